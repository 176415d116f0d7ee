//! argon2id hashing and verification under one process-wide concurrency bound.
//!
//! One argon2id call takes 19 MiB and tens of milliseconds of a core. Unbounded, a few hundred concurrent sign-in
//! or invitation posts would take gigabytes and every core, so every hash and every verification (sign-in,
//! invitation, password change, the re-confirmation of sensitive dashboard actions) first takes a permit. A caller
//! that cannot get one within [`HashLimit::wait`] is told to come back ([`StoreError::Busy`]) instead of queueing
//! without end: memory stays at `permits × 19 MiB` and the queue at what arrives in that wait.

use crate::domain::{Password, SecretToken};
use crate::error::StoreError;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long a request waits for a hashing permit before it is answered "busy", when not configured.
pub const DEFAULT_HASH_WAIT: Duration = Duration::from_secs(2);
/// What a busy answer tells the client to wait, in seconds.
const BUSY_RETRY_AFTER_SECS: i64 = 1;

/// The bound: how many argon2 computations may run at once, and how long a caller waits for a turn.
#[derive(Debug, Clone)]
pub struct HashLimit {
    permits: Arc<Semaphore>,
    size: usize,
    wait: Duration,
}

impl HashLimit {
    /// `permits` computations at once (0 counts as 1), each caller waiting at most `wait` for its turn.
    pub fn new(permits: usize, wait: Duration) -> Self {
        let size = permits.max(1);
        Self {
            permits: Arc::new(Semaphore::new(size)),
            size,
            wait,
        }
    }

    /// The default bound: one computation per core.
    pub fn per_core() -> Self {
        Self::new(default_permits(), DEFAULT_HASH_WAIT)
    }

    /// How many computations may run at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Runs `work` on the blocking pool once a permit is free; [`StoreError::Busy`] when none frees in time.
    /// Link passwords' PBKDF2 ([`crate::link_password`]) runs under the same bound.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let permit = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| StoreError::Busy {
                retry_after: BUSY_RETRY_AFTER_SECS,
            })?
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        tokio::task::spawn_blocking(move || {
            // Held until the computation ends, even if the request that asked for it is gone.
            let _permit = permit;
            work()
        })
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))
    }

    /// The PHC string of a new password (fresh salt).
    pub(crate) async fn hash(&self, password: &Password) -> Result<String, StoreError> {
        let password = password.expose().to_owned();
        self.run(move || hash_blocking(&password)).await?
    }

    /// Whether `password` matches `phc`. With no stored hash (unknown email, no password set yet) a decoy is
    /// verified instead, so that the answer takes as long as a wrong password and does not say which it was.
    pub(crate) async fn verify(
        &self,
        password: &str,
        phc: Option<String>,
    ) -> Result<bool, StoreError> {
        let password = password.to_owned();
        self.run(move || match phc {
            Some(phc) => verify_blocking(&password, &phc),
            None => {
                let _ = verify_blocking(&password, decoy_hash());
                false
            }
        })
        .await
    }
}

/// One permit per core the process may use (at least one).
fn default_permits() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// A PHC hash of nothing anyone can type, verified against when there is no hash to verify.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_blocking(SecretToken::generate().expose()).unwrap_or_default())
}

fn hash_blocking(password: &str) -> Result<String, StoreError> {
    let salt: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt).map_err(|e| StoreError::Internal(e.to_string()))?;
    // Argon2::default() is argon2id, v19, m = 19 MiB, t = 2, p = 1: OWASP's recommended minimum.
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StoreError::Internal(e.to_string()))
}

fn verify_blocking(password: &str, phc: &str) -> bool {
    // The comparison inside argon2's verify is constant-time.
    PasswordHash::new(phc).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn argon2id_round_trip() {
        let phc = hash_blocking("correct horse battery").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        assert!(verify_blocking("correct horse battery", &phc));
        assert!(!verify_blocking("correct horse batterz", &phc));
        assert!(!verify_blocking("correct horse battery", "not a hash"));
        // A fresh salt each time.
        assert_ne!(phc, hash_blocking("correct horse battery").unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_more_than_the_permits_at_once_and_busy_beyond_the_wait() {
        let limit = HashLimit::new(2, Duration::from_millis(150));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (limit, running, most) = (limit.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    limit
                        .run(move || {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(100));
                            running.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                })
            })
            .collect();
        let mut done = 0;
        let mut busy = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(()) => done += 1,
                Err(StoreError::Busy { retry_after }) => {
                    assert_eq!(retry_after, 1);
                    busy += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "two permits, two at once");
        // 100 ms each, two at a time, 150 ms of waiting: the first two run, then at most two more get a turn.
        assert!((2..=4).contains(&done), "{done} ran");
        assert_eq!(done + busy, 8);
        assert!(busy >= 4, "{busy} were told to come back");
    }

    #[test]
    fn zero_permits_counts_as_one() {
        assert_eq!(HashLimit::new(0, DEFAULT_HASH_WAIT).size(), 1);
        assert!(HashLimit::per_core().size() >= 1);
    }
}
