//! Retention of the raw click events, of the batch ids and event ids of click reports, of the activity log's
//! rows and of the webhooks' log, finished deliveries and events: each is deleted by age, in bounded statements (each its own short transaction, so the SQLite writer is
//! never held for long). The day counters are kept: statistics do not change when raw events go.

use crate::domain::Micros;
use crate::error::StoreError;
use crate::pool::Db;

/// What is deleted by age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aged {
    /// Raw click events, by when they happened.
    RawClicks,
    /// Click-report batch ids, by when they were received: a report delivered again after its id is forgotten
    /// is counted again.
    BatchIds,
    /// Click event ids, by when they were received: an event delivered again after its id is forgotten is
    /// counted again.
    EventIds,
    /// Rows of the activity log ([`crate::audit`]), by when the change was made.
    AuditRows,
    /// The webhooks' log of attempts, by when the attempt was made.
    WebhookAttempts,
    /// Finished webhook deliveries (succeeded or failed; never a pending one), by when they were created: an
    /// event whose delivery is gone can no longer be redelivered.
    WebhookDeliveries,
    /// Webhook events with no delivery left, by when they were created.
    WebhookEvents,
}

impl Aged {
    /// The bounded delete: the `LIMIT` in a subquery, which both engines accept (PostgreSQL has no
    /// `DELETE … LIMIT`).
    fn delete(self) -> &'static str {
        match self {
            Aged::RawClicks => {
                "DELETE FROM clicks WHERE id IN (SELECT id FROM clicks WHERE at < $1 LIMIT $2)"
            }
            Aged::BatchIds => {
                "DELETE FROM click_batches WHERE batch_id IN \
                 (SELECT batch_id FROM click_batches WHERE received_at < $1 LIMIT $2)"
            }
            Aged::EventIds => {
                "DELETE FROM click_event_ids WHERE id IN \
                 (SELECT id FROM click_event_ids WHERE received_at < $1 LIMIT $2)"
            }
            Aged::AuditRows => {
                "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < $1 LIMIT $2)"
            }
            Aged::WebhookAttempts => {
                "DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE at < $1 LIMIT $2)"
            }
            Aged::WebhookDeliveries => {
                "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries \
                 WHERE state <> 'pending' AND created_at < $1 LIMIT $2)"
            }
            Aged::WebhookEvents => {
                "DELETE FROM webhook_events WHERE id IN (SELECT ev.id FROM webhook_events ev WHERE ev.created_at < $1 \
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id) LIMIT $2)"
            }
        }
    }
}

impl Db {
    /// Deletes up to `limit` rows of `what` from before `before`; returns how many went.
    pub async fn prune(&self, what: Aged, before: Micros, limit: u32) -> Result<u64, StoreError> {
        let done = sqlx::query(what.delete())
            .bind(before.0)
            .bind(i64::from(limit))
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected())
    }

    /// How many raw click events are stored (operators and tests; a full count, not for request paths).
    pub async fn raw_click_count(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM clicks")
            .fetch_one(&self.read)
            .await?)
    }
}
