//! Sending side of the webhooks' outbox: claiming due deliveries, and the account's redeliveries and test pings.
//! What each attempt came to is recorded by [`super::record`].
//!
//! **Claims.** A worker claims due deliveries by writing its claim token and a lease end (`claimed_until`) on them,
//! in a write transaction: on PostgreSQL the candidate rows are read `FOR UPDATE … SKIP LOCKED`, so two processes
//! claiming at once never take the same row (the loser skips it, or re-reads it once the winner commits and finds
//! it leased); on SQLite the transaction holds the database's one write lock. A worker that dies mid-delivery
//! leaves its lease to expire, and the row is claimed again (at least once, never twice at the same time). An
//! outcome is recorded only by the claim that sent it.
//!
//! **Order.** A delivery is due only when no earlier delivery (lower id) of the same ordering key to the same
//! endpoint is still pending, claimed or waiting for a retry: one link's events reach an endpoint one after the
//! other, in commit order, while other links' events go past.
//!
//! **Retries and health.** The caller says when the next attempt is due (the Standard Webhooks schedule, in the
//! origin); none left means the delivery is dropped (`failed`) with its last error. Any failure starts (or
//! continues) the endpoint's failure run; any success ends it; a run of `DISABLE_AFTER` disables the endpoint
//! with the reason, and drops its pending deliveries. Test pings never touch an endpoint's health.

use super::EventType;
use super::emit::{is_postgres, new_event_id, payload};
use super::endpoints::endpoint_in;
use super::fanout;
use crate::domain::Micros;
use crate::error::{Entity, StoreError};
use crate::pool::Db;
use crate::sql_chunks::in_lists;
use sqlx::Row;
use std::collections::HashMap;
use std::time::Duration;

/// A claimed delivery: what to send, where, signed with which secret. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct DueDelivery {
    /// The delivery's row id.
    pub delivery_id: i64,
    /// The endpoint's id.
    pub endpoint_id: String,
    /// The event's id (`webhook-id`).
    pub event_id: String,
    /// The event's type name.
    pub event_type: String,
    /// Where to POST (checked again by the sender, against DNS rebinding).
    pub url: String,
    /// The body, exactly as stored.
    pub payload: String,
    /// Which attempt this is: 1 for the first, 2 for the first retry, …
    pub attempt: u32,
    secret: String,
    pub(super) claim: String,
}

impl DueDelivery {
    /// The endpoint's signing secret (`whsec_…`).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// True for a test ping (sent once, never retried, no effect on the endpoint's health).
    pub fn is_ping(&self) -> bool {
        self.event_type == EventType::Ping.as_str()
    }
}

impl std::fmt::Debug for DueDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueDelivery")
            .field("delivery_id", &self.delivery_id)
            .field("endpoint_id", &self.endpoint_id)
            .field("event_id", &self.event_id)
            .field("event_type", &self.event_type)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

pub(super) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `($first, $first+1, …)` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns a [`DueDelivery`] is read from.
const DUE_COLUMNS: &str =
    "d.id, d.endpoint_id, d.event_id, d.attempts, ev.type, ev.payload, e.url, e.secret";

fn due_from_row(r: &sqlx::any::AnyRow, claim: &str) -> Result<DueDelivery, sqlx::Error> {
    let attempts: i64 = r.try_get("attempts")?;
    Ok(DueDelivery {
        delivery_id: r.try_get("id")?,
        endpoint_id: r.try_get("endpoint_id")?,
        event_id: r.try_get("event_id")?,
        event_type: r.try_get("type")?,
        url: r.try_get("url")?,
        payload: r.try_get("payload")?,
        attempt: u32::try_from(attempts.saturating_add(1)).unwrap_or(u32::MAX),
        secret: r.try_get("secret")?,
        claim: claim.to_owned(),
    })
}

impl Db {
    /// Claims up to `limit` due deliveries for `lease` under a fresh claim token, oldest due first, at most
    /// `per_endpoint` in flight per endpoint counting `in_flight` (the caller's own deliveries still being sent, by
    /// endpoint; one for an endpoint that is failing): dead receivers cannot take every place. Due: the head of
    /// its key's queue (see the migration 0012), its time come, not leased, its endpoint enabled.
    pub async fn claim_webhook_deliveries(
        &self,
        limit: usize,
        lease: Duration,
        in_flight: &HashMap<String, usize>,
        per_endpoint: usize,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        if limit == 0 || !self.any_webhook_delivery_due().await? {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_queue_write().await?;
        let due = claim_in(&mut tx, limit, lease, in_flight, per_endpoint).await?;
        tx.commit().await?;
        Ok(due)
    }

    /// Whether any delivery is due, on a read connection: an idle loop (most of the time) never takes SQLite's
    /// write lock.
    pub(super) async fn any_webhook_delivery_due(&self) -> Result<bool, StoreError> {
        let any_due = sqlx::query(
            "SELECT id FROM webhook_deliveries WHERE state = 'pending' AND waiting = 0 AND next_attempt_at <= $1 \
             AND (claimed_until IS NULL OR claimed_until < $1) LIMIT 1",
        )
        .bind(Micros::now().0)
        .fetch_optional(&self.read)
        .await?;
        Ok(any_due.is_some())
    }

    /// Promotes the first waiting delivery of every queue that has no head. Ending a head promotes the next in
    /// the same transaction, and a fan-out on PostgreSQL locks the head each new delivery waits behind, so this should never
    /// find one; the delivery loop runs it now and then all the same, because a queue without a head would never
    /// be sent. Returns how many it promoted (reads the waiting rows only).
    pub async fn promote_stranded_webhook_deliveries(&self) -> Result<u64, StoreError> {
        let mut tx = self.begin_queue_write().await?;
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET waiting = 0 WHERE id IN (\
               SELECT MIN(w.id) FROM webhook_deliveries w WHERE w.state = 'pending' AND w.waiting = 1 \
               AND NOT EXISTS (SELECT 1 FROM webhook_deliveries h WHERE h.endpoint_id = w.endpoint_id \
                   AND h.ordering_key = w.ordering_key AND h.state = 'pending' AND h.waiting = 0) \
               GROUP BY w.endpoint_id, w.ordering_key)",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(done)
    }

    /// A test ping for one of the account's endpoints (enabled or not), claimed for `lease` by the caller, who
    /// sends it now and records it like any attempt ([`Db::record_webhook_attempt`], with no retry). It is in the
    /// endpoint's log, and may be redelivered.
    pub async fn start_webhook_test(
        &self,
        account_id: &str,
        endpoint_id: &str,
        lease: Duration,
    ) -> Result<DueDelivery, StoreError> {
        let now = Micros::now();
        let claim = uuid::Uuid::new_v4().to_string();
        let event_id = new_event_id();
        let body = payload(
            EventType::Ping,
            now,
            serde_json::json!({ "endpoint_id": endpoint_id }),
        );
        let mut tx = self.begin_write().await?;
        endpoint_in(&mut tx, account_id, endpoint_id).await?;
        sqlx::query(
            "INSERT INTO webhook_events (id, account_id, type, ordering_key, payload, created_at) \
             VALUES ($1, $2, $3, $1, $4, $5)",
        )
        .bind(&event_id)
        .bind(account_id)
        .bind(EventType::Ping.as_str())
        .bind(&body)
        .bind(now.0)
        .execute(&mut *tx)
        .await?;
        let delivery_id: i64 = sqlx::query(
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, ordering_key, state, attempts, next_attempt_at, \
             claimed_by, claimed_until, created_at) VALUES ($1, $2, $2, 'pending', 0, $3, $4, $5, $3) RETURNING id",
        )
            .bind(endpoint_id)
            .bind(&event_id)
            .bind(now.0)
            .bind(&claim)
            .bind(now.0.saturating_add(micros(lease)))
            .fetch_one(&mut *tx)
            .await?
            .try_get("id")?;
        let sql = format!(
            "SELECT {DUE_COLUMNS} FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id \
             JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = $1"
        );
        let row = sqlx::query(&sql)
            .bind(delivery_id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(due_from_row(&row, &claim)?)
    }

    /// Sends an event to one of the account's endpoints again: its delivery starts over (due now, attempt 1, the
    /// full retry schedule), in its place in its key's order. A delivery being sent right now is left to finish.
    /// A disabled endpoint is [`StoreError::WebhookDisabled`]; an event the endpoint never had (or one pruned
    /// after 30 days) is not found.
    pub async fn redeliver_webhook_event(
        &self,
        account_id: &str,
        endpoint_id: &str,
        event_id: &str,
    ) -> Result<(), StoreError> {
        let now = Micros::now().0;
        let mut tx = self.begin_write().await?;
        let endpoint = endpoint_in(&mut tx, account_id, endpoint_id).await?;
        if !endpoint.enabled {
            return Err(StoreError::WebhookDisabled);
        }
        // A delivery that has ended goes back into its key's queue: behind the head if the key has one (which
        // then promotes the lowest waiting id: this one before any later event), else as the head. One still
        // pending keeps its place.
        let key: Option<String> = sqlx::query(
            "SELECT ordering_key FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2 AND state <> 'pending'",
        )
        .bind(endpoint_id)
        .bind(event_id)
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| r.try_get("ordering_key"))
        .transpose()?;
        let waiting = match &key {
            Some(key) => {
                let has_head = !fanout::heads(&mut tx, &[(endpoint_id, event_id, key.as_str())])
                    .await?
                    .is_empty();
                i64::from(has_head)
            }
            None => 0,
        };
        let reset = sqlx::query(
            "UPDATE webhook_deliveries SET waiting = CASE WHEN state = 'pending' THEN waiting ELSE $4 END, \
             state = 'pending', attempts = 0, next_attempt_at = $3, last_error = NULL, \
             claimed_by = NULL, claimed_until = NULL \
             WHERE endpoint_id = $1 AND event_id = $2 AND (claimed_until IS NULL OR claimed_until < $3)",
        )
        .bind(endpoint_id)
        .bind(event_id)
        .bind(now)
        .bind(waiting)
        .execute(&mut *tx)
        .await?;
        if reset.rows_affected() == 0 {
            sqlx::query(
                "SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2",
            )
            .bind(endpoint_id)
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound(Entity::WebhookEvent))?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The claim of [`Db::claim_webhook_deliveries`] in the caller's queue transaction (after a round's records, so
/// an endpoint's failing state and its queues' heads are as those left them: [`super::round`]).
pub(super) async fn claim_in(
    tx: &mut sqlx::AnyConnection,
    limit: usize,
    lease: Duration,
    in_flight: &HashMap<String, usize>,
    per_endpoint: usize,
) -> Result<Vec<DueDelivery>, StoreError> {
    let now = Micros::now().0;
    let claim = uuid::Uuid::new_v4().to_string();
    // An endpoint that is failing (no success since its last failure) gets one place: receivers that time
    // out hold theirs for the whole timeout, and must not take the places of the ones that answer.
    let busy: Vec<&str> = in_flight.keys().map(String::as_str).collect();
    let mut failing: Vec<String> = Vec::new();
    for (list, binds) in in_lists(&busy, 1) {
        let sql = format!(
            "SELECT id FROM webhook_endpoints WHERE failing_since IS NOT NULL AND id IN ({list})"
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        for r in q.fetch_all(&mut *tx).await? {
            failing.push(r.try_get("id")?);
        }
    }
    let cap = |endpoint: &str| {
        if failing.iter().any(|f| f == endpoint) {
            1
        } else {
            per_endpoint
        }
    };
    let full: Vec<&str> = in_flight
        .iter()
        .filter(|(e, n)| **n >= cap(e))
        .map(|(e, _)| e.as_str())
        .collect();
    let skip = if full.is_empty() {
        String::new()
    } else {
        format!(
            " AND d.endpoint_id NOT IN ({})",
            placeholders(3, full.len())
        )
    };
    let lock = if is_postgres(tx) {
        " FOR UPDATE OF d SKIP LOCKED"
    } else {
        ""
    };
    let sql = format!(
        "SELECT d.id, d.endpoint_id FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
         WHERE d.state = 'pending' AND d.next_attempt_at <= $1 \
         AND d.waiting = 0 AND (d.claimed_until IS NULL OR d.claimed_until < $1) AND e.enabled = 1{skip} \
         ORDER BY d.next_attempt_at, d.id LIMIT $2{lock}"
    );
    // More candidates than places, so endpoints at their bound leave room for the others.
    let candidates = i64::try_from(limit.saturating_mul(4)).unwrap_or(i64::MAX);
    let mut q = sqlx::query(&sql).bind(now).bind(candidates);
    for e in &full {
        q = q.bind(*e);
    }
    let rows = q.fetch_all(&mut *tx).await?;
    let mut taken: HashMap<String, usize> = HashMap::new();
    let mut picked: Vec<i64> = Vec::with_capacity(limit);
    for r in &rows {
        if picked.len() >= limit {
            break;
        }
        let endpoint: String = r.try_get("endpoint_id")?;
        let busy = in_flight.get(&endpoint).copied().unwrap_or(0);
        let room = cap(&endpoint);
        let n = taken.entry(endpoint).or_default();
        if busy + *n < room {
            *n += 1;
            picked.push(r.try_get("id")?);
        }
    }
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "UPDATE webhook_deliveries SET claimed_by = $1, claimed_until = $2 WHERE id IN ({})",
        placeholders(3, picked.len())
    );
    let mut q = sqlx::query(&sql)
        .bind(&claim)
        .bind(now.saturating_add(micros(lease)));
    for id in &picked {
        q = q.bind(*id);
    }
    q.execute(&mut *tx).await?;
    let sql = format!(
        "SELECT {DUE_COLUMNS} FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id \
         JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id IN ({})",
        placeholders(1, picked.len())
    );
    let mut q = sqlx::query(&sql);
    for id in &picked {
        q = q.bind(*id);
    }
    let rows = q.fetch_all(&mut *tx).await?;
    let mut due = rows
        .iter()
        .map(|r| due_from_row(r, &claim))
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    due.sort_by_key(|d| picked.iter().position(|p| *p == d.delivery_id));
    Ok(due)
}
