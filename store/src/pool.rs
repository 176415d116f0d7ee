//! Opening the database: the connection pools, the per-engine connection settings and migrations, and the
//! choices of how new links are committed and how large a multi-row statement is. This is the only place that
//! looks at the engine.

use crate::click_writer::{ClickWriter, Engine as ClickEngine, POSTGRES_WRITERS};
use crate::error::StoreError;
use crate::link_writer::LinkWriter;
use crate::password_hashing::HashLimit;
use crate::sql_chunks::MultiRow;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::migrate::Migrator;
use sqlx::{AnyConnection, AnyPool, Executor};
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

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// How a link creation is committed, chosen when the pools open.
#[derive(Clone, Debug)]
pub(crate) enum LinkPath {
    /// SQLite: handed to the one writer task, which commits the creations waiting at the same moment in one
    /// transaction (group commit, [`crate::link_writer`]).
    Batched(LinkWriter),
    /// PostgreSQL: a transaction of its own per creation, serialised per key by the key row's lock.
    Direct,
}

/// Connection pools. On SQLite all writes go through one connection: SQLite has one writer
/// anyway, and queueing in the pool is cheaper and fairer than busy-waiting on the file lock.
/// On PostgreSQL both are the same pool.
#[derive(Clone, Debug)]
pub struct Db {
    pub(crate) read: AnyPool,
    pub(crate) write: AnyPool,
    pub(crate) link_path: LinkPath,
    /// How multi-row statements are written ([`crate::sql_chunks`]).
    pub(crate) multi_row: MultiRow,
    /// Click reports are stored by writer tasks, several per transaction ([`crate::click_writer`]).
    pub(crate) click_writer: ClickWriter,
    /// The process-wide bound on argon2 computations ([`crate::password_hashing`]).
    pub(crate) hashing: HashLimit,
    /// The bound on link passwords' PBKDF2 ([`crate::link_password`]): one at a time, apart from `hashing`, so
    /// API keys setting link passwords (checked against their limits only after hashing, in create-link's
    /// transaction) can take at most one core and never the turns that sign-ins and password checks wait for.
    pub(crate) link_hashing: HashLimit,
    migrator: &'static Migrator,
}

/// How many database connections are open, and how many of them wait for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Open connections.
    pub open: u32,
    /// Of those, idle ones.
    pub idle: u32,
}

/// How long a request waits for a connection before it gets a 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits on a lock held by another process before giving up.
const SQLITE_BUSY_TIMEOUT_MS: u32 = 5_000;

impl Db {
    /// Opens the pools (creating an SQLite file if missing) without migrating.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        install_default_drivers();
        let options = || AnyPoolOptions::new().acquire_timeout(ACQUIRE_TIMEOUT);
        match Engine::from_url(url)? {
            Engine::Sqlite => {
                let sqlite = || {
                    options()
                        // A caller cancelled while its `BEGIN` ran (a request whose client went away, a task
                        // stopped) leaves its connection in a transaction that nothing will end, and sqlx still
                        // returns it to the pool: the writer (the only one) then refused every write with
                        // "begin_with at non-zero transaction depth", and a reader would have served one old
                        // snapshot for ever. `BEGIN` fails inside a transaction, so such a connection is closed
                        // here instead of reused (CI: imports::sqlite::a_dead_runners_job_is_finished_once).
                        .after_release(|conn, _| {
                            Box::pin(async move {
                                Ok(conn.execute("BEGIN; ROLLBACK").await.is_ok())
                            })
                        })
                        .after_connect(|conn, _| {
                        Box::pin(async move {
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
                            Ok(())
                        })
                    })
                };
                // Anonymous placeholders: see MultiRow.
                let multi_row = MultiRow::SQLITE;
                let url = sqlite_create_if_missing(url);
                // The writer's page cache is 64 MiB instead of SQLite's 2 MiB: click reports upsert thousands of
                // counter rows across many links each, and with the small cache those B-tree pages were re-read for
                // every report (ingestion 16-17k events/s before, 20-22k after, interleaved runs; BENCHMARKS.md).
                let write = sqlite()
                    .max_connections(1)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute(
                                format!(
                                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                                     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}; \
                                     PRAGMA wal_autocheckpoint = 10000; PRAGMA cache_size = -65536;"
                                )
                                .as_str(),
                            )
                            .await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await?;
                let read = sqlite()
                    .max_connections(max_connections.max(1))
                    .connect(&url)
                    .await?;
                Ok(Self {
                    read,
                    link_path: LinkPath::Batched(LinkWriter::new(write.clone())),
                    click_writer: ClickWriter::new(write.clone(), multi_row, ClickEngine::Sqlite),
                    write,
                    multi_row,
                    hashing: HashLimit::per_core(),
                    link_hashing: HashLimit::new(1, crate::password_hashing::DEFAULT_HASH_WAIT),
                    migrator: &SQLITE_MIGRATIONS,
                })
            }
            Engine::Postgres => {
                let pool = options()
                    .max_connections(max_connections.max(2))
                    .connect(url)
                    .await?;
                Ok(Self {
                    read: pool.clone(),
                    click_writer: ClickWriter::new(
                        pool.clone(),
                        MultiRow::POSTGRES,
                        ClickEngine::Postgres {
                            writers: POSTGRES_WRITERS,
                        },
                    ),
                    write: pool,
                    link_path: LinkPath::Direct,
                    multi_row: MultiRow::POSTGRES,
                    hashing: HashLimit::per_core(),
                    link_hashing: HashLimit::new(1, crate::password_hashing::DEFAULT_HASH_WAIT),
                    migrator: &POSTGRES_MIGRATIONS,
                })
            }
        }
    }

    /// The same store with another bound on password hashing (default: one computation per core, each caller
    /// waiting at most [`crate::DEFAULT_HASH_WAIT`]). Set once at start: clones made before keep the old bound.
    pub fn with_hash_limit(mut self, limit: HashLimit) -> Self {
        self.hashing = limit;
        self
    }

    /// The same store with `writers` transactions storing click reports at once on PostgreSQL (default
    /// [`crate::click_writer`]'s two; SQLite has one writer). Set once at start, before the first report.
    pub fn with_click_writers(mut self, writers: usize) -> Self {
        self.click_writer = self.click_writer.with_writers(writers);
        self
    }

    /// Applies pending migrations for this engine.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.migrator.run(&self.write).await?;
        // The steps SQL cannot take: the day counters of migration 0005 become digests (migration 0020)…
        let mut tx = self.begin_write().await?;
        crate::digests::convert::counters_to_digests(&mut tx).await?;
        tx.commit().await?;
        // And the visitor hashes of migration 0021 become 64-bit keys (migration 0023).
        let mut tx = self.begin_write().await?;
        crate::unique_visitors::hashes_to_keys(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Connections open and idle now, over both pools (PostgreSQL has one pool; SQLite a reader pool and the
    /// writer's), for the metrics.
    pub fn pool_use(&self) -> PoolUse {
        let (open, idle) = (self.read.size(), self.read.num_idle() as u32);
        match self.link_path {
            LinkPath::Direct => PoolUse { open, idle },
            LinkPath::Batched(_) => PoolUse {
                open: open + self.write.size(),
                idle: idle + self.write.num_idle() as u32,
            },
        }
    }

    /// Closes every connection (graceful shutdown).
    pub async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }

    /// A write transaction. On SQLite it takes the write lock at `BEGIN` (`IMMEDIATE`): a deferred transaction that
    /// reads and then writes fails at once with "database is locked", without waiting out the busy timeout, when
    /// another connection (a second origin process, the operator's CLI, the retention task of a server started a
    /// moment ago) committed in between. CI met exactly that once.
    pub(crate) async fn begin_write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.link_path {
            LinkPath::Batched(_) => self.write.begin_with("BEGIN IMMEDIATE").await,
            LinkPath::Direct => self.write.begin().await,
        }
    }

    /// A read transaction whose statements all see one snapshot of the database: the statistics read day rows and
    /// the deltas not folded into them yet ([`crate::digests`]), and a fold committed between two reads of
    /// PostgreSQL's default `READ COMMITTED` would count its clicks twice or not at all. SQLite's read transaction
    /// (WAL) keeps the snapshot of its first read to its end already. The deltas table is a queue that fills and
    /// empties, so PostgreSQL plans each statement for the table as it is, as [`Db::begin_queue_write`] does.
    pub(crate) async fn begin_snapshot_read(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.link_path {
            LinkPath::Batched(_) => self.read.begin().await,
            LinkPath::Direct => {
                self.read
                    .begin_with(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                         SET LOCAL plan_cache_mode = force_custom_plan",
                    )
                    .await
            }
        }
    }

    /// A write transaction ([`Db::begin_write`]) of the webhooks' delivery loop, whose statements PostgreSQL plans
    /// for the tables as they are at each execution (`SET LOCAL`, for the transaction only, sent with the `BEGIN`
    /// in one round trip). The queue tables start empty and grow by hundreds of rows a second (keeping their dead
    /// rows until a vacuum). sqlx prepares every statement once per connection, and from its sixth execution
    /// PostgreSQL may run it with a generic plan made then and kept for the life of the connection: made while
    /// the table held a few hundred rows, the plan of a lookup by id is a sequential scan, and it went on reading
    /// the whole table (30,000 rows, 9–18 ms a statement after a minute at 500 events/s) until the loop fell
    /// behind for good (BENCHMARKS.md, "Webhooks"). Planning costs a fraction of a millisecond a statement.
    /// SQLite plans every statement as it prepares it: this is [`Db::begin_write`] there.
    pub(crate) async fn begin_queue_write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.link_path {
            LinkPath::Batched(_) => self.begin_write().await,
            LinkPath::Direct => {
                self.write
                    .begin_with("BEGIN; SET LOCAL plan_cache_mode = force_custom_plan")
                    .await
            }
        }
    }

    /// Serialises the caller's write transaction with every other one that names `key`, until it ends. SQLite
    /// needs nothing more: `begin_write` took the database's one write lock. PostgreSQL takes a transaction-level
    /// advisory lock on the key's 64-bit hash (a collision only serialises two unrelated keys).
    pub(crate) async fn serialise_on(
        &self,
        tx: &mut sqlx::AnyConnection,
        key: &str,
    ) -> Result<(), StoreError> {
        if let LinkPath::Direct = self.link_path {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind(key)
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    /// Fails with NotFound unless the account exists.
    pub(crate) async fn require_account(&self, account_id: &str) -> Result<(), StoreError> {
        let mut conn = self.read.acquire().await?;
        require_account_in(&mut conn, account_id).await
    }
}

/// Fails with NotFound unless the account exists, inside a transaction or on a connection.
pub(crate) async fn require_account_in(
    conn: &mut AnyConnection,
    account_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("SELECT id FROM accounts WHERE id = $1")
        .bind(account_id)
        .fetch_optional(&mut *conn)
        .await?
        .map(|_| ())
        .ok_or(StoreError::NotFound(crate::Entity::Account))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection returned to the pool inside a transaction (as a caller cancelled during its `BEGIN` leaves it)
    /// is closed, not handed to the next writer or reader.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_connections_left_in_a_transaction_are_not_reused() {
        let dir =
            std::env::temp_dir().join(format!("shortlink-pool-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("db.sqlite").display()), 1)
            .await
            .unwrap();
        db.migrate().await.unwrap();
        for pool in [&db.write, &db.read] {
            let mut conn = pool.acquire().await.unwrap();
            conn.execute("BEGIN").await.unwrap();
            drop(conn);
        }
        // Each pool holds one connection: the next use gets the same one back, or a new one.
        let tx = db.begin_write().await.expect("the writer begins");
        tx.commit().await.unwrap();
        let mut read = db.read.begin().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *read).await.unwrap();
        read.commit().await.unwrap();
        db.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}
