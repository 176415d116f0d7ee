//! Storage on SQLite (embedded default) or PostgreSQL, through sqlx's `Any` driver.
//!
//! The SQL is written once, in the common subset of both engines (`$n` parameters, 0/1 flags,
//! `ON CONFLICT`), with runtime-checked queries: compile-time macros would need both schemas
//! at build time. Identifiers are UUID text and times are microseconds, so every value
//! round-trips identically on both engines.

mod accounts;
mod blocklist;
mod clicks;
mod domains;
mod groups;
mod keys;
mod link_writer;
mod links;
mod outbox;

pub use accounts::NewAccount;
pub use clicks::{ClickEvent, LinkStats};
pub use domains::{DomainOwner, DomainRow};
pub use groups::GroupRow;
pub use keys::AuthContext;
pub use links::{CreateLink, CreatedLink, LinkPage, ListedLink, RateLimitState};
pub use outbox::OutboxLag;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::time::Duration;

/// Which engine a `DATABASE_URL` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// An SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Engine {
    /// Picks the engine from the URL scheme.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            Err(StoreError::Config(
                "DATABASE_URL must start with sqlite: or postgres://".to_owned(),
            ))
        }
    }
}

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named thing does not exist.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The change contradicts existing data (a duplicate email, host, …).
    #[error("{0}")]
    Conflict(String),
    /// A bad configuration value.
    #[error("{0}")]
    Config(String),
    /// An invariant of ours broke (stored data that does not parse, no randomness, …).
    #[error("internal: {0}")]
    Internal(String),
    /// The database cannot be reached or is overloaded right now; the request may be retried.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else the database reported.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The key's rate limit is used up.
    #[error("rate limit exceeded")]
    RateLimited(RateLimitState),
    /// The requested short code is taken on the target domain.
    #[error("short code exists")]
    ShortCodeExists,
    /// The destination's host (or a parent domain) is on the blocklist.
    #[error("destination domain is blocked")]
    BlockedDestination,
    /// No platform domain is enabled.
    #[error("no platform domain is available")]
    PlatformDomainUnavailable,
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Self::Unavailable(e)
            }
            // SQLite busy beyond busy_timeout, or PostgreSQL shutting down / too many clients.
            // SQLite: BUSY and LOCKED with their extended codes (BUSY_RECOVERY, BUSY_SNAPSHOT,
            // BUSY_TIMEOUT, LOCKED_SHAREDCACHE). PostgreSQL: shutting down, starting up, too many
            // connections, and class 08 (connection exceptions).
            sqlx::Error::Database(ref d)
                if matches!(
                    d.code().as_deref(),
                    Some(
                        "5" | "261"
                            | "517"
                            | "773"
                            | "6"
                            | "262"
                            | "57P01"
                            | "57P02"
                            | "57P03"
                            | "53300"
                    )
                ) || d.code().is_some_and(|c| c.starts_with("08")) =>
            {
                Self::Unavailable(e)
            }
            _ => Self::Database(e),
        }
    }
}

/// True when `e` is a unique-constraint violation (on either engine).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// Connection pools. On SQLite all writes go through one connection: SQLite has one writer
/// anyway, and queueing in the pool is cheaper and fairer than busy-waiting on the file lock.
/// On PostgreSQL both are the same pool.
#[derive(Clone, Debug)]
pub struct Db {
    engine: Engine,
    read: AnyPool,
    write: AnyPool,
    /// SQLite: the task that commits new links in batches (unused on PostgreSQL).
    link_writer: link_writer::LinkWriter,
}

/// How long a request waits for a connection before it gets a 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits on a lock held by another process before giving up.
const SQLITE_BUSY_TIMEOUT_MS: u32 = 5_000;

impl Db {
    /// Opens the pools (creating an SQLite file if missing) without migrating.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        install_default_drivers();
        let engine = Engine::from_url(url)?;
        let options = || {
            AnyPoolOptions::new()
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if engine == Engine::Sqlite {
                            // WAL: readers never block the writer. NORMAL is durable across
                            // application crashes in WAL mode, which is what we promise.
                            conn.execute(
                                format!(
                                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                                     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS};"
                                )
                                .as_str(),
                            )
                            .await?;
                        }
                        Ok(())
                    })
                })
        };
        let (read, write) = match engine {
            Engine::Sqlite => {
                let url = sqlite_create_if_missing(url);
                let write = options().max_connections(1).connect(&url).await?;
                let read = options()
                    .max_connections(max_connections.max(1))
                    .connect(&url)
                    .await?;
                (read, write)
            }
            Engine::Postgres => {
                let pool = options()
                    .max_connections(max_connections.max(2))
                    .connect(url)
                    .await?;
                (pool.clone(), pool)
            }
        };
        Ok(Self {
            engine,
            read,
            write,
            link_writer: link_writer::LinkWriter::default(),
        })
    }

    /// The engine in use.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Applies pending migrations for this engine.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match self.engine {
            Engine::Sqlite => {
                sqlx::migrate!("../migrations/sqlite")
                    .run(&self.write)
                    .await?
            }
            Engine::Postgres => {
                sqlx::migrate!("../migrations/postgres")
                    .run(&self.write)
                    .await?
            }
        }
        Ok(())
    }

    /// Closes every connection (graceful shutdown).
    pub async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }
}

/// `sqlite://file.db` → `sqlite://file.db?mode=rwc`, so a fresh machine gets a new file.
fn sqlite_create_if_missing(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A new random identifier.
fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
