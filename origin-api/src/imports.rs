//! The import runner: takes queued link imports (and ones whose runner died) and carries them out, a chunk per
//! transaction ([`shortlink_store::Db::run_next_import`]). One per process; with several processes on one
//! database, each job's lease keeps it to one runner at a time.

use shortlink_store::Db;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// How often the runner looks for a job when nobody wakes it: a job left by a runner that died is taken once its
/// lease (15 seconds) has run out.
const POLL: Duration = Duration::from_secs(5);

/// What the API needs of the runner: its wake-up and the daily budget.
#[derive(Debug, Clone)]
pub struct ImportHandle {
    /// Poked after a job is queued.
    pub wake: Arc<Notify>,
    /// Imported links an account may create per UTC day.
    pub limit_per_day: u32,
}

impl ImportHandle {
    /// A runner's handle with this budget.
    pub fn new(limit_per_day: u32) -> Self {
        Self {
            wake: Arc::new(Notify::new()),
            limit_per_day,
        }
    }
}

/// Runs imports until `stopped` turns true.
pub async fn run(db: Db, handle: ImportHandle, mut stopped: watch::Receiver<bool>) {
    // The lease's owner: this process's run, never reused.
    let owner = uuid::Uuid::new_v4().to_string();
    loop {
        if *stopped.borrow() {
            return;
        }
        let worked = tokio::select! {
            r = db.run_next_import(&owner, handle.limit_per_day) => r,
            _ = stopped.changed() => return,
        };
        match worked {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "import run failed; the job is taken again later"),
        }
        tokio::select! {
            () = handle.wake.notified() => {}
            () = tokio::time::sleep(POLL) => {}
            _ = stopped.changed() => return,
        }
    }
}
