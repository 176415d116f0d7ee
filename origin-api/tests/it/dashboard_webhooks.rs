//! The dashboard's Webhooks page (issue 27) over HTTP, on both engines, against a real receiver on loopback (the
//! origin runs with `--webhooks-allow-private`): adding an endpoint (its signing secret shown once, never on a
//! reload), refusals shown on the form with what was typed (no events, a bad URL, the account's limit), the test
//! event signed with that secret and in the delivery log, redelivery, disable and enable (and what the page says
//! when the origin disabled it), changing it, rotating the secret, deleting it, paging the log, the activity rows
//! with the user's email, SSRF refusals without the flag, escaping, and another account's endpoint answering 404.
//! The role matrix and the CSRF refusals of every webhooks form are in `teams.rs`.

use crate::common::{Engine, TestApp, TestDb};
use crate::dashboard::{Browser, Page, email};
use axum::body::Bytes;
use axum::http::HeaderMap;
use reqwest::StatusCode;
use shortlink_store::{Actor, Attempted, EventType, NewWebhook};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use webhook_sender::WebhookSecret;

both_engines!(
    add_test_redeliver_rotate_delete,
    refusals_keep_what_was_typed,
    the_log_pages_and_says_why_disabled,
    ssrf_is_refused_without_the_flag,
    another_accounts_endpoint_is_not_found,
);

/// One request the receiver got: its Standard Webhooks headers and body.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: Vec<u8>,
}

impl Got {
    fn kind(&self) -> String {
        let v: serde_json::Value = serde_json::from_slice(&self.body).unwrap();
        v["type"].as_str().unwrap_or_default().to_owned()
    }

    /// The signature verifies under `secret` (the sender's own `v1` scheme).
    fn signed_with(&self, secret: &str) -> bool {
        let secret = WebhookSecret::parse(secret).unwrap();
        let ts: i64 = self.timestamp.parse().unwrap();
        let want = webhook_sender::sign(&secret, &self.id, ts, &self.body);
        self.signature.split(' ').any(|s| s == want)
    }
}

/// A small HTTP server on loopback answering 200 to everything and recording each request.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Got>>>,
    _stop: oneshot::Sender<()>,
}

impl Receiver {
    async fn start() -> Self {
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .fallback(
                |axum::extract::State(got): axum::extract::State<Arc<Mutex<Vec<Got>>>>,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    let h = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    got.lock().unwrap().push(Got {
                        id: h("webhook-id"),
                        timestamp: h("webhook-timestamp"),
                        signature: h("webhook-signature"),
                        body: body.to_vec(),
                    });
                    "ok"
                },
            )
            .with_state(got.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            url: format!("http://{addr}/hook"),
            got,
            _stop: stop,
        }
    }

    fn received(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (20 s at most) for the `n`th request.
    async fn wait_for(&self, n: usize) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "receiver: {n} requests did not come: {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// An origin whose webhooks may go to loopback (receivers in the test), with a fast delivery loop.
async fn app(engine: Engine) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.webhooks.allow_private = true;
        s.webhooks.poll_interval = Duration::from_millis(50);
        s.webhooks.timeout = Duration::from_secs(2);
    })
    .await
}

/// A signed-in owner of a new account, and the account's id.
async fn owner(app: &TestApp) -> (Browser, String, String) {
    let mut b = Browser::new(app);
    let address = email();
    b.join(app, &address).await;
    let account = app.db.find_account(&address).await.unwrap().id;
    (b, account, address)
}

/// Posts the add form; `events` are the checked boxes.
async fn add(b: &mut Browser, url: &str, description: &str, events: &[&str]) -> Page {
    let csrf = b.get("/dashboard/webhooks").await.csrf();
    let mut form = vec![
        ("csrf", csrf.as_str()),
        ("url", url),
        ("description", description),
    ];
    form.extend(events.iter().map(|e| ("events", *e)));
    b.post("/dashboard/webhooks", &form).await
}

/// The value of the read-only field `id` on a page.
fn field(page: &Page, id: &str) -> Option<String> {
    let at = page.body.find(&format!(r#"id="{id}""#))?;
    let rest = &page.body[at..];
    let v = rest.find(r#"value=""#)? + r#"value=""#.len();
    let rest = &rest[v..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// The id of the endpoint whose page this is (from its forms' actions).
fn endpoint_id(page: &Page) -> String {
    let at = page
        .body
        .find(r#"action="/dashboard/webhooks/"#)
        .unwrap_or_else(|| panic!("not an endpoint's page: {}", page.body))
        + r#"action="/dashboard/webhooks/"#.len();
    page.body[at..at + 36].to_owned()
}

/// The rows of the page's "Deliveries" table.
fn delivery_rows(page: &Page) -> Vec<String> {
    let Some(at) = page
        .body
        .find("<caption class=\"visually-hidden\">Deliveries</caption>")
    else {
        return Vec::new();
    };
    let table = &page.body[at..page.body[at..].find("</table>").unwrap() + at];
    table.split("<tr>").skip(2).map(str::to_owned).collect()
}

/// A form post with only the session's CSRF token.
async fn press(b: &mut Browser, path: &str) -> Page {
    let csrf = b.get("/dashboard/webhooks").await.csrf();
    b.post(path, &[("csrf", &csrf)]).await
}

async fn add_test_redeliver_rotate_delete(engine: Engine) {
    let app = app(engine).await;
    let receiver = Receiver::start().await;
    let (mut b, account, address) = owner(&app).await;

    // The page: heading, the form's fields, one box per event type, and the nav item.
    let page = b.get("/dashboard/webhooks").await;
    assert_eq!(page.status, StatusCode::OK);
    for text in [
        "<h1>Webhooks</h1>",
        r#"<label for="webhook-url">Endpoint URL</label>"#,
        r#"<label for="webhook-description">Description</label>"#,
        "<legend>Events</legend>",
        "Add endpoint",
        r#"href="/dashboard/webhooks" aria-current="page">Webhooks</a>"#,
    ] {
        assert!(page.body.contains(text), "{text}: {}", page.body);
    }
    for t in EventType::SUBSCRIBABLE {
        assert!(
            page.body
                .contains(&format!(r#"class="mono">{}</label>"#, t.as_str())),
            "{}",
            t.as_str()
        );
    }
    assert!(!page.body.contains("ping</label>"));

    // Added: the answer is the endpoint's page with the secret, once.
    let made = add(
        &mut b,
        &receiver.url,
        "CRM <script>alert(1)</script>",
        &["link.created", "link.clicked"],
    )
    .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.body);
    assert!(
        made.body
            .contains(r#"<label for="signing-secret">Signing secret</label>"#)
    );
    assert!(made.body.contains(r#"aria-label="Copy signing secret""#));
    let secret = field(&made, "signing-secret").unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(!made.body.contains("<script>alert"), "escaped");
    assert!(made.body.contains("&#60;script&#62;"), "{}", made.body);
    assert!(
        made.headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("no-store")
    );
    let id = endpoint_id(&made);
    let reload = b.get(&format!("/dashboard/webhooks/{id}")).await;
    assert_eq!(reload.status, StatusCode::OK);
    assert!(!reload.body.contains(&secret) && !reload.body.contains("signing-secret"));
    let list = b.get("/dashboard/webhooks").await;
    assert!(!list.body.contains(&secret));
    assert!(list.body.contains("Webhook endpoints"));
    let row = list
        .body
        .split("<tr>")
        .find(|r| r.contains(&receiver.url))
        .unwrap_or_else(|| panic!("no row: {}", list.body));
    for text in [
        "link.created, link.clicked",
        "CRM &#60;script&#62;",
        "Enabled",
    ] {
        assert!(row.contains(text), "{text}: {row}");
    }
    assert!(!list.body.contains("<script>alert"));

    // Send test event: a ping signed with that secret, in the log.
    let tested = press(&mut b, &format!("/dashboard/webhooks/{id}/test")).await;
    assert_eq!(tested.status, StatusCode::SEE_OTHER, "{}", tested.body);
    assert_eq!(
        tested.location(),
        format!("/dashboard/webhooks/{id}?done=tested")
    );
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].kind(), "ping");
    assert!(got[0].signed_with(&secret), "{got:?}");
    let page = b.get(tested.location()).await;
    assert!(page.body.contains("Test event delivered"), "{}", page.body);
    let rows = delivery_rows(&page);
    assert_eq!(rows.len(), 1, "{}", page.body);
    for text in [
        "UTC",
        ">ping<",
        ">1<",
        ">200<",
        " ms<",
        "Delivered",
        "Redeliver",
    ] {
        assert!(rows[0].contains(text), "{text}: {}", rows[0]);
    }
    for th in [
        "Time (UTC)",
        "Event type",
        "Attempt",
        "Status code",
        "Duration",
        "Error",
    ] {
        assert!(
            page.body.contains(&format!(r#"<th scope="col">{th}</th>"#)),
            "{th}"
        );
    }

    // Redeliver: the same event again.
    let event = got[0].id.clone();
    let again = press(
        &mut b,
        &format!("/dashboard/webhooks/{id}/deliveries/{event}/redeliver"),
    )
    .await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].id, event);
    assert!(got[1].signed_with(&secret));

    // Disable, then enable.
    let off = press(&mut b, &format!("/dashboard/webhooks/{id}/disable")).await;
    assert_eq!(off.status, StatusCode::SEE_OTHER);
    let page = b.get(off.location()).await;
    assert!(
        page.body.contains("Disabled by the account."),
        "{}",
        page.body
    );
    assert!(page.body.contains(">Enable</button>"));
    assert!(!page.body.contains(">Redeliver</button>"));
    let refused = press(
        &mut b,
        &format!("/dashboard/webhooks/{id}/deliveries/{event}/redeliver"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(refused.body.contains(r#"role="alert""#) && refused.body.contains("enable it"));
    let on = press(&mut b, &format!("/dashboard/webhooks/{id}/enable")).await;
    assert_eq!(on.status, StatusCode::SEE_OTHER);
    assert!(
        b.get(on.location())
            .await
            .body
            .contains(">Disable</button>")
    );

    // Change it.
    let csrf = reload.csrf();
    let saved = b
        .post(
            &format!("/dashboard/webhooks/{id}"),
            &[
                ("csrf", csrf.as_str()),
                ("url", receiver.url.as_str()),
                ("description", "Warehouse"),
                ("events", "group.deleted"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let e = app.db.webhook(&account, &id).await.unwrap();
    assert_eq!(
        (e.description.as_deref(), e.events.clone()),
        (Some("Warehouse"), vec![EventType::GroupDeleted])
    );
    let bad = b
        .post(
            &format!("/dashboard/webhooks/{id}"),
            &[
                ("csrf", csrf.as_str()),
                ("url", "nope"),
                ("events", "link.created"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains(r#"role="alert""#) && bad.body.contains(r#"value="nope""#));
    assert_eq!(app.db.webhook(&account, &id).await.unwrap(), e);

    // Rotate: confirmed, then the new secret once; later pings are signed with it.
    let confirm = b.get(&format!("/dashboard/webhooks/{id}/rotate")).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Rotate secret") && confirm.body.contains("Cancel"));
    let rotated = b
        .post(
            &format!("/dashboard/webhooks/{id}/rotate"),
            &[("csrf", &confirm.csrf())],
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.body);
    let new_secret = field(&rotated, "signing-secret").unwrap();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert!(
        !b.get(&format!("/dashboard/webhooks/{id}"))
            .await
            .body
            .contains(&new_secret)
    );
    press(&mut b, &format!("/dashboard/webhooks/{id}/test")).await;
    let got = receiver.wait_for(3).await;
    assert!(got[2].signed_with(&new_secret) && !got[2].signed_with(&secret));

    // Delete: confirmed; then it is gone.
    let confirm = b.get(&format!("/dashboard/webhooks/{id}/delete")).await;
    assert!(confirm.body.contains("Delete endpoint"));
    let deleted = b
        .post(
            &format!("/dashboard/webhooks/{id}/delete"),
            &[("csrf", &confirm.csrf())],
        )
        .await;
    assert_eq!(
        (deleted.status, deleted.location()),
        (StatusCode::SEE_OTHER, "/dashboard/webhooks?done=deleted")
    );
    assert_eq!(
        b.get(&format!("/dashboard/webhooks/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(app.db.webhooks(&account).await.unwrap().is_empty());

    // The activity log names the user for each change, never a secret.
    let activity = b.get("/dashboard/activity").await;
    for what in [
        "webhook.created",
        "webhook.updated",
        "webhook.secret_rotated",
        "webhook.deleted",
    ] {
        assert!(
            activity
                .body
                .split("<tr>")
                .any(|r| r.contains(what) && r.contains(&address)),
            "{what}: {}",
            activity.body
        );
    }
    assert!(!activity.body.contains("whsec_"));
}

async fn refusals_keep_what_was_typed(engine: Engine) {
    let app = app(engine).await;
    let (mut b, account, _) = owner(&app).await;
    // No event: an alert, and the URL and description as typed.
    let page = add(&mut b, "http://127.0.0.1:9/kept", "kept description", &[]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        page.body.contains(r#"role="alert""#) && page.body.contains("Choose at least one event")
    );
    assert!(page.body.contains(r#"value="http://127.0.0.1:9/kept""#));
    assert!(page.body.contains(r#"value="kept description""#));
    // A bad URL: the boxes stay checked.
    for (url, why) in [
        ("not a url", "absolute URL"),
        ("ftp://example.com/x", "must use https"),
        ("https://user:pw@example.com/", "user name or password"),
    ] {
        let page = add(&mut b, url, "", &["group.created", "link.deleted"]).await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        assert!(
            page.body.contains(r#"role="alert""#) && page.body.contains(why),
            "{url}: {}",
            page.body
        );
        assert!(
            page.body.contains(r#"value="group.created" checked"#),
            "{}",
            page.body
        );
        assert!(page.body.contains(r#"value="link.deleted" checked"#));
        assert!(!page.body.contains(r#"value="link.created" checked"#));
    }
    // Forged event names are refused readably.
    let page = add(&mut b, "http://127.0.0.1:9/x", "", &["ping"]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.body.contains(r#"role="alert""#));
    // A description over 500 characters: the store's refusal, readable.
    let long = "d".repeat(501);
    let page = add(&mut b, "http://127.0.0.1:9/x", &long, &["link.created"]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        page.body.contains("Description: at most 500 characters"),
        "{}",
        page.body
    );
    assert!(app.db.webhooks(&account).await.unwrap().is_empty());
    // At most 20: the 21st is refused on the form.
    for n in 0..20 {
        let page = add(
            &mut b,
            &format!("http://127.0.0.1:9/{n}"),
            "",
            &["link.created"],
        )
        .await;
        assert_eq!(page.status, StatusCode::OK, "{n}: {}", page.body);
    }
    let page = add(
        &mut b,
        "http://127.0.0.1:9/21",
        "one too many",
        &["link.created"],
    )
    .await;
    assert_eq!(page.status, StatusCode::CONFLICT);
    assert!(
        page.body.contains(r#"role="alert""#) && page.body.contains("20 endpoints"),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"value="one too many""#));
    assert_eq!(app.db.webhooks(&account).await.unwrap().len(), 20);
}

async fn the_log_pages_and_says_why_disabled(engine: Engine) {
    let app = app(engine).await;
    let (mut b, account, _) = owner(&app).await;
    let made = add(&mut b, "http://127.0.0.1:9/paged", "", &["link.created"]).await;
    let id = endpoint_id(&made);
    // 51 attempts (test pings recorded straight in the store): 50 on page 1, newest first; 1 on page 2.
    for n in 0..51u16 {
        let due = app
            .db
            .start_webhook_test(&account, &id, Duration::from_secs(60))
            .await
            .unwrap();
        let outcome = Attempted {
            status_code: Some(200 + n),
            duration_ms: 7,
            error: (n % 2 == 1).then(|| format!("HTTP {}", 200 + n)),
            success: n % 2 == 0,
        };
        app.db
            .record_webhook_attempt(&due, &outcome, None)
            .await
            .unwrap();
    }
    let first = b.get(&format!("/dashboard/webhooks/{id}")).await;
    let rows = delivery_rows(&first);
    assert_eq!(rows.len(), 50);
    assert!(rows[0].contains(">250<"), "newest first: {}", rows[0]);
    assert!(first.body.contains("Page 1 of 2 (51 attempts)"));
    assert!(first.body.contains(&format!(
        r#"href="/dashboard/webhooks/{id}?page=2" rel="next""#
    )));
    let second = b.get(&format!("/dashboard/webhooks/{id}?page=2")).await;
    let rows = delivery_rows(&second);
    assert_eq!(rows.len(), 1);
    assert!(rows[0].contains(">200<") && rows[0].contains("Delivered"));
    assert!(delivery_rows(&first)[1].contains("HTTP 249"));
    // Disabled by the origin after five days of failures: the list and the page say so, since when and why.
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    sqlx::query(
        "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = $1 WHERE id = $2",
    )
    .bind("failing continuously since 2026-11-18T09:30:00.000000Z; last error: connection refused")
    .bind(&id)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    for path in [
        "/dashboard/webhooks".to_owned(),
        format!("/dashboard/webhooks/{id}"),
    ] {
        let page = b.get(&path).await;
        for text in [
            "Disabled",
            "Disabled automatically",
            "2026-11-18 09:30 UTC",
            "Last error: connection refused",
        ] {
            assert!(page.body.contains(text), "{path}: {text}: {}", page.body);
        }
    }
}

async fn ssrf_is_refused_without_the_flag(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (mut b, account, _) = owner(&app).await;
    for (url, why) in [
        ("http://example.com/hook", "must use https"),
        ("https://127.0.0.1/hook", "non-public"),
        ("https://10.1.2.3/hook", "non-public"),
        ("https://[::1]/hook", "non-public"),
        ("https://169.254.169.254/latest", "non-public"),
        ("https://localhost/hook", "non-public"),
    ] {
        let page = add(&mut b, url, "", &["link.created"]).await;
        assert_eq!(
            page.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{url}: {}",
            page.body
        );
        assert!(
            page.body.contains(r#"role="alert""#) && page.body.contains(why),
            "{url}: {}",
            page.body
        );
    }
    assert!(app.db.webhooks(&account).await.unwrap().is_empty());
}

async fn another_accounts_endpoint_is_not_found(engine: Engine) {
    let app = app(engine).await;
    let (mut one, _, _) = owner(&app).await;
    let (_, theirs, _) = owner(&app).await;
    let new = NewWebhook {
        url: "http://127.0.0.1:9/theirs".to_owned(),
        events: vec![EventType::LinkCreated],
        description: Some("theirs".to_owned()),
        secret: WebhookSecret::generate().expose().to_owned(),
    };
    let e = app
        .db
        .create_webhook(&theirs, &new, &Actor::ApiKey)
        .await
        .unwrap();
    let due = app
        .db
        .start_webhook_test(&theirs, &e.id, Duration::from_secs(60))
        .await
        .unwrap();
    let event = due.event_id.clone();
    let outcome = Attempted {
        status_code: Some(200),
        duration_ms: 1,
        error: None,
        success: true,
    };
    app.db
        .record_webhook_attempt(&due, &outcome, None)
        .await
        .unwrap();
    let base = format!("/dashboard/webhooks/{}", e.id);
    for path in [
        base.clone(),
        format!("{base}/rotate"),
        format!("{base}/delete"),
    ] {
        let page = one.get(&path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "GET {path}");
        assert!(page.body.contains("not yours"));
    }
    let csrf = one.get("/dashboard/webhooks").await.csrf();
    for path in [
        base.clone(),
        format!("{base}/test"),
        format!("{base}/enable"),
        format!("{base}/disable"),
        format!("{base}/rotate"),
        format!("{base}/delete"),
        format!("{base}/deliveries/{event}/redeliver"),
    ] {
        let page = one
            .post(
                &path,
                &[
                    ("csrf", csrf.as_str()),
                    ("url", "http://127.0.0.1:9/mine"),
                    ("events", "link.created"),
                ],
            )
            .await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "POST {path}");
    }
    // Nor a made-up or malformed id.
    for path in [
        "/dashboard/webhooks/00000000-0000-4000-8000-000000000000",
        "/dashboard/webhooks/not-an-id",
    ] {
        assert_eq!(one.get(path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(app.db.webhook(&theirs, &e.id).await.unwrap(), e);
    assert_eq!(
        app.db
            .webhook_attempts(&theirs, &e.id, 10, 0)
            .await
            .unwrap()
            .total,
        1
    );
    assert!(!one.get("/dashboard/webhooks").await.body.contains("theirs"));
}
