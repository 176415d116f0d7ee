//! Recording what attempts came to: each attempt's row in the endpoint's log, then its delivery's new state (done;
//! due again later; or dropped after its last retry), the next delivery of its queue made the head, and the
//! endpoint's health (see [`super::delivery`]). The delivery loop records every attempt that ended since its last
//! round in one transaction, and a round's successes (nearly all of them) in a handful of statements whatever their
//! number: one delivery costs the loop a fraction of a statement, not four.

use super::delivery::{DueDelivery, micros};
use super::endpoints::drop_pending;
use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;
use crate::sql_chunks::{MultiRow, in_lists};
use sqlx::{AnyConnection, Row};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// An endpoint failing for this long without a success is disabled (Standard Webhooks: five days).
pub const DISABLE_AFTER: Duration = Duration::from_secs(5 * 24 * 3_600);

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

/// Ends or reschedules one attempt's delivery and updates its endpoint's health, one row at a time (failures,
/// test pings: the rare cases), in the caller's transaction. `succeeded` holds the endpoints with a success in
/// the same batch: a failure of theirs leaves their health alone (a success in the batch ends any failure run).
async fn end_one(
    tx: &mut sqlx::AnyConnection,
    due: &DueDelivery,
    outcome: &Attempted,
    retry_in: Option<Duration>,
    now: Micros,
    succeeded: &HashSet<&str>,
) -> Result<(), StoreError> {
    let error = outcome.failure();
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
    if !due.is_ping() && !succeeded.contains(due.endpoint_id.as_str()) {
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

/// One recorded attempt: the claimed delivery, what it came to, and when to try again (none: it was the last).
type Recorded<'a> = (&'a DueDelivery, &'a Attempted, Option<Duration>);

/// On PostgreSQL, locks the batch's deliveries in id order before anything else touches them: fan-outs lock the
/// heads they queue behind in id order too (`fanout::heads`), so the two never deadlock, whatever order the
/// statements below visit rows in.
async fn lock_in_id_order(
    tx: &mut sqlx::AnyConnection,
    ordered: &[&Recorded<'_>],
) -> Result<(), StoreError> {
    if !super::emit::is_postgres(tx) {
        return Ok(());
    }
    let ids: Vec<i64> = ordered.iter().map(|(due, _, _)| due.delivery_id).collect();
    for (list, binds) in in_lists(&ids, 1) {
        let sql = format!(
            "SELECT id FROM webhook_deliveries WHERE id IN ({list}) ORDER BY id FOR UPDATE"
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.fetch_all(&mut *tx).await?;
    }
    Ok(())
}

/// Every attempt's row in its endpoint's log.
async fn insert_attempts(
    tx: &mut sqlx::AnyConnection,
    ordered: &[&Recorded<'_>],
    now: Micros,
) -> Result<(), StoreError> {
    for (chunk, values) in MultiRow::of(tx).split(ordered, 8) {
        let sql = format!(
            "INSERT INTO webhook_attempts (endpoint_id, event_id, event_type, attempt, at, status_code, \
             duration_ms, error) VALUES {values}"
        );
        let mut q = sqlx::query(&sql);
        for (due, outcome, _) in chunk {
            q = q
                .bind(due.endpoint_id.as_str())
                .bind(due.event_id.as_str())
                .bind(due.event_type.as_str())
                .bind(i64::from(due.attempt))
                .bind(now.0)
                .bind(outcome.status_code.map(i64::from))
                .bind(i64::try_from(outcome.duration_ms).unwrap_or(i64::MAX))
                .bind(outcome.failure());
        }
        q.execute(&mut *tx).await?;
    }
    Ok(())
}

/// Ends the delivered (2xx, not a ping) deliveries of a batch still held by their claims, makes the next of each
/// queue its head, and ends their endpoints' failure runs. Returns the endpoints with a success.
async fn end_delivered<'a>(
    tx: &mut sqlx::AnyConnection,
    delivered: &[&Recorded<'a>],
    now: Micros,
) -> Result<HashSet<&'a str>, StoreError> {
    let succeeded: HashSet<&'a str> = delivered
        .iter()
        .map(|(due, _, _)| due.endpoint_id.as_str())
        .collect();
    // A claim's rows together (a batch holds the claims of a few rounds): a claim that lost its lease changes
    // nothing here, as in `end_one`.
    let mut by_claim: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (due, _, _) in delivered {
        by_claim
            .entry(due.claim.as_str())
            .or_default()
            .push(due.delivery_id);
    }
    let mut ended: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (claim, ids) in by_claim {
        for (list, binds) in in_lists(&ids, 3) {
            let sql = format!(
                "UPDATE webhook_deliveries SET state = 'succeeded', attempts = attempts + 1, next_attempt_at = $2, \
                 last_error = NULL, claimed_by = NULL, claimed_until = NULL \
                 WHERE claimed_by = $1 AND id IN ({list}) RETURNING endpoint_id, ordering_key"
            );
            let mut q = sqlx::query(&sql).bind(claim).bind(now.0);
            for b in binds {
                q = q.bind(b);
            }
            for r in q.fetch_all(&mut *tx).await? {
                ended
                    .entry(r.try_get("endpoint_id")?)
                    .or_default()
                    .push(r.try_get("ordering_key")?);
            }
        }
    }
    // Each ended head's queue: its lowest waiting delivery becomes the head. One `MIN` per key, each an
    // equality lookup on both leading columns of webhook_deliveries_order (the first waiting row of the key), so
    // the statement costs the same whatever the backlog. Written as `ordering_key IN (…) … GROUP BY ordering_key`
    // it read every pending row of the endpoint on PostgreSQL 15 (the key list a filter, to keep the index's order
    // for the grouping): 4,000 rows and 3–4 ms a statement with a backlog of 4,000, so a backlog made every round
    // slower and, once one formed, it only grew (BENCHMARKS.md, "Webhooks").
    for (endpoint, keys) in &ended {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        for (_, binds) in in_lists(&keys, 2) {
            // The padded list's values, one a row: `($2), ($3), …` (a repeated last value promotes nothing more).
            let rows = (2..2 + binds.len())
                .map(|n| format!("(${n})"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "UPDATE webhook_deliveries SET waiting = 0 WHERE id IN (SELECT (SELECT MIN(w.id) \
                 FROM webhook_deliveries w WHERE w.endpoint_id = $1 AND w.ordering_key = k.column1 \
                 AND w.state = 'pending' AND w.waiting = 1) FROM (VALUES {rows}) AS k)"
            );
            let mut q = sqlx::query(&sql).bind(endpoint.as_str());
            for b in binds {
                q = q.bind(b);
            }
            q.execute(&mut *tx).await?;
        }
    }
    let healthy: Vec<&str> = succeeded.iter().copied().collect();
    for (list, binds) in in_lists(&healthy, 1) {
        let sql = format!(
            "UPDATE webhook_endpoints SET failing_since = NULL WHERE failing_since IS NOT NULL AND id IN ({list})"
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.execute(&mut *tx).await?;
    }
    Ok(succeeded)
}

impl Db {
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

    /// Records several attempts as [`Db::record_webhook_attempt`] does one, in one transaction (the delivery loop
    /// records them with its next claim instead: [`Db::record_and_claim_webhook_deliveries`]).
    pub async fn record_webhook_attempts(
        &self,
        attempts: &[(&DueDelivery, &Attempted, Option<Duration>)],
    ) -> Result<(), StoreError> {
        if attempts.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_queue_write().await?;
        record_in(&mut tx, attempts).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Records `attempts` in the caller's queue transaction: a busy endpoint costs a few statements per round of the
/// loop rather than a transaction per delivery.
pub(super) async fn record_in(
    tx: &mut AnyConnection,
    attempts: &[(&DueDelivery, &Attempted, Option<Duration>)],
) -> Result<(), StoreError> {
    let now = Micros::now();
    let mut ordered: Vec<&(&DueDelivery, &Attempted, Option<Duration>)> = attempts.iter().collect();
    ordered.sort_by_key(|(due, _, _)| due.delivery_id);
    lock_in_id_order(tx, &ordered).await?;
    insert_attempts(tx, &ordered, now).await?;
    // The common case, a delivered event, in a few statements for the whole batch; the rest row by row.
    let (delivered, rest): (Vec<_>, Vec<_>) = ordered
        .into_iter()
        .partition(|(due, outcome, _)| outcome.success && !due.is_ping());
    let succeeded = end_delivered(tx, &delivered, now).await?;
    for (due, outcome, retry_in) in rest {
        end_one(tx, due, outcome, *retry_in, now, &succeeded).await?;
    }
    Ok(())
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
