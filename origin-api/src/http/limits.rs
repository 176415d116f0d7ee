//! The limits on what an API key (or a burst of requests) may cost the origin beyond create-link's own: the
//! budget of management writes per key, the cap on groups per account, and the process-wide bound on CPU-heavy
//! answers (PNG QR codes, CSV exports). Each write handler charges the budget once its request is well formed
//! ([`Limits::charge`]) and answers through [`answer`], so every charged write carries the budget's headers.

use super::error::{ApiError, rate_limit_headers};
use axum::response::{IntoResponse, Response};
use shortlink_store::{AuthContext, Db, RateLimitState, WriteCharge, WriteSubject};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The configured limits, shared by every handler.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Management writes per API key (and per account's dashboard) in any rolling minute.
    pub writes_per_minute: u32,
    /// Most groups an account may have, its default group included.
    pub max_groups_per_account: u32,
    /// The bound on PNG QR codes and CSV exports being made at once.
    pub renders: RenderGate,
}

/// A process-wide bound on CPU-heavy answers: at most `concurrency` at once; a request beyond waits up to `wait`
/// for a place, then gets `503` with `Retry-After: 1`. A burst of 2048-pixel PNGs or large exports then costs
/// the other requests at most these places' worth of CPU, instead of every core and blocking thread.
#[derive(Debug, Clone)]
pub struct RenderGate {
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl RenderGate {
    /// At most `concurrency` (at least 1) at once, each waiting at most `wait` for its turn.
    pub fn new(concurrency: usize, wait: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            wait,
        }
    }

    /// A place, held until the returned permit is dropped; `503` when none frees up in time.
    pub(crate) async fn enter(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Timed out, or the semaphore was closed (never done): busy either way.
            Ok(Err(_)) | Err(_) => {
                super::observe::rate_limited("render");
                Err(ApiError::Busy)
            }
        }
    }
}

impl RenderGate {
    /// The places themselves, for the later parts of an answer already under way (an export's next batch), which
    /// wait for a place however long it takes, since they can no longer be refused. The parts between two places
    /// hold none, so a slow reader never keeps one from the others.
    pub(crate) fn places(&self) -> Arc<Semaphore> {
        self.permits.clone()
    }
}

impl Limits {
    /// Charges one management write to the caller's key; `429` when the key's budget for the last minute is spent.
    /// (Takes the store rather than the application state, which holds these limits.)
    pub(crate) async fn charge(
        &self,
        db: &Db,
        caller: &AuthContext,
    ) -> Result<RateLimitState, ApiError> {
        match db
            .charge_write(WriteSubject::ApiKey(&caller.key_id), self.writes_per_minute)
            .await?
        {
            WriteCharge::Allowed(limit) => Ok(limit),
            WriteCharge::Limited(limit) => Err(ApiError::WriteLimited(limit)),
        }
    }
}

/// The answer of a charged write, success or failure, with the budget's `X-RateLimit-*` headers: the write was
/// counted either way. A write that succeeded wakes the publisher (`wake`), so the edge learns of it at once; a
/// write that changed nothing (an empty PATCH) wakes it for nothing, which costs one empty outbox read.
pub(crate) fn answer(
    limit: &RateLimitState,
    wake: &Notify,
    result: Result<impl IntoResponse, ApiError>,
) -> Response {
    let mut response = match result {
        Ok(r) => {
            wake.notify_one();
            r.into_response()
        }
        Err(e) => e.into_response(),
    };
    rate_limit_headers(limit, response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_gate_turns_away_after_its_wait() {
        let gate = RenderGate::new(1, Duration::from_millis(20));
        let held = gate.enter().await.ok();
        assert!(held.is_some());
        assert!(matches!(gate.enter().await, Err(ApiError::Busy)));
        drop(held);
        assert!(
            gate.enter().await.is_ok(),
            "free again once the place is given back"
        );
        // Zero places is one: a misconfiguration must not stop every render.
        assert!(RenderGate::new(0, Duration::ZERO).enter().await.is_ok());
    }
}
