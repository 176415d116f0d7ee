//! Mail, "Forgot password" and sign-up over HTTP, on both engines, against a real SMTP server on loopback:
//! `tests/support/smtp_sink.py` (aiosmtpd, pinned in `tests/support/requirements-mail.txt`, installed by
//! `cargo xtask test`) writes every message it receives to a directory, and the tests read them and follow their
//! links. Without aiosmtpd these tests fail, saying how to install it.

use crate::common::{Engine, TestApp, TestDb, free_port, start_server_with};
use crate::dashboard::{Browser, PASSWORD, Page, email};
use futures::future::join_all;
use origin_api::startup::{Application, Settings, SignupMode, StartError};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The login the sink requires (AUTH PLAIN/LOGIN over plain SMTP on loopback).
const SMTP_USER: &str = "shortlink";
const SMTP_PASSWORD: &str = "sink-password-7f3a";
const NEW_PASSWORD: &str = "a brand new password";

/// The SMTP server: a child process, killed (and its directory removed) on drop.
pub(crate) struct SmtpSink {
    child: Child,
    pub(crate) port: u16,
    dir: PathBuf,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SmtpSink {
    /// Starts the sink, requiring [`SMTP_USER`] and [`SMTP_PASSWORD`]; panics with the way to install aiosmtpd
    /// when it cannot start.
    pub(crate) fn start() -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/support/smtp_sink.py");
        let dir =
            std::env::temp_dir().join(format!("shortlink-mail-{}", uuid::Uuid::new_v4().simple()));
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(&dir)
            .args(["--user", SMTP_USER, "--password", SMTP_PASSWORD])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 must be installed for the mail tests");
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let port = line.trim().parse::<u16>().ok().filter(|_| read.is_ok());
        let Some(port) = port else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.wait();
            panic!(
                "the SMTP sink (tests/support/smtp_sink.py) did not start. It needs aiosmtpd: \
                 `python3 -m pip install -r tests/support/requirements-mail.txt` (`cargo xtask test` does it). \
                 Its error:\n{err}"
            );
        };
        Self { child, port, dir }
    }

    /// `smtp://user:password@127.0.0.1:port`.
    pub(crate) fn url(&self) -> String {
        format!("smtp://{SMTP_USER}:{SMTP_PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Every message received so far, oldest first.
    pub(crate) fn messages(&self) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect()
    }

    /// Waits (at most 20 s) until at least `n` messages arrived, then returns them all.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.messages();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{n} messages expected, {} arrived: {got:#?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The one line of a message's body that starts with `prefix` (the link is on its own line).
fn link_in(message: &Value, prefix: &str) -> String {
    let body = message["body"].as_str().unwrap();
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(lines.len(), 1, "one link line starting {prefix}: {body}");
    lines[0].trim().to_owned()
}

/// An origin with mail through `sink` (and a public URL, which mail needs, on the port it listens on), the
/// client address from `X-Forwarded-For`, and room for many argon2 computations at once (so the throttles alone
/// decide).
async fn app_with_mail(engine: Engine, sink: Option<&SmtpSink>, signup: SignupMode) -> TestApp {
    let test_db = TestDb::new(engine).await;
    let port = free_port();
    let smtp = sink.map(SmtpSink::url);
    TestApp::with_settings(test_db, move |s| {
        s.listen = SocketAddr::from(([127, 0, 0, 1], port));
        s.public_url = Some(format!("http://127.0.0.1:{port}"));
        s.smtp_url = smtp.map(SecretString::from);
        s.mail_from = Some("Shortlink <no-reply@shortlink.test>".to_owned());
        s.signup = signup;
        s.client_ip_header = Some("X-Forwarded-For".to_owned());
        s.password_hash_concurrency = Some(32);
    })
    .await
}

/// A browser whose proxy says it comes from `addr`.
fn from(app: &TestApp, addr: &str) -> Browser {
    let mut b = Browser::new(app);
    b.extra
        .push(("x-forwarded-for".to_owned(), format!("10.9.9.9, {addr}")));
    b
}

fn count(pages: &[Page], status: StatusCode) -> usize {
    pages.iter().filter(|p| p.status == status).count()
}

fn retry_after(page: &Page) -> i64 {
    page.headers
        .get("retry-after")
        .expect("Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn raw_pool(app: &TestApp) -> sqlx::AnyPool {
    sqlx::AnyPool::connect(&app.test_db.url).await.unwrap()
}

async fn scalar(app: &TestApp, sql: &str, bind: &str) -> i64 {
    let pool = raw_pool(app).await;
    let v: i64 = sqlx::query_scalar(sql)
        .bind(bind)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    v
}

/// Asks for a reset link for `address` from a fresh browser; the answer is always the same redirect.
async fn ask_reset(app: &TestApp, addr: &str, address: &str) -> Page {
    from(app, addr)
        .post("/dashboard/forgot-password", &[("email", address)])
        .await
}

both_engines!(
    reset_link_by_mail,
    reset_link_expires_after_an_hour,
    reset_link_is_spent_once_under_concurrency,
    forgot_password_is_throttled,
    without_mail_forgot_password_says_ask_the_operator,
    sign_up_when_open,
    sign_up_is_not_there_by_invitation_only,
    sign_up_is_throttled_per_address,
    invitation_mail_carries_a_working_link,
    mail_needs_a_sender_and_a_public_url,
    no_address_or_link_reaches_the_log,
);

async fn reset_link_by_mail(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Invite).await;
    let address = email();
    let mut first = Browser::new(&app);
    first.join(&app, &address).await;
    let mut second = Browser::new(&app);
    assert_eq!(
        second.sign_in(&address, PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    // The sign-in page links to it; the page has its form.
    let mut visitor = Browser::new(&app);
    let sign_in = visitor.get("/dashboard/sign-in").await;
    assert!(
        sign_in
            .body
            .contains(r#"<a href="/dashboard/forgot-password">Forgot password</a>"#),
        "{}",
        sign_in.body
    );
    let form = visitor.get("/dashboard/forgot-password").await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.body.contains(r#"<label for="email">Email</label>"#));
    assert!(form.body.contains("Send reset link"));
    assert_eq!(
        form.headers.get("cache-control").unwrap().to_str().unwrap(),
        "no-store"
    );
    // An unknown email and a user's get the same answer, and only the user's gets mail.
    let unknown = ask_reset(&app, "192.0.2.1", &email()).await;
    let known = ask_reset(&app, "192.0.2.2", &address.to_uppercase()).await;
    for page in [&unknown, &known] {
        assert_eq!(page.status, StatusCode::SEE_OTHER);
        assert_eq!(page.location(), "/dashboard/forgot-password?sent=1");
    }
    assert_eq!(unknown.body, known.body);
    assert!(known.headers.get("set-cookie").is_none());
    let sent = visitor.get("/dashboard/forgot-password?sent=1").await;
    assert_eq!(sent.status, StatusCode::OK);
    assert!(sent.body.contains("If this email has a user here"));
    let mails = sink.wait_for(1).await;
    // Room for a stray message for the unknown email to arrive: there must be none.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mails_after = sink.messages();
    assert_eq!(mails_after.len(), 1, "{mails_after:#?}");
    let mail = &mails[0];
    assert_eq!(mail["rcpt_tos"], serde_json::json!([address]));
    assert_eq!(mail["to"], address);
    assert_eq!(mail["mail_from"], "no-reply@shortlink.test");
    assert_eq!(mail["from"], "Shortlink <no-reply@shortlink.test>");
    assert_eq!(mail["login"], SMTP_USER, "the URL's credentials were used");
    assert_eq!(mail["subject"], "Reset your Shortlink password");
    assert_eq!(mail["content_type"], "text/plain");
    let link = link_in(mail, &format!("{}/dashboard/reset/", app.base));
    let path = link.strip_prefix(&app.base).unwrap().to_owned();
    // The link's page.
    let page = visitor.get(&path).await;
    assert_eq!(page.status, StatusCode::OK);
    for label in [
        r#"<label for="new-password">New password</label>"#,
        r#"<label for="confirm-password">Confirm password</label>"#,
        "Set password",
    ] {
        assert!(page.body.contains(label), "{label}: {}", page.body);
    }
    let refused = visitor
        .post(
            &path,
            &[
                ("password", NEW_PASSWORD),
                ("confirm", "another one entirely"),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("differ"));
    let done = visitor
        .post(
            &path,
            &[("password", NEW_PASSWORD), ("confirm", NEW_PASSWORD)],
        )
        .await;
    assert_eq!(
        (done.status, done.location()),
        (StatusCode::SEE_OTHER, "/dashboard/sign-in?done=reset")
    );
    assert!(visitor.cookie.is_none(), "nobody is signed in by a reset");
    let notice = visitor.get("/dashboard/sign-in?done=reset").await;
    assert!(notice.body.contains("Your new password is set"));
    // Every session of the user ended.
    for b in [&mut first, &mut second] {
        let gone = b.get("/dashboard/").await;
        assert_eq!(
            (gone.status, gone.location()),
            (StatusCode::SEE_OTHER, "/dashboard/sign-in")
        );
    }
    assert_eq!(
        scalar(
            &app,
            "SELECT COUNT(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1",
            &address
        )
        .await,
        0
    );
    // One use: the link is gone, for its page and its post.
    let again = visitor.get(&path).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert!(again.body.contains("This link cannot be used"));
    let reuse = visitor
        .post(
            &path,
            &[
                ("password", "yet another password"),
                ("confirm", "yet another password"),
            ],
        )
        .await;
    assert_eq!(reuse.status, StatusCode::NOT_FOUND);
    // The old password is over, the new one works.
    let mut b = Browser::new(&app);
    assert_eq!(
        b.sign_in(&address, PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        b.sign_in(&address, NEW_PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(b.get("/dashboard/").await.status, StatusCode::OK);
    // A newer link replaces the older.
    ask_reset(&app, "192.0.2.3", &address).await;
    ask_reset(&app, "192.0.2.3", &address).await;
    let mails = sink.wait_for(3).await;
    let prefix = format!("{}/dashboard/reset/", app.base);
    // (Mailed in the background: the two may arrive in either order.)
    let links = [link_in(&mails[1], &prefix), link_in(&mails[2], &prefix)];
    assert_ne!(links[0], links[1]);
    let mut live = 0;
    for l in &links {
        let path = l.strip_prefix(&app.base).unwrap().to_owned();
        match Browser::new(&app).get(&path).await.status {
            StatusCode::OK => live += 1,
            StatusCode::NOT_FOUND => {}
            other => panic!("{other}"),
        }
    }
    assert_eq!(live, 1, "one live link per user");
    // Made-up tokens: the same page as a used one.
    for bad in ["nothing", &"ab".repeat(32)] {
        assert_eq!(
            Browser::new(&app)
                .get(&format!("/dashboard/reset/{bad}"))
                .await
                .status,
            StatusCode::NOT_FOUND
        );
    }
    app.stop().await;
}

async fn reset_link_expires_after_an_hour(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Invite).await;
    let address = email();
    let mut user = Browser::new(&app);
    user.join(&app, &address).await;
    assert_eq!(
        ask_reset(&app, "192.0.2.1", &address).await.status,
        StatusCode::SEE_OTHER
    );
    let mails = sink.wait_for(1).await;
    let link = link_in(&mails[0], &format!("{}/dashboard/reset/", app.base));
    let path = link.strip_prefix(&app.base).unwrap().to_owned();
    // Valid exactly one hour.
    assert_eq!(
        scalar(
            &app,
            "SELECT r.expires_at - r.created_at FROM password_resets r JOIN users u ON u.id = r.user_id \
             WHERE u.email = $1",
            &address
        )
        .await,
        3_600_000_000
    );
    assert_eq!(Browser::new(&app).get(&path).await.status, StatusCode::OK);
    // An hour later (the row's expiry moved back by one hour): gone, and the password stays.
    let pool = raw_pool(&app).await;
    sqlx::query("UPDATE password_resets SET expires_at = expires_at - 3600000000")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let mut b = Browser::new(&app);
    assert_eq!(b.get(&path).await.status, StatusCode::NOT_FOUND);
    let late = b
        .post(
            &path,
            &[("password", NEW_PASSWORD), ("confirm", NEW_PASSWORD)],
        )
        .await;
    assert_eq!(late.status, StatusCode::NOT_FOUND);
    assert!(late.body.contains("reset links last one hour"));
    assert_eq!(
        Browser::new(&app).sign_in(&address, PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    // The session the user had is still there: nothing happened.
    assert_eq!(user.get("/dashboard/").await.status, StatusCode::OK);
    app.stop().await;
}

async fn reset_link_is_spent_once_under_concurrency(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Invite).await;
    let address = email();
    Browser::new(&app).join(&app, &address).await;
    ask_reset(&app, "192.0.2.1", &address).await;
    let mails = sink.wait_for(1).await;
    let link = link_in(&mails[0], &format!("{}/dashboard/reset/", app.base));
    let path = link.strip_prefix(&app.base).unwrap().to_owned();
    let posts = (0..6).map(|i| {
        let mut b = Browser::new(&app);
        let path = path.clone();
        async move {
            let password = format!("parallel password {i}");
            let page = b
                .post(&path, &[("password", &password), ("confirm", &password)])
                .await;
            (page, password)
        }
    });
    let results = join_all(posts).await;
    let winners: Vec<&String> = results
        .iter()
        .filter(|(p, _)| p.status == StatusCode::SEE_OTHER)
        .map(|(_, pw)| pw)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one use");
    assert_eq!(
        results
            .iter()
            .filter(|(p, _)| p.status == StatusCode::NOT_FOUND)
            .count(),
        5
    );
    // The password is the winner's.
    assert_eq!(
        Browser::new(&app)
            .sign_in(&address, winners[0])
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    app.stop().await;
}

async fn forgot_password_is_throttled(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Invite).await;
    let address = email();
    Browser::new(&app).join(&app, &address).await;
    // One email from many addresses, at once: exactly 10 are taken.
    let asks = (0..14).map(|i| {
        let address = address.clone();
        let app = &app;
        async move { ask_reset(app, &format!("198.51.100.{i}"), &address).await }
    });
    let pages = join_all(asks).await;
    assert_eq!(count(&pages, StatusCode::SEE_OTHER), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 4);
    for p in pages
        .iter()
        .filter(|p| p.status == StatusCode::TOO_MANY_REQUESTS)
    {
        assert!(p.body.contains("Too many reset links"), "{}", p.body);
        assert!((1..=900).contains(&retry_after(p)));
    }
    // Ten mails, no more.
    sink.wait_for(10).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.messages().len(), 10);
    // An unknown email is throttled exactly the same (the answer says nothing about the email).
    let unknown = email();
    let asks = (0..14).map(|i| {
        let unknown = unknown.clone();
        let app = &app;
        async move { ask_reset(app, &format!("198.51.101.{i}"), &unknown).await }
    });
    let pages = join_all(asks).await;
    assert_eq!(count(&pages, StatusCode::SEE_OTHER), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 4);
    // One address across many emails: exactly 10.
    let asks = (0..13).map(|_| {
        let app = &app;
        async move { ask_reset(app, "203.0.113.9", &email()).await }
    });
    let pages = join_all(asks).await;
    assert_eq!(count(&pages, StatusCode::SEE_OTHER), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 3);
    // Reset requests have budgets of their own: sign-in from that address still works.
    assert_eq!(
        from(&app, "203.0.113.9")
            .sign_in(&address, PASSWORD)
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        sink.messages().len(),
        10,
        "nothing mailed to unknown emails"
    );
    app.stop().await;
}

async fn without_mail_forgot_password_says_ask_the_operator(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let address = email();
    Browser::new(&app).join(&app, &address).await;
    let mut b = Browser::new(&app);
    assert!(
        b.get("/dashboard/sign-in")
            .await
            .body
            .contains("Forgot password")
    );
    for page in [
        b.get("/dashboard/forgot-password").await,
        b.post("/dashboard/forgot-password", &[("email", &address)])
            .await,
    ] {
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains("Ask your operator"), "{}", page.body);
        assert!(!page.body.contains("Send reset link"));
        assert!(
            !page
                .body
                .contains("<form method=\"post\" action=\"/dashboard/forgot-password\"")
        );
    }
    assert_eq!(
        scalar(&app, "SELECT COUNT(*) FROM password_resets r JOIN users u ON u.id = r.user_id WHERE u.email = $1", &address).await,
        0
    );
    // A mail server that is down is no error page: the answer is the same.
    let dead = free_port();
    let port = free_port();
    let down = TestApp::with_settings(TestDb::new(engine).await, move |s| {
        s.listen = SocketAddr::from(([127, 0, 0, 1], port));
        s.public_url = Some(format!("http://127.0.0.1:{port}"));
        s.smtp_url = Some(SecretString::from(format!("smtp://127.0.0.1:{dead}")));
        s.mail_from = Some("no-reply@shortlink.test".to_owned());
    })
    .await;
    let address = email();
    Browser::new(&down).join(&down, &address).await;
    let page = Browser::new(&down)
        .post("/dashboard/forgot-password", &[("email", &address)])
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/dashboard/forgot-password?sent=1")
    );
    down.stop().await;
    app.stop().await;
}

async fn sign_up_when_open(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Open).await;
    let mut b = from(&app, "192.0.2.10");
    let sign_in = b.get("/dashboard/sign-in").await;
    assert!(
        sign_in
            .body
            .contains(r#"<a href="/dashboard/sign-up">Create account</a>"#),
        "{}",
        sign_in.body
    );
    let form = b.get("/dashboard/sign-up").await;
    assert_eq!(form.status, StatusCode::OK);
    for label in [
        r#"<label for="email">Email</label>"#,
        r#"<label for="new-password">Password</label>"#,
        r#"<label for="confirm-password">Confirm password</label>"#,
        r#"<button type="submit">Create account</button>"#,
    ] {
        assert!(form.body.contains(label), "{label}: {}", form.body);
    }
    let address = email();
    for (mail, password, confirm, message) in [
        (address.as_str(), PASSWORD, "something else!", "differ"),
        (address.as_str(), "short", "short", "at least 10 characters"),
        ("not-an-email", PASSWORD, PASSWORD, "valid email address"),
    ] {
        let page = b
            .post(
                "/dashboard/sign-up",
                &[
                    ("email", mail),
                    ("password", password),
                    ("confirm", confirm),
                ],
            )
            .await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.body.contains(message), "{message}: {}", page.body);
        assert!(b.cookie.is_none());
    }
    let made = b
        .post(
            "/dashboard/sign-up",
            &[
                ("email", &address.to_uppercase()),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(
        (made.status, made.location()),
        (StatusCode::SEE_OTHER, "/dashboard/?done=welcome")
    );
    assert!(b.cookie.is_some(), "signed in");
    let home = b.get("/dashboard/?done=welcome").await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(home.body.contains("Welcome: your account is ready"));
    assert!(home.body.contains(&address) && home.body.contains("owner"));
    // The account: named by the email, API access on, its default group, no API key; the user owns it; the
    // activity log has the join, by the new user.
    let account_id = {
        let pool = raw_pool(&app).await;
        let row: (String, String, i64) =
            sqlx::query_as("SELECT id, name, api_access FROM accounts WHERE email = $1")
                .bind(&address)
                .fetch_one(&pool)
                .await
                .unwrap();
        pool.close().await;
        assert_eq!((row.1.as_str(), row.2), (address.as_str(), 1));
        row.0
    };
    for (sql, want) in [
        (
            "SELECT COUNT(*) FROM groups WHERE account_id = $1 AND name = 'Default'",
            1,
        ),
        ("SELECT COUNT(*) FROM groups WHERE account_id = $1", 1),
        ("SELECT COUNT(*) FROM api_keys WHERE account_id = $1", 0),
        ("SELECT COUNT(*) FROM memberships WHERE account_id = $1", 1),
        (
            "SELECT COUNT(*) FROM memberships m JOIN users u ON u.id = m.user_id \
             JOIN accounts a ON a.id = m.account_id \
             WHERE m.account_id = $1 AND m.role = 'owner' AND u.email = a.email",
            1,
        ),
        (
            "SELECT COUNT(*) FROM audit_log WHERE account_id = $1 AND action = 'member.joined' \
             AND actor_type = 'user' AND target_id = actor_email",
            1,
        ),
    ] {
        assert_eq!(scalar(&app, sql, &account_id).await, want, "{sql}");
    }
    // The account's pages work for its owner, who may generate a key.
    let key = b.get("/dashboard/key").await;
    assert_eq!(key.status, StatusCode::OK);
    // Taken: the same email again (any case) is refused readably, nothing more is made.
    let mut other = from(&app, "192.0.2.11");
    let taken = other
        .post(
            "/dashboard/sign-up",
            &[
                ("email", &format!("  {}", address.to_uppercase())),
                ("password", "another password!"),
                ("confirm", "another password!"),
            ],
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert!(
        taken
            .body
            .contains("An account with this email exists already.")
    );
    assert!(
        taken
            .body
            .contains(r#"<a href="/dashboard/forgot-password">reset your password</a>"#)
    );
    assert!(other.cookie.is_none());
    assert_eq!(
        scalar(
            &app,
            "SELECT COUNT(*) FROM users WHERE email = $1",
            &address
        )
        .await,
        1
    );
    // An invited user's email, and an account's made by the operator, are taken too.
    let invited = email();
    Browser::new(&app).join(&app, &invited).await;
    let operators = email();
    app.db.create_account(&operators, true).await.unwrap();
    for e in [&invited, &operators] {
        let page = other
            .post(
                "/dashboard/sign-up",
                &[("email", e), ("password", PASSWORD), ("confirm", PASSWORD)],
            )
            .await;
        assert_eq!(page.status, StatusCode::CONFLICT, "{e}");
    }
    // A signed-in visitor is sent to their links.
    assert_eq!(b.get("/dashboard/sign-up").await.location(), "/dashboard/");
    // The new user signs out and in again with the password.
    let mut again = Browser::new(&app);
    assert_eq!(
        again.sign_in(&address, PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    // Sign-up mails nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sink.messages().is_empty());
    app.stop().await;
}

async fn sign_up_is_not_there_by_invitation_only(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    let sign_in = b.get("/dashboard/sign-in").await;
    assert!(!sign_in.body.contains("Create account"));
    assert!(!sign_in.body.contains("/dashboard/sign-up"));
    assert_eq!(
        b.get("/dashboard/sign-up").await.status,
        StatusCode::NOT_FOUND
    );
    let address = email();
    let post = b
        .post(
            "/dashboard/sign-up",
            &[
                ("email", &address),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(post.status, StatusCode::NOT_FOUND);
    assert!(b.cookie.is_none());
    assert_eq!(
        scalar(
            &app,
            "SELECT COUNT(*) FROM users WHERE email = $1",
            &address
        )
        .await,
        0
    );
    app.stop().await;
}

async fn sign_up_is_throttled_per_address(engine: Engine) {
    let app = app_with_mail(engine, None, SignupMode::Open).await;
    // Fifteen at once from one address, each for its own email: exactly ten accounts.
    let posts = (0..15).map(|_| {
        let mut b = from(&app, "198.51.100.20");
        async move {
            let address = email();
            let page = b
                .post(
                    "/dashboard/sign-up",
                    &[
                        ("email", &address),
                        ("password", PASSWORD),
                        ("confirm", PASSWORD),
                    ],
                )
                .await;
            (page, address)
        }
    });
    let results = join_all(posts).await;
    let pages: Vec<Page> = results
        .iter()
        .map(|(p, _)| Page {
            status: p.status,
            headers: p.headers.clone(),
            body: p.body.clone(),
        })
        .collect();
    let statuses: Vec<u16> = pages.iter().map(|p| p.status.as_u16()).collect();
    let odd: Vec<&str> = pages
        .iter()
        .filter(|p| ![StatusCode::SEE_OTHER, StatusCode::TOO_MANY_REQUESTS].contains(&p.status))
        .map(|p| p.body.as_str())
        .collect();
    assert_eq!(
        count(&pages, StatusCode::SEE_OTHER),
        10,
        "{statuses:?} {odd:?}"
    );
    assert_eq!(
        count(&pages, StatusCode::TOO_MANY_REQUESTS),
        5,
        "{statuses:?}"
    );
    for (p, address) in &results {
        let users = scalar(&app, "SELECT COUNT(*) FROM users WHERE email = $1", address).await;
        if p.status == StatusCode::TOO_MANY_REQUESTS {
            assert!(p.body.contains("Too many accounts"), "{}", p.body);
            assert!((1..=900).contains(&retry_after(p)));
            assert_eq!(users, 0, "a throttled sign-up makes nothing");
        } else {
            assert_eq!(users, 1);
        }
    }
    // The spent address cannot even ask about a taken email (every attempt counts, taken ones too).
    let (_, made) = results
        .iter()
        .find(|(p, _)| p.status == StatusCode::SEE_OTHER)
        .unwrap();
    let probe = from(&app, "198.51.100.20")
        .post(
            "/dashboard/sign-up",
            &[
                ("email", made),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(probe.status, StatusCode::TOO_MANY_REQUESTS);
    // Another address has its own budget; sign-in from the spent address is not affected.
    let mut elsewhere = from(&app, "198.51.100.21");
    let ok = elsewhere
        .post(
            "/dashboard/sign-up",
            &[
                ("email", &email()),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    assert_eq!(
        from(&app, "198.51.100.20")
            .sign_in(made, PASSWORD)
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    app.stop().await;
}

async fn invitation_mail_carries_a_working_link(engine: Engine) {
    let sink = SmtpSink::start();
    let app = app_with_mail(engine, Some(&sink), SignupMode::Invite).await;
    let mailer =
        mailer::Mailer::from_url(&sink.url(), "Shortlink <no-reply@shortlink.test>").unwrap();
    let address = email();
    let invite = app.db.invite(&address).await.unwrap();
    let url = format!("{}/dashboard/invite/{}", app.base, invite.token.expose());
    mailer
        .invitation(&address, "Acme & Co", "owner", &url, "2026-11-23 14:05 UTC")
        .await
        .unwrap();
    let mails = sink.wait_for(1).await;
    let mail = &mails[0];
    assert_eq!(mail["rcpt_tos"], serde_json::json!([address]));
    assert_eq!(
        mail["subject"],
        "You are invited to join Acme & Co on Shortlink"
    );
    assert!(mail["body"].as_str().unwrap().contains("as owner"));
    let link = link_in(mail, &format!("{}/dashboard/invite/", app.base));
    assert_eq!(link, url);
    let path = link.strip_prefix(&app.base).unwrap().to_owned();
    let mut b = Browser::new(&app);
    assert!(b.get(&path).await.body.contains("Accept invitation"));
    let joined = b
        .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(joined.status, StatusCode::SEE_OTHER);
    // A wrong login is a refusal the caller sees by kind, with no address in it.
    let wrong = mailer::Mailer::from_url(
        &format!("smtp://{SMTP_USER}:wrong@127.0.0.1:{}", sink.port),
        "no-reply@shortlink.test",
    )
    .unwrap();
    let e = wrong.password_reset(&address, &url).await.unwrap_err();
    assert_eq!(e.kind(), "send.permanent", "{e:?}");
    assert!(!e.to_string().contains(&address));
    assert_eq!(sink.messages().len(), 1);
    app.stop().await;
}

async fn mail_needs_a_sender_and_a_public_url(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let base = |s: &mut Settings| {
        s.smtp_url = Some(SecretString::from(
            "smtp://user:hunter2secret@127.0.0.1:2525",
        ));
        s.mail_from = Some("no-reply@shortlink.test".to_owned());
        s.public_url = Some("https://links-admin.example.com".to_owned());
    };
    let refused = |adjust: &dyn Fn(&mut Settings)| {
        let mut s = Settings::new(test_db.url.clone());
        base(&mut s);
        adjust(&mut s);
        async move {
            match Application::build(&s).await {
                Err(StartError::Config(m)) => m,
                other => panic!("a config error expected: {other:?}"),
            }
        }
    };
    let m = refused(&|s| s.mail_from = None).await;
    assert!(m.contains("--mail-from"), "{m}");
    let m = refused(&|s| s.public_url = None).await;
    assert!(m.contains("--public-url"), "{m}");
    let m = refused(&|s| s.mail_from = Some("not an address".to_owned())).await;
    assert!(m.contains("--mail-from"), "{m}");
    let m = refused(&|s| {
        s.smtp_url = Some(SecretString::from("smtp://user:hunter2secret@[broken:2525"))
    })
    .await;
    assert!(
        m.contains("--smtp-url") && !m.contains("hunter2secret"),
        "{m}"
    );
    let m =
        refused(&|s| s.smtp_url = Some(SecretString::from("imap://user:hunter2secret@x"))).await;
    assert!(m.contains("smtp://") && !m.contains("hunter2secret"), "{m}");
    // The binary says the same and exits non-zero, without the password.
    let out = Command::new(env!("CARGO_BIN_EXE_origin-api"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("DATABASE_URL", &test_db.url)
        .env("SMTP_URL", "smtp://user:hunter2secret@127.0.0.1:2525")
        .env_remove("MAIL_FROM")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--mail-from"), "{stderr}");
    assert!(!stderr.contains("hunter2secret"), "{stderr}");
    // --help names the settings and never shows the URL's value.
    let help = Command::new(env!("CARGO_BIN_EXE_origin-api"))
        .args(["serve", "--help"])
        .env("SMTP_URL", "smtp://user:hunter2secret@127.0.0.1:2525")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--smtp-url",
        "--mail-from",
        "--signup",
        "SMTP_URL",
        "invite",
        "open",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    assert!(!help.contains("hunter2secret"), "{help}");
}

async fn no_address_or_link_reaches_the_log(engine: Engine) {
    let sink = SmtpSink::start();
    let test_db = TestDb::new(engine).await;
    let smtp = sink.url();
    let server = start_server_with(
        &test_db.url,
        "trace",
        &[
            "--smtp-url",
            &smtp,
            "--mail-from",
            "no-reply@shortlink.test",
            "--public-url",
            "http://links-admin.shortlink.test",
            "--signup",
            "open",
        ],
        &[],
    )
    .await;
    let app = TestApp::on(test_db).await;
    let mut b = Browser::new(&app);
    b.base = server.base.clone();
    b.origin = Some(server.base.clone());
    let address = email();
    assert_eq!(
        b.post(
            "/dashboard/sign-up",
            &[
                ("email", &address),
                ("password", PASSWORD),
                ("confirm", PASSWORD)
            ],
        )
        .await
        .status,
        StatusCode::SEE_OTHER
    );
    let unknown = email();
    for e in [&address, &unknown] {
        let page = b.post("/dashboard/forgot-password", &[("email", e)]).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER);
    }
    let mails = sink.wait_for(1).await;
    let link = link_in(
        &mails[0],
        "http://links-admin.shortlink.test/dashboard/reset/",
    );
    let token = link.rsplit('/').next().unwrap().to_owned();
    // The failure of a message is logged too, by kind: a sink that is gone.
    drop(sink);
    b.post("/dashboard/forgot-password", &[("email", &address)])
        .await;
    let log_path = server.log.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    let log = loop {
        let log = std::fs::read_to_string(&log_path).unwrap();
        if log.contains("mail not sent") || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(log.contains("mail sent"), "{log}");
    assert!(
        log.contains("mail not sent") && log.contains("send.connection"),
        "{log}"
    );
    for (what, secret) in [
        ("email", address.as_str()),
        ("unknown email", unknown.as_str()),
        ("reset token", token.as_str()),
        ("SMTP password", SMTP_PASSWORD),
        ("password", PASSWORD),
    ] {
        assert!(!log.contains(secret), "the log holds the {what}");
    }
    drop(server);
    app.stop().await;
}
