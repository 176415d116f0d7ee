//! The dashboard in a real browser (Chromium driven by playwright-core), against the real origin and the real
//! worker: an invitation made with the admin CLI, then every flow a person goes through in the dashboard, each
//! checked where it matters (the API for keys, the worker for links, groups and clicks); then a team: the owner
//! invites a viewer and a member, who join in their own browser contexts, and removes the member at the end (the
//! account's members are checked here afterwards with the admin CLI). The origin runs with mail and open sign-up
//! (`--signup open`, `--smtp-url` to a real SMTP server on loopback, `tests/support/smtp_sink.py`), so the browser
//! also creates an account on "Create account", asks "Forgot password" and follows the mailed reset link, and the
//! team's invitations are checked in the mail the sink received. With `--webhooks-allow-private`, the script adds
//! a webhook endpoint on a receiver of its own on loopback and checks the signed events it gets. The flows and their assertions are in
//! `tests/browser/dashboard.mjs`; this test starts what it needs and runs it.
//!
//! Needs Chromium (`/usr/bin/chromium`, or `CHROMIUM`), the npm packages (`npm ci`: playwright-core, axe-core) and
//! Python's aiosmtpd (`python3 -m pip install -r tests/support/requirements-mail.txt`).
//! Screenshots of every page at 1280×800 and 390×844 land in `target/dashboard-screenshots/`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::origin::{
    Database, HOST, HOST_FALLBACK, INTERNAL_SECRET, Origin, OriginOptions, free_port,
};
use e2e::{Options, Worker, eventually, root};
use serde_json::Value;

/// The whole browser run may take this long (it takes about a minute on an idle machine).
const SCRIPT_DEADLINE: Duration = Duration::from_secs(420);

/// Isolate cache TTL of the worker: how stale a visitor's answer may be after a change is published.
const CACHE_TTL_SECONDS: u64 = 2;

/// The login the SMTP sink requires (AUTH PLAIN/LOGIN over plain SMTP on loopback).
const SMTP_USER: &str = "shortlink";
const SMTP_PASSWORD: &str = "browser-sink-password-4d1c";

/// The sender the origin is configured with.
const MAIL_FROM: &str = "Shortlink <no-reply@shortlink.test>";

/// Where the screenshots go: `<target dir>/dashboard-screenshots`.
fn screenshot_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join("dashboard-screenshots")
}

/// Reads `stream` line by line, echoing each line to the test's output as it comes (shown when the test fails, or
/// with `--nocapture`), and keeps the lines in `into` when given.
fn echo(stream: impl Read, tag: &'static str, into: Option<Arc<Mutex<Vec<String>>>>) {
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        eprintln!("[{tag}] {line}");
        if let Some(Ok(mut lines)) = into.as_ref().map(|i| i.lock()) {
            lines.push(line);
        }
    }
}

/// The SMTP server (`tests/support/smtp_sink.py`, aiosmtpd) on a port of its choosing, writing every message it
/// receives as `NNNN.json` into its directory; killed on drop.
struct SmtpSink {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl SmtpSink {
    /// Starts the sink on `dir`, requiring [`SMTP_USER`] and [`SMTP_PASSWORD`]; panics with the way to install
    /// aiosmtpd when it cannot start.
    fn start(dir: PathBuf) -> SmtpSink {
        let mut child = Command::new("python3")
            .arg(root().join("tests/support/smtp_sink.py"))
            .arg(&dir)
            .args(["--user", SMTP_USER, "--password", SMTP_PASSWORD])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 must be installed for the mail flows");
        // The first line is the port, printed once it accepts connections.
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
        let Some(port) = line.trim().parse::<u16>().ok().filter(|_| read.is_ok()) else {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            let _ = child.wait();
            panic!(
                "the SMTP sink (tests/support/smtp_sink.py) did not start. It needs aiosmtpd: \
                 `python3 -m pip install -r tests/support/requirements-mail.txt`. Its error:\n{err}"
            );
        };
        // Its later complaints (a refused login, a malformed message) are shown with the test's output.
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || echo(stderr, "smtp", None));
        }
        SmtpSink { child, port, dir }
    }

    /// `smtp://user:password@127.0.0.1:port`.
    fn url(&self) -> String {
        format!("smtp://{SMTP_USER}:{SMTP_PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Every message received so far, oldest first.
    fn messages(&self) -> Vec<Value> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p)
                    .unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
                serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", p.display()))
            })
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `node dashboard.mjs` with `env`, streaming its output; returns whether it exited 0 and, when it did not,
/// why (its stderr: the failed assertion; the steps it went through are in the streamed stdout).
fn run_browser_script(env: &[(&str, String)]) -> (bool, String) {
    let root = root();
    // The same Node 22 the harness runs Miniflare with.
    let node = root.join("node_modules/.bin/node");
    assert!(
        node.exists(),
        "{} is missing: run scripts/install-edge-toolchain.sh (npm ci)",
        node.display()
    );
    let mut cmd = Command::new(node);
    cmd.arg(root.join("tests/browser/dashboard.mjs"))
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn node tests/browser/dashboard.mjs");
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let readers = [
        {
            let stream = child.stdout.take().expect("piped stdout");
            std::thread::spawn(move || echo(stream, "browser", None))
        },
        {
            let (stream, into) = (child.stderr.take().expect("piped stderr"), stderr.clone());
            std::thread::spawn(move || echo(stream, "browser:err", Some(into)))
        },
    ];
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break Some(status);
        }
        if start.elapsed() > SCRIPT_DEADLINE {
            // Killing node leaves Chromium without its parent; playwright's pipe closing makes it exit.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for reader in readers {
        let _ = reader.join();
    }
    let said = stderr.lock().map(|o| o.join("\n")).unwrap_or_default();
    match status {
        Some(s) if s.success() => (true, said),
        Some(s) => (
            false,
            format!("dashboard.mjs exited with {s}; its stderr:\n{said}"),
        ),
        None => (
            false,
            format!("dashboard.mjs did not finish within {SCRIPT_DEADLINE:?}; its stderr:\n{said}"),
        ),
    }
}

#[tokio::test]
async fn dashboard_flows_in_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "Chromium is missing at {chromium} (apt-get install chromium, or set CHROMIUM)"
    );

    // The worker first, told the origin's port in advance (it reports clicks there), then the origin publishing
    // to it: a publisher started before the worker listens backs off, as in tests/propagation.rs.
    let db = Database::new();
    let origin_port = free_port();
    let worker_port = free_port();
    let worker = Worker::start_with(Options {
        env: vec![
            ("PORT".into(), worker_port.to_string()),
            (
                "ORIGIN_URL".into(),
                format!("http://127.0.0.1:{origin_port}"),
            ),
            ("ORIGIN_SECRET".into(), INTERNAL_SECRET.into()),
            (
                "ISOLATE_CACHE_TTL_SECONDS".into(),
                CACHE_TTL_SECONDS.to_string(),
            ),
        ],
        ..Options::default()
    });
    // Mail through the sink (its messages land in the database's directory, removed with it), a public URL (mail
    // needs one: every mailed link points there) and open sign-up.
    let sink = SmtpSink::start(db.dir().join("mail"));
    let origin_url = format!("http://127.0.0.1:{origin_port}");
    let origin = Origin::start(
        &db,
        OriginOptions {
            port: Some(origin_port),
            edge_sync_url: Some(format!("http://127.0.0.1:{worker_port}/__shortlink/sync")),
            args: vec![
                "--smtp-url".to_owned(),
                sink.url(),
                "--mail-from".to_owned(),
                MAIL_FROM.to_owned(),
                "--public-url".to_owned(),
                origin_url,
                "--signup".to_owned(),
                "open".to_owned(),
                // The browser script's webhook receiver listens on loopback.
                "--webhooks-allow-private".to_owned(),
            ],
        },
    )
    .await;

    // The invitation, as an operator makes it.
    let email = "dashboard-owner@example.com";
    let invite = db.admin(&[
        "admin",
        "account",
        "invite",
        "--email",
        email,
        "--public-url",
        &origin.url,
    ]);
    let invite_url = invite["invite_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no invite_url in {invite}"))
        .to_owned();
    assert!(
        invite_url.starts_with(&format!("{}/dashboard/invite/", origin.url)),
        "{invite_url}"
    );

    // The team the owner makes in the dashboard.
    let viewer_email = "dashboard-viewer@example.com";
    let member_email = "dashboard-member@example.com";
    // The person who creates an account of their own on "Create account", then resets their password.
    let signup_email = "dashboard-signup@example.com";

    let screenshots = screenshot_dir();
    let env = [
        ("DASHBOARD_URL", origin.url.clone()),
        ("INVITE_URL", invite_url),
        ("ACCOUNT_EMAIL", email.to_owned()),
        ("VIEWER_EMAIL", viewer_email.to_owned()),
        ("MEMBER_EMAIL", member_email.to_owned()),
        ("SIGNUP_EMAIL", signup_email.to_owned()),
        ("MAIL_DIR", sink.dir.display().to_string()),
        ("EDGE_URL", worker.url.clone()),
        ("EDGE_HOST", HOST.to_owned()),
        ("EDGE_FALLBACK", HOST_FALLBACK.to_owned()),
        ("SCREENSHOT_DIR", screenshots.display().to_string()),
        ("CHROMIUM", chromium),
    ];
    let (passed, said) = tokio::task::spawn_blocking(move || run_browser_script(&env))
        .await
        .expect("the browser script's thread");
    assert!(passed, "{said}");
    eprintln!("screenshots: {}", screenshots.display());

    // The team as the database has it: the owner and the viewer; the removed member is gone.
    let account = db.admin(&["admin", "account", "get", "--email", email]);
    let account_id = account["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {account}"));
    let members = db.admin(&["admin", "member", "list", "--account", account_id]);
    let mut team: Vec<(String, String)> = members["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {members}"))
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap_or_default().to_owned(),
                m["role"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    team.sort();
    assert_eq!(
        team,
        [
            (email.to_owned(), "owner".to_owned()),
            (viewer_email.to_owned(), "viewer".to_owned()),
        ],
        "the account's members after the browser run: {members}"
    );

    // The account made on "Create account": its own, with the new user its only member, as owner.
    let signed_up = db.admin(&["admin", "account", "get", "--email", signup_email]);
    let signed_up_id = signed_up["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {signed_up}"));
    assert_ne!(
        signed_up_id, account_id,
        "sign-up made an account of its own"
    );
    let signed_up_members = db.admin(&["admin", "member", "list", "--account", signed_up_id]);
    let owners: Vec<(&str, &str)> = signed_up_members["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {signed_up_members}"))
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap_or_default(),
                m["role"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        [(signup_email, "owner")],
        "the signed-up account's members: {signed_up_members}"
    );

    // Mail: the two invitations and the one reset link, each to its person, through the sink's login, from the
    // configured sender; nothing else (no mail for the unknown email, none for sign-up). The browser script
    // followed their links.
    let messages = sink.messages();
    let mut mailed: Vec<(String, &str)> = messages
        .iter()
        .map(|m| {
            assert_eq!(
                m["login"], SMTP_USER,
                "sent with the URL's credentials: {m}"
            );
            assert_eq!(m["from"], MAIL_FROM, "{m}");
            assert_eq!(m["content_type"], "text/plain", "{m}");
            let subject = m["subject"].as_str().unwrap_or_default();
            let kind = if subject == "Reset your Shortlink password" {
                "reset"
            } else if subject.starts_with("You are invited to join ")
                && subject.ends_with(" on Shortlink")
            {
                "invitation"
            } else {
                subject
            };
            (m["rcpt_tos"].to_string(), kind)
        })
        .collect();
    mailed.sort();
    let mut expected = vec![
        (format!("[\"{signup_email}\"]"), "reset"),
        (format!("[\"{viewer_email}\"]"), "invitation"),
        (format!("[\"{member_email}\"]"), "invitation"),
    ];
    expected.sort();
    assert_eq!(mailed, expected, "the messages the SMTP server received");

    // Everything the dashboard changed was handed to the publisher, and the worker took it all.
    eventually(
        Duration::from_secs(10),
        "the publisher's outbox is empty",
        || async { origin.healthz().await["publisher"]["pending"] == 0 },
    )
    .await;
}
