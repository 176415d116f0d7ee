//! End-to-end test harness: the real edge worker (wasm built by `worker-build`) in workerd, driven over HTTP.
//!
//! [`Worker::start`] builds the worker once per test process (`scripts/build-edge-worker.sh`; set
//! `SHORTLINK_EDGE_SKIP_BUILD=1` when a preceding step already built it), starts
//! `tests/support/serve-worker.mjs` (Miniflare, configured from the root `wrangler.toml`) on a free port, waits for
//! it with a deadline, and kills it on drop. KV starts empty; tests seed it through the worker's own
//! `POST /__shortlink/sync` route. Requests name the domain in the `Host` header, as visitors' browsers do.
//!
//! The worker process's output (the worker's structured log lines, workerd's messages) is kept: [`Worker::output`]
//! and [`Worker::wait_for_log`] read it, and each line is also printed to the test's stderr (shown when a test fails
//! or with `--nocapture`).
//!
//! With `KV_FAULTS=1` in [`Options::env`], [`Worker::fail_kv_reads`] makes the worker's KV reads of chosen keys fail
//! (tests/support/serve-worker.mjs puts a test-only entry module in front of the worker's). With `NO_KV=1`, the
//! worker runs without its KV binding.
//!
//! [`origin`] runs the real origin (`origin-api serve`) next to it, for the propagation tests.
//!
//! Prerequisite: `scripts/install-edge-toolchain.sh`.

pub mod origin;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use kv_model::{DomainRecord, GroupRecord, GroupSettings, LinkRecord};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use shared_crypto::{GroupKey, Payload, TokenCipher};

/// The bearer secret the test workers are configured with.
pub const SYNC_SECRET: &str = "e2e-sync-secret";

/// The worker's `DEFAULT_FALLBACK_URL` in tests.
pub const DEFAULT_FALLBACK: &str = "https://default.example/fallback";

/// How long a worker may take to start (workerd compiles the wasm on first load).
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Builds the worker once per process, unless `SHORTLINK_EDGE_SKIP_BUILD` is set. Panics with the build output on
/// failure.
fn ensure_built() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        if std::env::var_os("SHORTLINK_EDGE_SKIP_BUILD").is_some() {
            return Ok(());
        }
        let out = Command::new("bash")
            .arg(root().join("scripts/build-edge-worker.sh"))
            .output()
            .map_err(|e| format!("cannot run scripts/build-edge-worker.sh: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/build-edge-worker.sh failed ({}):\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let wasm = root().join("edge-worker/build/index_bg.wasm");
    assert!(wasm.exists(), "{} is missing", wasm.display());
}

/// A running worker: the Miniflare child process, what it has written so far, and an HTTP client that does not
/// follow redirects.
pub struct Worker {
    child: Child,
    /// Base URL, e.g. `http://127.0.0.1:40123/`.
    pub url: String,
    client: reqwest::Client,
    output: Output,
    /// With `CLICK_QUEUE=1`: where serve-worker.mjs answers what the dead-letter queue received.
    dead_letters_url: Option<String>,
}

/// The lines a worker process wrote (stderr, and stdout after the readiness line), in the order they arrived
/// (filled by reader threads).
type Output = Arc<Mutex<Vec<String>>>;

/// Reads `stream` line by line into `output` until it closes, echoing each line to the test's stderr.
fn collect(stream: impl std::io::Read, output: &Output) {
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        eprintln!("[worker] {line}");
        if let Ok(mut lines) = output.lock() {
            lines.push(line);
        }
    }
}

/// Options for [`Worker::start_with`].
#[derive(Debug, Clone)]
pub struct Options {
    /// `SYNC_SECRET`; `None` leaves it unset (the sync route is then disabled).
    pub sync_secret: Option<String>,
    /// Extra environment for the serve script (e.g. `ISOLATE_CACHE_TTL_SECONDS`, `PORT`, `ORIGIN_URL`,
    /// `ORIGIN_SECRET`, `KV_PERSIST`). `ORIGIN_URL`, `ORIGIN_SECRET`, `PORT` and `KV_PERSIST` are not inherited from
    /// the test's environment.
    pub env: Vec<(String, String)>,
    /// Serve the benchmark's floor worker instead of the edge worker.
    pub floor: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync_secret: Some(SYNC_SECRET.into()),
            env: Vec::new(),
            floor: false,
        }
    }
}

impl Worker {
    /// Starts the edge worker with the test secret and default fallback.
    pub fn start() -> Worker {
        Worker::start_with(Options::default())
    }

    /// Starts a worker with `options`.
    pub fn start_with(options: Options) -> Worker {
        if !options.floor {
            ensure_built();
        }
        let root = root();
        let node = root.join("node_modules/.bin/node");
        assert!(
            node.exists(),
            "{} is missing: run scripts/install-edge-toolchain.sh",
            node.display()
        );
        let mut cmd = Command::new(node);
        cmd.arg(root.join("tests/support/serve-worker.mjs"))
            .arg("--stop-on-eof")
            .current_dir(&root)
            .env("DEFAULT_FALLBACK_URL", DEFAULT_FALLBACK)
            .env("WRANGLER_SEND_METRICS", "false")
            .env("WRANGLER_SEND_ERROR_REPORTS", "false")
            .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
            .env("WRANGLER_HIDE_BANNER", "true")
            .env_remove("SYNC_SECRET")
            .env_remove("ORIGIN_URL")
            .env_remove("ORIGIN_SECRET")
            .env_remove("PORT")
            .env_remove("KV_PERSIST")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(secret) = &options.sync_secret {
            cmd.env("SYNC_SECRET", secret);
        }
        if options.floor {
            cmd.arg("--floor");
        }
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn node serve-worker.mjs");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let output = Output::default();
        // Read the readiness line on a thread, so the wait has a deadline; then keep reading, so that a later write
        // to stdout never meets a closed pipe.
        let (tx, rx) = mpsc::channel();
        let stdout_output = output.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            collect(reader, &stdout_output);
        });
        let stderr_output = output.clone();
        std::thread::spawn(move || collect(stderr, &stderr_output));
        let line = match rx.recv_timeout(STARTUP_DEADLINE) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("worker did not start within {STARTUP_DEADLINE:?}");
            }
        };
        let ready: Value = match serde_json::from_str(line.trim()) {
            Ok(v) => v,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                // Give the stderr reader a moment to take what the script said before it exited.
                std::thread::sleep(Duration::from_millis(200));
                let said = output.lock().map(|o| o.join("\n")).unwrap_or_default();
                panic!(
                    "serve-worker.mjs did not report readiness (got {line:?}); its stderr:\n{said}"
                );
            }
        };
        let url = ready["url"]
            .as_str()
            .expect("url in readiness line")
            .to_owned();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("reqwest client");
        let dead_letters_url = ready["dead_letters_url"].as_str().map(str::to_owned);
        Worker {
            child,
            url,
            client,
            output,
            dead_letters_url,
        }
    }

    /// The click events the dead-letter queue has received so far (`CLICK_QUEUE=1` workers only).
    pub async fn dead_letters(&self) -> Vec<Value> {
        let url = self
            .dead_letters_url
            .as_deref()
            .expect("a worker started with CLICK_QUEUE=1");
        self.client
            .get(url)
            .send()
            .await
            .expect("GET dead letters")
            .json()
            .await
            .expect("dead letters JSON")
    }

    /// Makes the worker's KV reads of `keys` fail from now on, as a failing KV read does (the keys set before are
    /// replaced; none: every read works again), and returns how many reads have failed so far. Only for a worker
    /// started with `KV_FAULTS=1` (tests/support/serve-worker.mjs puts a test-only entry in front of it).
    pub async fn fail_kv_reads(&self, keys: &[&str]) -> u64 {
        self.kv_faults(Some(keys)).await
    }

    /// Makes the worker's KV reads of each key of `keys` wait that many milliseconds before KV is asked, from now on
    /// (no read fails; the keys set before are replaced). Only for a worker started with `KV_FAULTS=1`.
    pub async fn slow_kv_reads(&self, keys: &[(&str, u64)]) {
        let slow: serde_json::Map<String, Value> = keys
            .iter()
            .map(|(key, ms)| ((*key).to_owned(), json!(ms)))
            .collect();
        self.kv_faults_answer(Some(json!({ "fail": [], "slow": slow })))
            .await;
    }

    /// How many of the worker's KV reads have failed so far (`KV_FAULTS=1` workers only).
    pub async fn failed_kv_reads(&self) -> u64 {
        self.kv_faults(None).await
    }

    /// How many times the worker has read each KV key so far, failed reads included (`KV_FAULTS=1` workers only).
    pub async fn kv_reads(&self) -> std::collections::HashMap<String, u64> {
        let body = self.kv_faults_answer(None).await;
        serde_json::from_value(body["reads"].clone()).expect("reads by key")
    }

    /// Asserts that KV has read each of `keys` exactly once so far (`KV_FAULTS=1` workers only), and gives every
    /// key's count for what else the caller checks.
    pub async fn assert_read_once(
        &self,
        keys: &[String],
    ) -> std::collections::HashMap<String, u64> {
        let reads = self.kv_reads().await;
        for key in keys {
            assert_eq!(reads.get(key), Some(&1), "{key} read once: {reads:?}");
        }
        reads
    }

    /// How many tokens the worker's entry module has given WebCrypto to decrypt so far, and how many of them it
    /// opened (`KV_FAULTS=1` workers only): a new isolate's first visit to a dynamic link opens its token so.
    pub async fn webcrypto_decrypts(&self) -> (u64, u64) {
        let body = self.kv_faults_answer(None).await;
        let count = |name: &str| body["webcrypto"][name].as_u64().expect("webcrypto counts");
        (count("decrypts"), count("opened"))
    }

    async fn kv_faults(&self, set: Option<&[&str]>) -> u64 {
        let body = self
            .kv_faults_answer(set.map(|keys| json!({ "fail": keys })))
            .await;
        body["failed_reads"].as_u64().expect("failed_reads")
    }

    /// The test entry's answer (`tests/support/serve-worker.mjs`): after setting `set` (`{"fail": […], "slow":
    /// {…}}`), or as it stands.
    async fn kv_faults_answer(&self, set: Option<Value>) -> Value {
        let url = format!("{}/__test/kv-faults", self.url.trim_end_matches('/'));
        let req = match set {
            Some(body) => self.client.post(url).json(&body),
            None => self.client.get(url),
        };
        let resp = req.send().await.expect("kv-faults request");
        assert_eq!(
            resp.status().as_u16(),
            200,
            "a worker started with KV_FAULTS=1"
        );
        resp.json().await.expect("kv-faults JSON")
    }

    /// Every line the worker process has written so far (its log lines, workerd's messages), oldest first.
    pub fn output(&self) -> Vec<String> {
        self.output.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// The worker's structured log lines so far (`edge-worker/src/log.rs`: JSON objects with an `event`), parsed.
    pub fn log_events(&self) -> Vec<Value> {
        self.output()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
            .filter(|v| v["event"].is_string())
            .collect()
    }

    /// Waits (polling, up to `deadline`) for a log line with `event` for which `matches` holds, and returns it.
    /// Panics with the output so far when none came: log lines of work done after the response (`wait_until`)
    /// arrive a little after the response does.
    pub async fn wait_for_log(
        &self,
        event: &str,
        deadline: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            if let Some(found) = self
                .log_events()
                .into_iter()
                .find(|v| v["event"] == event && matches(v))
            {
                return found;
            }
            if start.elapsed() > deadline {
                panic!(
                    "no {event} log line within {deadline:?}; the worker wrote:\n{}",
                    self.output().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The HTTP client (no redirects followed).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// A request to `path` (with query) on the worker, naming `host` in the `Host` header.
    pub fn request(
        &self,
        method: reqwest::Method,
        host: &str,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let url = format!("{}{}", self.url.trim_end_matches('/'), path);
        self.client.request(method, url).header("Host", host)
    }

    /// `GET` as a browser (a desktop Chrome User-Agent), with extra headers.
    pub async fn visit(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> Visit {
        self.send(reqwest::Method::GET, host, path, headers).await
    }

    /// Visits `path` on `host` `times` times, each a redirect to the destination `location`: a first visit and the
    /// ones that follow it, decided from what it read.
    pub async fn visit_destination(&self, host: &str, path: &str, times: usize, location: &str) {
        for _ in 0..times {
            self.visit(host, path, &[])
                .await
                .assert_destination(location);
        }
    }

    /// Any method, as a browser, with extra headers (which may override the User-Agent).
    pub async fn send(
        &self,
        method: reqwest::Method,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Visit {
        // `RequestBuilder::header` appends, so the default User-Agent is only added when not overridden.
        let mut req = self.request(method, host, path);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
        {
            req = req.header("User-Agent", BROWSER_UA);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("request to the worker");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.expect("response body");
        Visit {
            status,
            headers,
            body,
        }
    }

    /// `POST /__shortlink/sync` with `body` and the given bearer token; returns status and JSON body.
    pub async fn sync_as(&self, bearer: Option<&str>, body: String) -> (u16, Value) {
        let mut req = self
            .request(reqwest::Method::POST, "sync.internal", "/__shortlink/sync")
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(token) = bearer {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let resp = req.send().await.expect("sync request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("sync body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Like [`Worker::sync_as`], but returns the transport error instead of panicking: a server that refuses an
    /// oversized body from its `Content-Length` may answer and close before the client has finished sending.
    /// It uses a connection of its own, so a reset does not touch the pooled connections of other requests.
    pub async fn try_sync_as(
        &self,
        bearer: Option<&str>,
        body: String,
    ) -> Result<(u16, Value), reqwest::Error> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(30))
            .build()?;
        let url = format!("{}/__shortlink/sync", self.url.trim_end_matches('/'));
        let mut req = client
            .post(url)
            .header("Host", "sync.internal")
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(token) = bearer {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// Seeds KV through the sync route with the test secret; panics unless it answers 200.
    pub async fn sync(&self, puts: Vec<(String, Value)>, deletes: Vec<String>) {
        let body = json!({
            "put": puts.into_iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
            "delete": deletes,
        });
        let (status, reply) = self.sync_as(Some(SYNC_SECRET), body.to_string()).await;
        assert_eq!(status, 200, "sync failed: {reply}");
        assert_eq!(reply["ok"], true);
    }

    /// Writes one KV record through the sync route.
    pub async fn put(&self, key: String, value: Value) {
        self.sync(vec![(key, value)], vec![]).await;
    }
}

impl Drop for Worker {
    /// Closes the child's stdin, which makes serve-worker.mjs dispose of Miniflare and so stop workerd (a SIGKILL
    /// would leave workerd running without its parent); kills it only if it has not exited within a deadline.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 25 ms until it holds; panics with `what` after `deadline`. Returns how long it took.
pub async fn eventually<F, Fut>(deadline: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A desktop Chrome User-Agent: a human visitor.
pub const BROWSER_UA: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                              Chrome/126.0.0.0 Safari/537.36";

/// A response: status, headers, body.
#[derive(Debug)]
pub struct Visit {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Body text.
    pub body: String,
}

impl Visit {
    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a 302 to `location` and returns `self` for more checks.
    #[track_caller]
    pub fn assert_redirect(&self, location: &str) -> &Self {
        assert_eq!(
            (self.status, self.header("location")),
            (302, Some(location)),
            "expected 302 to {location}; body: {}",
            self.body
        );
        self
    }

    /// A redirect to a destination: 302 to `location`, never cached, and a referrer policy that keeps the short
    /// link's path (and a dynamic link's signature) from the destination.
    pub fn assert_destination(&self, location: &str) -> &Self {
        self.assert_redirect(location);
        assert_eq!(
            self.header("cache-control"),
            Some("private, no-store, max-age=0")
        );
        assert_eq!(
            self.header("referrer-policy"),
            Some("strict-origin-when-cross-origin")
        );
        self
    }
}

/// KV value of a link record.
pub fn link(long_url: &str, group_id: &str, is_active: bool) -> Value {
    serde_json::to_value(LinkRecord::new(long_url, group_id, is_active)).expect("serialize")
}

/// KV value of a domain record.
pub fn domain(enabled: bool, fallback_url: Option<&str>) -> Value {
    serde_json::to_value(DomainRecord::new(enabled, fallback_url.map(str::to_owned)))
        .expect("serialize")
}

/// KV value of a group record with `key` and `settings` (a JSON object, as the origin stores it).
pub fn group(key: &GroupKey, settings: Value) -> Value {
    // Round-trip through the shared type, so the tests publish exactly what the origin's publisher would.
    let settings: GroupSettings = serde_json::from_value(settings).expect("valid settings");
    serde_json::to_value(GroupRecord::new(key.to_base64url(), settings)).expect("serialize")
}

/// A fresh 12-byte IV per token (a counter: unique within the test process, which is all GCM needs here).
fn next_iv() -> [u8; 12] {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut iv = [0u8; 12];
    iv[..8].copy_from_slice(&n.to_be_bytes());
    iv
}

/// A dynamic-link token for `payload` under `key`.
pub fn token(key: &GroupKey, payload: &Payload) -> String {
    TokenCipher::new(key).seal(payload, next_iv())
}

/// The path of a dynamic link: `/e/<group_id>?signature=<url-encoded token>`.
pub fn dynamic_path(group_id: &str, token: &str) -> String {
    // base64url needs no escaping except that `-` and `_` are safe anyway; encode defensively all the same.
    let encoded: String = token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("/e/{group_id}?signature={encoded}")
}
