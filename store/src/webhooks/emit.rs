//! Writing events on the change's own connection (the outbox side of webhooks). Every change site calls one of
//! these next to its activity-log row ([`crate::audit::record`]), inside the same transaction: the event and its
//! deliveries commit with the change or not at all.
//!
//! Only the account's *enabled* endpoints subscribed to the event's type get a delivery, and an event with no
//! subscriber is not written at all, so an account without webhooks pays one indexed read per change. On
//! PostgreSQL the subscribed endpoints are read `FOR KEY SHARE`: an endpoint deleted at the same moment waits for
//! this change to commit (then its deliveries go with it), instead of failing the change on the foreign key.

use super::{EventType, events_from_json};
use crate::domain::Micros;
use crate::error::StoreError;
use crate::listed::{LISTED_COLUMNS, ListedLink};
use crate::sql_chunks::in_lists;
use sqlx::{AnyConnection, Row};
use std::collections::{HashMap, HashSet};

/// Rows per multi-row insert (5 parameters a row at most: far under both engines' limits).
const ROWS_PER_STATEMENT: usize = 64;

/// True on PostgreSQL (row locks and `SKIP LOCKED`), false on SQLite (one writer: nothing to lock).
pub(crate) fn is_postgres(conn: &AnyConnection) -> bool {
    conn.backend_name() == "PostgreSQL"
}

/// The enabled endpoints of each of `accounts` subscribed to `kind`, by account (accounts without one are left
/// out).
pub(crate) async fn subscribers(
    conn: &mut AnyConnection,
    accounts: &[&str],
    kind: EventType,
) -> Result<HashMap<String, Vec<String>>, StoreError> {
    let mut found: HashMap<String, Vec<String>> = HashMap::new();
    let lock = if is_postgres(conn) {
        " FOR KEY SHARE"
    } else {
        ""
    };
    let mut accounts = accounts.to_vec();
    accounts.sort_unstable();
    accounts.dedup();
    for (list, binds) in in_lists(&accounts, 1) {
        let sql = format!(
            "SELECT id, account_id, events FROM webhook_endpoints WHERE enabled = 1 AND account_id IN ({list}) \
             ORDER BY id{lock}"
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        for row in q.fetch_all(&mut *conn).await? {
            let events: String = row.try_get("events")?;
            if events_from_json(&events).contains(&kind) {
                let id: String = row.try_get("id")?;
                let account: String = row.try_get("account_id")?;
                let ids = found.entry(account).or_default();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    Ok(found)
}

/// One event to write: whose, its ordering key (a link's or group's id), its `data`, and the endpoints it goes to.
pub(crate) struct Pending<'a> {
    pub(crate) account_id: &'a str,
    pub(crate) ordering_key: &'a str,
    pub(crate) data: serde_json::Value,
    pub(crate) endpoints: &'a [String],
}

/// A new event id: the Standard Webhooks message id (`webhook-id`), `msg_` and 32 hex digits.
pub(crate) fn new_event_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// The body sent for an event: `{"type", "timestamp", "data"}`.
pub(crate) fn payload(kind: EventType, at: Micros, data: serde_json::Value) -> String {
    serde_json::json!({ "type": kind.as_str(), "timestamp": at.to_iso8601(), "data": data })
        .to_string()
}

/// Writes `events` of type `kind` and their deliveries (due now) on `conn`; returns the events' ids in order.
/// Deliveries are inserted in the order of `events`, so their ids (the per-key delivery order) follow it.
pub(crate) async fn write_events(
    conn: &mut AnyConnection,
    kind: EventType,
    events: Vec<Pending<'_>>,
) -> Result<Vec<String>, StoreError> {
    let now = Micros::now();
    let rows: Vec<(String, Pending<'_>, String)> = events
        .into_iter()
        .filter(|e| !e.endpoints.is_empty())
        .map(|mut e| {
            let data = std::mem::take(&mut e.data);
            (new_event_id(), e, payload(kind, now, data))
        })
        .collect();
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let p = 3 + 4 * i;
                format!("(${}, ${}, $1, ${}, ${}, $2)", p, p + 1, p + 2, p + 3)
            })
            .collect();
        let sql = format!(
            "INSERT INTO webhook_events (id, account_id, type, ordering_key, payload, created_at) VALUES {}",
            values.join(", ")
        );
        let mut q = sqlx::query(&sql).bind(kind.as_str()).bind(now.0);
        for (id, e, body) in chunk {
            q = q
                .bind(id.as_str())
                .bind(e.account_id)
                .bind(e.ordering_key)
                .bind(body.as_str());
        }
        q.execute(&mut *conn).await?;
    }
    let deliveries: Vec<(&str, &str, &str)> = rows
        .iter()
        .flat_map(|(id, e, _)| {
            e.endpoints
                .iter()
                .map(move |endpoint| (endpoint.as_str(), id.as_str(), e.ordering_key))
        })
        .collect();
    // Each (endpoint, key) queue has one head; a new delivery waits behind the head, or behind the earlier rows of
    // its own key in this batch.
    let mut queued = heads(conn, &deliveries).await?;
    let queued_rows: Vec<(&str, &str, &str, i64)> = deliveries
        .iter()
        .map(|&(endpoint, event, key)| {
            let waiting = !queued.insert((endpoint.to_owned(), key.to_owned()));
            (endpoint, event, key, i64::from(waiting))
        })
        .collect();
    for chunk in queued_rows.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let p = 2 + 4 * i;
                format!(
                    "(${}, ${}, ${}, 'pending', 0, $1, $1, ${})",
                    p,
                    p + 1,
                    p + 2,
                    p + 3
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, ordering_key, state, attempts, \
             next_attempt_at, created_at, waiting) VALUES {}",
            values.join(", ")
        );
        let mut q = sqlx::query(&sql).bind(now.0);
        for (endpoint, event, key, waiting) in chunk {
            q = q.bind(*endpoint).bind(*event).bind(*key).bind(*waiting);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(rows.into_iter().map(|(id, _, _)| id).collect())
}

/// The (endpoint, key) queues among `deliveries` that have a head already (a pending delivery not waiting). On
/// PostgreSQL the heads are locked until the change commits, in id order (as the delivery loop ends them, so the
/// two never deadlock). A head that ends while this waits for its lock is no longer one when the lock comes, and
/// the next of its key, promoted in that same transaction, was not a head when this statement began: so the
/// read is repeated, each time with a fresh view, until it finds and holds the same heads twice. Then every head
/// this change queues behind is held, none can end before the change commits, and the change's new rows are seen
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

/// Emits one event of `kind` about `ordering_key` with `data`, to the account's subscribed endpoints, on the
/// change's own connection.
pub(crate) async fn emit(
    conn: &mut AnyConnection,
    account_id: &str,
    kind: EventType,
    ordering_key: &str,
    data: serde_json::Value,
) -> Result<(), StoreError> {
    let subscribed = subscribers(conn, &[account_id], kind).await?;
    let Some(endpoints) = subscribed.get(account_id) else {
        return Ok(());
    };
    write_events(
        conn,
        kind,
        vec![Pending {
            account_id,
            ordering_key,
            data,
            endpoints,
        }],
    )
    .await?;
    Ok(())
}

/// Emits `kind` for each `(account, link id)` with the link as listed now (read on `conn`, after the change), to
/// each account's subscribed endpoints. The links are read only when some account has a subscriber.
pub(crate) async fn emit_links(
    conn: &mut AnyConnection,
    kind: EventType,
    links: &[(&str, &str)],
) -> Result<(), StoreError> {
    if links.is_empty() {
        return Ok(());
    }
    let accounts: Vec<&str> = links.iter().map(|(a, _)| *a).collect();
    let subscribed = subscribers(conn, &accounts, kind).await?;
    if subscribed.is_empty() {
        return Ok(());
    }
    let wanted: Vec<&str> = links
        .iter()
        .filter(|(a, _)| subscribed.contains_key(*a))
        .map(|(_, l)| *l)
        .collect();
    let mut listed: HashMap<String, ListedLink> = HashMap::with_capacity(wanted.len());
    for (list, binds) in in_lists(&wanted, 1) {
        let sql = format!(
            "SELECT {LISTED_COLUMNS} FROM links l JOIN domains d ON d.id = l.domain_id WHERE l.id IN ({list})"
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        for row in q.fetch_all(&mut *conn).await? {
            let link = ListedLink::from_row(&row)?;
            listed.insert(link.id.clone(), link);
        }
    }
    let events: Vec<Pending<'_>> = links
        .iter()
        .filter_map(|(account, link_id)| {
            let endpoints = subscribed.get(*account)?;
            let link = listed.get(*link_id)?;
            Some(Pending {
                account_id: account,
                ordering_key: link_id,
                data: link.to_json(),
                endpoints,
            })
        })
        .collect();
    write_events(conn, kind, events).await?;
    Ok(())
}

/// The `data` of a group event: the group as the API shows it, without its key (a secret).
pub(crate) fn group_data(group: &crate::GroupRow) -> serde_json::Value {
    serde_json::json!({
        "id": group.id,
        "name": group.name,
        "settings": group.settings,
        "is_default": group.is_default,
    })
}
