//! What an attacker could do without credentials, and with a session, before the hardening issue: each test
//! failed on the code before its fix. Real parallel requests against a real origin, on both engines.
//! (Write limits, concurrent deletes and blocked fallbacks: `write_limits.rs`.)

use crate::common::{Engine, TestApp, TestDb, json, start_server_with};
use crate::dashboard::{Browser, PASSWORD, Page, email};
use futures::future::join_all;
use origin_api::retention::{self, Retention};
use origin_api::startup::{Application, Settings, StartError};
use reqwest::StatusCode;
use shortlink_store::Actor;
use shortlink_store::domain::Micros;
use std::time::Duration;

/// Raw clicks kept 90 days (the default), the activity log its default.
const CLICKS_90: Retention = Retention {
    click_days: 90,
    audit_days: 365,
};

both_engines!(
    made_up_invitations_cost_no_hash,
    password_hashing_is_bounded,
    sign_in_throttle_is_exact_under_concurrency,
    password_change_throttle_is_exact_under_concurrency,
    sensitive_actions_need_the_password,
    client_address_comes_from_the_trusted_hop,
    https_dashboards_send_hsts_and_forms_are_bounded,
    group_keys_are_never_cached,
    wrong_internal_secrets_are_throttled,
    maintenance_deletes_dead_sign_in_rows,
);

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

/// A browser whose proxy says it comes from `addr` (the app trusts `X-Forwarded-For`, one hop).
fn from(app: &TestApp, addr: &str) -> Browser {
    let mut b = Browser::new(app);
    b.extra
        .push(("x-forwarded-for".to_owned(), format!("10.9.9.9, {addr}")));
    b
}

async fn behind_proxy(engine: Engine, hash_concurrency: usize) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.client_ip_header = Some("X-Forwarded-For".to_owned());
        s.password_hash_concurrency = Some(hash_concurrency);
    })
    .await
}

/// Posts to an invitation with a token nobody was given are answered from the database alone: with room for
/// one hash at a time, 40 of them at once still all get the invitation's 404 page, none a "busy" 429.
async fn made_up_invitations_cost_no_hash(engine: Engine) {
    let app = behind_proxy(engine, 1).await;
    let posts = (0..40).map(|i| {
        let mut b = from(&app, &format!("198.51.100.{i}"));
        async move {
            let token: String = (0..64)
                .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
                .collect();
            b.post(
                &format!("/dashboard/invite/{token}"),
                &[("password", PASSWORD), ("confirm", PASSWORD)],
            )
            .await
        }
    });
    let pages = join_all(posts).await;
    assert_eq!(count(&pages, StatusCode::NOT_FOUND), 40);
    // A used invitation is as unknown as a made-up one.
    let address = email();
    let invite = app.db.invite(&address).await.unwrap();
    let path = format!("/dashboard/invite/{}", invite.token.expose());
    let mut b = Browser::new(&app);
    let first = b
        .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    let again = Browser::new(&app)
        .post(&path, &[("password", PASSWORD), ("confirm", PASSWORD)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    app.stop().await;
}

/// With room for one argon2 computation and 50 ms of waiting for it, 30 sign-ins at once (each from its own
/// address, so no throttle is involved) are either checked or told to come back with 429, `Retry-After` and a
/// readable page: never queued without bound.
async fn password_hashing_is_bounded(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.client_ip_header = Some("X-Forwarded-For".to_owned());
        s.password_hash_concurrency = Some(1);
        s.password_hash_wait = std::time::Duration::from_millis(50);
    })
    .await;
    let attempts = (0..30).map(|i| {
        let mut b = from(&app, &format!("203.0.113.{i}"));
        async move { b.sign_in(&email(), "not anybody's password").await }
    });
    let pages = join_all(attempts).await;
    let busy: Vec<&Page> = pages
        .iter()
        .filter(|p| p.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(count(&pages, StatusCode::UNAUTHORIZED) + busy.len(), 30);
    assert!(
        !busy.is_empty(),
        "30 checks of ≥ 15 ms each, one at a time, 50 ms of waiting"
    );
    for page in busy {
        assert_eq!(retry_after(page), 1);
        assert!(page.body.contains("Try again in a moment"), "{}", page.body);
    }
    app.stop().await;
}

/// 50 wrong passwords at once for one email: exactly 10 are checked (401), 40 are throttled (429) without a
/// check; then even the right password waits.
async fn sign_in_throttle_is_exact_under_concurrency(engine: Engine) {
    // Room for every check at once, so that none is "busy": the throttle alone decides.
    let app = behind_proxy(engine, 50).await;
    let address = email();
    Browser::new(&app).join(&app, &address).await;
    let attempts = (0..50).map(|i| {
        // Each from its own address: only the email's limit applies.
        let mut b = from(&app, &format!("192.0.2.{i}"));
        let address = address.clone();
        async move { b.sign_in(&address, "wrong password!").await }
    });
    let pages = join_all(attempts).await;
    assert_eq!(count(&pages, StatusCode::UNAUTHORIZED), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 40);
    for p in pages
        .iter()
        .filter(|p| p.status == StatusCode::TOO_MANY_REQUESTS)
    {
        assert!(p.body.contains("Too many failed sign-ins"));
        assert!((1..=900).contains(&retry_after(p)));
    }
    let right = from(&app, "192.0.2.200").sign_in(&address, PASSWORD).await;
    assert_eq!(right.status, StatusCode::TOO_MANY_REQUESTS);
    // The same from one address across many emails.
    let attempts = (0..30).map(|_| {
        let mut b = from(&app, "198.51.100.77");
        async move { b.sign_in(&email(), "wrong password!").await }
    });
    let pages = join_all(attempts).await;
    assert_eq!(count(&pages, StatusCode::UNAUTHORIZED), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 20);
    app.stop().await;
}

/// "Change password" checks the current password under the sign-in throttle: 30 wrong ones at once, exactly 10
/// checked; the sensitive actions then wait too (the same account's limit).
async fn password_change_throttle_is_exact_under_concurrency(engine: Engine) {
    let app = behind_proxy(engine, 50).await;
    let mut b = from(&app, "192.0.2.1");
    b.join(&app, &email()).await;
    let csrf = b.get("/dashboard/profile").await.csrf();
    let attempts = (0..30).map(|i| {
        let mut one = from(&app, &format!("203.0.113.{i}"));
        one.cookie = b.cookie.clone();
        let csrf = csrf.clone();
        async move {
            one.post(
                "/dashboard/profile/password",
                &[
                    ("csrf", csrf.as_str()),
                    ("current", "not my password"),
                    ("password", "a brand new password"),
                    ("confirm", "a brand new password"),
                ],
            )
            .await
        }
    });
    let pages = join_all(attempts).await;
    assert_eq!(count(&pages, StatusCode::UNPROCESSABLE_ENTITY), 10);
    assert_eq!(count(&pages, StatusCode::TOO_MANY_REQUESTS), 20);
    for p in pages
        .iter()
        .filter(|p| p.status == StatusCode::TOO_MANY_REQUESTS)
    {
        assert!(p.body.contains("Too many wrong passwords"), "{}", p.body);
        assert!((1..=900).contains(&retry_after(p)));
    }
    // The right password now waits as well, on the profile and on a sensitive action; nothing changes.
    let page = b
        .post(
            "/dashboard/profile/password",
            &[
                ("csrf", csrf.as_str()),
                ("current", PASSWORD),
                ("password", "a brand new password"),
                ("confirm", "a brand new password"),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    let page = b
        .post(
            "/dashboard/key/generate",
            &[("csrf", csrf.as_str()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(page.body.contains("Too many wrong passwords"));
    assert!(!page.body.contains("Your new API key"));
    app.stop().await;
}

/// Generating, regenerating and revoking the API key, rotating a group's key and deleting a group each ask for
/// the password on their confirmation page; without it, or with a wrong one, nothing happens.
async fn sensitive_actions_need_the_password(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let group = app
        .db
        .create_group(&account.id, "Signed", &Default::default(), &Actor::Operator)
        .await
        .unwrap();
    let csrf = b.get("/dashboard/key").await.csrf();
    let group_path = format!("/dashboard/groups/{}", group.id);
    for path in [
        "/dashboard/key/generate".to_owned(),
        "/dashboard/key/regenerate".to_owned(),
        "/dashboard/key/revoke".to_owned(),
        format!("{group_path}/rotate"),
        format!("{group_path}/delete"),
    ] {
        let confirm = b.get(&path).await;
        assert_eq!(confirm.status, StatusCode::OK, "{path}");
        assert!(
            confirm.body.contains(r#"autocomplete="current-password""#),
            "{path} asks for the password"
        );
        for password in ["", "not the password"] {
            let page = b
                .post(&path, &[("csrf", csrf.as_str()), ("password", password)])
                .await;
            assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "{path}");
            assert!(page.body.contains("The password is wrong"), "{path}");
            assert!(!page.body.contains("Your new API key"));
        }
    }
    // Nothing happened: no key, the group and its key as they were.
    assert!(app.db.api_key_info(&account.id).await.unwrap().is_none());
    let same = app.db.group(Some(&account.id), &group.id).await.unwrap();
    assert_eq!(same.key, group.key);
    // The right password does it.
    let shown = b
        .post(
            "/dashboard/key/generate",
            &[("csrf", csrf.as_str()), ("password", PASSWORD)],
        )
        .await;
    assert!(shown.body.contains("Your new API key"));
    let rotated = b
        .post(
            &format!("{group_path}/rotate"),
            &[("csrf", csrf.as_str()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(rotated.status, StatusCode::SEE_OTHER);
    assert_ne!(
        app.db
            .group(Some(&account.id), &group.id)
            .await
            .unwrap()
            .key,
        group.key
    );
    app.stop().await;
}

/// Behind one proxy that appends to `X-Forwarded-For`, the client is the right-most entry: rotating what the
/// client writes to the left does not get it a new allowance, on the sign-in throttle and on validate-dynamic.
/// IPv6 clients are counted per /64.
async fn client_address_comes_from_the_trusted_hop(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.client_ip_header = Some("X-Forwarded-For".to_owned());
        s.password_hash_concurrency = Some(16);
        s.validate_burst = 2;
        s.validate_per_minute = 1;
    })
    .await;
    let with_forged_left = |left: String, right: &str| {
        let mut b = Browser::new(&app);
        b.extra
            .push(("x-forwarded-for".to_owned(), format!("{left}, {right}")));
        b
    };
    for i in 0..10 {
        let page = with_forged_left(format!("1.2.3.{i}"), "203.0.113.7")
            .sign_in(&email(), "wrong password!")
            .await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
    let page = with_forged_left("9.9.9.9".to_owned(), "203.0.113.7")
        .sign_in(&email(), "wrong password!")
        .await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    let other = with_forged_left("9.9.9.9".to_owned(), "203.0.113.8")
        .sign_in(&email(), "wrong password!")
        .await;
    assert_eq!(other.status, StatusCode::UNAUTHORIZED, "another client");
    // A header value that is no address is ignored: the peer (127.0.0.1) is the client.
    let mut junk = Browser::new(&app);
    junk.extra
        .push(("x-forwarded-for".to_owned(), "not-an-address".to_owned()));
    assert_eq!(
        junk.sign_in(&email(), "wrong password!").await.status,
        StatusCode::UNAUTHORIZED
    );
    // IPv6: one /64, one allowance.
    for i in 1..=10 {
        let page = with_forged_left("::1".to_owned(), &format!("2001:db8:1:2::{i:x}"))
            .sign_in(&email(), "wrong password!")
            .await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
    let same_64 = with_forged_left("::1".to_owned(), "2001:db8:1:2:ffff:eeee:dddd:cccc")
        .sign_in(&email(), "wrong password!")
        .await;
    assert_eq!(same_64.status, StatusCode::TOO_MANY_REQUESTS);
    let next_64 = with_forged_left("::1".to_owned(), "2001:db8:1:3::1")
        .sign_in(&email(), "wrong password!")
        .await;
    assert_eq!(next_64.status, StatusCode::UNAUTHORIZED);
    // validate-dynamic: a burst of 2 per client, whatever the client writes on the left.
    let validate = |left: String| {
        app.client
            .post(app.url("/api/v1/public/links/validate-dynamic"))
            .header("x-forwarded-for", format!("{left}, 198.51.100.9"))
            .json(&serde_json::json!({"group_id": uuid::Uuid::new_v4().to_string(), "signature": "x"}))
            .send()
    };
    let mut statuses = Vec::new();
    for i in 0..4 {
        statuses.push(validate(format!("10.0.0.{i}")).await.unwrap().status());
    }
    assert_ne!(statuses[0], StatusCode::TOO_MANY_REQUESTS);
    assert_ne!(statuses[1], StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(statuses[2], StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(statuses[3], StatusCode::TOO_MANY_REQUESTS);
    app.stop().await;
}

/// Over https (the public URL says so) every dashboard answer carries HSTS; over plain http none does. A form
/// body over 16 KiB is refused with 413 and a page, not read.
async fn https_dashboards_send_hsts_and_forms_are_bounded(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.public_url = Some("https://links-admin.example.com".to_owned());
    })
    .await;
    let page = Browser::new(&app).get("/dashboard/sign-in").await;
    assert_eq!(
        page.headers.get("strict-transport-security").unwrap(),
        "max-age=31536000"
    );
    let big = "a".repeat(20 * 1024);
    let mut b = Browser::new(&app);
    b.origin = None;
    let page = b
        .post(
            "/dashboard/sign-in",
            &[("email", "x@example.com"), ("password", &big)],
        )
        .await;
    assert_eq!(page.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(page.body.contains("Form too large"));
    assert!(page.headers.get("strict-transport-security").is_some());
    app.stop().await;
    let plain = TestApp::spawn(engine).await;
    let page = Browser::new(&plain).get("/dashboard/sign-in").await;
    assert!(page.headers.get("strict-transport-security").is_none());
    // Just under the limit is read (and refused for what it says, not for its size).
    let mut b = Browser::new(&plain);
    let fits = "a".repeat(15 * 1024);
    let page = b
        .post(
            "/dashboard/sign-in",
            &[("email", "x@example.com"), ("password", &fits)],
        )
        .await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    plain.stop().await;
}

/// Every API answer that carries a group's signing key says `Cache-Control: no-store`.
async fn group_keys_are_never_cached(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let created = app
        .client
        .post(app.url("/api/v1/external/groups"))
        .header("Authorization", format!("Token {}", acc.key))
        .json(&serde_json::json!({"name": "Cached?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.headers()["cache-control"], "no-store");
    let (status, body) = json(created).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap();
    let path = format!("/api/v1/external/groups/{id}");
    let got = app.get(&acc.key, &path).await;
    assert_eq!(got.headers()["cache-control"], "no-store");
    let rotated = app
        .client
        .post(app.url(&format!("{path}/rotate-key")))
        .header("Authorization", format!("Token {}", acc.key))
        .send()
        .await
        .unwrap();
    assert_eq!(rotated.status(), 200);
    assert_eq!(rotated.headers()["cache-control"], "no-store");
    app.stop().await;
}

/// `serve` refuses an internal secret under 32 bytes; wrong secrets are throttled per address (the right one
/// never is); internal routes on an https public listener are warned about at start.
async fn wrong_internal_secrets_are_throttled(engine: Engine) {
    let db = TestDb::new(engine).await;
    let mut settings = Settings::new(db.url.clone());
    settings.internal_secret = Some("31-bytes-is-one-byte-too-short!".into());
    match Application::build(&settings).await {
        Err(StartError::Config(message)) => assert!(message.contains("32 bytes"), "{message}"),
        other => panic!("started with a short secret: {other:?}"),
    }
    let secret = "an-internal-secret-of-plenty-of-bytes-0123456789";
    let app = TestApp::with_settings(db, |s| s.internal_secret = Some(secret.into())).await;
    let resolve = |token: &str| {
        app.client
            .get(app.url("/internal/v1/links/sho.rt/abc"))
            .bearer_auth(token)
            .send()
    };
    let mut statuses = Vec::new();
    for i in 0..12 {
        statuses.push(resolve(&format!("guess-{i}")).await.unwrap());
    }
    let codes: Vec<u16> = statuses.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(&codes[..10], &[401; 10]);
    assert_eq!(&codes[10..], &[429, 429]);
    assert!(statuses[11].headers().contains_key("retry-after"));
    // The worker's right secret still gets through from the same address.
    assert_eq!(resolve(secret).await.unwrap().status(), 404);
    app.stop().await;

    // The warning, from the real process: internal routes on the public listener of an https origin.
    let db = TestDb::new(engine).await;
    let mut server = start_server_with(
        &db.url,
        "info",
        &["--public-url", "https://links-admin.example.com"],
        &[("INTERNAL_API_SECRET", secret)],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.contains("internal routes share the public listener"),
        "{log}"
    );
    let _ = server.child.kill();
    let _ = server.child.wait();
}

/// The hourly maintenance deletes expired invitations, sessions past their limits and throttle rows past their
/// window; live ones stay.
async fn maintenance_deletes_dead_sign_in_rows(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    app.db.invite(&email()).await.unwrap();
    for _ in 0..3 {
        let page = Browser::new(&app)
            .sign_in(&address, "wrong password!")
            .await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
    // Now: nothing is dead yet.
    let now = retention::prune(&app.db, CLICKS_90, Micros::now(), || true)
        .await
        .unwrap();
    assert_eq!(now.sign_in_rows, 0);
    assert_eq!(b.get("/dashboard/").await.status, StatusCode::OK);
    // 16 minutes on: the 3 failures, each counted for the email and the address.
    let later = |micros: i64| Micros(Micros::now().0 + micros);
    let pruned = retention::prune(&app.db, CLICKS_90, later(16 * 60 * 1_000_000), || true)
        .await
        .unwrap();
    assert_eq!(pruned.sign_in_rows, 6);
    // 25 hours on: the idle session; 73 hours on: the invitation.
    let pruned = retention::prune(&app.db, CLICKS_90, later(25 * 3_600 * 1_000_000), || true)
        .await
        .unwrap();
    assert_eq!(pruned.sign_in_rows, 1);
    let pruned = retention::prune(&app.db, CLICKS_90, later(73 * 3_600 * 1_000_000), || true)
        .await
        .unwrap();
    assert_eq!(pruned.sign_in_rows, 1);
    assert_eq!(
        b.get("/dashboard/").await.location(),
        "/dashboard/sign-in",
        "the session is gone"
    );
    app.stop().await;
}
