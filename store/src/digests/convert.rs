//! The one-time move from the day counters of migration 0005 (a row per day, dimension and value) to day digests.
//! Run at start after the SQL migrations, in one transaction: the counters are read in key order, each day's rows
//! become one digest row (revision 1), and the counter tables are dropped. A database that never had them, or has
//! been moved already, has nothing to do. Written in Rust because the digests' bytes are ([`super::format`]).

use sqlx::{AnyConnection, Row};
use std::collections::BTreeMap;

use super::write::{Change, DayKey};
use super::{Dimension, Scope};
use crate::error::StoreError;
use crate::sql_chunks::{MultiRow, in_lists};

/// The counter tables, what they became, and their key columns (owner, day, then the group of link rows).
const MOVES: [(&str, Scope, &str); 3] = [
    ("link_click_counts", Scope::LINKS, "link_id, day, group_id"),
    ("group_click_counts", Scope::GROUPS, "group_id, day"),
    ("account_click_counts", Scope::ACCOUNTS, "account_id, day"),
];

/// Serialises a step of `Db::migrate` that moves an old table's rows (`step` names it) with the same step of
/// another origin starting at once: on PostgreSQL the second waits here for the first's transaction, then finds the
/// table gone; SQLite's write transaction serialises them already.
pub(crate) async fn serialise_move(
    conn: &mut AnyConnection,
    postgres: bool,
    step: &str,
) -> Result<(), StoreError> {
    if postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("shortlink:{step}"))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Whether the old `table` is still there to move, and if so, on PostgreSQL, locked against writes to the end of
/// the caller's transaction: an origin of the version before, still running in a rolling upgrade, may be writing
/// to it; what it committed is moved, and its later reports fail on the dropped table and are sent again by the
/// edge (to a new origin, once the old ones are gone).
pub(crate) async fn take_old_table(
    conn: &mut AnyConnection,
    postgres: bool,
    table: &str,
) -> Result<bool, StoreError> {
    let sql = if postgres {
        "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1"
    } else {
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1"
    };
    let exists = sqlx::query(sql)
        .bind(table)
        .fetch_optional(&mut *conn)
        .await?
        .is_some();
    if exists && postgres {
        sqlx::query(&format!("LOCK TABLE {table} IN EXCLUSIVE MODE"))
            .execute(&mut *conn)
            .await?;
    }
    Ok(exists)
}

/// Moves every counter table still there, in the caller's transaction.
pub(crate) async fn counters_to_digests(conn: &mut AnyConnection) -> Result<(), StoreError> {
    let multi_row = MultiRow::of(conn);
    let postgres = !multi_row.anonymous;
    serialise_move(conn, postgres, "counters-to-digests").await?;
    for (table, scope, key) in MOVES {
        if !take_old_table(conn, postgres, table).await? {
            continue;
        }
        // A few owners at a time, so memory holds their rows only, however large the tables.
        let owner_col = key.split(',').next().unwrap_or(key);
        let owners: Vec<String> = sqlx::query(&format!(
            "SELECT DISTINCT {owner_col} AS owner FROM {table} ORDER BY 1"
        ))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get("owner"))
        .collect::<Result<_, _>>()?;
        let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
        for (list, binds) in in_lists(&owners, 1) {
            let sql = format!(
                "SELECT {key}, dimension, value, clicks FROM {table} \
                 WHERE {owner_col} IN ({list}) AND clicks > 0 ORDER BY {key}",
            );
            let mut q = sqlx::query(&sql);
            for b in binds {
                q = q.bind(b);
            }
            // Owned keys: the owners' days are gathered, then written.
            let mut changes: BTreeMap<(String, i64, String), Change> = BTreeMap::new();
            for row in q.fetch_all(&mut *conn).await? {
                let owner: String = row.try_get(0)?;
                let day: i64 = row.try_get(1)?;
                let group: String = if scope.grouped {
                    row.try_get(2)?
                } else {
                    String::new()
                };
                let dimension: String = row.try_get("dimension")?;
                let value: String = row.try_get("value")?;
                let clicks: i64 = row.try_get("clicks")?;
                let change = changes.entry((owner, day, group)).or_default();
                let dimension = match dimension.as_str() {
                    "country" => Dimension::COUNTRY,
                    // Every click is in exactly one device row of its day: those give the day's clicks.
                    "device" => {
                        change.clicks += clicks;
                        Dimension::DEVICE
                    }
                    "referrer" => Dimension::REFERRER,
                    _ => continue,
                };
                change.digest.add(dimension, &value, clicks);
            }
            let borrowed: BTreeMap<DayKey<'_>, Change> = changes
                .iter()
                .map(|((o, d, g), c)| {
                    (
                        (o.as_str(), *d, g.as_str()),
                        Change {
                            clicks: c.clicks,
                            bots: 0,
                            // The old counters had no visitors.
                            uniques: 0,
                            digest: c.digest.clone(),
                        },
                    )
                })
                .collect();
            super::write::add(conn, multi_row, scope, &borrowed).await?;
        }
        sqlx::query(&format!("DROP TABLE {table}"))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
