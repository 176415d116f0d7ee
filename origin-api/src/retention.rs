//! Retention, run by `serve` in the background: raw click events and activity-log rows older than their configured
//! number of days ([`Retention`]) and click-report batch and event ids older than [`BATCH_ID_DAYS`] are deleted at
//! start and then every [`PRUNE_INTERVAL`], at most [`PRUNE_ROWS`] rows per statement so no statement holds the
//! database for long.
//! Statistics do not change: they come from the day counters, which are kept. The same round deletes the
//! dashboard's dead rows (expired invitations and sessions, password-check rows past the throttle's window),
//! write-budget rows past their minute, and the webhooks' attempts, finished deliveries and events older than
//! [`shortlink_store::WEBHOOK_RETENTION_DAYS`].
//!
//! Every origin process prunes; two doing it at once only delete the same old rows sooner.

use shortlink_store::DEFAULT_AUDIT_RETENTION_DAYS;
use shortlink_store::domain::Micros;
use shortlink_store::{Aged, Db, StoreError, WEBHOOK_RETENTION_DAYS};
use std::time::Duration;
use tokio::sync::watch;

/// Days raw click events are kept, when not configured.
pub const DEFAULT_CLICK_RETENTION_DAYS: u32 = 90;

/// How often old rows are deleted.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3_600);
/// Rows per delete statement.
pub const PRUNE_ROWS: u32 = 10_000;
/// How long a click report's batch id is remembered: redeliveries come within minutes or hours, and a report
/// redelivered later than this is counted again.
pub const BATCH_ID_DAYS: u32 = 7;

const DAY_MICROS: i64 = 86_400_000_000;

/// How many days each kind of aged data is kept (a retention of 0 days counts as 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Raw click events (`--click-retention-days`).
    pub click_days: u32,
    /// Activity-log rows (`--audit-retention-days`).
    pub audit_days: u32,
}

impl Default for Retention {
    /// The settings' defaults: 90 days of raw clicks, 365 days of activity log.
    fn default() -> Self {
        Self {
            click_days: DEFAULT_CLICK_RETENTION_DAYS,
            audit_days: DEFAULT_AUDIT_RETENTION_DAYS,
        }
    }
}

/// What one pruning round deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Raw click events.
    pub clicks: u64,
    /// Batch ids.
    pub batch_ids: u64,
    /// Event ids.
    pub event_ids: u64,
    /// Expired invitations and sessions, and password-check rows out of the throttle's window.
    pub sign_in_rows: u64,
    /// Write-budget rows out of their minute (a key that never writes again would keep its rows).
    pub write_budget_rows: u64,
    /// Activity-log rows older than the audit retention.
    pub audit_rows: u64,
    /// Webhook attempts, finished deliveries and events older than 30 days.
    pub webhook_rows: u64,
}

/// One round at `now`: raw clicks that happened more than `retention.click_days` days before `now` and
/// activity-log rows written more than `retention.audit_days` days before it (a retention of 0 days counts as
/// 1), and batch and event ids received more than [`BATCH_ID_DAYS`] days before it, in statements of
/// [`PRUNE_ROWS`] rows, until none are left or `keep_going` says stop (shutdown; the next round continues).
pub async fn prune(
    db: &Db,
    retention: Retention,
    now: Micros,
    keep_going: impl Fn() -> bool,
) -> Result<Pruned, StoreError> {
    let before = |days: u32| Micros(now.0.saturating_sub(i64::from(days) * DAY_MICROS));
    Ok(Pruned {
        clicks: drain(
            db,
            Aged::RawClicks,
            before(retention.click_days.max(1)),
            &keep_going,
        )
        .await?,
        batch_ids: drain(db, Aged::BatchIds, before(BATCH_ID_DAYS), &keep_going).await?,
        event_ids: drain(db, Aged::EventIds, before(BATCH_ID_DAYS), &keep_going).await?,
        // Bounded by what a day's sign-ins and sessions leave behind: one statement each.
        sign_in_rows: db.prune_web_auth(now).await?,
        write_budget_rows: db.prune_write_budget(now.0).await?,
        audit_rows: drain(
            db,
            Aged::AuditRows,
            before(retention.audit_days.max(1)),
            &keep_going,
        )
        .await?,
        // Deliveries before events: an event goes once no delivery of it is left.
        webhook_rows: {
            let before = before(WEBHOOK_RETENTION_DAYS);
            let mut n = 0;
            for what in [
                Aged::WebhookAttempts,
                Aged::WebhookDeliveries,
                Aged::WebhookEvents,
            ] {
                n += drain(db, what, before, &keep_going).await?;
            }
            n
        },
    })
}

/// Deletes `what` from before `before`, [`PRUNE_ROWS`] rows a statement, until none are left or `keep_going`
/// says stop; returns how many went.
async fn drain(
    db: &Db,
    what: Aged,
    before: Micros,
    keep_going: &impl Fn() -> bool,
) -> Result<u64, StoreError> {
    let mut total = 0;
    loop {
        let n = db.prune(what, before, PRUNE_ROWS).await?;
        total += n;
        if n < u64::from(PRUNE_ROWS) || !keep_going() {
            return Ok(total);
        }
        // Let waiting writers (click reports, link creations) in between statements.
        tokio::task::yield_now().await;
    }
}

/// Prunes every `interval` until `stopped` turns true. A failed round is logged and retried next interval.
pub async fn run(
    db: Db,
    retention: Retention,
    interval: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let still = stopped.clone();
        match prune(&db, retention, Micros::now(), move || !*still.borrow()).await {
            Ok(p) if p != Pruned::default() => {
                tracing::info!(
                    clicks = p.clicks,
                    batch_ids = p.batch_ids,
                    event_ids = p.event_ids,
                    sign_in_rows = p.sign_in_rows,
                    write_budget_rows = p.write_budget_rows,
                    audit_rows = p.audit_rows,
                    webhook_rows = p.webhook_rows,
                    "pruned old data"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "pruning old data failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
