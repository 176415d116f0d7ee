//! Click statistics of a link, a group or a whole account over a range of UTC days, read from the digests that
//! [`crate::clicks`] writes ([`crate::digests`]), never from the raw events: the cost depends on the periods in the
//! range (a row per day, or per 32-day block where the range covers one), not on the clicks, and it survives the
//! raw events' retention. A value a deleted link's clicks were taken out of is gone: counts of 0 are not listed.

use crate::digests::format::Tally;
use crate::digests::read::{DayFigures, range, store_blocks};
use crate::digests::{Dimension, Scope};
use crate::domain::Day;
use crate::error::StoreError;
use crate::pool::Db;
use sqlx::AnyConnection;

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

/// Clicks from one place (a region or a city) of one country.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceCount {
    /// The country (ISO 3166-1 alpha-2); `None` when unknown.
    pub country: Option<String>,
    /// The region's or city's name; `None` when unknown.
    pub name: Option<String>,
    /// Clicks.
    pub clicks: i64,
}

/// Clicks by the visited URL's UTM parameters, each most clicks first, then by value (`None`, no such parameter,
/// first); at most [`TOP_VALUES`] each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UtmStats {
    /// `utm_source`.
    pub source: Vec<ValueCount>,
    /// `utm_medium`.
    pub medium: Vec<ValueCount>,
    /// `utm_campaign`.
    pub campaign: Vec<ValueCount>,
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
    /// Browsers (`chrome`, `safari`, …, `other`), most clicks first, then by name.
    pub by_browser: Vec<ValueCount>,
    /// Operating systems (`ios`, `android`, …, `other`), most clicks first, then by name.
    pub by_os: Vec<ValueCount>,
    /// Regions, most clicks first, then by country and name; at most [`TOP_VALUES`].
    pub by_region: Vec<PlaceCount>,
    /// Cities, most clicks first, then by country and name; at most [`TOP_VALUES`].
    pub by_city: Vec<PlaceCount>,
    /// The visited URLs' UTM parameters.
    pub by_utm: UtmStats,
    /// Requests the edge recognised as bots and did not count: in no other figure, `total` included.
    pub bots: i64,
    /// Days with bots, oldest first.
    pub bots_by_day: Vec<DayCount>,
    /// Unique visitors over the range: the sum of each day's (a visitor is counted once per link per UTC day, so
    /// one who comes back on another day, or to another link, counts again).
    pub unique_visitors: i64,
    /// Days with unique visitors, oldest first (`clicks` holds the day's unique visitors).
    pub uniques_by_day: Vec<DayCount>,
}

/// The digests of a scope.
fn digests(scope: StatsScope<'_>) -> Scope {
    match scope {
        StatsScope::Link(_) => Scope::LINKS,
        StatsScope::Group(_) => Scope::GROUPS,
        StatsScope::Account => Scope::ACCOUNTS,
    }
}

/// The `''` of an unknown or absent value is `None`.
fn value(raw: &str) -> Option<String> {
    Some(raw).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// A dimension's values as listed, at most `limit`.
fn listed(tally: &Tally<'_>, dimension: Dimension, limit: usize) -> Vec<ValueCount> {
    tally
        .top(dimension, limit)
        .into_iter()
        .map(|(v, clicks)| ValueCount {
            value: value(v),
            clicks,
        })
        .collect()
}

/// The places of `dimension` (region or city), whose values are the country, a TAB and the name.
fn places(tally: &Tally<'_>, dimension: Dimension) -> Vec<PlaceCount> {
    tally
        .top(dimension, TOP_VALUES as usize)
        .into_iter()
        .map(|(raw, clicks)| {
            let (country, name) = raw.split_once('\t').unwrap_or(("", raw));
            PlaceCount {
                country: value(country),
                name: value(name),
                clicks,
            }
        })
        .collect()
}

/// Whether the account owns the link or group (an account always owns itself).
pub(crate) async fn owns(
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

impl Db {
    /// The statistics of `scope` from `from` to `to` (both inclusive), or None when the link or group is not
    /// the account's (or does not exist). One read transaction in one snapshot, so the parts agree with each other
    /// and the reports' deltas are counted once ([`Db::begin_snapshot_read`]).
    pub async fn click_stats(
        &self,
        account_id: &str,
        scope: StatsScope<'_>,
        from: Day,
        to: Day,
    ) -> Result<Option<ClickStats>, StoreError> {
        let mut tx = self.begin_snapshot_read().await?;
        if !owns(&mut tx, account_id, scope).await? {
            return Ok(None);
        }
        let id = match scope {
            StatsScope::Link(id) | StatsScope::Group(id) => id,
            StatsScope::Account => account_id,
        };
        let scope = digests(scope);
        let read = range(&mut tx, scope, id, from.0, to.0, Day::today().0).await?;
        tx.commit().await?;
        if !read.built.is_empty() {
            // The block cache is only a shortcut (every read checks it against the days): a failure to store it
            // costs the next read the same work again, not a wrong answer, so it does not fail this one.
            if let Ok(mut conn) = self.write.acquire().await {
                let _ = store_blocks(&mut conn, scope, id, &read.built).await;
            }
        }
        let tally = read.tally()?;
        let top = TOP_VALUES as usize;
        let per_day = |count: fn(&DayFigures) -> i64| -> Vec<DayCount> {
            read.days
                .iter()
                .filter(|d| count(d) > 0)
                .map(|d| DayCount {
                    day: Day(d.day),
                    clicks: count(d),
                })
                .collect()
        };
        Ok(Some(ClickStats {
            total: read.days.iter().map(|d| d.clicks).sum(),
            bots: read.days.iter().map(|d| d.bots).sum(),
            unique_visitors: read.days.iter().map(|d| d.uniques).sum(),
            by_day: per_day(|d| d.clicks),
            bots_by_day: per_day(|d| d.bots),
            uniques_by_day: per_day(|d| d.uniques),
            by_country: listed(&tally, Dimension::COUNTRY, top),
            by_device: listed(&tally, Dimension::DEVICE, top),
            by_referrer: listed(&tally, Dimension::REFERRER, top),
            by_browser: listed(&tally, Dimension::BROWSER, top),
            by_os: listed(&tally, Dimension::OS, top),
            by_region: places(&tally, Dimension::REGION),
            by_city: places(&tally, Dimension::CITY),
            by_utm: UtmStats {
                source: listed(&tally, Dimension::UTM_SOURCE, top),
                medium: listed(&tally, Dimension::UTM_MEDIUM, top),
                campaign: listed(&tally, Dimension::UTM_CAMPAIGN, top),
            },
        }))
    }
}
