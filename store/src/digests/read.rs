//! Reading a range of days: the clicks of each day, and the digests that cover the range, with [`BLOCK_DAYS`]-day
//! blocks read from the block cache where it is current.
//!
//! A block row is built from its day rows by a read that found it missing, and stored with the sum of those day
//! rows' revisions as its own. Every write to a day row bumps that row's revision (reports, deletions) and day rows
//! of groups and accounts are never deleted (a link's go with all of its block rows), so the sum only grows: a
//! block row whose revision is not the current sum is out of date and is built again. No lock is needed between
//! the reads that build blocks and the reports that change days, and a late click for an old day is counted the
//! next time its block is read. Only blocks wholly in the past are cached: today's clicks change the current one.
//!
//! The reports' deltas not folded yet ([`super::fold`]) are added on top, read in the same snapshot as the day rows.

use std::collections::BTreeMap;

use sqlx::{AnyConnection, Row};

use super::format::Tally;
use super::{BLOCK_DAYS, Scope};
use crate::error::StoreError;

/// A block built by a read, to be stored in the cache ([`store_blocks`]).
#[derive(Debug)]
pub(crate) struct Built {
    block: i64,
    stamp: i64,
    clicks: i64,
    bots: i64,
    data: Vec<u8>,
}

/// One day's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DayFigures {
    pub(crate) day: i64,
    pub(crate) clicks: i64,
    pub(crate) bots: i64,
    /// Unique visitors: of a link, that day's; of a group or an account, the sum of its links'.
    pub(crate) uniques: i64,
}

/// What a range holds for one owner.
#[derive(Debug, Default)]
pub(crate) struct RangeRead {
    /// Days with clicks or bots, oldest first.
    pub(crate) days: Vec<DayFigures>,
    /// Blocks this read built.
    pub(crate) built: Vec<Built>,
    /// The digests that together cover the range once: current blocks and the days outside them.
    blobs: Vec<Vec<u8>>,
}

impl RangeRead {
    /// Every dimension's values over the range.
    pub(crate) fn tally(&self) -> Result<Tally<'_>, StoreError> {
        let mut tally = Tally::default();
        for b in &self.blobs {
            tally.add_encoded(b)?;
        }
        Ok(tally)
    }
}

/// The blocks wholly inside `from ..= to` and before `today`: these are read from (and built into) the cache.
fn cacheable(from: i64, to: i64, today: i64) -> std::ops::RangeInclusive<i64> {
    let first = from.div_euclid(BLOCK_DAYS) + i64::from(from.rem_euclid(BLOCK_DAYS) != 0);
    let last = (to + 1).min(today).div_euclid(BLOCK_DAYS) - 1;
    first..=last
}

/// Reads `owner`'s days `from ..= to` (UTC days since 1970), `today` being the current day.
pub(crate) async fn range(
    conn: &mut AnyConnection,
    scope: Scope,
    owner: &str,
    from: i64,
    to: i64,
    today: i64,
) -> Result<RangeRead, StoreError> {
    let (t, o) = (scope.table, scope.owner);
    // SUM is NUMERIC on PostgreSQL: cast back to BIGINT, as both engines answer it.
    let per_day = sqlx::query(&format!(
        "SELECT period, CAST(SUM(clicks) AS BIGINT) AS n, CAST(SUM(bots) AS BIGINT) AS b, \
         CAST(SUM(uniques) AS BIGINT) AS u, CAST(SUM(revision) AS BIGINT) AS r FROM {t} \
         WHERE {o} = $1 AND span = 'day' AND period >= $2 AND period <= $3 GROUP BY period ORDER BY period"
    ))
    .bind(owner)
    .bind(from)
    .bind(to)
    .fetch_all(&mut *conn)
    .await?;
    let blocks = cacheable(from, to, today);
    let mut read = RangeRead::default();
    // Each day's figures: its day rows' and then its deltas'.
    let mut figures: BTreeMap<i64, DayFigures> = BTreeMap::new();
    // (stamp, clicks, bots) of each cacheable block that has day rows.
    let mut stamps: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new();
    for row in &per_day {
        let (day, n, b, r): (i64, i64, i64, i64) = (
            row.try_get("period")?,
            row.try_get("n")?,
            row.try_get("b")?,
            row.try_get("r")?,
        );
        figures.insert(
            day,
            DayFigures {
                day,
                clicks: n,
                bots: b,
                uniques: row.try_get("u")?,
            },
        );
        let block = day.div_euclid(BLOCK_DAYS);
        if blocks.contains(&block) {
            let s = stamps.entry(block).or_default();
            s.0 += r;
            s.1 += n;
            s.2 += b;
        }
    }
    // The deltas of reports not folded into the day rows yet (at most a few seconds' worth): added on top of the
    // days and of whatever covers them (a block is built from day rows only, so it stays right to cache).
    let deltas = sqlx::query(
        "SELECT period, clicks, bots, uniques, data FROM click_digest_deltas \
         WHERE owner = $1 AND period >= $2 AND period <= $3 AND scope = $4",
    )
    .bind(owner)
    .bind(from)
    .bind(to)
    .bind(scope.delta)
    .fetch_all(&mut *conn)
    .await?;
    for row in &deltas {
        let day: i64 = row.try_get("period")?;
        let f = figures.entry(day).or_insert(DayFigures {
            day,
            ..DayFigures::default()
        });
        f.clicks += row.try_get::<i64, _>("clicks")?;
        f.bots += row.try_get::<i64, _>("bots")?;
        f.uniques += row.try_get::<i64, _>("uniques")?;
        read.blobs.push(row.try_get("data")?);
    }
    read.days = figures
        .into_values()
        .filter(|f| f.clicks > 0 || f.bots > 0)
        .collect();
    if per_day.is_empty() {
        return Ok(read);
    }
    let mut current: Vec<i64> = Vec::new();
    if let (Some(first), Some(last)) = (stamps.keys().next(), stamps.keys().next_back()) {
        let cached = sqlx::query(&format!(
            "SELECT period, revision, data FROM {t} \
             WHERE {o} = $1 AND span = 'block' AND period >= $2 AND period <= $3 ORDER BY period"
        ))
        .bind(owner)
        .bind(*first)
        .bind(*last)
        .fetch_all(&mut *conn)
        .await?;
        for row in cached {
            let block: i64 = row.try_get("period")?;
            if stamps.get(&block).map(|s| s.0) == Some(row.try_get("revision")?) {
                current.push(block);
                read.blobs.push(row.try_get("data")?);
            }
        }
    }
    // The days outside current blocks, in runs between them.
    let mut runs: Vec<(i64, i64)> = Vec::new();
    let mut start = from;
    for block in &current {
        if start < block * BLOCK_DAYS {
            runs.push((start, block * BLOCK_DAYS - 1));
        }
        start = (block + 1) * BLOCK_DAYS;
    }
    if start <= to {
        runs.push((start, to));
    }
    // The day digests of each cacheable block to build, and of the other days.
    let mut to_build: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
    for (first, last) in runs {
        let rows = sqlx::query(&format!(
            "SELECT period, data FROM {t} WHERE {o} = $1 AND span = 'day' AND period >= $2 AND period <= $3"
        ))
        .bind(owner)
        .bind(first)
        .bind(last)
        .fetch_all(&mut *conn)
        .await?;
        for row in rows {
            let block = row.try_get::<i64, _>("period")?.div_euclid(BLOCK_DAYS);
            let data: Vec<u8> = row.try_get("data")?;
            if stamps.contains_key(&block) {
                to_build.entry(block).or_default().push(data);
            } else {
                read.blobs.push(data);
            }
        }
    }
    for (block, days) in to_build {
        let mut tally = Tally::default();
        for d in &days {
            tally.add_encoded(d)?;
        }
        let mut digest = tally.to_digest();
        digest.cap();
        let data = digest.encode();
        let (stamp, clicks, bots) = stamps[&block];
        read.blobs.push(data.clone());
        read.built.push(Built {
            block,
            stamp,
            clicks,
            bots,
            data,
        });
    }
    Ok(read)
}

/// Stores blocks a read built. Only while the owner still has day rows in the block: a link deleted since keeps
/// none.
pub(crate) async fn store_blocks(
    conn: &mut AnyConnection,
    scope: Scope,
    owner: &str,
    built: &[Built],
) -> Result<(), StoreError> {
    let (t, o) = (scope.table, scope.owner);
    let (group_col, group_val) = if scope.grouped {
        (", group_id", ", ''")
    } else {
        ("", "")
    };
    let sql = format!(
        "INSERT INTO {t} ({o}, span, period{group_col}, revision, clicks, bots, data) \
         SELECT $1, 'block', $2{group_val}, $3, $4, $5, $6 WHERE EXISTS \
         (SELECT 1 FROM {t} WHERE {o} = $1 AND span = 'day' AND period >= $7 AND period <= $8) \
         ON CONFLICT ({o}, {keys}) DO UPDATE SET revision = excluded.revision, clicks = excluded.clicks, \
         bots = excluded.bots, data = excluded.data",
        keys = scope.key_columns(),
    );
    for b in built {
        sqlx::query(&sql)
            .bind(owner)
            .bind(b.block)
            .bind(b.stamp)
            .bind(b.clicks)
            .bind(b.bots)
            .bind(b.data.as_slice())
            .bind(b.block * BLOCK_DAYS)
            .bind(b.block * BLOCK_DAYS + BLOCK_DAYS - 1)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_blocks_in_the_past_are_cached() {
        // Days 0..=31 are block 0, 32..=63 block 1, 64..=95 block 2.
        assert_eq!(cacheable(0, 95, 1000), 0..=2);
        assert_eq!(cacheable(1, 95, 1000), 1..=2);
        assert_eq!(cacheable(0, 94, 1000), 0..=1);
        assert_eq!(cacheable(32, 63, 1000), 1..=1);
        // Today is day 63: block 1 is not over.
        assert_eq!(cacheable(0, 95, 63).count(), 1);
        assert_eq!(cacheable(0, 95, 64), 0..=1);
        assert_eq!(cacheable(5, 20, 1000).count(), 0);
    }
}
