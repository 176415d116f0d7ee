//! Sending side of the webhooks' outbox: claiming due deliveries, recording what each attempt came to, and the
//! account's redeliveries and test pings.
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
//! continues) the endpoint's failure run; any success ends it; a run of [`DISABLE_AFTER`] disables the endpoint
//! with the reason, and drops its pending deliveries. Test pings never touch an endpoint's health.

use super::EventType;
use super::emit::{is_postgres, new_event_id, payload};
use super::endpoints::{drop_pending, endpoint_in};
use super::fanout;
use crate::domain::Micros;
use crate::error::{Entity, StoreError};
use crate::pool::Db;
use crate::sql_chunks::in_lists;
use sqlx::Row;
use std::collections::HashMap;
use std::time::Duration;

/// An endpoint failing for this long without a success is disabled (Standard Webhooks: five days).
pub const DISABLE_AFTER: Duration = Duration::from_secs(5 * 24 * 3_600);

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
    claim: String,
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

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempted {
    /// The receiver's HTTP status, if it answered.
    pub status_code: Option<u16>,
    /// How long the attempt took.
    pub duration_ms: u64,
    /// Why it failed (refused address, timeout, connection, a non-2xx status).
    pub error: Option<String>,
    /// A 2xx answer.
    pub success: bool,
}

impl Attempted {
    /// The error to keep for a failure: the sender's, else the status.
    fn failure(&self) -> Option<String> {
        if self.success {
            return None;
        }
        Some(
            self.error
                .clone()
                .or_else(|| self.status_code.map(|s| format!("HTTP {s}")))
                .unwrap_or_else(|| "failed".to_owned()),
        )
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `($first, $first+1, …)` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Makes the lowest waiting delivery of `key` to `endpoint_id` the head of its queue (due at its own time: at once
/// for a delivery that never ran). Called in the transaction that ends the previous head.
async fn promote_next(
    conn: &mut sqlx::AnyConnection,
    endpoint_id: &str,
    key: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_deliveries SET waiting = 0 WHERE id = (SELECT MIN(id) FROM webhook_deliveries \
         WHERE endpoint_id = $1 AND ordering_key = $2 AND state = 'pending' AND waiting = 1)",
    )
    .bind(endpoint_id)
    .bind(key)
    .execute(&mut *conn)
    .await?;
    Ok(())
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

/// One attempt's rows (see [`Db::record_webhook_attempt`]) in the caller's transaction.
async fn record_in(
    tx: &mut sqlx::AnyConnection,
    due: &DueDelivery,
    outcome: &Attempted,
    retry_in: Option<Duration>,
    now: Micros,
) -> Result<(), StoreError> {
    let error = outcome.failure();
    sqlx::query(
            "INSERT INTO webhook_attempts (endpoint_id, event_id, event_type, attempt, at, status_code, \
             duration_ms, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&due.endpoint_id)
        .bind(&due.event_id)
        .bind(&due.event_type)
        .bind(i64::from(due.attempt))
        .bind(now.0)
        .bind(outcome.status_code.map(i64::from))
        .bind(i64::try_from(outcome.duration_ms).unwrap_or(i64::MAX))
        .bind(error.as_deref())
        .execute(&mut *tx)
        .await?;
    let (state, next) = match (outcome.success, retry_in) {
        (true, _) => ("succeeded", now.0),
        (false, Some(wait)) => ("pending", now.0.saturating_add(micros(wait))),
        (false, None) => ("failed", now.0),
    };
    let ended = sqlx::query(
            "UPDATE webhook_deliveries SET state = $3, attempts = $4, next_attempt_at = $5, last_error = $6, \
             claimed_by = NULL, claimed_until = NULL WHERE id = $1 AND claimed_by = $2 RETURNING ordering_key",
        )
        .bind(due.delivery_id)
        .bind(&due.claim)
        .bind(state)
        .bind(i64::from(due.attempt))
        .bind(next)
        .bind(error.as_deref())
        .fetch_optional(&mut *tx)
        .await?;
    // The head of its key's queue has ended: the next waiting delivery of the key becomes the head.
    if let (Some(row), false) = (ended, state == "pending") {
        let key: String = row.try_get("ordering_key")?;
        promote_next(tx, &due.endpoint_id, &key).await?;
    }
    if !due.is_ping() {
        match &error {
            None => {
                sqlx::query(
                        "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL",
                    )
                    .bind(&due.endpoint_id)
                    .execute(&mut *tx)
                    .await?;
            }
            Some(error) => {
                let since = sqlx::query(
                    "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, $2) \
                         WHERE id = $1 AND enabled = 1 RETURNING failing_since",
                )
                .bind(&due.endpoint_id)
                .bind(now.0)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get::<i64, _>("failing_since"))
                .transpose()?;
                if let Some(since) = since.filter(|s| now.0 - s >= micros(DISABLE_AFTER)) {
                    let reason = format!(
                        "failing continuously since {}; last error: {error}",
                        Micros(since).to_iso8601()
                    );
                    sqlx::query(
                            "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = $2 WHERE id = $1",
                        )
                        .bind(&due.endpoint_id)
                        .bind(&reason)
                        .execute(&mut *tx)
                        .await?;
                    drop_pending(
                        tx,
                        &due.endpoint_id,
                        &format!("endpoint disabled: {reason}"),
                    )
                    .await?;
                }
            }
        }
    }
    Ok(())
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
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = Micros::now().0;
        // A read first: an idle loop (most of the time) never takes SQLite's write lock.
        let any_due = sqlx::query(
            "SELECT id FROM webhook_deliveries WHERE state = 'pending' AND waiting = 0 AND next_attempt_at <= $1 \
             AND (claimed_until IS NULL OR claimed_until < $1) LIMIT 1",
        )
        .bind(now)
        .fetch_optional(&self.read)
        .await?;
        if any_due.is_none() {
            return Ok(Vec::new());
        }
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
            for r in q.fetch_all(&self.read).await? {
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
        let mut tx = self.begin_write().await?;
        let skip = if full.is_empty() {
            String::new()
        } else {
            format!(
                " AND d.endpoint_id NOT IN ({})",
                placeholders(3, full.len())
            )
        };
        let lock = if is_postgres(&tx) {
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
            tx.commit().await?;
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
        tx.commit().await?;
        let mut due = rows
            .iter()
            .map(|r| due_from_row(r, &claim))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        due.sort_by_key(|d| picked.iter().position(|p| *p == d.delivery_id));
        Ok(due)
    }

    /// Records an attempt of a claimed delivery: its row in the log, then the delivery's state (succeeded; due
    /// again in `retry_in`; or, with no retry left, failed with the error kept) and the endpoint's health (see the
    /// module's documentation), in one transaction. A claim that lost its lease (another worker took the row after
    /// it expired) still logs its attempt but leaves the delivery to the newer claim.
    pub async fn record_webhook_attempt(
        &self,
        due: &DueDelivery,
        outcome: &Attempted,
        retry_in: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.record_webhook_attempts(&[(due, outcome, retry_in)])
            .await
    }

    /// Records several attempts as [`Db::record_webhook_attempt`] does one, in one transaction: the delivery loop
    /// records what has finished since its last round together, so a busy endpoint costs one write transaction
    /// per round rather than one per delivery.
    pub async fn record_webhook_attempts(
        &self,
        attempts: &[(&DueDelivery, &Attempted, Option<Duration>)],
    ) -> Result<(), StoreError> {
        if attempts.is_empty() {
            return Ok(());
        }
        let now = Micros::now();
        // In id order, as fan-outs lock the heads they queue behind (`fanout::heads`): never a deadlock.
        let mut ordered: Vec<&(&DueDelivery, &Attempted, Option<Duration>)> =
            attempts.iter().collect();
        ordered.sort_by_key(|(due, _, _)| due.delivery_id);
        let mut tx = self.begin_write().await?;
        for (due, outcome, retry_in) in ordered {
            record_in(&mut tx, due, outcome, *retry_in, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Promotes the first waiting delivery of every queue that has no head. Ending a head promotes the next in
    /// the same transaction, and a fan-out on PostgreSQL locks the head each new delivery waits behind, so this should never
    /// find one; the delivery loop runs it now and then all the same, because a queue without a head would never
    /// be sent. Returns how many it promoted (reads the waiting rows only).
    pub async fn promote_stranded_webhook_deliveries(&self) -> Result<u64, StoreError> {
        let mut tx = self.begin_write().await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_senders_error_or_the_status() {
        let mut outcome = Attempted {
            status_code: Some(500),
            duration_ms: 3,
            error: None,
            success: false,
        };
        assert_eq!(outcome.failure().as_deref(), Some("HTTP 500"));
        outcome.error = Some("timed out".to_owned());
        assert_eq!(outcome.failure().as_deref(), Some("timed out"));
        outcome.success = true;
        assert_eq!(outcome.failure(), None);
    }
}
