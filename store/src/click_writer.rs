//! The batched writer of click reports (group commit), on both engines, as [`crate::link_writer`] is for new links
//! on SQLite.
//!
//! Reports arrive concurrently (the worker's queue consumers deliver several at once). A writer task takes every
//! report waiting at the moment it is free (at most [`MAX_REPORTS`]) and stores them in one transaction: their
//! links and groups are looked up once, their counter increments added up together, and the pages they touch (a
//! link's counters, its place in the raw clicks' index, the visitors' hashes) are written to the WAL once per
//! transaction instead of once per report.
//!
//! - SQLite has one writer: one task, `BEGIN IMMEDIATE` on the single-connection write pool.
//! - PostgreSQL: a few tasks ([`POSTGRES_WRITERS`]) share the queue, each with a transaction of its own. With a
//!   transaction per report instead, concurrent reports queued on each other's row locks (the links' totals,
//!   locked to the commit) and each paid a commit: ingestion fell as more reports were in flight (24.2k events/s
//!   at 4, 16.1k at 16; with this writer 24.9k and 30.4k; BENCHMARKS.md, "Group commit on PostgreSQL, visitors as
//!   64-bit keys"). A second task gathers and stores the next reports while the first commits.
//!
//! Each report keeps its own outcome (stored n, or a duplicate batch id). When the database fails (busy beyond
//! the timeout, I/O, a failed commit, a deadlock), nothing of the transaction is committed and every report in it
//! gets that error: the worker delivers them again, and their batch ids were not claimed.

use crate::clicks::{Ingested, Report, record_reports};
use crate::error::StoreError;
use crate::sql_chunks::MultiRow;
use sqlx::AnyPool;
use std::sync::{Arc, OnceLock};
use tokio::sync::{Mutex, mpsc, oneshot};

/// Most reports in one transaction (8,000 events at most): enough to take every concurrent delivery, few
/// enough that the write lock is never held for long.
const MAX_REPORTS: usize = 8;

/// Reports that may wait for the writer before senders wait for room.
const QUEUE: usize = 64;

/// Writer tasks on PostgreSQL: one leaves the server idle while it commits, more than two gained nothing steady on
/// two cores (BENCHMARKS.md, "Group commit on PostgreSQL, visitors as 64-bit keys").
pub(crate) const POSTGRES_WRITERS: usize = 2;

/// How the writer's transactions begin.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Engine {
    /// One task; `BEGIN IMMEDIATE` takes SQLite's write lock at the start (see [`crate::Db::begin_write`]).
    Sqlite,
    /// This many tasks, each with a plain `BEGIN`.
    Postgres { writers: usize },
}

/// One report handed to the writer.
struct Job {
    report: Report,
    reply: oneshot::Sender<Result<Ingested, StoreError>>,
}

/// The handle to the writer tasks, started on the first report (so admin commands start no task). Clones share
/// the tasks; they end when the last clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct ClickWriter {
    /// SQLite's single-connection write pool, or PostgreSQL's pool.
    write: AnyPool,
    multi_row: MultiRow,
    engine: Engine,
    jobs: Arc<OnceLock<mpsc::Sender<Job>>>,
}

impl ClickWriter {
    /// A writer over `write`.
    pub(crate) fn new(write: AnyPool, multi_row: MultiRow, engine: Engine) -> Self {
        Self {
            write,
            multi_row,
            engine,
            jobs: Arc::default(),
        }
    }

    /// The same writer with `writers` tasks on PostgreSQL (at least one); SQLite keeps its one. Before the first
    /// report only: the tasks start with it.
    pub(crate) fn with_writers(mut self, writers: usize) -> Self {
        if let Engine::Postgres { .. } = self.engine {
            self.engine = Engine::Postgres {
                writers: writers.max(1),
            };
        }
        self
    }

    /// Stores the report in the next transaction and returns its own outcome.
    pub(crate) async fn record(&self, report: Report) -> Result<Ingested, StoreError> {
        let jobs = self.jobs.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            let (begin, writers) = match self.engine {
                Engine::Sqlite => ("BEGIN IMMEDIATE", 1),
                Engine::Postgres { writers } => ("BEGIN", writers),
            };
            let receiver = Arc::new(Mutex::new(receiver));
            for _ in 0..writers {
                tokio::spawn(run(
                    self.write.clone(),
                    self.multi_row,
                    begin,
                    receiver.clone(),
                ));
            }
            sender
        });
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Internal("the click writer has stopped".to_owned());
        jobs.send(Job { report, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// A writer task: a transaction of whatever is waiting, then the next. The tasks take turns at the queue: one
/// gathers while another stores.
async fn run(
    write: AnyPool,
    multi_row: MultiRow,
    begin: &'static str,
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
) {
    let mut batch = Vec::with_capacity(MAX_REPORTS);
    loop {
        let taken = jobs.lock().await.recv_many(&mut batch, MAX_REPORTS).await;
        if taken == 0 {
            return;
        }
        commit(&write, multi_row, begin, std::mem::take(&mut batch)).await;
    }
}

/// Stores the reports of `batch` in one transaction and answers each.
async fn commit(write: &AnyPool, multi_row: MultiRow, begin: &'static str, batch: Vec<Job>) {
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
        let mut tx = write.begin_with(begin).await?;
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
