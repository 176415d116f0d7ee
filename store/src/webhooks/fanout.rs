//! Fanning events out into deliveries, in the delivery loop rather than in the change's transaction. A change
//! writes its event and one `webhook_fanout` row naming the endpoints subscribed at that moment
//! ([`super::emit`]); the loop takes those rows in order, writes one delivery per endpoint that is still enabled
//! (an endpoint deleted or disabled since gets none; one created since gets none either: it was not subscribed
//! when the change happened), queues each behind its (endpoint, key) head, and deletes the rows, in one
//! transaction. Fan-outs are serialised (one process at a time on PostgreSQL, by an advisory lock), so the
//! order they are taken in is the order of each key's deliveries.

use super::emit::is_postgres;
use crate::error::StoreError;
use crate::pool::Db;
use crate::sql_chunks::{MultiRow, in_lists};
use sqlx::{AnyConnection, Row};
use std::collections::HashSet;

/// The name fan-outs serialise on ([`Db::serialise_on`]).
const FANOUT_LOCK: &str = "webhook-fanout";

impl Db {
    /// Fans out up to `limit` events (oldest first) into their deliveries, due now; returns how many events it
    /// took (fewer than `limit`: none are left). Reads first, so an idle loop never takes SQLite's write lock.
    pub async fn fan_out_webhook_events(&self, limit: usize) -> Result<usize, StoreError> {
        // By the key: the table's rows live for moments, and until a vacuum its heap is mostly dead rows, which a
        // plain `LIMIT 1` (a sequential scan) reads through from the first page every time.
        let any = sqlx::query("SELECT seq FROM webhook_fanout ORDER BY seq LIMIT 1")
            .fetch_optional(&self.read)
            .await?;
        if any.is_none() || limit == 0 {
            return Ok(0);
        }
        let now = crate::domain::Micros::now();
        let mut tx = self.begin_queue_write().await?;
        self.serialise_on(&mut tx, FANOUT_LOCK).await?;
        let rows = sqlx::query(
            "SELECT f.seq, f.event_id, f.endpoints, ev.ordering_key FROM webhook_fanout f \
             JOIN webhook_events ev ON ev.id = f.event_id ORDER BY f.seq LIMIT $1",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?;
        let mut taken: Vec<(i64, String, String, Vec<String>)> = Vec::with_capacity(rows.len());
        for r in &rows {
            let endpoints: String = r.try_get("endpoints")?;
            taken.push((
                r.try_get("seq")?,
                r.try_get("event_id")?,
                r.try_get("ordering_key")?,
                serde_json::from_str(&endpoints).unwrap_or_default(),
            ));
        }
        let live = enabled(&mut tx, &taken).await?;
        let deliveries: Vec<(&str, &str, &str)> = taken
            .iter()
            .flat_map(|(_, event, key, endpoints)| {
                endpoints
                    .iter()
                    .filter(|e| live.contains(e.as_str()))
                    .map(move |e| (e.as_str(), event.as_str(), key.as_str()))
            })
            .collect();
        insert_deliveries(&mut tx, &deliveries, now.0).await?;
        let seqs: Vec<i64> = taken.iter().map(|t| t.0).collect();
        for (list, binds) in in_lists(&seqs, 1) {
            let sql = format!("DELETE FROM webhook_fanout WHERE seq IN ({list})");
            let mut q = sqlx::query(&sql);
            for b in binds {
                q = q.bind(b);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(taken.len())
    }
}

/// Which of the endpoints `taken` names are still enabled. On PostgreSQL they are read `FOR KEY SHARE`: an
/// endpoint deleted at the same moment waits for the fan-out to commit (then its deliveries go with it), instead
/// of failing it on the foreign key.
async fn enabled(
    conn: &mut AnyConnection,
    taken: &[(i64, String, String, Vec<String>)],
) -> Result<HashSet<String>, StoreError> {
    let mut ids: Vec<&str> = taken
        .iter()
        .flat_map(|t| t.3.iter().map(String::as_str))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let lock = if is_postgres(conn) {
        " ORDER BY id FOR KEY SHARE"
    } else {
        ""
    };
    let mut live = HashSet::new();
    for (list, binds) in in_lists(&ids, 1) {
        let sql =
            format!("SELECT id FROM webhook_endpoints WHERE enabled = 1 AND id IN ({list}){lock}");
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        for r in q.fetch_all(&mut *conn).await? {
            live.insert(r.try_get("id")?);
        }
    }
    Ok(live)
}

/// Writes `(endpoint, event, key)` deliveries, due at `now`, in order: each the head of its (endpoint, key) queue
/// if it has none yet, else waiting behind it (or behind the earlier rows of its key in this batch).
async fn insert_deliveries(
    conn: &mut AnyConnection,
    deliveries: &[(&str, &str, &str)],
    now: i64,
) -> Result<(), StoreError> {
    let mut queued = heads(conn, deliveries).await?;
    let rows: Vec<(&str, &str, &str, i64)> = deliveries
        .iter()
        .map(|&(endpoint, event, key)| {
            let waiting = !queued.insert((endpoint.to_owned(), key.to_owned()));
            (endpoint, event, key, i64::from(waiting))
        })
        .collect();
    for (chunk, values) in MultiRow::of(conn).split(&rows, 8) {
        let sql = format!(
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, ordering_key, state, attempts, \
             next_attempt_at, created_at, waiting) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for (endpoint, event, key, waiting) in chunk {
            q = q
                .bind(*endpoint)
                .bind(*event)
                .bind(*key)
                .bind("pending")
                .bind(0i64)
                .bind(now)
                .bind(now)
                .bind(*waiting);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The (endpoint, key) queues among `deliveries` that have a head already (a pending delivery not waiting). On
/// PostgreSQL the heads are locked until the fan-out commits, in id order (as the delivery loop ends them, so the
/// two never deadlock). A head that ends while this waits for its lock is no longer one when the lock comes, and
/// the next of its key, promoted in that same transaction, was not a head when this statement began: so the
/// read is repeated, each time with a fresh view, until it finds and holds the same heads twice. Then every head
/// this fan-out queues behind is held, none can end before it commits, and its new rows are seen
/// by whichever transaction ends that head next. (SQLite runs one write transaction at a time.)
pub(crate) async fn heads(
    conn: &mut AnyConnection,
    deliveries: &[(&str, &str, &str)],
) -> Result<HashSet<(String, String)>, StoreError> {
    if deliveries.is_empty() {
        return Ok(HashSet::new());
    }
    let mut endpoints: Vec<&str> = deliveries.iter().map(|d| d.0).collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    let mut keys: Vec<&str> = deliveries.iter().map(|d| d.2).collect();
    keys.sort_unstable();
    keys.dedup();
    let postgres = is_postgres(conn);
    let lock = if postgres {
        " ORDER BY id FOR UPDATE"
    } else {
        ""
    };
    let mut found = read_heads(conn, &endpoints, &keys, lock).await?;
    // Bounded: each round that differs means a head ended meanwhile; a busy key cannot keep that up for long,
    // and after the last round the heads it holds are still correct for the rows it saw.
    for _ in 0..8 {
        if !postgres {
            break;
        }
        let again = read_heads(conn, &endpoints, &keys, lock).await?;
        if again == found {
            break;
        }
        found = again;
    }
    Ok(found)
}

/// One read of [`heads`].
async fn read_heads(
    conn: &mut AnyConnection,
    endpoints: &[&str],
    keys: &[&str],
    lock: &str,
) -> Result<HashSet<(String, String)>, StoreError> {
    let mut found = HashSet::new();
    // At most 20 endpoints an account (and a batch is one account's, or a few accounts' for click reports).
    for (endpoint_list, endpoint_binds) in in_lists(endpoints, 1) {
        for (key_list, key_binds) in in_lists(keys, 1 + endpoint_binds.len()) {
            let sql = format!(
                "SELECT endpoint_id, ordering_key FROM webhook_deliveries WHERE state = 'pending' AND waiting = 0 \
                 AND endpoint_id IN ({endpoint_list}) AND ordering_key IN ({key_list}){lock}"
            );
            let mut q = sqlx::query(&sql);
            for b in endpoint_binds.iter().chain(key_binds.iter()) {
                q = q.bind(*b);
            }
            for r in q.fetch_all(&mut *conn).await? {
                found.insert((r.try_get("endpoint_id")?, r.try_get("ordering_key")?));
            }
        }
    }
    Ok(found)
}
