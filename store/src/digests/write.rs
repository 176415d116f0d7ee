//! A report's clicks as delta rows ([`add_deltas`]); adding folded deltas to day rows ([`add`]); taking a deleted
//! link's clicks back out of its groups' and account's day rows ([`take_out`]).
//!
//! Day rows are written in key order, each once per call, so concurrent folds (and a link deletion, which takes the
//! rows of the link, then of its groups, then of its account, as folds do) take their locks in one order and never
//! deadlock on PostgreSQL. Deltas are only inserted: reports take no lock on any digest.

use std::collections::{BTreeMap, HashMap};

use sqlx::{AnyConnection, Row};

use super::format::Tally;
use super::{Digest, Scope};
use crate::error::StoreError;
use crate::sql_chunks::MultiRow;

/// A day row's key: its owner, the day, and for link rows the group (`""` otherwise).
pub(crate) type DayKey<'a> = (&'a str, i64, &'a str);

/// What a report adds to a day row.
#[derive(Debug, Default)]
pub(crate) struct Change {
    pub(crate) clicks: i64,
    /// Bot requests: in no other figure.
    pub(crate) bots: i64,
    /// Unique visitors: the clicks that were their visitor's first of the day on their link.
    pub(crate) uniques: i64,
    pub(crate) digest: Digest,
}

impl Change {
    /// Adds `other` to this change (a fold adding up the deltas of one day row).
    pub(crate) fn absorb(&mut self, other: Change) {
        self.clicks += other.clicks;
        self.bots += other.bots;
        self.uniques += other.uniques;
        if self.digest.is_empty() {
            self.digest = other.digest;
        } else {
            self.digest.merge(&other.digest, 1);
        }
    }
}

/// What one report adds to one link's, group's or account's day, counted with borrowed values.
#[derive(Debug, Default)]
pub(crate) struct Delta<'a> {
    pub(crate) clicks: i64,
    pub(crate) bots: i64,
    pub(crate) uniques: i64,
    pub(crate) tally: Tally<'a>,
}

/// Stores what a report adds to each link's, group's and account's days as delta rows ([`super::fold`]), in as
/// few multi-row inserts as the engine's bind limit allows.
pub(crate) async fn add_deltas(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    deltas: [(Scope, &BTreeMap<DayKey<'_>, Delta<'_>>); 3],
) -> Result<(), StoreError> {
    let rows: Vec<(&str, &DayKey<'_>, &Delta<'_>, Vec<u8>)> = deltas
        .iter()
        .flat_map(|(scope, map)| {
            map.iter().map(|(key, delta)| {
                // Capped as a day row would keep it (a report can bring 1,000 values, a batch of reports more).
                let mut d = delta.tally.to_digest();
                d.cap();
                (scope.delta, key, delta, d.encode())
            })
        })
        .collect();
    for (chunk, values) in multi_row.split(&rows, 8) {
        let sql = format!(
            "INSERT INTO click_digest_deltas (scope, owner, period, group_id, clicks, bots, uniques, data) \
             VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for (scope, key, delta, data) in chunk {
            q = q
                .bind(*scope)
                .bind(key.0)
                .bind(key.1)
                .bind(key.2)
                .bind(delta.clicks)
                .bind(delta.bots)
                .bind(delta.uniques)
                .bind(data.as_slice());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Adds `changes` to their day rows, creating the rows a day's first clicks need.
///
/// Two statements per chunk of rows: an upsert that creates the missing rows with the change as their digest,
/// and on the existing ones counts the clicks, bumps the revision (which the block cache checks, see
/// [`super::read`]) and so locks them, returning their digest as it was; then an update of the merged digests of
/// those existing rows. A row the upsert created answers revision 1 and needs no second write.
pub(crate) async fn add(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    scope: Scope,
    changes: &BTreeMap<DayKey<'_>, Change>,
) -> Result<(), StoreError> {
    let rows: Vec<(&DayKey<'_>, &Change)> = changes.iter().collect();
    let cols = if scope.grouped { 9 } else { 8 };
    let (t, owner) = (scope.table, scope.owner);
    let group_col = if scope.grouped { ", group_id" } else { "" };
    let mut merged: Vec<(DayKey<'_>, Vec<u8>)> = Vec::new();
    for (chunk, values) in multi_row.split(&rows, cols) {
        let sql = format!(
            "INSERT INTO {t} ({owner}, span, period{group_col}, revision, clicks, bots, uniques, data) \
             VALUES {values} ON CONFLICT ({owner}, {keys}) DO UPDATE SET revision = {t}.revision + 1, \
             clicks = {t}.clicks + excluded.clicks, bots = {t}.bots + excluded.bots, \
             uniques = {t}.uniques + excluded.uniques \
             RETURNING {owner} AS owner, period{group_col}, revision, data",
            keys = scope.key_columns(),
        );
        // A new row stores the change as it is, within the bound a merge keeps (one report can bring 1,000
        // values, a batch of reports more).
        let encoded: Vec<Vec<u8>> = chunk
            .iter()
            .map(|(_, c)| {
                let mut d = c.digest.clone();
                d.cap();
                d.encode()
            })
            .collect();
        let mut q = sqlx::query(&sql);
        for ((key, change), data) in chunk.iter().zip(&encoded) {
            q = q.bind(key.0).bind("day").bind(key.1);
            if scope.grouped {
                q = q.bind(key.2);
            }
            q = q
                .bind(1_i64)
                .bind(change.clicks)
                .bind(change.bots)
                .bind(change.uniques)
                .bind(data.as_slice());
        }
        let by_key: HashMap<DayKey<'_>, (DayKey<'_>, &Change)> =
            chunk.iter().map(|(k, c)| (**k, (**k, *c))).collect();
        for row in q.fetch_all(&mut *conn).await? {
            if row.try_get::<i64, _>("revision")? == 1 {
                continue;
            }
            let owner: String = row.try_get("owner")?;
            let day: i64 = row.try_get("period")?;
            let group: String = if scope.grouped {
                row.try_get("group_id")?
            } else {
                String::new()
            };
            let Some(&(key, change)) = by_key.get(&(owner.as_str(), day, group.as_str())) else {
                return Err(StoreError::Internal(format!(
                    "{t}: the upsert answered a row it was not given"
                )));
            };
            if change.digest.is_empty() {
                // Bots only: the values stay as they are.
                continue;
            }
            let mut digest = Digest::decode(&row.try_get::<Vec<u8>, _>("data")?)?;
            digest.merge(&change.digest, 1);
            merged.push((key, digest.encode()));
        }
    }
    merged.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    set_data(conn, multi_row, scope, &merged, None).await
}

/// Writes the digests of existing day rows; with `less`, also takes those clicks and bots off each row's counts and
/// bumps its revision (a deletion: [`take_out`]).
async fn set_data(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    scope: Scope,
    rows: &[(DayKey<'_>, Vec<u8>)],
    less: Option<&[(i64, i64, i64)]>,
) -> Result<(), StoreError> {
    let (t, owner) = (scope.table, scope.owner);
    let key_cols = if scope.grouped { 3 } else { 2 };
    let cols = key_cols + 1 + 3 * usize::from(less.is_some());
    let group_match = if scope.grouped {
        format!(" AND {t}.group_id = v.column3")
    } else {
        String::new()
    };
    let data_col = key_cols + 1;
    let set = if less.is_some() {
        format!(
            "data = v.column{data_col}, clicks = {t}.clicks - v.column{}, bots = {t}.bots - v.column{}, \
             uniques = {t}.uniques - v.column{}, revision = {t}.revision + 1",
            data_col + 1,
            data_col + 2,
            data_col + 3
        )
    } else {
        format!("data = v.column{data_col}")
    };
    let indexed: Vec<(usize, &(DayKey<'_>, Vec<u8>))> = rows.iter().enumerate().collect();
    for (chunk, values) in multi_row.split(&indexed, cols) {
        let sql = format!(
            "UPDATE {t} SET {set} FROM (VALUES {values}) AS v \
             WHERE {t}.{owner} = v.column1 AND {t}.span = 'day' AND {t}.period = v.column2{group_match}"
        );
        let mut q = sqlx::query(&sql);
        for (i, (key, data)) in chunk {
            q = q.bind(key.0).bind(key.1);
            if scope.grouped {
                q = q.bind(key.2);
            }
            q = q.bind(data.as_slice());
            if let Some(less) = less {
                q = q.bind(less[*i].0).bind(less[*i].1).bind(less[*i].2);
            }
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Takes `changes` out of the day rows of groups or accounts (not links: a deleted link's own rows are deleted).
/// Rows that are no longer there (their group was deleted) are left alone.
pub(crate) async fn take_out(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    scope: Scope,
    changes: &BTreeMap<DayKey<'_>, Change>,
) -> Result<(), StoreError> {
    debug_assert!(!scope.grouped);
    let (t, owner) = (scope.table, scope.owner);
    // Locked in key order on PostgreSQL, as the reports lock them.
    let lock = if multi_row.anonymous {
        ""
    } else {
        " FOR UPDATE"
    };
    let mut owners: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (o, day, _) in changes.keys() {
        let span = owners.entry(o).or_insert((*day, *day));
        span.0 = span.0.min(*day);
        span.1 = span.1.max(*day);
    }
    let mut rows: Vec<(DayKey<'_>, Vec<u8>)> = Vec::new();
    let mut less: Vec<(i64, i64, i64)> = Vec::new();
    for (o, (first, last)) in owners {
        let stored = sqlx::query(&format!(
            "SELECT period, data FROM {t} WHERE {owner} = $1 AND span = 'day' AND period >= $2 AND period <= $3 \
             ORDER BY period{lock}"
        ))
        .bind(o)
        .bind(first)
        .bind(last)
        .fetch_all(&mut *conn)
        .await?;
        for row in stored {
            let day: i64 = row.try_get("period")?;
            let Some(change) = changes.get(&(o, day, "")) else {
                continue;
            };
            let mut digest = Digest::decode(&row.try_get::<Vec<u8>, _>("data")?)?;
            digest.merge(&change.digest, -1);
            rows.push(((o, day, ""), digest.encode()));
            less.push((change.clicks, change.bots, change.uniques));
        }
    }
    set_data(conn, multi_row, scope, &rows, Some(&less)).await
}
