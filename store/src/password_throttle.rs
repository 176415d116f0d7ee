//! The throttle in front of every password check: at most [`THROTTLE_FAILURES`] failed or unfinished checks per
//! subject (`email:<address>`, `ip:<client address>`) in any [`THROTTLE_WINDOW_MICROS`].
//!
//! A check is *reserved* before the password is looked at: in one serialised transaction the subjects' rows in the
//! window are counted and, when every subject has room, a row per subject is written. Only then is argon2 run. A
//! wrong password leaves its rows as the failure they are; a right one takes them back. Reading the count, checking
//! and writing the failure afterwards (what this replaced) let 50 parallel guesses all be checked.

use crate::error::StoreError;
use crate::pool::Db;
use sqlx::Row;

/// Failed (or still running) password checks counted per email and per client address…
pub const THROTTLE_FAILURES: i64 = 10;
/// …within this window; the eleventh attempt waits until the oldest of them leaves it.
pub const THROTTLE_WINDOW_MICROS: i64 = 15 * 60 * 1_000_000;

/// A reserved check: the subjects charged and the time their rows carry, to take them back on success.
#[derive(Debug)]
pub(crate) struct Reservation {
    subjects: Vec<String>,
    at: i64,
}

/// Whether a check may go ahead.
#[derive(Debug)]
pub(crate) enum Reserved {
    /// Go ahead; the check is counted until [`Db::release`] takes it back.
    Go(Reservation),
    /// A subject is at its limit: seconds until one of its counted checks leaves the window.
    Throttled(i64),
}

impl Db {
    /// Counts the subjects' checks in the window ending `now` and, when each has room, charges one more to each,
    /// atomically: concurrent reservations for a subject are serialised (SQLite's write lock, PostgreSQL's
    /// advisory lock per subject), so exactly [`THROTTLE_FAILURES`] of any number of parallel attempts get through.
    pub(crate) async fn reserve_check(
        &self,
        subjects: &[String],
        now: i64,
    ) -> Result<Reserved, StoreError> {
        let mut tx = self.begin_write().await?;
        let mut sorted: Vec<&str> = subjects.iter().map(String::as_str).collect();
        // One order for every caller, so two reservations never wait on each other's locks.
        sorted.sort_unstable();
        sorted.dedup();
        for subject in &sorted {
            self.serialise_on(&mut tx, subject).await?;
        }
        let mut wait = None;
        for subject in &sorted {
            // The THROTTLE_FAILURES-th newest row in the window: once it leaves, there is room again.
            let row = sqlx::query(
                "SELECT at FROM sign_in_failures WHERE subject = $1 AND at > $2 ORDER BY at DESC LIMIT 1 OFFSET $3",
            )
            .bind(*subject)
            .bind(now - THROTTLE_WINDOW_MICROS)
            .bind(THROTTLE_FAILURES - 1)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(r) = row {
                let at: i64 = r.try_get("at")?;
                wait = Some(wait.unwrap_or(0).max(seconds_until_room(at, now)));
            }
        }
        if let Some(secs) = wait {
            return Ok(Reserved::Throttled(secs));
        }
        for subject in &sorted {
            // Rows that left the window count for nothing; they go as new ones arrive (and hourly, see prune).
            sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1 AND at <= $2")
                .bind(*subject)
                .bind(now - THROTTLE_WINDOW_MICROS)
                .execute(&mut *tx)
                .await?;
            sqlx::query("INSERT INTO sign_in_failures (subject, at) VALUES ($1, $2)")
                .bind(*subject)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Reserved::Go(Reservation {
            subjects: sorted.into_iter().map(str::to_owned).collect(),
            at: now,
        }))
    }

    /// Deletes the rows that left the window (the hourly maintenance): a subject never tried again would keep its
    /// rows forever otherwise.
    pub async fn prune_password_checks(&self, now: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM sign_in_failures WHERE at <= $1")
            .bind(now - THROTTLE_WINDOW_MICROS)
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected())
    }
}

/// Whole seconds from `now` until a check counted at `at` leaves the window: at least 1, at most the window.
///
/// `now` is read before the reservation waits for its subject's lock, so a parallel reservation that took the lock
/// first can have counted a check a little *after* `now`; unclamped, that check would ask the visitor to wait a
/// second longer than the window itself (a CI run saw 901 s).
fn seconds_until_room(at: i64, now: i64) -> i64 {
    let window_secs = THROTTLE_WINDOW_MICROS / 1_000_000;
    ((at + THROTTLE_WINDOW_MICROS - now + 999_999) / 1_000_000).clamp(1, window_secs)
}

/// Takes a reserved check back (the password was right), and with it every failure of `clear`, the subject whose
/// holder has just proved who they are (their email), inside the caller's transaction. Another check of the same
/// subject reserved in the same microsecond goes too: at worst one attempt more, never fewer.
pub(crate) async fn release(
    conn: &mut sqlx::AnyConnection,
    reservation: &Reservation,
    clear: Option<&str>,
) -> Result<(), StoreError> {
    for subject in &reservation.subjects {
        sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1 AND at = $2")
            .bind(subject)
            .bind(reservation.at)
            .execute(&mut *conn)
            .await?;
    }
    if let Some(subject) = clear {
        sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1")
            .bind(subject)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_within_the_window() {
        let now = 1_000_000_000_000;
        // The oldest counted check is 15 minutes old, less a quarter second: a whole second to wait.
        assert_eq!(
            seconds_until_room(now - THROTTLE_WINDOW_MICROS + 250_000, now),
            1
        );
        // Counted just now: the whole window.
        assert_eq!(seconds_until_room(now, now), 900);
        // Counted by a parallel reservation after this one read the clock: still the window, not 901.
        assert_eq!(seconds_until_room(now + 3_000, now), 900);
        // Already out of the window (pruned by the query in practice): never 0 or less.
        assert_eq!(seconds_until_room(now - THROTTLE_WINDOW_MICROS - 5, now), 1);
    }
}
