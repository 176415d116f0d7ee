//! Folding the click reports' delta rows into the day rows ([`super`]): the oldest deltas first, a chunk per
//! transaction, each chunk's deltas added up in memory first, so a day row is rewritten once per chunk however many
//! reports touched it (a busy link's day row once a second rather than once per report).
//!
//! The deltas are deleted in the transaction that adds them to the day rows, so each is folded exactly once, and a
//! fold that fails leaves its deltas for the next. Every origin process folds; on PostgreSQL each takes the deltas
//! no other fold holds (`SKIP LOCKED`) and writes day rows in key order ([`write::add`]), so folds neither wait for
//! each other's deltas nor deadlock on the rows they share. The statistics read day rows and deltas in one
//! snapshot ([`crate::Db::begin_snapshot_read`]), so a fold between their reads never counts a click twice or
//! misses it.

use std::collections::BTreeMap;

use sqlx::{AnyConnection, Row};

use super::write::{self, Change, DayKey};
use super::{Digest, Scope};
use crate::error::StoreError;
use crate::sql_chunks::{MultiRow, in_lists};

/// Most deltas folded in one transaction. A report of 1,000 clicks over many links makes several hundred, so this
/// is a second or two of a busy origin's reports: the more a chunk holds, the fewer times each busy day row is
/// rewritten, and the longer a fold holds SQLite's one writer (BENCHMARKS.md, "Deltas instead of rewriting day
/// rows": at 13–16k events/s the folds kept up, with a few thousand deltas left at the end).
pub const CHUNK: usize = 16_384;

const COLUMNS: &str = "scope, owner, period, group_id, clicks, bots, uniques, data";

/// One delta row, read back as it is deleted.
struct Delta {
    scope: String,
    owner: String,
    period: i64,
    group: String,
    change: Change,
}

/// Folds up to [`CHUNK`] of the oldest deltas and answers how many.
pub(crate) async fn oldest(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
) -> Result<usize, StoreError> {
    let skip = if multi_row.anonymous {
        ""
    } else {
        " FOR UPDATE SKIP LOCKED"
    };
    let rows = sqlx::query(&format!(
        "DELETE FROM click_digest_deltas WHERE id IN \
         (SELECT id FROM click_digest_deltas ORDER BY id LIMIT {CHUNK}{skip}) RETURNING {COLUMNS}"
    ))
    .fetch_all(&mut *conn)
    .await?;
    let n = rows.len();
    apply(conn, multi_row, rows).await?;
    Ok(n)
}

/// Folds every delta of `owners` (links', groups' or accounts' ids). Waits for a fold that holds some of them, so
/// once it returns every click of those owners committed so far is in their day rows: what a link's deletion
/// needs before it takes the link's clicks out of its groups' and account's rows ([`crate::link_edits`]).
pub(crate) async fn of_owners(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    owners: &[&str],
) -> Result<(), StoreError> {
    let mut rows = Vec::new();
    for (list, ids) in in_lists(owners, 1) {
        let sql =
            format!("DELETE FROM click_digest_deltas WHERE owner IN ({list}) RETURNING {COLUMNS}");
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        rows.extend(q.fetch_all(&mut *conn).await?);
    }
    apply(conn, multi_row, rows).await
}

/// Adds deleted delta rows to their day rows: links', then groups', then accounts' (the lock order).
async fn apply(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    rows: Vec<sqlx::any::AnyRow>,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut deltas = Vec::with_capacity(rows.len());
    for r in rows {
        deltas.push(Delta {
            scope: r.try_get("scope")?,
            owner: r.try_get("owner")?,
            period: r.try_get("period")?,
            group: r.try_get("group_id")?,
            change: Change {
                clicks: r.try_get("clicks")?,
                bots: r.try_get("bots")?,
                uniques: r.try_get("uniques")?,
                digest: Digest::decode(&r.try_get::<Vec<u8>, _>("data")?)?,
            },
        });
    }
    let mut links: BTreeMap<DayKey<'_>, Change> = BTreeMap::new();
    let mut groups: BTreeMap<DayKey<'_>, Change> = BTreeMap::new();
    let mut accounts: BTreeMap<DayKey<'_>, Change> = BTreeMap::new();
    for d in deltas.iter_mut() {
        let map = if d.scope == Scope::LINKS.delta {
            &mut links
        } else if d.scope == Scope::GROUPS.delta {
            &mut groups
        } else if d.scope == Scope::ACCOUNTS.delta {
            &mut accounts
        } else {
            return Err(StoreError::Internal(format!(
                "a click digest delta of scope {:?}",
                d.scope
            )));
        };
        map.entry((d.owner.as_str(), d.period, d.group.as_str()))
            .or_default()
            .absorb(std::mem::take(&mut d.change));
    }
    keep_existing(conn, multi_row, "groups", &mut groups).await?;
    keep_existing(conn, multi_row, "accounts", &mut accounts).await?;
    write::add(conn, multi_row, Scope::LINKS, &links).await?;
    write::add(conn, multi_row, Scope::GROUPS, &groups).await?;
    write::add(conn, multi_row, Scope::ACCOUNTS, &accounts).await
}

/// Leaves out the changes of groups or accounts deleted since their reports: their day rows went with them (the
/// foreign key cascades), and so do these deltas. On PostgreSQL the rows found are held against deletion (`FOR KEY
/// SHARE`, what the day rows' foreign key takes) until the fold commits.
async fn keep_existing(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    table: &str,
    changes: &mut BTreeMap<DayKey<'_>, Change>,
) -> Result<(), StoreError> {
    let mut owners: Vec<&str> = changes.keys().map(|k| k.0).collect();
    owners.dedup();
    if owners.is_empty() {
        return Ok(());
    }
    let lock = if multi_row.anonymous {
        ""
    } else {
        " FOR KEY SHARE"
    };
    let mut found = std::collections::HashSet::new();
    for (list, ids) in in_lists(&owners, 1) {
        let sql = format!("SELECT id FROM {table} WHERE id IN ({list}) ORDER BY id{lock}");
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        for row in q.fetch_all(&mut *conn).await? {
            found.insert(row.try_get::<String, _>("id")?);
        }
    }
    changes.retain(|k, _| found.contains(k.0));
    Ok(())
}

impl crate::pool::Db {
    /// Folds up to [`CHUNK`] of the oldest click digest deltas into the day rows and answers how many: the
    /// origin's background task calls it every second, and again at once while it answers a whole chunk. Folding
    /// changes no figure the statistics show, only how fast they are read.
    pub async fn fold_click_deltas(&self) -> Result<usize, StoreError> {
        let mut tx = self.begin_queue_write().await?;
        let n = oldest(&mut tx, self.multi_row).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// How many click digest deltas wait to be folded. For the tests and the benchmarks; not an API.
    #[doc(hidden)]
    pub async fn pending_click_deltas(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM click_digest_deltas")
            .fetch_one(&self.read)
            .await?
            .try_get("n")?)
    }
}
