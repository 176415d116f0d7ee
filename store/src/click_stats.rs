//! Click statistics of a link, a group or a whole account over a range of UTC days, read from the day counters
//! that [`crate::clicks`] maintains (`link_click_counts`, `group_click_counts`, `account_click_counts`), never from
//! the raw events: the cost depends on the days and values in the range, not on the clicks, and it survives the
//! raw events' retention. A counter a deleted link's clicks were taken out of can be 0: sums of 0 are not listed.

use crate::domain::Day;
use crate::error::StoreError;
use crate::pool::Db;
use sqlx::{AnyConnection, Row};
use std::collections::BTreeMap;

/// Most countries and referrer hosts listed (by clicks, then by value); `total` still counts every click.
pub const TOP_VALUES: i64 = 100;

/// What the statistics are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsScope<'a> {
    /// One of the account's links.
    Link(&'a str),
    /// One of the account's groups: every click attributed to it at click time (its links' and its dynamic
    /// links').
    Group(&'a str),
    /// Every click of the account.
    Account,
}

/// Clicks on one day (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayCount {
    /// The day.
    pub day: Day,
    /// Clicks.
    pub clicks: i64,
}

/// Clicks with one value of a dimension (a country, a device, a referrer host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueCount {
    /// The value; `None` when unknown (country) or absent (referrer).
    pub value: Option<String>,
    /// Clicks.
    pub clicks: i64,
}

/// Statistics over a range of days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickStats {
    /// All clicks in the range.
    pub total: i64,
    /// Days with clicks, oldest first.
    pub by_day: Vec<DayCount>,
    /// Countries (ISO 3166-1 alpha-2), most clicks first, then by code; at most [`TOP_VALUES`].
    pub by_country: Vec<ValueCount>,
    /// Devices, most clicks first, then by name.
    pub by_device: Vec<ValueCount>,
    /// Referrer hosts, most clicks first, then by host; at most [`TOP_VALUES`].
    pub by_referrer: Vec<ValueCount>,
}

/// The counters of a scope: (table, id column).
fn counters(scope: StatsScope<'_>) -> (&'static str, &'static str) {
    match scope {
        StatsScope::Link(_) => ("link_click_counts", "link_id"),
        StatsScope::Group(_) => ("group_click_counts", "group_id"),
        StatsScope::Account => ("account_click_counts", "account_id"),
    }
}

/// The stored `''` of an unknown or absent value is `None`.
fn value(raw: String) -> Option<String> {
    Some(raw).filter(|v| !v.is_empty())
}

/// Whether the account owns the link or group (an account always owns itself).
async fn owns(
    conn: &mut AnyConnection,
    account_id: &str,
    scope: StatsScope<'_>,
) -> Result<bool, StoreError> {
    let (sql, id) = match scope {
        StatsScope::Link(id) => ("SELECT id FROM links WHERE id = $1 AND account_id = $2", id),
        StatsScope::Group(id) => (
            "SELECT id FROM groups WHERE id = $1 AND account_id = $2",
            id,
        ),
        StatsScope::Account => return Ok(true),
    };
    Ok(sqlx::query(sql)
        .bind(id)
        .bind(account_id)
        .fetch_optional(&mut *conn)
        .await?
        .is_some())
}

/// The most clicked values of one dimension.
async fn top(
    conn: &mut AnyConnection,
    (table, column): (&str, &str),
    id: &str,
    dimension: &str,
    from: Day,
    to: Day,
) -> Result<Vec<ValueCount>, StoreError> {
    // SUM is NUMERIC on PostgreSQL: cast back, so both engines answer a BIGINT. Ties are in byte order on both
    // (the column is COLLATE "C" on PostgreSQL, SQLite compares bytes): '' (unknown) first.
    let sql = format!(
        "SELECT value, CAST(SUM(clicks) AS BIGINT) AS n FROM {table} \
         WHERE {column} = $1 AND dimension = $2 AND day >= $3 AND day <= $4 \
         GROUP BY value HAVING SUM(clicks) > 0 ORDER BY n DESC, value LIMIT {TOP_VALUES}"
    );
    sqlx::query(&sql)
        .bind(id)
        .bind(dimension)
        .bind(from.0)
        .bind(to.0)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| {
            Ok(ValueCount {
                value: value(r.try_get("value")?),
                clicks: r.try_get("n")?,
            })
        })
        .collect()
}

impl Db {
    /// The statistics of `scope` from `from` to `to` (both inclusive), or None when the link or group is not
    /// the account's (or does not exist). One read transaction, so the parts agree with each other.
    pub async fn click_stats(
        &self,
        account_id: &str,
        scope: StatsScope<'_>,
        from: Day,
        to: Day,
    ) -> Result<Option<ClickStats>, StoreError> {
        let mut tx = self.read.begin().await?;
        if !owns(&mut tx, account_id, scope).await? {
            return Ok(None);
        }
        let (table, column) = counters(scope);
        let id = match scope {
            StatsScope::Link(id) | StatsScope::Group(id) => id,
            StatsScope::Account => account_id,
        };
        // Every click is in exactly one device row of its day: the device rows give the days and the total too.
        let sql = format!(
            "SELECT day, value, CAST(SUM(clicks) AS BIGINT) AS n FROM {table} \
             WHERE {column} = $1 AND dimension = 'device' AND day >= $2 AND day <= $3 \
             GROUP BY day, value HAVING SUM(clicks) > 0"
        );
        let devices = sqlx::query(&sql)
            .bind(id)
            .bind(from.0)
            .bind(to.0)
            .fetch_all(&mut *tx)
            .await?;
        let by_country = top(&mut tx, (table, column), id, "country", from, to).await?;
        let by_referrer = top(&mut tx, (table, column), id, "referrer", from, to).await?;
        tx.commit().await?;
        let mut days: BTreeMap<i64, i64> = BTreeMap::new();
        let mut device_totals: BTreeMap<String, i64> = BTreeMap::new();
        for r in &devices {
            let n: i64 = r.try_get("n")?;
            *days.entry(r.try_get("day")?).or_default() += n;
            *device_totals.entry(r.try_get("value")?).or_default() += n;
        }
        let mut by_device: Vec<ValueCount> = device_totals
            .into_iter()
            .map(|(v, clicks)| ValueCount {
                value: value(v),
                clicks,
            })
            .collect();
        // Stable: equal counts stay in name order.
        by_device.sort_by_key(|d| std::cmp::Reverse(d.clicks));
        Ok(Some(ClickStats {
            total: days.values().sum(),
            by_day: days
                .into_iter()
                .map(|(day, clicks)| DayCount {
                    day: Day(day),
                    clicks,
                })
                .collect(),
            by_country,
            by_device,
            by_referrer,
        }))
    }
}
