//! Writing events on the change's own connection (the outbox side of webhooks). Every change site calls one of
//! these next to its activity-log row ([`crate::audit::record`]), inside the same transaction: the event commits
//! with the change or not at all.
//!
//! An event goes to the account's *enabled* endpoints subscribed to its type at that moment; it is written with
//! a fan-out row naming them, and the delivery loop turns that into deliveries ([`super::fanout`]). An event with
//! no subscriber is not written at all, so an account without webhooks pays one indexed read per change, and one
//! with twenty endpoints pays that read and two inserts: the deliveries, and the locks on their queues, are off
//! the request path.

use super::{EventType, events_from_json};
use crate::domain::Micros;
use crate::error::StoreError;
use crate::listed::{LISTED_COLUMNS, ListedLink};
use crate::sql_chunks::{MultiRow, in_lists};
use sqlx::{AnyConnection, Row};
use std::collections::HashMap;

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
    let mut accounts = accounts.to_vec();
    accounts.sort_unstable();
    accounts.dedup();
    for (list, binds) in in_lists(&accounts, 1) {
        let sql = format!(
            "SELECT id, account_id, events FROM webhook_endpoints WHERE enabled = 1 AND account_id IN ({list}) \
             ORDER BY id"
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

/// Writes `events` of type `kind` on `conn`, each with its fan-out row (the endpoints subscribed now), in the order
/// of `events`: the delivery loop fans them out in that order ([`super::fanout`]), which is the order of one
/// key's deliveries. Returns the events' ids in order.
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
    let multi_row = MultiRow::of(conn);
    for (chunk, values) in multi_row.split(&rows, 6) {
        let sql = format!(
            "INSERT INTO webhook_events (id, account_id, type, ordering_key, payload, created_at) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for (id, e, body) in chunk {
            q = q
                .bind(id.as_str())
                .bind(e.account_id)
                .bind(kind.as_str())
                .bind(e.ordering_key)
                .bind(body.as_str())
                .bind(now.0);
        }
        q.execute(&mut *conn).await?;
        let sql = format!(
            "INSERT INTO webhook_fanout (event_id, endpoints) VALUES {}",
            multi_row.values(chunk.len(), 2)
        );
        let mut q = sqlx::query(&sql);
        for (id, e, _) in chunk {
            q = q
                .bind(id.as_str())
                .bind(serde_json::Value::from(e.endpoints.to_vec()).to_string());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(rows.into_iter().map(|(id, _, _)| id).collect())
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
