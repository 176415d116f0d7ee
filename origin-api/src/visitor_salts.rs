//! The unique visitors' day salts, kept by `serve` in the background ([`shortlink_store::Db::rotate_visitor_salts`]):
//! at start and then at each boundary that changes them (midnight UTC, when tomorrow's salt is made; 02:00 UTC,
//! when yesterday's is deleted), and at least every [`MAX_SLEEP`] (a clock that jumps, a failed round). Each
//! change wakes the publisher, which puts the new salt in KV or deletes the old one.
//!
//! Every origin process runs it; two doing it at once make each salt once and delete it once.

use std::sync::Arc;
use std::time::Duration;

use kv_model::visitor::SALT_GRACE_MICROS;
use shortlink_store::Db;
use shortlink_store::domain::Micros;
use tokio::sync::{Notify, watch};

/// Longest wait between rounds.
pub const MAX_SLEEP: Duration = Duration::from_secs(600);

const DAY_MICROS: i64 = 86_400_000_000;

/// How long from `now` until the next midnight or 02:00 UTC (the rounds' boundaries), plus a second so the round
/// runs after it, at most [`MAX_SLEEP`].
pub fn until_next_boundary(now: Micros) -> Duration {
    let into_day = now.0.rem_euclid(DAY_MICROS);
    let next = if into_day < SALT_GRACE_MICROS {
        SALT_GRACE_MICROS
    } else {
        DAY_MICROS
    };
    let micros = u64::try_from(next - into_day).unwrap_or(0) + 1_000_000;
    Duration::from_micros(micros).min(MAX_SLEEP)
}

/// Rotates at start and at each boundary until `stopped` turns true. A failed round is logged and retried at the
/// next wake-up.
pub async fn run(db: Db, publisher_wake: Arc<Notify>, mut stopped: watch::Receiver<bool>) {
    loop {
        let now = Micros::now();
        match db.rotate_visitor_salts(now).await {
            Ok(round) => {
                if round.changed_kv() {
                    publisher_wake.notify_one();
                    tracing::info!(
                        created = round.created.len(),
                        deleted = round.deleted.len(),
                        hashes_deleted = round.hashes_deleted,
                        "visitor salts rotated"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "rotating the visitor salts failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(until_next_boundary(now)) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000;

    #[test]
    fn wakes_after_each_boundary() {
        let midnight = 20_000 * DAY_MICROS;
        let s = |t: i64| until_next_boundary(Micros(t));
        assert_eq!(s(midnight + 2 * HOUR - 5_000_000), Duration::from_secs(6));
        assert_eq!(s(midnight + DAY_MICROS - 1_000_000), Duration::from_secs(2));
        assert_eq!(s(midnight + 2 * HOUR), MAX_SLEEP, "capped");
        assert_eq!(s(midnight), MAX_SLEEP);
    }
}
