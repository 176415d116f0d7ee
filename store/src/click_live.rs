//! The dashboard's live view (issue 26): a link's clicks of the last hour per minute, read from the raw clicks
//! (kept for the retention period, indexed by link and time: at most an hour of one link's rows), and the account's
//! clicks of today from its day counters (one day's rows of one dimension).

use crate::domain::{Day, Micros};
use crate::error::{Entity, StoreError};
use crate::pool::Db;
use sqlx::Row;

/// Minutes the live view covers, the current one included.
pub const LIVE_MINUTES: i64 = 60;
/// A minute in microseconds (written into the query as `60000000`).
const MINUTE_MICROS: i64 = 60_000_000;

/// Clicks in one minute (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteCount {
    /// The minute, as minutes since 1970-01-01T00:00Z.
    pub minute: i64,
    /// Clicks whose time falls in it.
    pub clicks: i64,
}

/// A link's last hour: every minute from `first_minute` to the current one, with its clicks (zero included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastHour {
    /// The oldest minute shown.
    pub first_minute: i64,
    /// One entry per minute, oldest first ([`LIVE_MINUTES`] of them).
    pub minutes: Vec<MinuteCount>,
    /// Their sum.
    pub total: i64,
}

impl Db {
    /// The clicks of the account's link `link_id` in each of the last [`LIVE_MINUTES`] minutes up to `now`;
    /// another account's link (or none) is [`Entity::Link`] not found. Clicks reach the origin in the worker's
    /// batches, so the current minute fills in over a few seconds.
    pub async fn link_last_hour(
        &self,
        account_id: &str,
        link_id: &str,
        now: Micros,
    ) -> Result<LastHour, StoreError> {
        let current = now.0.div_euclid(MINUTE_MICROS);
        let first_minute = current - (LIVE_MINUTES - 1);
        let mut tx = self.read.begin().await?;
        let owned = sqlx::query("SELECT 1 AS x FROM links WHERE id = $1 AND account_id = $2")
            .bind(link_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if owned.is_none() {
            return Err(StoreError::NotFound(Entity::Link));
        }
        let rows = sqlx::query(
            "SELECT at / 60000000 AS minute, COUNT(*) AS clicks FROM clicks \
             WHERE link_id = $1 AND at >= $2 AND at < $3 GROUP BY at / 60000000",
        )
        .bind(link_id)
        .bind(first_minute * MINUTE_MICROS)
        .bind((current + 1) * MINUTE_MICROS)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut minutes: Vec<MinuteCount> = (first_minute..=current)
            .map(|minute| MinuteCount { minute, clicks: 0 })
            .collect();
        for row in rows {
            let minute: i64 = row.try_get("minute")?;
            let clicks: i64 = row.try_get("clicks")?;
            if let Some(slot) = usize::try_from(minute - first_minute)
                .ok()
                .and_then(|i| minutes.get_mut(i))
            {
                slot.clicks = clicks;
            }
        }
        let total = minutes.iter().map(|m| m.clicks).sum();
        Ok(LastHour {
            first_minute,
            minutes,
            total,
        })
    }

    /// The account's clicks of today (UTC), from its day digest (migration 0020) and the deltas not folded into it
    /// yet (migration 0022), in one statement and so one snapshot.
    pub async fn account_clicks_today(&self, account_id: &str) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE((SELECT SUM(clicks) FROM account_click_digests \
             WHERE account_id = $1 AND span = 'day' AND period = $2), 0) + COALESCE((SELECT SUM(clicks) \
             FROM click_digest_deltas WHERE owner = $1 AND period = $2 AND scope = 'account'), 0) AS BIGINT) \
             AS clicks",
        )
        .bind(account_id)
        .bind(Day::today().0)
        .fetch_one(&self.read)
        .await?;
        Ok(row.try_get("clicks")?)
    }
}
