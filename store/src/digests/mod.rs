//! Click digests (issue 26): the statistics' storage. A row holds one period of one link, group or account: its
//! clicks, a revision, and a [`format::Digest`] of every dimension's values. Day rows are written by the click
//! reports (one row per link, group and account and day a report touches, however many values it carries) and
//! taken back out when a link is deleted; block rows ([`BLOCK_DAYS`] days) are a cache the statistics build from
//! the day rows and check against them ([`read`]).
//!
//! This replaced a counter row per day, dimension and value (migration 0005), whose rows multiplied with every new
//! dimension: a year of a busy link read 111,690 rows, and a city dimension would have made an account's month
//! tens of thousands. A digest row is read whole, so a range costs one row per period, whatever the values.
//!
//! A report does not write the day rows itself: it adds a delta row per link, group and account and day it touches
//! ([`write::add_deltas`]), which the origin folds into the day rows a second's worth at a time ([`fold`]), and the
//! statistics add the deltas not folded yet to what they read ([`read`]). Rewriting a busy day's row (hundreds of
//! values) for every report made ingestion slower as the day filled up; a delta holds only the report's values.

pub(crate) mod convert;
pub(crate) mod fold;
pub(crate) mod format;
pub(crate) mod read;
pub(crate) mod write;

pub(crate) use format::{Digest, Dimension};

/// Days per block: blocks are aligned to 1970-01-01 (block `b` holds days `b * 32 ..= b * 32 + 31`), so a year's
/// statistics read about 11 block rows and the days at both ends.
pub(crate) const BLOCK_DAYS: i64 = 32;

/// The digests of links, groups or accounts: the table and its owner column. Link rows are also keyed by the group
/// the clicks were attributed to (a link can move), so that deleting the link can take them out of that group's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope {
    pub(crate) table: &'static str,
    pub(crate) owner: &'static str,
    pub(crate) grouped: bool,
    /// Its deltas' `scope` in `click_digest_deltas` ([`fold`]).
    pub(crate) delta: &'static str,
}

impl Scope {
    pub(crate) const LINKS: Scope = Scope {
        table: "link_click_digests",
        delta: "link",
        owner: "link_id",
        grouped: true,
    };
    pub(crate) const GROUPS: Scope = Scope {
        table: "group_click_digests",
        delta: "group",
        owner: "group_id",
        grouped: false,
    };
    pub(crate) const ACCOUNTS: Scope = Scope {
        table: "account_click_digests",
        delta: "account",
        owner: "account_id",
        grouped: false,
    };

    /// The key columns after the owner's: `span, period` and, for links, `group_id`.
    fn key_columns(self) -> &'static str {
        if self.grouped {
            "span, period, group_id"
        } else {
            "span, period"
        }
    }
}

/// Whose day counts [`crate::Db::seed_day_counts`] writes.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum SeedScope<'a> {
    /// A link, and the group its clicks are attributed to.
    Link {
        link_id: &'a str,
        group_id: &'a str,
    },
    Group(&'a str),
    Account(&'a str),
}

/// One day's counts to seed: the day (since 1970) and (dimension, value, clicks) with the dimension named as in the
/// statistics' CSV (`country`, `device`, `referrer`, `browser`, …, `utm_campaign`; a region or city is its country,
/// a TAB and its name); the day's clicks are its `device` counts.
#[doc(hidden)]
pub type SeedDay<'a> = (i64, Vec<(&'a str, &'a str, i64)>);

impl crate::pool::Db {
    /// Adds counts to day digests directly, as click reports would have. For the benchmarks: a year of a busy link
    /// (10,000,000 clicks) in seconds, where ingesting the events would only measure ingestion again. Not an API.
    #[doc(hidden)]
    pub async fn seed_day_counts(
        &self,
        scope: SeedScope<'_>,
        days: &[SeedDay<'_>],
    ) -> Result<(), crate::StoreError> {
        let (table, owner, group) = match scope {
            SeedScope::Link { link_id, group_id } => (Scope::LINKS, link_id, group_id),
            SeedScope::Group(id) => (Scope::GROUPS, id, ""),
            SeedScope::Account(id) => (Scope::ACCOUNTS, id, ""),
        };
        let mut changes = std::collections::BTreeMap::new();
        for (day, counts) in days {
            let mut change = write::Change::default();
            for (dimension, value, n) in counts {
                let dimension = match *dimension {
                    "country" => Dimension::COUNTRY,
                    "device" => {
                        change.clicks += n;
                        Dimension::DEVICE
                    }
                    "referrer" => Dimension::REFERRER,
                    "browser" => Dimension::BROWSER,
                    "os" => Dimension::OS,
                    "region" => Dimension::REGION,
                    "city" => Dimension::CITY,
                    "utm_source" => Dimension::UTM_SOURCE,
                    "utm_medium" => Dimension::UTM_MEDIUM,
                    "utm_campaign" => Dimension::UTM_CAMPAIGN,
                    other => {
                        return Err(crate::StoreError::Invalid(format!("no dimension {other}")));
                    }
                };
                change.digest.add(dimension, value, *n);
            }
            changes.insert((owner, *day, group), change);
        }
        let mut tx = self.begin_write().await?;
        write::add(&mut tx, self.multi_row, table, &changes).await?;
        tx.commit().await?;
        Ok(())
    }
}
