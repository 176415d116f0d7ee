//! The budget of management writes: at most N writes (default [`DEFAULT_WRITES_PER_MINUTE`]) in any rolling
//! minute per subject, an API key or an account's dashboard. Every origin process shares it, so it is kept in the
//! database (`write_budget`, one row per counted write) rather than in memory, like create-link's limit.
//!
//! A write is *charged* before it is made: in one transaction serialised per subject (SQLite's write lock,
//! PostgreSQL's advisory lock on the subject), the subject's rows that left the window are deleted, the rest
//! counted, and, when there is room, a row is added. So of any number of parallel writes exactly the budget's
//! worth get through, and a subject never keeps more rows than one window holds.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;
use crate::rate_limit::{RateLimitState, RateWindow};
use sqlx::Row;

/// Management writes allowed per subject in any rolling minute, when not configured.
pub const DEFAULT_WRITES_PER_MINUTE: u32 = 600;

/// Who spends a write budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteSubject<'a> {
    /// The API key with this row id (a regenerated key starts with a fresh budget, as create-link's limit).
    ApiKey(&'a str),
    /// The dashboard of the account with this id: a person at a form gets the budget a key gets, apart from
    /// the key's.
    Dashboard(&'a str),
}

impl WriteSubject<'_> {
    /// The `write_budget.subject`: the key's row id, or `dashboard:<account id>` (never a UUID, so never a
    /// key's), as create-link's subjects.
    fn as_subject(self) -> String {
        match self {
            Self::ApiKey(id) => id.to_owned(),
            Self::Dashboard(account) => format!("dashboard:{account}"),
        }
    }
}

/// What charging a write came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCharge {
    /// The write is counted; go ahead. The state is the one after it (for the `X-RateLimit-*` headers).
    Allowed(RateLimitState),
    /// The budget is used up: nothing was counted; `retry_after` says when one more write is allowed.
    Limited(RateLimitState),
}

impl Db {
    /// Charges one write to `subject`'s budget of `per_minute` writes in any rolling minute, if it has room.
    pub async fn charge_write(
        &self,
        subject: WriteSubject<'_>,
        per_minute: u32,
    ) -> Result<WriteCharge, StoreError> {
        let window = RateWindow::per_minute(per_minute);
        let subject = subject.as_subject();
        let mut tx = self.begin_write().await?;
        // Its own lock namespace, so a write budget never waits on another kind of subject's lock.
        self.serialise_on(&mut tx, &format!("write_budget:{subject}"))
            .await?;
        // Read after the lock, so the time stamped is never earlier than a write counted before ours.
        let now = Micros::now().0;
        let start = window.start(now);
        sqlx::query("DELETE FROM write_budget WHERE subject = $1 AND at <= $2")
            .bind(&subject)
            .bind(start)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, MIN(at) AS oldest FROM write_budget WHERE subject = $1 AND at > $2",
        )
        .bind(&subject)
        .bind(start)
        .fetch_one(&mut *tx)
        .await?;
        let state = window.state(row.try_get("n")?, row.try_get("oldest")?, now);
        if state.remaining == 0 {
            // The prune above is kept: it is right whatever the answer.
            tx.commit().await?;
            return Ok(WriteCharge::Limited(state));
        }
        sqlx::query("INSERT INTO write_budget (subject, at) VALUES ($1, $2)")
            .bind(&subject)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(WriteCharge::Allowed(state.after_use(window, now)))
    }

    /// Deletes every subject's rows that left the window before `now` (UNIX µs). Charging prunes its own
    /// subject; this is for subjects that never write again (a revoked key), to run with the other maintenance.
    pub async fn prune_write_budget(&self, now: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM write_budget WHERE at <= $1")
            .bind(RateWindow::per_minute(0).start(now))
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected())
    }
}
