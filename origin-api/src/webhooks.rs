//! The webhook delivery loop: every `serve` process runs one. A companion task fans committed events out into
//! deliveries ([`shortlink_store::Db::fan_out_webhook_events`]) as soon as a commit wakes it, and wakes the loop.
//! The loop claims due deliveries from the store (under a
//! lease, so two processes never send the same attempt at once: [`shortlink_store::DueDelivery`]), sends each
//! with [`webhook_sender::Sender`] (signed, Standard Webhooks headers, 10 s timeout, public addresses only unless
//! `--webhooks-allow-private`), and records each attempt with the next retry from [`webhook_sender::retry_delay`].
//!
//! It is off every request path: handlers only commit events (the outbox) and poke [`WebhookHandle::wake`]; a slow
//! or dead receiver holds one of this loop's [`CONCURRENCY`] places for at most its timeout, and at most
//! [`PER_ENDPOINT`] of them (one while it is failing). It wakes after each fan-out, when a delivery ends (the next event of the
//! same link may now be due) and every [`WebhookSettings::poll_interval`] (retries coming due, changes made by other processes).

use shortlink_store::{Attempted, Db, DueDelivery, StoreError};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use webhook_sender::{Sender, Url, WebhookSecret};

/// Deliveries in flight at once in one process (each an idle socket most of its time).
pub const CONCURRENCY: usize = 64;
/// Deliveries in flight at once to one endpoint, in one process; an endpoint that is failing gets one (the
/// store's claim): dead receivers cannot take every place.
pub const PER_ENDPOINT: usize = 8;
/// How often the loop looks for a queue left without a head (see `promote_stranded_webhook_deliveries`).
const STRANDED_SWEEP: Duration = Duration::from_secs(60);
/// How long a claim lasts beyond the attempt's own timeout: a process that dies mid-delivery leaves its rows to be
/// claimed again after this.
const LEASE_MARGIN: Duration = Duration::from_secs(50);
/// Events fanned out into deliveries per transaction.
const FAN_OUT_BATCH: usize = 256;
/// How often the loop looks for due deliveries when nothing wakes it.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The test ping's timeout: the answer carries its outcome, so it must come within the API's 10 s request bound.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The delivery loop's settings. Only `allow_private` is the operator's (`--webhooks-allow-private`); the others
/// are for tests (a shorter schedule, a faster poll, a shorter timeout) and keep their defaults in `serve`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WebhookSettings {
    /// Allow loopback and private targets, and plain `http` (receivers on a private network, and the tests).
    pub allow_private: bool,
    /// Multiplies every retry delay of the schedule (1.0: Standard Webhooks' 5 s, 5 min, … 10 h).
    pub retry_scale: f64,
    /// How often the loop looks for due deliveries without being woken.
    pub poll_interval: Duration,
    /// One attempt's timeout.
    pub timeout: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            retry_scale: 1.0,
            poll_interval: POLL_INTERVAL,
            timeout: webhook_sender::TIMEOUT,
        }
    }
}

impl WebhookSettings {
    /// The wait before the attempt after `attempt` (1-based), scaled; `None`: that was the last.
    pub fn retry_after(&self, attempt: u32) -> Option<Duration> {
        webhook_sender::retry_delay(attempt).map(|d| d.mul_f64(self.retry_scale.max(0.0)))
    }

    /// How long a claim lasts.
    pub fn lease(&self) -> Duration {
        self.timeout + LEASE_MARGIN
    }
}

/// What handlers share with the loop: the wake-up, and a sender for test pings.
#[derive(Debug, Clone)]
pub struct WebhookHandle {
    /// Poked after each committed change (and click report), so the loop sends at once.
    pub wake: Arc<Notify>,
    /// The settings the loop runs with.
    pub settings: WebhookSettings,
    /// Sends test pings (with [`TEST_TIMEOUT`]).
    pub test_sender: Sender,
}

impl WebhookHandle {
    /// A handle for `settings`.
    pub fn new(settings: WebhookSettings) -> Self {
        Self {
            wake: Arc::default(),
            settings,
            test_sender: Sender::with_timeout(
                settings.allow_private,
                settings.timeout.min(TEST_TIMEOUT),
            ),
        }
    }
}

/// Sends one claimed delivery now: the stored body, signed with the endpoint's secret over the event id and this
/// attempt's time. Never fails: a URL or secret that no longer parses is a failed attempt like any other.
pub async fn send(sender: &Sender, due: &DueDelivery) -> Attempted {
    let failed = |error: &str| Attempted {
        status_code: None,
        duration_ms: 0,
        error: Some(error.to_owned()),
        success: false,
    };
    let Ok(url) = Url::parse(&due.url) else {
        return failed("url must be an absolute URL");
    };
    let Ok(secret) = WebhookSecret::parse(due.secret()) else {
        return failed("the endpoint's secret does not parse");
    };
    let timestamp = shortlink_store::domain::Micros::now().unix_seconds();
    let outcome = sender
        .send(
            &url,
            &secret,
            &due.event_id,
            timestamp,
            due.payload.as_bytes(),
        )
        .await;
    Attempted {
        status_code: outcome.status_code,
        duration_ms: outcome.duration_ms,
        error: outcome.error,
        success: outcome.success,
    }
}

/// Sends a `ping` to one of the account's endpoints now (enabled or not) and records the attempt in its log, with
/// no retry: the API's `POST webhooks/{id}/test` and the dashboard's "Send test event". Returns the ping's event
/// id and what it came to (a receiver's failure is an `Ok` whose `success` is false); another account's endpoint
/// is not found.
pub async fn test_ping(
    db: &Db,
    handle: &WebhookHandle,
    account_id: &str,
    endpoint_id: &str,
) -> Result<(String, Attempted), StoreError> {
    let due = db
        .start_webhook_test(account_id, endpoint_id, handle.settings.lease())
        .await?;
    let outcome = send(&handle.test_sender, &due).await;
    db.record_webhook_attempt(&due, &outcome, None).await?;
    Ok((due.event_id, outcome))
}

/// The dashboard's test pings are the API's ([`test_ping`]).
impl shortlink_dashboard::WebhookTester for WebhookHandle {
    fn test<'a>(
        &'a self,
        db: &'a Db,
        account_id: &'a str,
        endpoint_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<shortlink_dashboard::TestPing, StoreError>> + Send + 'a>>
    {
        Box::pin(test_ping(db, self, account_id, endpoint_id))
    }
}

/// What one attempt came to, for the loop to record with the others that ended in the same round.
struct Finished {
    due: DueDelivery,
    outcome: Attempted,
    retry: Option<Duration>,
}

/// Sends one delivery; the loop records the attempt.
async fn deliver(sender: Sender, settings: WebhookSettings, due: DueDelivery) -> Finished {
    let outcome = send(&sender, &due).await;
    // Pings are sent once; everything else follows the schedule.
    let retry = if due.is_ping() {
        None
    } else {
        settings.retry_after(due.attempt)
    };
    // Ids, status and the sender's short error only: never the URL (it may carry a token) nor the secret.
    if outcome.success {
        tracing::debug!(endpoint = %due.endpoint_id, event = %due.event_id, attempt = due.attempt,
            status = outcome.status_code, "webhook delivered");
    } else {
        tracing::info!(endpoint = %due.endpoint_id, event = %due.event_id, attempt = due.attempt,
            status = outcome.status_code, error = outcome.error.as_deref().unwrap_or_default(),
            retry_in = ?retry, "webhook attempt failed");
    }
    metrics::counter!("webhook_attempts_total",
        "result" => if outcome.success { "success" } else { "failure" })
    .increment(1);
    Finished {
        due,
        outcome,
        retry,
    }
}

/// Frees the places of the attempts that ended.
fn free_places(finished: &[Finished], in_flight: &mut HashMap<String, usize>) {
    for f in finished {
        if let Some(n) = in_flight.get_mut(&f.due.endpoint_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_flight.remove(&f.due.endpoint_id);
            }
        }
    }
}

/// What the store records of each ended attempt.
fn records(finished: &[Finished]) -> Vec<(&DueDelivery, &Attempted, Option<Duration>)> {
    finished
        .iter()
        .map(|f| (&f.due, &f.outcome, f.retry))
        .collect()
}

/// Fans committed events out into deliveries whenever `wake` (a commit) or the poll says so, then wakes the
/// delivery loop (`deliver`), until `stopped`. A failure is logged once per outage; the events wait, committed.
async fn fan_out(
    db: Db,
    poll: Duration,
    wake: Arc<Notify>,
    deliver: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut failing = false;
    loop {
        loop {
            match db.fan_out_webhook_events(FAN_OUT_BATCH).await {
                Ok(n) => {
                    failing = false;
                    if n > 0 {
                        deliver.notify_one();
                    }
                    if n < FAN_OUT_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "fanning out webhook events failed");
                    }
                    failing = true;
                    break;
                }
            }
        }
        // A commit may also have made a delivery due without a new event (a redelivery).
        deliver.notify_one();
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(poll) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

/// Runs the loop until `stopped` turns true, then lets the attempts in flight finish (each within its timeout).
pub async fn run(
    db: Db,
    settings: WebhookSettings,
    wake: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) {
    let sender = Sender::with_timeout(settings.allow_private, settings.timeout);
    let fanned = Arc::new(Notify::new());
    let fanning = tokio::spawn(fan_out(
        db.clone(),
        settings.poll_interval,
        wake,
        fanned.clone(),
        stopped.clone(),
    ));
    let mut tasks: JoinSet<Finished> = JoinSet::new();
    let mut in_flight: HashMap<String, usize> = HashMap::new();
    let mut finished: Vec<Finished> = Vec::new();
    let mut failing = false;
    let mut next_sweep = tokio::time::Instant::now() + STRANDED_SWEEP;
    loop {
        if tokio::time::Instant::now() >= next_sweep {
            next_sweep += STRANDED_SWEEP;
            match db.promote_stranded_webhook_deliveries().await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    promoted = n,
                    "webhook queues without a head were found and resumed"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "looking for webhook queues without a head failed")
                }
            }
        }
        // The attempts that ended since the last round are recorded in the claim's transaction: one commit a
        // round, and the places they held are taken again at once.
        free_places(&finished, &mut in_flight);
        let room = CONCURRENCY.saturating_sub(tasks.len());
        match db
            .record_and_claim_webhook_deliveries(
                &records(&finished),
                room,
                settings.lease(),
                &in_flight,
                PER_ENDPOINT,
            )
            .await
        {
            Ok(due) => {
                failing = false;
                for d in due {
                    *in_flight.entry(d.endpoint_id.clone()).or_default() += 1;
                    tasks.spawn(deliver(sender.clone(), settings, d));
                }
            }
            Err(e) => {
                // Once per outage, not once per poll. The attempts are sent again once their leases run out
                // (at least once).
                if !failing {
                    tracing::warn!(attempts = finished.len(), error = %e,
                        "recording webhook attempts and claiming deliveries failed");
                }
                failing = true;
            }
        }
        finished.clear();
        let ended = tokio::select! {
            Some(done) = tasks.join_next(), if !tasks.is_empty() => Some(done),
            () = fanned.notified() => None,
            () = tokio::time::sleep(settings.poll_interval) => None,
            _ = stopped.wait_for(|s| *s) => break,
        };
        if let Some(done) = ended {
            // This one and every other that has ended meanwhile, recorded together.
            finished.extend(done);
            while let Some(more) = tasks.try_join_next() {
                finished.extend(more);
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        finished.extend(done);
    }
    if let Err(e) = db.record_webhook_attempts(&records(&finished)).await {
        tracing::warn!(attempts = finished.len(), error = %e,
            "recording webhook attempts failed; they will be sent again after their lease");
    }
    let _ = fanning.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_standard_webhooks_scaled() {
        let real = WebhookSettings::default();
        assert_eq!(real.retry_after(1), Some(Duration::from_secs(5)));
        assert_eq!(real.retry_after(7), Some(Duration::from_secs(36_000)));
        assert_eq!(real.retry_after(8), None);
        let fast = WebhookSettings {
            retry_scale: 0.001,
            ..real
        };
        assert_eq!(fast.retry_after(1), Some(Duration::from_millis(5)));
        assert_eq!(fast.retry_after(2), Some(Duration::from_millis(300)));
        assert!(real.lease() > real.timeout);
    }
}
