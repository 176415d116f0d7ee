//! Folds the click reports' digest deltas into the day rows in the background ([`Db::fold_click_deltas`]): every
//! [`INTERVAL`] (a setting: tests hold the deltas back), and again at once while a fold finds a whole chunk (a backlog after a burst, or a start after
//! downtime). The statistics count the deltas not folded yet, so this keeps their reads short and takes no part in
//! what they show; reports only ever insert deltas, so ingestion never waits on a busy day's row.
//!
//! Every origin process runs it; on PostgreSQL two folds take different deltas ([`shortlink_store`]'s `fold`).

use std::time::Duration;

use shortlink_store::{CLICK_FOLD_CHUNK, Db};
use tokio::sync::watch;

/// How often the deltas are folded by default: a busy link's day row is rewritten about this often instead of once
/// per report.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Folds until `stopped` turns true. A failed fold is logged and tried again after the interval (its deltas stay).
pub async fn run(db: Db, interval: Duration, mut stopped: watch::Receiver<bool>) {
    loop {
        match db.fold_click_deltas().await {
            Ok(n) if n >= CLICK_FOLD_CHUNK && !*stopped.borrow() => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "folding click digest deltas failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
