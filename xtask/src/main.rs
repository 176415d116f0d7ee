//! `cargo xtask dev` runs the local stack; `cargo xtask test` installs what is missing and
//! runs every test. These are the README's two set-up commands; `.ci/run` runs the second.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("dev") => dev(),
        Some("test") => test(),
        _ => Err("usage: cargo xtask <dev|test>\n  dev   run the origin (SQLite) and the edge worker (local workerd), seeded with a demo account\n  test  install what is missing, then run every test".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs a command in the workspace root, failing on a non-zero exit.
fn run(cmd: &mut Command) -> Result {
    eprintln!("xtask: $ {}", describe(cmd));
    let status = cmd
        .current_dir(root())
        .status()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed: {status}", describe(cmd)))
    }
}

/// Runs a command and returns its stdout.
fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if !out.status.success() {
        return Err(format!("`{}` failed: {}", describe(cmd), out.status));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
}

fn port_open(addr: &str) -> bool {
    addr.parse::<SocketAddr>()
        .is_ok_and(|a| TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

fn wait_for(what: &str, deadline: Duration, mut ready: impl FnMut() -> bool) -> Result {
    let end = Instant::now() + deadline;
    while !ready() {
        if Instant::now() > end {
            return Err(format!("{what} did not become ready within {deadline:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// cargo xtask test

/// PostgreSQL for the integration tests: the URL from TEST_POSTGRES_URL, or the local server,
/// started with the machine's cluster tool when it is down.
fn ensure_postgres() -> Result {
    if std::env::var_os("TEST_POSTGRES_URL").is_some() || port_open("127.0.0.1:5432") {
        return Ok(());
    }
    let versions = std::fs::read_dir("/etc/postgresql").map_err(|e| format!("PostgreSQL is not running on 127.0.0.1:5432 and /etc/postgresql is unreadable ({e}); set TEST_POSTGRES_URL"))?;
    for v in versions.flatten() {
        let version = v.file_name().to_string_lossy().into_owned();
        run(Command::new("pg_ctlcluster").args([
            "--skip-systemctl-redirect",
            &version,
            "main",
            "start",
        ]))?;
    }
    wait_for("PostgreSQL", Duration::from_secs(30), || {
        port_open("127.0.0.1:5432")
    })
}

fn ensure_wasm_target() -> Result {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !installed
        .lines()
        .any(|l| l.trim() == "wasm32-unknown-unknown")
    {
        run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
    }
    Ok(())
}

/// The Python packages pinned in `requirements` (`name==version` lines), installed with pip unless every one is
/// installed at exactly its version already.
fn ensure_pip(requirements: &str) -> Result {
    let text = std::fs::read_to_string(root().join(requirements)).map_err(|e| e.to_string())?;
    let installed = |(package, version): (&str, &str)| {
        Command::new("python3")
            .args([
                "-c",
                &format!("import importlib.metadata as m; print(m.version('{package}'))"),
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == version)
    };
    let mut pins = text.lines().filter_map(|l| l.trim().split_once("=="));
    if !pins.all(installed) {
        run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "-r", requirements]))?;
    }
    Ok(())
}

/// Debian's Chromium for the dashboard's browser tests (Playwright's own browser download does not work here).
fn ensure_chromium() -> Result {
    if Path::new("/usr/bin/chromium").exists() {
        return Ok(());
    }
    eprintln!("xtask: installing chromium (apt)");
    run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "chromium"]))
        .or_else(|_| {
            run(Command::new("apt-get").arg("update"))?;
            run(Command::new("apt-get").args([
                "install",
                "-y",
                "--no-install-recommends",
                "chromium",
            ]))
        })
}

fn test() -> Result {
    ensure_postgres()?;
    ensure_chromium()?;
    ensure_wasm_target()?;
    // The snippet check's Python side.
    ensure_pip("snippets/requirements.txt")?;
    if root().join("scripts/install-edge-toolchain.sh").exists() {
        run(Command::new("bash").arg("scripts/install-edge-toolchain.sh"))?;
    }
    // The protocol crate must build for the edge.
    run(cargo().args([
        "build",
        "-p",
        "shared-crypto",
        "--target",
        "wasm32-unknown-unknown",
        "--no-default-features",
    ]))?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The mail tests' SMTP server on loopback (aiosmtpd), before the workspace tests that start it.
    ensure_pip("tests/support/requirements-mail.txt")?;
    ensure_pip("tests/support/requirements-webhooks.txt")?;
    // Unit and integration tests on SQLite and PostgreSQL; property tests with a bounded budget.
    let cases = std::env::var("PROPTEST_CASES").unwrap_or_else(|_| "2000".to_owned());
    // (The e2e crate runs last, in workerd, through scripts/edge-test.sh.)
    run(cargo()
        .args(["test", "--workspace", "--exclude", "e2e"])
        .env("PROPTEST_CASES", cases))?;
    // The README's JavaScript and Python snippets make tokens the Rust side accepts.
    run(cargo().args(["build", "-p", "shortlink"]))?;
    let shortlink = root().join("target/debug/shortlink");
    run(Command::new("bash")
        .arg("snippets/check.sh")
        .env("SHORTLINK_BIN", &shortlink))?;
    // The dashboard's dynamic-link builder (browser JavaScript) against the same CLI, both ways.
    run(Command::new(root().join("node_modules/.bin/node"))
        .args(["--test", "tests/browser/dynamic-link.test.mjs"])
        .env("SHORTLINK_CLI", &shortlink))?;
    // A short coverage-guided smoke of each parser fuzz target (longer runs: BENCHMARKS.md).
    let fuzz_seconds = std::env::var("FUZZ_SECONDS").unwrap_or_else(|_| "10".to_owned());
    run(Command::new("bash")
        .arg("scripts/fuzz.sh")
        .env("FUZZ_SECONDS", fuzz_seconds))?;
    // Requests generated from the OpenAPI document against a real origin.
    ensure_pip("scripts/requirements-schemathesis.txt")?;
    run(Command::new("bash").arg("scripts/schemathesis.sh"))?;
    if root().join("scripts/edge-test.sh").exists() {
        run(Command::new("bash").arg("scripts/edge-test.sh"))?;
    }
    // `wrangler deploy --dry-run` of every environment, offline, and the worker's size (on the build above).
    run(Command::new("bash").arg("scripts/check-deploy.sh"))?;
    eprintln!("xtask: all tests passed");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// cargo xtask dev

/// Kills the child when dropped, so Ctrl-C or an error never leaves a server behind.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const DEMO_EMAIL: &str = "demo@shortlink.local";
/// The second demo user: a member of the demo account (teams).
const DEMO_MEMBER_EMAIL: &str = "member@shortlink.local";
const DEMO_DOMAIN: &str = "sho.localhost";
/// The demo account's dashboard password: printed by `cargo xtask dev`, for a development database only.
const DEMO_PASSWORD: &str = "shortlink-demo";

fn admin(bin: &Path, db: &str, args: &[&str]) -> Result<serde_json::Value> {
    let out = output(
        Command::new(bin)
            .args(args)
            .env("DATABASE_URL", db)
            .env("RUST_LOG", "warn"),
    )?;
    serde_json::from_str(&out).map_err(|e| format!("{args:?} printed no JSON: {e}"))
}

/// Runs an admin command that reads a password from its standard input (never an argument).
fn with_password(bin: &Path, db: &str, args: &[&str], password: &str) -> Result {
    let mut child = Command::new(bin)
        .args(args)
        .env("DATABASE_URL", db)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run origin-api {args:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        writeln!(stdin, "{password}").map_err(|e| e.to_string())?;
    }
    if !child.wait().map_err(|e| e.to_string())?.success() {
        return Err(format!("origin-api {args:?} failed"));
    }
    Ok(())
}

fn field(v: &serde_json::Value, name: &str) -> Result<String> {
    v[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("missing {name} in {v}"))
}

/// A random hex secret for the local origin ↔ worker wiring (fresh each run).
fn random_secret() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn dev() -> Result {
    let db =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite://shortlink-dev.db".to_owned());
    let origin_addr = std::env::var("ORIGIN_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
    let edge_addr = std::env::var("EDGE_ADDR").unwrap_or_else(|_| "127.0.0.1:8787".to_owned());
    let edge_port = edge_addr.rsplit(':').next().unwrap_or("8787").to_owned();
    run(cargo().args(["build", "--quiet", "-p", "origin-api"]))?;
    // The edge toolchain (first run: several minutes) and the worker's wasm.
    run(Command::new("bash").arg("scripts/install-edge-toolchain.sh"))?;
    run(Command::new("bash").arg("scripts/build-edge-worker.sh"))?;
    let bin = root().join("target/debug/origin-api");
    admin(&bin, &db, &["migrate"])?;

    // Seed idempotently: reuse the demo account, domain and group if they exist.
    let existing = Command::new(&bin)
        .args(["admin", "account", "get", "--email", DEMO_EMAIL])
        .env("DATABASE_URL", &db)
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    let account = match existing {
        Some(a) => a,
        None => admin(
            &bin,
            &db,
            &["admin", "account", "create", "--email", DEMO_EMAIL],
        )?,
    };
    let account_id = field(&account, "id")?;
    let _ = Command::new(&bin)
        .args([
            "admin",
            "domain",
            "add",
            "--host",
            DEMO_DOMAIN,
            "--platform",
            "--fallback-url",
            "https://example.com/",
        ])
        .env("DATABASE_URL", &db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let groups = admin(
        &bin,
        &db,
        &["admin", "group", "list", "--account", &account_id],
    )?;
    let demo = groups["results"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "Demo").cloned());
    let group = match demo {
        Some(g) => g,
        None => admin(
            &bin,
            &db,
            &[
                "admin",
                "group",
                "create",
                "--account",
                &account_id,
                "--name",
                "Demo",
                "--settings",
                r#"{"access":{"block_bots":true},"analytics":{"enabled":true}}"#,
            ],
        )?,
    };
    // Keys are shown once and stored hashed: each run issues a fresh one.
    let key = field(
        &admin(
            &bin,
            &db,
            &["admin", "api-key", "generate", "--account", &account_id],
        )?,
        "api_key",
    )?;
    // The dashboard's demo passwords (a development database only; people set theirs through an invitation): the
    // owner, and a second person who is a member of the same account (teams).
    with_password(
        &bin,
        &db,
        &["admin", "account", "set-password", "--email", DEMO_EMAIL],
        DEMO_PASSWORD,
    )?;
    with_password(
        &bin,
        &db,
        &[
            "admin",
            "member",
            "add",
            "--account",
            &account_id,
            "--email",
            DEMO_MEMBER_EMAIL,
            "--role",
            "member",
        ],
        DEMO_PASSWORD,
    )?;
    // The local edge's KV starts empty: queue the whole read model for the publisher.
    admin(&bin, &db, &["admin", "republish"])?;

    let (sync_secret, internal_secret) = (random_secret()?, random_secret()?);
    let node = root().join("node_modules/.bin/node");
    let mut edge = Guard(
        Command::new(&node)
            .arg("tests/support/serve-worker.mjs")
            .env("PORT", &edge_port)
            .env("SYNC_SECRET", &sync_secret)
            .env("ORIGIN_URL", format!("http://{origin_addr}"))
            .env("ORIGIN_SECRET", &internal_secret)
            .envs([
                ("WRANGLER_SEND_METRICS", "false"),
                ("WRANGLER_SEND_ERROR_REPORTS", "false"),
                ("CLOUDFLARE_CF_FETCH_ENABLED", "false"),
                ("WRANGLER_HIDE_BANNER", "true"),
            ])
            .current_dir(root())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the worker ({}): {e}", node.display()))?,
    );
    wait_for("edge worker", Duration::from_secs(60), || {
        port_open(&edge_addr)
    })?;
    let mut origin = Guard(
        Command::new(&bin)
            .args(["serve", "--listen", &origin_addr])
            .env("DATABASE_URL", &db)
            .env(
                "EDGE_SYNC_URL",
                format!("http://{edge_addr}/__shortlink/sync"),
            )
            .env("EDGE_SYNC_SECRET", &sync_secret)
            .env("INTERNAL_API_SECRET", &internal_secret)
            .current_dir(root())
            .spawn()
            .map_err(|e| format!("cannot start origin-api: {e}"))?,
    );
    wait_for("origin", Duration::from_secs(30), || {
        port_open(&origin_addr)
    })?;
    let (group_id, group_key) = (field(&group, "id")?, field(&group, "key")?);
    println!(
        r#"
Shortlink is running.
  dashboard http://{origin_addr}/dashboard/   (owner: email {DEMO_EMAIL}, password {DEMO_PASSWORD})
            a second user, a member of the same account: email {DEMO_MEMBER_EMAIL}, password {DEMO_PASSWORD}
  origin    http://{origin_addr}   (database {db})
  edge      http://{edge_addr}   (the worker in local workerd; name the domain in the Host header)
  API key   {key}
  domain    {DEMO_DOMAIN}
  group     {group_id}   (analytics on, bots blocked)
  group key {group_key}

Try:
  link=$(curl -s -X POST http://{origin_addr}/api/v1/external/links/create-link \
       -H 'Authorization: Token {key}' -H 'Content-Type: application/json' \
       -d '{{"long_url": "https://www.rust-lang.org/", "short_code": "rust", "group_id": "{group_id}"}}' \
       | tee /dev/stderr | sed -E 's/.*"id":"([^"]+)".*/\1/')
  curl -si http://{edge_addr}/rust -H 'Host: {DEMO_DOMAIN}' -A 'Mozilla/5.0'      # 302 to the destination
  curl -s -X PATCH http://{origin_addr}/api/v1/external/links/$link \
       -H 'Authorization: Token {key}' -H 'Content-Type: application/json' \
       -d '{{"is_active": false}}'                # paused: within a second the edge sends visitors to the fallback
  curl -s -X DELETE http://{origin_addr}/api/v1/external/links/$link \
       -H 'Authorization: Token {key}' -w '%{{http_code}}\n'                      # 204: gone, "rust" is free again
  curl -s 'http://{origin_addr}/api/v1/external/links?limit=5' -H 'Authorization: Token {key}'
  url=$(cargo run -q -p shortlink -- sign --group-key {group_key} --group-id {group_id} \
       --domain {DEMO_DOMAIN} --destination https://example.com/hello --expires-in 1h)
  curl -si "http://{edge_addr}${{url#https://{DEMO_DOMAIN}}}" -H 'Host: {DEMO_DOMAIN}' -A 'Mozilla/5.0'

Ctrl-C stops everything."#
    );
    // Run until either process exits (Ctrl-C reaches the whole process group).
    loop {
        for (name, child) in [("origin-api", &mut origin), ("edge worker", &mut edge)] {
            if let Some(status) = child.0.try_wait().map_err(|e| e.to_string())? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("{name} exited: {status}"))
                };
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
