//! SQLite's batched writer of new links (group commit).
//!
//! SQLite has one writer, and sqlx's SQLite driver hands every statement to the connection's
//! own thread and back: on two cores, those thread hand-offs, not the disk, bounded create-link
//! throughput. One task therefore takes every creation waiting at the moment it is free (at most
//! [`MAX_BATCH`]) and runs them in one `BEGIN IMMEDIATE` transaction: per creation only its
//! rate-limit count and its insert; one `BEGIN`, one update of the accounts' link counters, one
//! outbox insert, one insert of the activity log's rows (one row per link) and one `COMMIT` for
//! all of them: a link and its `link.created` row commit together or not at all.
//!
//! Each creation keeps its own outcome: a taken code or a used-up limit fails that creation's
//! statement alone (SQLite aborts the statement, not the transaction), and the limit stays
//! exact because each count sees the creations before it in the same transaction. When the
//! database itself fails (busy beyond the timeout, I/O, a failed commit), nothing of the batch
//! is committed and every creation in it gets that error.

use crate::creation::{Attempt, CreateLink, Target, insert_link, record_created};
use crate::domain::{Micros, ShortCode};
use crate::error::StoreError;
use sqlx::AnyPool;
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// Most creations in one transaction: enough to take a full queue of concurrent requests,
/// few enough that the write lock is never held for long (each one is two statements).
const MAX_BATCH: usize = 64;

/// Creations that may wait for the writer before senders wait for room.
const QUEUE: usize = 1024;

/// One creation handed to the writer.
struct Job {
    req: CreateLink,
    target: Target,
    code: ShortCode,
    reply: oneshot::Sender<Result<Attempt, StoreError>>,
}

/// The handle to the writer task, started on the first creation (so admin commands that never
/// create links start no task). Clones share the task; it ends when the last clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct LinkWriter {
    /// The single-connection write pool.
    write: AnyPool,
    jobs: Arc<OnceLock<mpsc::Sender<Job>>>,
}

impl LinkWriter {
    /// A writer over SQLite's single-connection write pool.
    pub(crate) fn new(write: AnyPool) -> Self {
        Self {
            write,
            jobs: Arc::default(),
        }
    }

    /// Creates the link in the next batch and returns its own outcome.
    pub(crate) async fn create(
        &self,
        req: CreateLink,
        target: Target,
        code: ShortCode,
    ) -> Result<Attempt, StoreError> {
        let jobs = self.jobs.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(run(self.write.clone(), receiver));
            sender
        });
        let (reply, answer) = oneshot::channel();
        let job = Job {
            req,
            target,
            code,
            reply,
        };
        let stopped = || StoreError::Internal("the SQLite link writer has stopped".to_owned());
        jobs.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer task: a batch of whatever is waiting, then the next.
async fn run(write: AnyPool, mut jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        commit_batch(&write, std::mem::take(&mut batch)).await;
    }
}

/// Runs the creations of `batch` in one transaction and answers each.
async fn commit_batch(write: &AnyPool, batch: Vec<Job>) {
    let mut tx = match write.begin_with("BEGIN IMMEDIATE").await {
        Ok(tx) => tx,
        Err(e) => return fail_all(batch.into_iter().map(|job| job.reply), &e.into()),
    };
    let mut answers = Vec::with_capacity(batch.len());
    let mut jobs = batch.into_iter();
    while let Some(job) = jobs.next() {
        // Its request timed out or went away (before the batch or while it ran): leave its link
        // out. Only a timeout during the commit itself can still leave a created link behind a 503.
        if job.reply.is_closed() {
            continue;
        }
        let now = Micros::now().0;
        let outcome = insert_link(&mut tx, &job.req, &job.target, &job.code, now).await;
        match outcome {
            // This creation's own result (created, code taken, limit used up, key gone).
            Ok(_) | Err(StoreError::RateLimited(_) | StoreError::KeyRevoked) => {
                answers.push((job, outcome));
            }
            // The database failed: the transaction is rolled back when dropped.
            Err(e) => {
                drop(tx);
                let replies = answers.into_iter().map(|(job, _)| job.reply);
                let rest = jobs.map(|job| job.reply);
                fail_all(replies.chain([job.reply]).chain(rest), &e);
                return;
            }
        }
    }
    let created: Vec<(&CreateLink, &_)> = answers
        .iter()
        .filter_map(|(job, outcome)| match outcome {
            Ok(Ok((link, _))) => Some((&job.req, link)),
            _ => None,
        })
        .collect();
    let committed = match record_created(&mut tx, &created).await {
        Ok(()) => tx.commit().await.map_err(StoreError::from),
        Err(e) => Err(e),
    };
    for (job, outcome) in answers {
        // A receiver gone by now (its request timed out) finds the link in the list later.
        let _ = job.reply.send(match (&committed, outcome) {
            // Only the created links are lost with the commit; refusals stand as they were.
            (Err(e), Ok(Ok(_))) => Err(e.same_kind()),
            (_, outcome) => outcome,
        });
    }
}

fn fail_all(
    replies: impl Iterator<Item = oneshot::Sender<Result<Attempt, StoreError>>>,
    e: &StoreError,
) {
    for reply in replies {
        let _ = reply.send(Err(e.same_kind()));
    }
}
