//! SQLite's batched writer of new links (group commit).
//!
//! SQLite has one writer, and sqlx's SQLite driver hands every statement to the connection's
//! own thread and back: on two cores, those thread hand-offs, not the disk, bounded create-link
//! throughput. One task therefore takes every creation waiting at the moment it is free (at most
//! [`MAX_BATCH`]) and runs them in one `BEGIN IMMEDIATE` transaction: per creation only its
//! rate-limit count and its insert, and one `BEGIN` and one `COMMIT` for all of them.
//!
//! Each creation keeps its own outcome: a taken code or a used-up limit fails that creation's
//! statement alone (SQLite aborts the statement, not the transaction), and the limit stays
//! exact because each count sees the creations before it in the same transaction. When the
//! database itself fails (busy beyond the timeout, I/O, a failed commit), nothing of the batch
//! is committed and every creation in it gets that error.

use super::StoreError;
use super::links::{Attempt, CreateLink, Target, insert_link};
use crate::domain::{Micros, ShortCode};
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
#[derive(Clone, Debug, Default)]
pub(super) struct LinkWriter {
    jobs: Arc<OnceLock<mpsc::Sender<Job>>>,
}

impl LinkWriter {
    /// Creates the link in the next batch and returns its own outcome.
    pub(super) async fn create(
        &self,
        write: &AnyPool,
        req: CreateLink,
        target: Target,
        code: ShortCode,
    ) -> Result<Attempt, StoreError> {
        let jobs = self.jobs.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(run(write.clone(), receiver));
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
        let outcome = insert_link(
            &mut tx,
            super::Engine::Sqlite,
            &job.req,
            &job.target,
            &job.code,
            now,
        )
        .await;
        match outcome {
            // This creation's own result (created, code taken, limit used up, key gone).
            Ok(_) | Err(StoreError::RateLimited(_) | StoreError::NotFound(_)) => {
                answers.push((job.reply, outcome));
            }
            // The database failed: the transaction is rolled back when dropped.
            Err(e) => {
                drop(tx);
                let replies = answers.into_iter().map(|(reply, _)| reply);
                let rest = jobs.map(|job| job.reply);
                fail_all(replies.chain([job.reply]).chain(rest), &e);
                return;
            }
        }
    }
    if let Err(e) = tx.commit().await {
        let e = StoreError::from(e);
        for (reply, outcome) in answers {
            // Only the created links are lost with the commit; refusals stand as they were.
            let _ = reply.send(match outcome {
                Ok(Ok(_)) => Err(same_kind(&e)),
                other => other,
            });
        }
        return;
    }
    for (reply, outcome) in answers {
        // A receiver gone by now (its request timed out) finds the link in the list later.
        let _ = reply.send(outcome);
    }
}

fn fail_all(
    replies: impl Iterator<Item = oneshot::Sender<Result<Attempt, StoreError>>>,
    e: &StoreError,
) {
    for reply in replies {
        let _ = reply.send(Err(same_kind(e)));
    }
}

/// An error of the same kind (and so the same HTTP answer) as `e`, for every creation of a
/// failed batch: database errors cannot be cloned, their text can.
fn same_kind(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(inner) => {
            StoreError::Unavailable(sqlx::Error::Protocol(inner.to_string()))
        }
        StoreError::Internal(text) => StoreError::Internal(text.clone()),
        other => StoreError::Database(sqlx::Error::Protocol(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_batch_answers_every_creation_alike() {
        let busy = StoreError::Unavailable(sqlx::Error::PoolTimedOut);
        assert!(matches!(same_kind(&busy), StoreError::Unavailable(_)));
        let broken = StoreError::Database(sqlx::Error::RowNotFound);
        assert!(matches!(same_kind(&broken), StoreError::Database(_)));
        let internal = StoreError::Internal("x".to_owned());
        assert!(matches!(same_kind(&internal), StoreError::Internal(t) if t == "x"));
    }
}
