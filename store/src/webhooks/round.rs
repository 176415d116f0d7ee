//! One round of the delivery loop in one transaction: the attempts that ended are recorded ([`super::record`]) and
//! the next due deliveries claimed ([`super::delivery`]) together, so a round waits for one commit (one WAL flush)
//! instead of two, and the places the ended attempts held, and the heads their successes promoted, are claimed at
//! once.

use super::Attempted;
use super::delivery::{DueDelivery, claim_in};
use super::record::record_in;
use crate::error::StoreError;
use crate::pool::Db;
use std::collections::HashMap;
use std::time::Duration;

impl Db {
    /// Records `attempts` ([`Db::record_webhook_attempts`]) and claims up to `limit` due deliveries
    /// ([`Db::claim_webhook_deliveries`]; `in_flight` no longer counts the ended attempts) in one transaction.
    pub async fn record_and_claim_webhook_deliveries(
        &self,
        attempts: &[(&DueDelivery, &Attempted, Option<Duration>)],
        limit: usize,
        lease: Duration,
        in_flight: &HashMap<String, usize>,
        per_endpoint: usize,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        if attempts.is_empty() {
            return self
                .claim_webhook_deliveries(limit, lease, in_flight, per_endpoint)
                .await;
        }
        let mut tx = self.begin_queue_write().await?;
        record_in(&mut tx, attempts).await?;
        let due = if limit == 0 {
            Vec::new()
        } else {
            claim_in(&mut tx, limit, lease, in_flight, per_endpoint).await?
        };
        tx.commit().await?;
        Ok(due)
    }
}
