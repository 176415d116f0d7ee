//! The publisher: drains the outbox into the edge's KV, in order, idempotently, with retries.
//!
//! One process at a time holds the publisher lease (a database row), so rounds never overlap
//! and a slow round can never overwrite a newer value. Each round reads up to
//! [`BATCH`] outbox rows, loads the *current* record of every key they name, writes puts and
//! deletes to the sink in one batch, then removes the rows. If the sink fails, the rows stay
//! and the round is retried with exponential backoff: a committed change is never lost.

use rand::Rng;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use shortlink_store::{Db, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// Outbox rows per round (the worker's sync route takes up to 1000 operations).
const BATCH: i64 = 500;
/// How long a lease lasts without renewal: a crashed holder is replaced after this.
const LEASE_MICROS: i64 = 15_000_000;
/// Poll interval when idle (changes made by other processes, e.g. the admin CLI).
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where records go.
#[derive(Debug, Clone)]
pub enum Sink {
    /// The worker's own `POST /__shortlink/sync` route (local workerd, or operators who prefer it).
    WorkerSync {
        /// Full URL of the route.
        url: String,
        /// Bearer secret, the worker's `SYNC_SECRET`.
        secret: SecretString,
    },
    /// The Cloudflare KV REST API (bulk write and bulk delete).
    CloudflareKv {
        /// API base, `https://api.cloudflare.com/client/v4` in production.
        api_base: String,
        /// Cloudflare account id.
        account_id: String,
        /// KV namespace id.
        namespace_id: String,
        /// API token with Workers KV write permission.
        api_token: SecretString,
    },
}

/// Why a batch did not land.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The request failed (connection refused, timeout, …).
    #[error("sink unreachable: {0}")]
    Transport(#[from] reqwest::Error),
    /// The sink answered with an error.
    #[error("sink refused the batch: HTTP {status}: {body}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// Start of the response body.
        body: String,
    },
}

impl Sink {
    /// Writes `puts` (key, JSON text) and deletes `deletes`. Idempotent.
    pub async fn apply(
        &self,
        client: &reqwest::Client,
        puts: &[(String, String)],
        deletes: &[String],
    ) -> Result<(), SinkError> {
        match self {
            Self::WorkerSync { url, secret } => {
                let put: Vec<_> = puts
                    .iter()
                    .map(|(k, v)| json!({"key": k, "value": serde_json::from_str::<serde_json::Value>(v).unwrap_or_default()}))
                    .collect();
                let resp = client
                    .post(url)
                    .bearer_auth(secret.expose_secret())
                    .json(&json!({"put": put, "delete": deletes}))
                    .send()
                    .await?;
                check(resp).await
            }
            Self::CloudflareKv {
                api_base,
                account_id,
                namespace_id,
                api_token,
            } => {
                let base = format!(
                    "{api_base}/accounts/{account_id}/storage/kv/namespaces/{namespace_id}"
                );
                if !puts.is_empty() {
                    let body: Vec<_> = puts
                        .iter()
                        .map(|(k, v)| json!({"key": k, "value": v}))
                        .collect();
                    let resp = client
                        .put(format!("{base}/bulk"))
                        .bearer_auth(api_token.expose_secret())
                        .json(&body)
                        .send()
                        .await?;
                    check(resp).await?;
                }
                if !deletes.is_empty() {
                    let resp = client
                        .post(format!("{base}/bulk/delete"))
                        .bearer_auth(api_token.expose_secret())
                        .json(&deletes)
                        .send()
                        .await?;
                    check(resp).await?;
                }
                Ok(())
            }
        }
    }
}

async fn check(resp: reqwest::Response) -> Result<(), SinkError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body: String = resp
        .text()
        .await
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect();
    Err(SinkError::Refused {
        status: status.as_u16(),
        body,
    })
}

/// Counters for `/healthz`.
#[derive(Debug, Default)]
pub struct PublisherStats {
    /// Keys written or deleted at the edge since start.
    pub published: AtomicU64,
    /// Failed rounds since start.
    pub failures: AtomicU64,
    /// UNIX milliseconds of the last successful round (0: none yet).
    pub last_success_ms: AtomicI64,
}

/// The publisher task's handle on the rest of the process.
#[derive(Debug, Clone, Default)]
pub struct PublisherHandle {
    /// Poked after each committed change so the edge hears of it at once, not at the next poll.
    pub wake: Arc<Notify>,
    /// Counters.
    pub stats: Arc<PublisherStats>,
}

/// Runs rounds until `shutdown` fires; returns after releasing the lease.
pub async fn run(
    db: Db,
    sink: Sink,
    handle: PublisherHandle,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let holder = uuid::Uuid::new_v4().to_string();
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "publisher cannot build its HTTP client");
            return;
        }
    };
    let mut backoff = Duration::from_millis(100);
    loop {
        // After a failure the backoff is slept out even when changes arrive: a wake-up would retry a sink that is
        // down at once and double the backoff per change, so a burst of changes during an outage pushed it to
        // the 30 s maximum in a second, and the edge caught up up to 30 s after it came back.
        let (wait, wakeable) = match round(&db, &sink, &client, &holder).await {
            Ok(n) => {
                backoff = Duration::from_millis(100);
                handle
                    .stats
                    .last_success_ms
                    .store(now_ms(), Ordering::Relaxed);
                if n > 0 {
                    handle
                        .stats
                        .published
                        .fetch_add(n as u64, Ordering::Relaxed);
                    continue;
                }
                (IDLE_POLL, true)
            }
            Err(e) => {
                handle.stats.failures.fetch_add(1, Ordering::Relaxed);
                let wait = jittered(backoff);
                tracing::warn!(error = %e, retry_in = ?wait, "publish round failed");
                backoff = (backoff * 2).min(MAX_BACKOFF);
                (wait, false)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = handle.wake.notified(), if wakeable => {}
            _ = shutdown.changed() => break,
        }
        if *shutdown.borrow() {
            break;
        }
    }
    let _ = db.release_publisher_lease(&holder).await;
}

/// `backoff` less up to a quarter of it, at random, so that origins restarted together, or sharing one sink's
/// outage, do not retry in step. The backoff is kept here rather than taken from a retry crate (`backon`): a retry
/// wrapper retries one future, while this loop also sleeps between successful rounds, is woken by changes and
/// must stop on shutdown in the middle of a wait, which the `select!` below does in one place.
fn jittered(backoff: Duration) -> Duration {
    backoff.mul_f64(1.0 - rand::rng().random_range(0.0..0.25))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Why a round failed.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// One round; returns how many keys it published (0: idle or not the lease holder).
async fn round(
    db: &Db,
    sink: &Sink,
    client: &reqwest::Client,
    holder: &str,
) -> Result<usize, RoundError> {
    if !db.acquire_publisher_lease(holder, LEASE_MICROS).await? {
        return Ok(0);
    }
    let rows = db.outbox_batch(BATCH).await?;
    if rows.is_empty() {
        return Ok(0);
    }
    // Several rows may name one key; its current record covers all of them.
    let mut keys: Vec<&str> = Vec::with_capacity(rows.len());
    for (_, key) in &rows {
        if !keys.contains(&key.as_str()) {
            keys.push(key);
        }
    }
    let (mut puts, mut deletes) = (Vec::new(), Vec::new());
    for key in &keys {
        match db.kv_record(key).await? {
            Some(value) => puts.push(((*key).to_owned(), value)),
            None => deletes.push((*key).to_owned()),
        }
    }
    sink.apply(client, &puts, &deletes).await?;
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    db.outbox_remove(&ids).await?;
    tracing::debug!(puts = puts.len(), deletes = deletes.len(), "published");
    Ok(keys.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_a_quarter_below() {
        let base = Duration::from_millis(1_000);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(base)).collect();
        assert!(waits.iter().all(|w| *w <= base && *w > base * 3 / 4));
        assert!(waits.iter().any(|w| *w != waits[0]), "not one fixed value");
    }
}
