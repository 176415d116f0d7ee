//! Unique visitors (issue 26), the origin's part: each UTC day's random salt ([`Db::rotate_visitor_salts`]) and
//! the first visit of each visitor hash per link and day ([`first_visits`], in a click report's transaction).
//!
//! The worker hashes a visitor (address, User-Agent, link) with the day's salt and sends only the hash
//! ([`kv_model::visitor`]). A hash is remembered in `day_visitor_keys` (its first 64 bits: [`first_visits`]) for its day and deleted, with the day's salt, at
//! 02:00 UTC the next day: no address is ever stored, and nothing that could tell a visitor apart outlives the
//! day (as Plausible Analytics does it). A report arriving after that for a day whose hashes are gone cannot say
//! whether its visitors were new: its clicks count, their `first_visit` is unknown (NULL) and they add no unique
//! visitor.

use std::collections::HashSet;

use kv_model::salt_key;
use kv_model::visitor::SALT_GRACE_MICROS;
use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Row};

use crate::digests::convert::{serialise_move, take_old_table};
use crate::domain::{DAY_MICROS, Micros, hex};
use crate::error::StoreError;
use crate::outbox::enqueue;
use crate::pool::Db;
use crate::sql_chunks::MultiRow;

/// Rows of `day_visitor_keys` per delete statement: each its own short transaction, so SQLite's writer is never held
/// for long while a busy day's hashes go.
const DELETE_ROWS: i64 = 10_000;

/// The first day whose salt and hashes are kept at `now`: a day's go at 02:00 UTC the next day.
pub(crate) fn first_kept_day(now: Micros) -> i64 {
    now.0
        .saturating_sub(SALT_GRACE_MICROS)
        .div_euclid(DAY_MICROS)
}

/// Whether a click of `day` can be told a first visit or not at `now`: its day's hashes are still kept, and it is
/// not later than tomorrow (an edge clock running ahead; a hash of a far-off day would linger until that day).
pub(crate) fn countable_day(day: i64, now: Micros) -> bool {
    (first_kept_day(now)..=now.0.div_euclid(DAY_MICROS) + 1).contains(&day)
}

/// What one rotation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaltRotation {
    /// Days whose salt was made now (today's and tomorrow's, when missing).
    pub created: Vec<i64>,
    /// Days whose salt was deleted now.
    pub deleted: Vec<i64>,
    /// Visitor hashes deleted with them.
    pub hashes_deleted: u64,
}

impl SaltRotation {
    /// Whether KV has something to learn (the publisher is woken).
    pub fn changed_kv(&self) -> bool {
        !self.created.is_empty() || !self.deleted.is_empty()
    }
}

impl Db {
    /// Brings the salts to what `now` needs: today's and tomorrow's exist (tomorrow's ahead of time, so every
    /// worker has it at midnight), and those of days before [`first_kept_day`] are gone, with their visitor hashes.
    /// Each change goes to KV through the outbox (`salt:<day>`: a put, or a delete once the salt is gone). Safe to
    /// run from several processes at once: a salt is made once (the first insert wins) and deleted once.
    pub async fn rotate_visitor_salts(&self, now: Micros) -> Result<SaltRotation, StoreError> {
        let today = now.0.div_euclid(DAY_MICROS);
        let first_kept = first_kept_day(now);
        let mut round = SaltRotation::default();
        let mut tx = self.begin_write().await?;
        for day in [today, today + 1] {
            let salt: [u8; 32] = rand::random();
            let made = sqlx::query(
                "INSERT INTO visitor_salts (day, salt) VALUES ($1, $2) ON CONFLICT (day) DO NOTHING",
            )
            .bind(day)
            .bind(hex(&salt))
            .execute(&mut *tx)
            .await?;
            if made.rows_affected() == 1 {
                round.created.push(day);
            }
        }
        let gone = sqlx::query("DELETE FROM visitor_salts WHERE day < $1 RETURNING day")
            .bind(first_kept)
            .fetch_all(&mut *tx)
            .await?;
        for row in gone {
            round.deleted.push(row.try_get("day")?);
        }
        round.deleted.sort_unstable();
        let keys: Vec<String> = round
            .created
            .iter()
            .chain(&round.deleted)
            .map(|d| salt_key(*d))
            .collect();
        enqueue(&mut tx, &keys).await?;
        tx.commit().await?;
        // The hashes after the salt: once the salt is gone no worker makes new ones for the day, and a report
        // still carrying some is not counted ([`countable_day`]).
        loop {
            let done = sqlx::query(
                "DELETE FROM day_visitor_keys WHERE (day, visitor) IN \
                 (SELECT day, visitor FROM day_visitor_keys WHERE day < $1 LIMIT $2)",
            )
            .bind(first_kept)
            .bind(DELETE_ROWS)
            .execute(&self.write)
            .await?;
            round.hashes_deleted += done.rows_affected();
            if done.rows_affected() < DELETE_ROWS as u64 {
                return Ok(round);
            }
            tokio::task::yield_now().await;
        }
    }

    /// The salt of `day` as KV carries it, or None once it is gone (the publisher then deletes the key).
    pub(crate) async fn salt_record(&self, day: i64) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT salt FROM visitor_salts WHERE day = $1")
                .bind(day)
                .fetch_optional(&self.read)
                .await?,
        )
    }
}

/// A visitor on a day, for an owner (a link's id, or the group's for a dynamic link).
pub(crate) type VisitorKey<'a> = (i64, &'a str, &'a str);

/// What `day_visitor_keys` keeps of a visitor on a day (migration 0023): the first 64 bits of SHA-256 over the owner
/// and the hash, as a signed integer. 8 bytes a visitor instead of the owner's id and 32 hex characters (about 70
/// with SQLite's overhead) keep the day's B-tree small, so a report's random inserts dirty fewer pages. Two of a
/// day's (owner, visitor) pairs sharing a key would count one first visit fewer: about once a day in 4,000 at
/// 100,000,000 pairs a day. The owner is hashed in, not left to the worker's hash covering the link, so the count
/// per link never depends on how a worker version makes its hashes.
fn stored_key(owner: &str, visitor: &str) -> i64 {
    let digest = Sha256::new()
        .chain_update(owner.as_bytes())
        .chain_update([0])
        .chain_update(visitor.as_bytes())
        .finalize();
    let mut first = [0; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Records the visitors of `keys` (any order, repeats allowed) in the caller's transaction and returns those
/// recorded now: the visitors' first visits of the day. Inserted in stored-key order, so two reports with the same
/// visitors wait for each other in one order (PostgreSQL) and never deadlock.
pub(crate) async fn first_visits<'a>(
    conn: &mut AnyConnection,
    multi_row: MultiRow,
    keys: Vec<VisitorKey<'a>>,
) -> Result<HashSet<VisitorKey<'a>>, StoreError> {
    let mut stored: Vec<((i64, i64), VisitorKey<'a>)> = keys
        .into_iter()
        .map(|k| ((k.0, stored_key(k.1, k.2)), k))
        .collect();
    stored.sort_unstable();
    stored.dedup_by_key(|(key, _)| *key);
    let mut new = HashSet::with_capacity(stored.len());
    for (chunk, values) in multi_row.split(&stored, 2) {
        let sql = format!(
            "INSERT INTO day_visitor_keys (day, visitor) VALUES {values} \
             ON CONFLICT (day, visitor) DO NOTHING RETURNING day, visitor"
        );
        let mut q = sqlx::query(&sql);
        for ((day, visitor), _) in chunk {
            q = q.bind(*day).bind(*visitor);
        }
        // The keys were distinct: each returned row is one of this chunk's, found by binary search.
        for row in q.fetch_all(&mut *conn).await? {
            let key: (i64, i64) = (row.try_get("day")?, row.try_get("visitor")?);
            if let Ok(i) = chunk.binary_search_by(|(k, _)| k.cmp(&key)) {
                new.insert(chunk[i].1);
            }
        }
    }
    Ok(new)
}

/// Rows of the old `day_visitors` moved per statement by [`hashes_to_keys`].
const MOVE_ROWS: i64 = 10_000;

/// Moves the hashes kept before migration 0023 (`day_visitors`: owner and hash as text) into `day_visitor_keys`
/// and drops the old table, in the caller's transaction (the one step SQL cannot take: SQLite has no SHA-256).
/// Today's and yesterday's visitors are carried over, so none counts twice across the upgrade.
pub(crate) async fn hashes_to_keys(conn: &mut AnyConnection) -> Result<(), StoreError> {
    let multi_row = MultiRow::of(conn);
    let postgres = !multi_row.anonymous;
    serialise_move(conn, postgres, "visitors-to-keys").await?;
    if !take_old_table(conn, postgres, "day_visitors").await? {
        return Ok(());
    }
    // Keyset pages in key order, so memory holds one page however many hashes the two days have.
    let mut after = (i64::MIN, String::new(), String::new());
    loop {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT day, owner, visitor FROM day_visitors WHERE (day, owner, visitor) > ($1, $2, $3) \
             ORDER BY day, owner, visitor LIMIT $4",
        )
        .bind(after.0)
        .bind(after.1.as_str())
        .bind(after.2.as_str())
        .bind(MOVE_ROWS)
        .fetch_all(&mut *conn)
        .await?;
        let keys = rows
            .iter()
            .map(|(d, o, v)| (*d, o.as_str(), v.as_str()))
            .collect();
        first_visits(conn, multi_row, keys).await?;
        let full = rows.len() as i64 == MOVE_ROWS;
        match rows.into_iter().next_back() {
            Some(last) if full => after = last,
            _ => break,
        }
    }
    sqlx::query("DROP TABLE day_visitors")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000;

    #[test]
    fn a_days_salt_is_kept_until_two_the_next_day() {
        let day = 20_000;
        let midnight = day * DAY_MICROS;
        assert_eq!(first_kept_day(Micros(midnight + HOUR)), day - 1);
        assert_eq!(first_kept_day(Micros(midnight + 2 * HOUR - 1)), day - 1);
        assert_eq!(first_kept_day(Micros(midnight + 2 * HOUR)), day);
        assert_eq!(first_kept_day(Micros(midnight + 23 * HOUR)), day);
    }

    #[test]
    fn a_visitor_is_stored_per_owner_in_64_bits() {
        let v = "0123456789abcdef0123456789abcdef";
        assert_eq!(stored_key("link-a", v), stored_key("link-a", v));
        assert_ne!(stored_key("link-a", v), stored_key("link-b", v));
        assert_ne!(
            stored_key("link-a", v),
            stored_key("link-a", "0123456789abcdef0123456789abcdee")
        );
        // The owner and the hash are kept apart: ("ab", "c…") and ("a", "bc…") are different visitors.
        assert_ne!(stored_key("ab", "c"), stored_key("a", "bc"));
    }

    #[test]
    fn countable_days() {
        let day = 20_000;
        let now = Micros(day * DAY_MICROS + 3 * HOUR);
        assert!(!countable_day(day - 1, now), "yesterday's hashes are gone");
        assert!(countable_day(day, now));
        assert!(countable_day(day + 1, now), "an edge clock a little ahead");
        assert!(!countable_day(day + 2, now));
        let early = Micros(day * DAY_MICROS + HOUR);
        assert!(
            countable_day(day - 1, early),
            "late reports of yesterday until 02:00"
        );
    }
}
