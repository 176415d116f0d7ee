//! Test harness: a real origin on a random port against a fresh database — an SQLite file in
//! a temporary directory, or a fresh schema on the PostgreSQL at `TEST_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`), dropped afterwards.

#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use origin_api::startup::{Application, Settings};
use serde_json::Value;
use shortlink_store::domain::{GroupSettings, Hostname};
use shortlink_store::{Actor, Db, DomainOwner, DomainRow};
use sqlx::Connection;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Runs each named `async fn(Engine)` once per engine, as `sqlite::name` and `postgres::name`.
#[macro_export]
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::common::Engine::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::common::Engine::Postgres).await })*
        }
    };
}

pub fn postgres_admin_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The shared PostgreSQL server, as the tests in this binary use it: every test on PostgreSQL holds a read guard
/// for as long as its database lives, and the fault test that stops the server takes the write guard, so it never
/// pulls the server from under another test.
fn postgres_gate() -> Arc<tokio::sync::RwLock<()>> {
    static GATE: OnceLock<Arc<tokio::sync::RwLock<()>>> = OnceLock::new();
    GATE.get_or_init(Arc::default).clone()
}

/// The shared PostgreSQL server, up for as long as the guard lives (see [`postgres_gate`]).
pub async fn postgres_shared() -> tokio::sync::OwnedRwLockReadGuard<()> {
    postgres_gate().read_owned().await
}

/// The whole PostgreSQL server for the caller alone, until the guard is dropped (see [`postgres_gate`]).
pub async fn postgres_exclusive() -> tokio::sync::OwnedRwLockWriteGuard<()> {
    postgres_gate().write_owned().await
}

/// Migration 0011 creates pg_trgm where the search path points unless the database has it already: in a test's own
/// schema it would be dropped with that schema (taking every other test's trigram index with it), so the tests
/// put it in `public` first, once per process. Errors are those of a concurrent process doing the same.
async fn trigram_extension_in_public(conn: &mut sqlx::PgConnection) {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    DONE.get_or_init(|| async {
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
            .execute(&mut *conn)
            .await;
        let _ = sqlx::query("ALTER EXTENSION pg_trgm SET SCHEMA public")
            .execute(&mut *conn)
            .await;
    })
    .await;
}

/// A fresh, migrated database that disappears with this value.
pub struct TestDb {
    pub url: String,
    engine: Engine,
    schema: Option<String>,
    dir: Option<PathBuf>,
    /// PostgreSQL: the read guard of [`postgres_gate`].
    _shared: Option<tokio::sync::OwnedRwLockReadGuard<()>>,
}

impl TestDb {
    pub async fn new(engine: Engine) -> Self {
        let shared = match engine {
            Engine::Postgres => Some(postgres_shared().await),
            Engine::Sqlite => None,
        };
        Self::open(engine, shared).await
    }

    /// A fresh database migrated up to `version` only (to test a later migration on data of an earlier schema).
    pub async fn migrated_to(engine: Engine, version: i64) -> Self {
        let shared = match engine {
            Engine::Postgres => Some(postgres_shared().await),
            Engine::Sqlite => None,
        };
        Self::open_at(engine, shared, Some(version)).await
    }

    /// The rest of the migrations, for a database made by [`TestDb::migrated_to`] and filled with an earlier
    /// schema's rows: the store opened on it as the origin opens it, every migration run.
    pub async fn migrate_rest(&self) -> Db {
        let db = Db::connect(&self.url, 2).await.unwrap();
        db.migrate().await.unwrap();
        db
    }

    /// A PostgreSQL database for the holder of [`postgres_exclusive`] (which must not wait for a read guard).
    pub async fn postgres_while_exclusive(
        _exclusive: &tokio::sync::OwnedRwLockWriteGuard<()>,
    ) -> Self {
        Self::open(Engine::Postgres, None).await
    }

    async fn open(engine: Engine, shared: Option<tokio::sync::OwnedRwLockReadGuard<()>>) -> Self {
        Self::open_at(engine, shared, None).await
    }

    async fn open_at(
        engine: Engine,
        shared: Option<tokio::sync::OwnedRwLockReadGuard<()>>,
        version: Option<i64>,
    ) -> Self {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let db = match engine {
            Engine::Sqlite => {
                let dir = std::env::temp_dir().join(format!("shortlink-test-{tag}"));
                std::fs::create_dir_all(&dir).unwrap();
                let url = format!("sqlite://{}", dir.join("db.sqlite").display());
                Self {
                    url,
                    engine,
                    schema: None,
                    dir: Some(dir),
                    _shared: None,
                }
            }
            Engine::Postgres => {
                let admin = postgres_admin_url();
                let schema = format!("t_{tag}");
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .expect("PostgreSQL must be running for the postgres tests (see README)");
                trigram_extension_in_public(&mut conn).await;
                sqlx::query(&format!("CREATE SCHEMA {schema}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                let sep = if admin.contains('?') { '&' } else { '?' };
                let url = format!("{admin}{sep}options=-c%20search_path%3D{schema}");
                Self {
                    url,
                    engine,
                    schema: Some(schema),
                    dir: None,
                    _shared: shared,
                }
            }
        };
        match version {
            None => {
                let pool = Db::connect(&db.url, 2).await.unwrap();
                pool.migrate().await.unwrap();
                pool.close().await;
            }
            Some(version) => {
                let dir = match engine {
                    Engine::Sqlite => "sqlite",
                    Engine::Postgres => "postgres",
                };
                let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../migrations")
                    .join(dir);
                let mut migrator = sqlx::migrate::Migrator::new(path).await.unwrap();
                migrator.migrations = migrator
                    .migrations
                    .iter()
                    .filter(|m| m.version <= version)
                    .cloned()
                    .collect();
                // Through Db::connect, so SQLite gets its file and pragmas as the server does.
                let pool = Db::connect(&db.url, 2).await.unwrap();
                pool.close().await;
                let conn = sqlx::AnyPool::connect(&db.url).await.unwrap();
                migrator.run(&conn).await.unwrap();
                conn.close().await;
            }
        }
        db
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(schema) = self.schema.take() {
            // Drop cannot await: do it on a thread with its own runtime.
            let admin = postgres_admin_url();
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                        let _ = sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
                            .execute(&mut conn)
                            .await;
                    }
                });
            })
            .join();
        }
    }
}

/// A running origin plus a handle on its database for arranging fixtures.
pub struct TestApp {
    pub base: String,
    pub db: Db,
    pub client: reqwest::Client,
    pub engine: Engine,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    pub test_db: TestDb,
}

pub struct Account {
    pub id: String,
    pub default_group_id: String,
    pub key: String,
}

impl TestApp {
    pub async fn spawn(engine: Engine) -> Self {
        let test_db = TestDb::new(engine).await;
        Self::on(test_db).await
    }

    pub async fn on(test_db: TestDb) -> Self {
        Self::with_settings(test_db, |_| {}).await
    }

    /// Starts the origin with adjusted settings (limits, headers).
    pub async fn with_settings(test_db: TestDb, adjust: impl FnOnce(&mut Settings)) -> Self {
        let engine = test_db.engine;
        let mut settings = Settings::new(test_db.url.clone());
        adjust(&mut settings);
        let app = Application::build(&settings).await.unwrap();
        let base = format!("http://{}", app.addr());
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            app.run_until(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        let db = Db::connect(&test_db.url, 4).await.unwrap();
        Self {
            base,
            db,
            client: reqwest::Client::new(),
            engine,
            shutdown: Some(tx),
            server: Some(server),
            test_db,
        }
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.db.close().await;
    }

    /// Folds every click digest delta waiting into the day rows, as the origin does every second.
    pub async fn fold_clicks(&self) -> usize {
        let mut total = 0;
        loop {
            let n = self.db.fold_click_deltas().await.unwrap();
            total += n;
            if n < shortlink_store::CLICK_FOLD_CHUNK {
                return total;
            }
        }
    }

    pub async fn account(&self, api_access: bool) -> Account {
        let email = format!("{}@example.com", uuid::Uuid::new_v4().simple());
        let acc = self.db.create_account(&email, api_access).await.unwrap();
        let key = self
            .db
            .generate_api_key(&acc.id, &Actor::Operator)
            .await
            .unwrap();
        Account {
            id: acc.id,
            default_group_id: acc.default_group_id,
            key: key.expose().to_owned(),
        }
    }

    pub async fn platform_domain(&self, host: &str) -> DomainRow {
        self.db
            .add_domain(
                &Hostname::parse(host).unwrap(),
                &DomainOwner::Platform,
                None,
                &Actor::Operator,
            )
            .await
            .unwrap()
    }

    pub async fn custom_domain(&self, host: &str, account: &Account) -> DomainRow {
        self.db
            .add_domain(
                &Hostname::parse(host).unwrap(),
                &DomainOwner::Account(account.id.clone()),
                None,
                &Actor::Operator,
            )
            .await
            .unwrap()
    }

    pub async fn group(&self, account: &Account, name: &str) -> String {
        self.db
            .create_group(
                &account.id,
                name,
                &GroupSettings::default(),
                &Actor::Operator,
            )
            .await
            .unwrap()
            .id
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn create(&self, key: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url("/api/v1/external/links/create-link"))
            .header("Authorization", format!("Token {key}"))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// create-link, answered as (status, JSON body).
    pub async fn create_json(&self, key: &str, body: Value) -> (u16, Value) {
        json(self.create(key, body).await).await
    }

    /// Pauses link `link_id` with `PATCH links/{id}` `{"is_active": false}`, which must answer 200.
    pub async fn pause_link(&self, key: &str, link_id: &str) {
        let path = format!("/api/v1/external/links/{link_id}");
        let (s, b) = self
            .send(
                reqwest::Method::PATCH,
                key,
                &path,
                Some(serde_json::json!({"is_active": false})),
            )
            .await;
        assert_eq!(s, 200, "pausing {link_id}: {b}");
    }

    /// Any method with a key and an optional JSON body, answered as (status, JSON body or `null` when empty).
    pub async fn send(
        &self,
        method: reqwest::Method,
        key: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, self.url(path))
            .header("Authorization", format!("Token {key}"));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        if text.is_empty() {
            return (status, Value::Null);
        }
        let body =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        (status, body)
    }

    pub async fn get(&self, key: &str, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .header("Authorization", format!("Token {key}"))
            .send()
            .await
            .unwrap()
    }
}

/// Reads a response as (status, JSON body).
pub async fn json(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, body)
}

/// Asserts the spec's error shape and code.
pub fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "body: {body}");
    assert_eq!(body["error_code"], want_code, "body: {body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "body: {body}"
    );
    assert_eq!(
        body.as_object().unwrap().len(),
        2,
        "only detail and error_code: {body}"
    );
}

/// An `origin-api serve` child process on a free port, killed on drop; its stderr (the log)
/// goes to a file so tests can read it.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
    /// The addresses that stood for [`FREE_ADDR`] in the arguments, in order.
    pub addrs: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Starts the real binary against `url` and waits (with a deadline) until /healthz answers.
pub async fn start_server(url: &str, rust_log: &str) -> Server {
    start_server_with(url, rust_log, &[], &[]).await
}

/// A free port on 127.0.0.1 (for a listener the server is told to open). A port is bound and
/// released here, so another bind in the meantime can take it: [`start_server_with`] retries then.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// In [`start_server_with`]'s arguments: a fresh `127.0.0.1:PORT` on each attempt (see [`Server::addrs`]).
pub const FREE_ADDR: &str = "<free-addr>";

/// How long a spawned origin may take to answer /healthz (it migrates a fresh database first, on a
/// machine the rest of the suite keeps busy).
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// [`start_server`] with more `serve` arguments and environment variables. A port picked by
/// [`free_port`] can be taken by another test before the server binds it; when the server stops
/// because of that, it is started again on new ports. Any other early stop, or no answer by the
/// deadline, fails the test with the server's log.
pub async fn start_server_with(
    url: &str,
    rust_log: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Server {
    for _attempt in 0..5 {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "shortlink-serve-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let mut addrs = Vec::new();
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == FREE_ADDR {
                    let addr = format!("127.0.0.1:{}", free_port());
                    addrs.push(addr.clone());
                    addr
                } else {
                    (*a).to_owned()
                }
            })
            .collect();
        let child = Command::new(env!("CARGO_BIN_EXE_origin-api"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(&args)
            .env("DATABASE_URL", url)
            .env("RUST_LOG", rust_log)
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            addrs,
        };
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Ok(r) = reqwest::get(format!("{}/healthz", server.base)).await {
                if r.status() == 200 {
                    return server;
                }
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                if log.contains("cannot listen on") {
                    break;
                }
                panic!("the server stopped before it was ready ({status}); its log:\n{log}");
            }
            if Instant::now() >= deadline {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                panic!("the server did not become ready in {STARTUP_DEADLINE:?}; its log:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("the server lost its port to another process five times in a row");
}
