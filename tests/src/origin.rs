//! The real origin (`origin-api`) as a child process, for tests across origin and worker.
//!
//! [`Database`] is a fresh SQLite file in its own temporary directory (or, with [`Database::postgres`], a fresh schema
//! on the PostgreSQL at `TEST_POSTGRES_URL`), migrated with `origin-api migrate` and seeded with `origin-api admin …`,
//! exactly as an operator would. [`Origin::start`] runs `origin-api serve` on it and
//! waits (with a deadline) until `/healthz` answers; the process is killed on drop. The binary is built once per
//! test process with `cargo build -p origin-api` (skip with `SHORTLINK_ORIGIN_SKIP_BUILD=1` when a preceding step
//! built it).

use std::collections::BTreeSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shared_crypto::GroupKey;

use crate::root;

/// The `INTERNAL_API_SECRET` of test origins, which test workers get as `ORIGIN_SECRET`.
pub const INTERNAL_SECRET: &str = "e2e-internal-secret-0123456789abcdef";

/// The platform domain every seeded database has.
pub const HOST: &str = "go.example.com";

/// Its fallback URL.
pub const HOST_FALLBACK: &str = "https://www.example.com/not-found";

/// How long an origin may take to answer `/healthz` after it was spawned.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// A free TCP port on 127.0.0.1 (bound, then released: a port for a process started later), picked at random below
/// Linux's ephemeral range (32768–60999), and never the same twice in one test process.
///
/// Below the ephemeral range because a port the system hands out (`bind(0)`, and every outgoing connection's local
/// port) comes from that range, so between this call and the process binding it another test's client or listener
/// could take it (CI saw "Address already in use" that way). Never twice because a test often picks a port seconds
/// before anything binds it (a stack picks the origin's port, then starts the worker, then the origin): a parallel
/// test's pick in that window saw the port free and got it too (CI: the worker of
/// `propagation::group_settings_and_deletion_reach_the_edge` found its port taken). cargo runs test binaries one
/// after another, so remembering this process's picks is enough.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let state = RandomState::new();
    for _ in 0..1_000 {
        let mut h = state.build_hasher();
        h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        let port = 20_000 + (h.finish() % 12_000) as u16;
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// The `origin-api` binary, built once per process; `SHORTLINK_ORIGIN_BIN` names another (the benchmarks run a
/// release build).
pub fn origin_binary() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        if let Some(bin) = std::env::var_os("SHORTLINK_ORIGIN_BIN") {
            return Ok(PathBuf::from(bin));
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join("target"));
        let bin = target.join("debug/origin-api");
        if std::env::var_os("SHORTLINK_ORIGIN_SKIP_BUILD").is_none() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let out = Command::new(cargo)
                .args(["build", "--quiet", "-p", "origin-api"])
                .current_dir(root())
                .output()
                .map_err(|e| format!("cannot run cargo build -p origin-api: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "cargo build -p origin-api failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        if bin.exists() {
            Ok(bin)
        } else {
            Err(format!("{} is missing", bin.display()))
        }
    });
    match result {
        Ok(bin) => bin.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// An account seeded through the admin CLI, with its API key.
#[derive(Debug, Clone)]
pub struct Account {
    /// Account id.
    pub id: String,
    /// Its default group.
    pub default_group_id: String,
    /// Its API key (`Authorization: Token …`).
    pub api_key: String,
}

/// A group created through the admin CLI or the API.
#[derive(Debug, Clone)]
pub struct Group {
    /// Group id.
    pub id: String,
    /// Its key, base64url.
    pub key: String,
}

impl Group {
    /// Its key, for signing dynamic links.
    pub fn signing_key(&self) -> GroupKey {
        GroupKey::from_base64url(&self.key).expect("a valid group key")
    }
}

/// The database engine behind a [`Database`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// A file in the database's temporary directory.
    Sqlite,
    /// A fresh schema on the PostgreSQL server at `TEST_POSTGRES_URL` (default
    /// `postgres://postgres@127.0.0.1:5432/test`), dropped with the [`Database`].
    Postgres,
}

/// The PostgreSQL server the tests use (`TEST_POSTGRES_URL`, as the origin's integration tests).
pub fn postgres_admin_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A fresh, migrated database with the platform domain [`HOST`] (fallback [`HOST_FALLBACK`]): an SQLite file in a
/// temporary directory ([`Database::new`]) or a fresh PostgreSQL schema ([`Database::postgres`]; the directory then
/// holds only the origins' logs). Both are removed on drop.
pub struct Database {
    dir: PathBuf,
    /// `sqlite://…` URL of the file, or `postgres://…` with the schema as `search_path`.
    pub url: String,
    /// PostgreSQL: the schema (dropped on drop).
    schema: Option<String>,
}

impl Database {
    /// Creates, migrates and adds the platform domain (SQLite).
    pub fn new() -> Database {
        Database::on(Engine::Sqlite)
    }

    /// The same on PostgreSQL: a fresh schema, created with `psql` (which must be installed).
    pub fn postgres() -> Database {
        Database::on(Engine::Postgres)
    }

    /// A fresh database on `engine`.
    pub fn on(engine: Engine) -> Database {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("shortlink-e2e-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the database directory");
        let db = match engine {
            Engine::Sqlite => {
                let url = format!("sqlite://{}", dir.join("origin.db").display());
                Database {
                    dir,
                    url,
                    schema: None,
                }
            }
            Engine::Postgres => {
                let admin = postgres_admin_url();
                let schema = format!("e2e_{}_{n}", std::process::id());
                // Migration 0011 creates pg_trgm where the search path points unless the database has it: in this
                // schema it would go with it, and with it every other schema's trigram index. So it goes in
                // `public` first (an error is another process doing the same at once).
                let _ = psql(
                    &admin,
                    "CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public",
                );
                psql(
                    &admin,
                    &format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"),
                )
                .unwrap_or_else(|e| {
                    panic!("PostgreSQL must be running for the postgres tests (see README): {e}")
                });
                let sep = if admin.contains('?') { '&' } else { '?' };
                let url = format!("{admin}{sep}options=-c%20search_path%3D{schema}");
                Database {
                    dir,
                    url,
                    schema: Some(schema),
                }
            }
        };
        db.admin(&["migrate"]);
        db.admin(&[
            "admin",
            "domain",
            "add",
            "--host",
            HOST,
            "--platform",
            "--fallback-url",
            HOST_FALLBACK,
        ]);
        db
    }

    /// The directory holding the database (and the origins' logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its engine.
    pub fn engine(&self) -> Engine {
        if self.schema.is_some() {
            Engine::Postgres
        } else {
            Engine::Sqlite
        }
    }

    /// Runs `sql` on this database with the engine's own client (`sqlite3` or `psql`, which must be installed) and
    /// returns what it prints (unaligned, no headers: one row a line, columns separated by `|`); panics on error.
    /// For reading what the API does not show (a backlog, a state), never for arranging what a test checks.
    pub fn query(&self, sql: &str) -> String {
        let result = match self.engine() {
            Engine::Postgres => psql(&self.url, sql),
            Engine::Sqlite => {
                let path = self.dir.join("origin.db");
                Command::new("sqlite3")
                    .args(["-batch", "-cmd", ".timeout 5000"])
                    .arg(&path)
                    .arg(sql)
                    .output()
                    .map_err(|e| format!("cannot run sqlite3: {e}"))
                    .and_then(|out| {
                        if out.status.success() {
                            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
                        } else {
                            Err(String::from_utf8_lossy(&out.stderr).into_owned())
                        }
                    })
            }
        };
        result.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Inserts `n` links into `account`'s default group on [`HOST`] with one statement (codes `seed0000001`, …,
    /// destinations `https://example.com/page/N`, one microsecond apart), and counts them in the account's link
    /// count. Only for volumes that the API's creation limits (100 an hour per key) cannot arrange: a test of
    /// what the API does with a large account, never of how links are created.
    pub fn seed_links(&self, account: &Account, n: u64) {
        let domain = self.query(&format!("SELECT id FROM domains WHERE host = '{HOST}'"));
        let (acc, group, domain) = (&account.id, &account.default_group_id, domain.trim());
        let sql = match self.engine() {
            Engine::Sqlite => format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
                 INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at, search_text) \
                 SELECT printf('00000000-0000-4000-8000-%012d', i), '{acc}', '{group}', '{domain}', \
                        printf('seed%07d', i), printf('https://example.com/page/%d', i), 1700000000000000 + i, \
                        printf('seed%07d' || char(10) || 'https://example.com/page/%d' || char(10), i, i) FROM n; \
                 UPDATE accounts SET link_count = link_count + {n} WHERE id = '{acc}';"
            ),
            Engine::Postgres => format!(
                "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at, search_text) \
                 SELECT '00000000-0000-4000-8000-' || lpad(i::text, 12, '0'), '{acc}', '{group}', '{domain}', \
                        'seed' || lpad(i::text, 7, '0'), 'https://example.com/page/' || i, 1700000000000000 + i, \
                        'seed' || lpad(i::text, 7, '0') || E'\\n' || 'https://example.com/page/' || i || E'\\n' \
                 FROM generate_series(1, {n}) AS i; \
                 UPDATE accounts SET link_count = link_count + {n} WHERE id = '{acc}';"
            ),
        };
        self.query(&sql);
    }

    /// Runs `origin-api ARGS` on this database and returns the JSON it prints; panics unless it exits 0.
    pub fn admin(&self, args: &[&str]) -> Value {
        let out = Command::new(origin_binary())
            .args(args)
            .env("DATABASE_URL", &self.url)
            .env("RUST_LOG", "warn")
            .output()
            .expect("run origin-api");
        assert!(
            out.status.success(),
            "origin-api {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "origin-api {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// An account with an API key.
    pub fn account(&self, email: &str) -> Account {
        let a = self.admin(&["admin", "account", "create", "--email", email]);
        let id = str_field(&a, "id");
        let key = self.admin(&["admin", "api-key", "generate", "--account", &id]);
        Account {
            default_group_id: str_field(&a, "default_group_id"),
            api_key: str_field(&key, "api_key"),
            id,
        }
    }

    /// A group of `account` with `settings`.
    pub fn group(&self, account: &Account, name: &str, settings: Value) -> Group {
        let g = self.admin(&[
            "admin",
            "group",
            "create",
            "--account",
            &account.id,
            "--name",
            name,
            "--settings",
            &settings.to_string(),
        ]);
        group(&g)
    }
}

impl Default for Database {
    fn default() -> Self {
        Database::new()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(schema) = self.schema.take() {
            let _ = psql(
                &postgres_admin_url(),
                &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
            );
        }
    }
}

/// Runs `sql` with `psql` on `url`; its output (unaligned, tuples only), or why it failed.
fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn str_field(v: &Value, name: &str) -> String {
    v[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} in {v}"))
        .to_owned()
}

/// How to start an origin.
#[derive(Debug, Clone, Default)]
pub struct OriginOptions {
    /// Port to listen on; `None` picks a free one.
    pub port: Option<u16>,
    /// The worker's sync route for the publisher (`EDGE_SYNC_URL`, with the worker's test `SYNC_SECRET`);
    /// `None`: no publisher, the outbox keeps every change.
    pub edge_sync_url: Option<String>,
    /// More arguments for `serve` (mail, sign-up: `--smtp-url …`, `--signup open`).
    pub args: Vec<String>,
}

/// A running `origin-api serve` (SIGKILLed on drop).
pub struct Origin {
    child: Option<Child>,
    /// The port it listens on.
    pub port: u16,
    /// Base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    client: reqwest::Client,
}

impl Origin {
    /// Starts `origin-api serve` on `db` with [`INTERNAL_SECRET`] and waits until `/healthz` answers 200.
    pub async fn start(db: &Database, options: OriginOptions) -> Origin {
        let port = options.port.unwrap_or_else(free_port);
        let mut cmd = Command::new(origin_binary());
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(&options.args)
            .env("DATABASE_URL", &db.url)
            .env("INTERNAL_API_SECRET", INTERNAL_SECRET)
            .env("RUST_LOG", "warn")
            .env_remove("EDGE_SYNC_URL")
            .env_remove("EDGE_SYNC_SECRET")
            .env_remove("CF_ACCOUNT_ID")
            .env_remove("CF_KV_NAMESPACE_ID")
            .env_remove("CF_API_TOKEN")
            // Only what the options say: no mail, sign-up or public URL from the developer's shell.
            .env_remove("PUBLIC_BASE_URL")
            .env_remove("SMTP_URL")
            .env_remove("MAIL_FROM")
            .env_remove("SIGNUP_MODE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its warnings (publish rounds failing while the worker is down) go to the log file, not the test output.
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(db.dir().join("origin.log"))
                    .map_or_else(|_| Stdio::null(), Stdio::from),
            );
        if let Some(url) = &options.edge_sync_url {
            cmd.env("EDGE_SYNC_URL", url)
                .env("EDGE_SYNC_SECRET", crate::SYNC_SECRET);
        }
        let child = cmd.spawn().expect("spawn origin-api serve");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("reqwest client");
        let mut origin = Origin {
            child: Some(child),
            port,
            url: format!("http://127.0.0.1:{port}"),
            client,
        };
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            let exited = origin
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                // The log lives in the database's temporary directory, which goes with the test: show it here.
                let log = std::fs::read_to_string(db.dir().join("origin.log")).unwrap_or_default();
                panic!("origin-api serve exited with {status}; its log:\n{log}");
            }
            let healthy = origin
                .client
                .get(format!("{}/healthz", origin.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if healthy {
                return origin;
            }
            assert!(
                Instant::now() < deadline,
                "origin-api did not answer /healthz within {STARTUP_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its process id, while it runs (for reading its memory in /proc).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILLs the process (no graceful shutdown: a crash) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `GET /healthz` as JSON.
    pub async fn healthz(&self) -> Value {
        self.client
            .get(format!("{}/healthz", self.url))
            .send()
            .await
            .expect("GET /healthz")
            .json()
            .await
            .expect("healthz JSON")
    }

    /// The management API as `account`.
    pub fn api(&self, account: &Account) -> Api {
        Api {
            client: self.client.clone(),
            base: self.url.clone(),
            api_key: account.api_key.clone(),
        }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The management API with one account's key. Cheap to clone (for concurrent requests).
#[derive(Debug, Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    api_key: String,
}

impl Api {
    /// `method` on `/api/v1/external/{path}` as the account, with `body` as JSON when given; panics unless the
    /// answer is `expect`. Returns the JSON body (`null` when there is none, as for a 204).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        expect: u16,
    ) -> Value {
        let mut req = self
            .client
            .request(
                method.clone(),
                format!("{}/api/v1/external/{path}", self.base),
            )
            .header("Authorization", format!("Token {}", self.api_key));
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("response body");
        assert_eq!(status, expect, "{method} {path} {body:?}: {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
        }
    }

    /// `POST links/create-link` with `body`; panics unless 201; returns the created link.
    pub async fn create_link(&self, body: Value) -> Value {
        self.call(reqwest::Method::POST, "links/create-link", Some(&body), 201)
            .await
    }

    /// A link to `long_url` in `group_id` (the default group when `None`).
    pub async fn link(&self, long_url: &str, group_id: Option<&str>) -> Value {
        self.create_link(json!({"long_url": long_url, "group_id": group_id}))
            .await
    }

    /// `PATCH links/{id}` with `changes`; panics unless 200; returns the link as it now is.
    pub async fn patch_link(&self, link_id: &str, changes: Value) -> Value {
        self.call(
            reqwest::Method::PATCH,
            &format!("links/{link_id}"),
            Some(&changes),
            200,
        )
        .await
    }

    /// `DELETE links/{id}`; panics unless 204.
    pub async fn delete_link(&self, link_id: &str) {
        self.call(
            reqwest::Method::DELETE,
            &format!("links/{link_id}"),
            None,
            204,
        )
        .await;
    }

    /// `GET links/{id}/stats`; panics unless 200.
    pub async fn stats(&self, link_id: &str) -> Value {
        self.call(
            reqwest::Method::GET,
            &format!("links/{link_id}/stats"),
            None,
            200,
        )
        .await
    }

    /// `POST groups` (name and settings); panics unless 201; returns the group with its key.
    pub async fn create_group(&self, name: &str, settings: Value) -> Group {
        let body = json!({"name": name, "settings": settings});
        group(
            &self
                .call(reqwest::Method::POST, "groups", Some(&body), 201)
                .await,
        )
    }

    /// `POST groups/{id}/rotate-key`; panics unless 200; returns the group with its new key.
    pub async fn rotate_key(&self, group_id: &str) -> Group {
        group(
            &self
                .call(
                    reqwest::Method::POST,
                    &format!("groups/{group_id}/rotate-key"),
                    None,
                    200,
                )
                .await,
        )
    }

    /// `DELETE groups/{id}`; panics unless 204.
    pub async fn delete_group(&self, group_id: &str) {
        self.call(
            reqwest::Method::DELETE,
            &format!("groups/{group_id}"),
            None,
            204,
        )
        .await;
    }
}

/// A group as the admin CLI and the API print it.
fn group(v: &Value) -> Group {
    Group {
        id: str_field(v, "id"),
        key: str_field(v, "key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 300 picks from 12,000 ports would repeat one more often than not (birthday bound) if picks were independent;
    /// a stack's second pick must never be its first, nor a parallel test's.
    #[test]
    fn free_port_never_gives_a_port_twice() {
        let picks: Vec<u16> = (0..300).map(|_| free_port()).collect();
        let distinct: BTreeSet<u16> = picks.iter().copied().collect();
        assert_eq!(distinct.len(), picks.len());
        assert!(picks.iter().all(|p| (20_000..32_000).contains(p)));
    }
}
