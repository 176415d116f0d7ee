//! SQLite's batched writer of click reports (group commit), as [`crate::link_writer`] is for new links.
//!
//! Reports arrive concurrently (the worker's queue consumers deliver several at once) and SQLite has one writer.
//! One task takes every report waiting at the moment it is free (at most [`MAX_REPORTS`]) and stores them in one
//! `BEGIN IMMEDIATE` transaction: their links and groups are looked up once, their counter increments added up
//! together, and the pages they touch (a link's counters, its place in the raw clicks' index) are written to the
//! WAL, and later checkpointed, once per transaction instead of once per report.
//!
//! Each report keeps its own outcome (stored n, or a duplicate batch id). When the database fails (busy beyond
//! the timeout, I/O, a failed commit), nothing of the transaction is committed and every report in it gets that
//! error: the worker delivers them again, and their batch ids were not claimed.

use crate::clicks::{Ingested, Report, record_reports};
use crate::error::StoreError;
use crate::sql_chunks::MultiRow;
use sqlx::AnyPool;
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// Most reports in one transaction (8,000 events at most): enough to take every concurrent delivery, few
/// enough that the write lock is never held for long.
const MAX_REPORTS: usize = 8;

/// Reports that may wait for the writer before senders wait for room.
const QUEUE: usize = 64;

/// One report handed to the writer.
struct Job {
    report: Report,
    reply: oneshot::Sender<Result<Ingested, StoreError>>,
}

/// The handle to the writer task, started on the first report (so admin commands start no task). Clones share
/// the task; it ends when the last clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct ClickWriter {
    /// The single-connection write pool.
    write: AnyPool,
    multi_row: MultiRow,
    jobs: Arc<OnceLock<mpsc::Sender<Job>>>,
}

impl ClickWriter {
    /// A writer over SQLite's single-connection write pool.
    pub(crate) fn new(write: AnyPool, multi_row: MultiRow) -> Self {
        Self {
            write,
            multi_row,
            jobs: Arc::default(),
        }
    }

    /// Stores the report in the next transaction and returns its own outcome.
    pub(crate) async fn record(&self, report: Report) -> Result<Ingested, StoreError> {
        let jobs = self.jobs.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(run(self.write.clone(), self.multi_row, receiver));
            sender
        });
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Internal("the SQLite click writer has stopped".to_owned());
        jobs.send(Job { report, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer task: a transaction of whatever is waiting, then the next.
async fn run(write: AnyPool, multi_row: MultiRow, mut jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_REPORTS);
    while jobs.recv_many(&mut batch, MAX_REPORTS).await > 0 {
        commit(&write, multi_row, std::mem::take(&mut batch)).await;
    }
}

/// Stores the reports of `batch` in one transaction and answers each.
async fn commit(write: &AnyPool, multi_row: MultiRow, batch: Vec<Job>) {
    // A report whose request timed out or went away is left out: its batch id stays unclaimed, so the worker's
    // next delivery of it counts.
    let (reports, replies): (Vec<Report>, Vec<_>) = batch
        .into_iter()
        .filter(|job| !job.reply.is_closed())
        .map(|job| (job.report, job.reply))
        .unzip();
    if reports.is_empty() {
        return;
    }
    let stored = async {
        let mut tx = write.begin_with("BEGIN IMMEDIATE").await?;
        let outcomes = record_reports(&mut tx, multi_row, &reports).await?;
        tx.commit().await?;
        Ok::<_, StoreError>(outcomes)
    }
    .await;
    match stored {
        Ok(outcomes) => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.same_kind()));
            }
        }
    }
}
