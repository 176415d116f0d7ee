//! Webhooks (issue 27) against real receivers on loopback: every event type signed and checked by an independent
//! implementation (PyPI's `standardwebhooks`, `tests/support/verify_webhook.py`), retries on 500 and timeouts, the
//! Standard Webhooks schedule, the drop after the last retry, disabling after five days of failures, ordering per
//! link under retries, two origins on one database never sending one attempt twice, SSRF refusals without
//! `--webhooks-allow-private` (at creation and at delivery), isolation between accounts, no event for a refused
//! change, redelivery and test pings, retention, and no secret in a trace-level log.
//!
//! The origin runs with test settings ([`fast`]): private targets allowed (receivers are on 127.0.0.1), the retry
//! schedule scaled by 1/1000 (5 ms, 300 ms, 1.8 s, …), a 50 ms poll and a 1 s timeout. The schedule itself is
//! checked unscaled, on the stored times of the next attempts.

use crate::common::{Account, Engine, TestApp, TestDb, assert_error, json, start_server_with};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use origin_api::retention::{self, Retention};
use origin_api::startup::{Application, Settings};
use origin_api::webhooks::WebhookSettings;
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::Micros;
use shortlink_store::{ClickEvent, Db, Device};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

const HOOKS: &str = "/api/v1/external/webhooks";
const ALL: [&str; 7] = [
    "link.created",
    "link.updated",
    "link.deleted",
    "link.clicked",
    "group.created",
    "group.updated",
    "group.deleted",
];
const DAY_MICROS: i64 = 86_400_000_000;
const HOST: &str = "hooks.sho.rt";

// --- receivers -------------------------------------------------------------------------------------------------

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    content_type: String,
    user_agent: String,
    body: Vec<u8>,
    json: Value,
    at: Instant,
}

impl Received {
    fn kind(&self) -> &str {
        self.json["type"].as_str().unwrap_or_default()
    }
}

/// How a receiver answers one request.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Status(u16),
    /// Answers 200 after this long (longer than the origin's timeout: a timeout).
    Sleep(Duration),
}

/// Decides the answer to a request, given it and how many requests came before it.
type Script = Arc<dyn Fn(&Received, usize) -> Reply + Send + Sync>;

/// A small HTTP server on loopback that records every request and answers by its script.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
    /// Most requests being answered at once.
    max_in_flight: Arc<AtomicUsize>,
    _stop: oneshot::Sender<()>,
}

impl Receiver {
    async fn start(script: Script) -> Self {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let max_in_flight: Arc<AtomicUsize> = Arc::default();
        let in_flight: Arc<AtomicUsize> = Arc::default();
        let counters = (in_flight, max_in_flight.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let state = (got.clone(), script, counters);
        type ReceiverState = (
            Arc<Mutex<Vec<Received>>>,
            Script,
            (Arc<AtomicUsize>, Arc<AtomicUsize>),
        );
        let app = axum::Router::new().fallback(
            |axum::extract::State((got, script, (in_flight, max))): axum::extract::State<
                ReceiverState,
            >,
             headers: HeaderMap,
             body: Bytes| async move {
                let now = in_flight.fetch_add(1, SeqCst) + 1;
                max.fetch_max(now, SeqCst);
                let header = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let r = Received {
                    id: header("webhook-id"),
                    timestamp: header("webhook-timestamp"),
                    signature: header("webhook-signature"),
                    content_type: header("content-type"),
                    user_agent: header("user-agent"),
                    json: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    body: body.to_vec(),
                    at: Instant::now(),
                };
                let reply = {
                    let mut got = got.lock().unwrap();
                    let reply = script(&r, got.len());
                    got.push(r);
                    reply
                };
                let status = match reply {
                    Reply::Status(s) => StatusCode::from_u16(s).unwrap(),
                    Reply::Sleep(d) => {
                        tokio::time::sleep(d).await;
                        StatusCode::OK
                    }
                };
                in_flight.fetch_sub(1, SeqCst);
                status
            },
        );
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app.with_state(state))
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            url: format!("http://{addr}/hook"),
            got,
            max_in_flight,
            _stop: stop,
        }
    }

    /// A receiver answering 200 to everything.
    async fn ok() -> Self {
        Self::start(Arc::new(|_, _| Reply::Status(200))).await
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (20 s at most) until `done` holds of what was received, and returns it.
    async fn wait(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.received();
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "receiver: {what} did not happen; got {:?}",
                got.iter()
                    .map(|r| (r.kind().to_owned(), r.id.clone()))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_for(&self, n: usize) -> Vec<Received> {
        self.wait(&format!("{n} requests"), |g| g.len() >= n).await
    }
}

/// The independent check: `verify_webhook.py` (PyPI `standardwebhooks`) accepts the delivery under `secret`.
fn verify(secret: &str, r: &Received) {
    use std::io::Write;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/support/verify_webhook.py"
    );
    let mut child = std::process::Command::new("python3")
        .args([script, secret, &r.id, &r.timestamp, &r.signature])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed to verify webhook signatures (see README, Tests)");
    child.stdin.take().unwrap().write_all(&r.body).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "the Python package standardwebhooks is missing: python3 -m pip install -r tests/support/requirements-webhooks.txt"
    );
    assert!(
        out.status.success(),
        "standardwebhooks refused the delivery {}: {stderr}",
        r.id
    );
}

// --- origins ---------------------------------------------------------------------------------------------------

/// The test settings: receivers on loopback, a 1/1000 schedule, a fast poll, a 1 s timeout.
fn fast(s: &mut Settings) {
    s.webhooks = WebhookSettings {
        allow_private: true,
        retry_scale: 0.001,
        poll_interval: Duration::from_millis(50),
        timeout: Duration::from_secs(1),
    };
}

async fn app(engine: Engine) -> TestApp {
    let app = TestApp::with_settings(TestDb::new(engine).await, fast).await;
    app.platform_domain(HOST).await;
    app
}

/// Another origin (`serve`) on the same database, until the returned sender is dropped or fired.
async fn another_origin(
    url: &str,
    adjust: impl FnOnce(&mut Settings),
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let mut settings = Settings::new(url);
    adjust(&mut settings);
    let origin = Application::build(&settings).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        origin
            .run_until(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (stop, task)
}

/// Raw SQL on the test's database (to move times back, read states).
async fn pool(app: &TestApp) -> sqlx::AnyPool {
    sqlx::AnyPool::connect(&app.test_db.url).await.unwrap()
}

async fn call(
    app: &TestApp,
    method: Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    app.send(method, key, path, body).await
}

/// Creates an endpoint for `url` subscribed to `events`; returns (id, secret).
async fn endpoint(app: &TestApp, acc: &Account, url: &str, events: &[&str]) -> (String, String) {
    let (s, body) = call(
        app,
        Method::POST,
        &acc.key,
        HOOKS,
        Some(json!({ "url": url, "events": events })),
    )
    .await;
    assert_eq!(s, 201, "{body}");
    (
        body["id"].as_str().unwrap().to_owned(),
        body["secret"].as_str().unwrap().to_owned(),
    )
}

async fn create_link(app: &TestApp, acc: &Account, long_url: &str) -> Value {
    let (s, body) = app
        .create_json(&acc.key, json!({ "long_url": long_url }))
        .await;
    assert_eq!(s, 201, "{body}");
    body
}

async fn get_link(app: &TestApp, acc: &Account, id: &str) -> Value {
    let (s, body) = call(
        app,
        Method::GET,
        &acc.key,
        &format!("/api/v1/external/links/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    body
}

async fn patch_link(app: &TestApp, acc: &Account, id: &str, patch: Value) -> Value {
    let (s, body) = call(
        app,
        Method::PATCH,
        &acc.key,
        &format!("/api/v1/external/links/{id}"),
        Some(patch),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    body
}

/// The endpoint's delivery log (at most 100 attempts), newest first.
async fn attempts(app: &TestApp, acc: &Account, endpoint: &str) -> Vec<Value> {
    let (s, body) = call(
        app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{endpoint}/deliveries?limit=100"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    body["results"].as_array().unwrap().clone()
}

fn of_link<'a>(got: &'a [Received], link: &str) -> Vec<&'a Received> {
    got.iter()
        .filter(|r| r.json["data"]["id"] == link || r.json["data"]["link_id"] == link)
        .collect()
}

// --- the API ---------------------------------------------------------------------------------------------------

async fn endpoints_api(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let receiver = Receiver::ok().await;

    // Creation: 201, the secret once, events in their order, duplicates collapsed.
    let (s, created) = call(
        &app,
        Method::POST,
        &acc.key,
        HOOKS,
        Some(
            json!({"url": receiver.url, "events": ["link.clicked", "link.created", "link.clicked"],
                    "description": " CRM "}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let mut keys: Vec<&str> = created
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "created_at",
            "description",
            "disabled_reason",
            "enabled",
            "events",
            "failing_since",
            "id",
            "secret",
            "url"
        ]
    );
    assert_eq!(created["events"], json!(["link.created", "link.clicked"]));
    assert_eq!(created["description"], "CRM");
    assert_eq!(created["enabled"], true);
    assert_eq!(created["url"], receiver.url);
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let id = created["id"].as_str().unwrap().to_owned();

    // Reads never carry the secret.
    let (s, list) = call(&app, Method::GET, &acc.key, HOOKS, None).await;
    assert_eq!(s, 200);
    assert_eq!(list["results"].as_array().unwrap().len(), 1);
    assert!(!list.to_string().contains(&secret));
    assert!(list["results"][0].get("secret").is_none());
    let (s, one) = call(&app, Method::GET, &acc.key, &format!("{HOOKS}/{id}"), None).await;
    assert_eq!(s, 200);
    assert!(one.get("secret").is_none());
    assert_eq!(one["id"], id);

    // PATCH: events, description removed; {} changes nothing; unknown fields refused.
    let (s, patched) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{id}"),
        Some(json!({"events": ALL, "description": null})),
    )
    .await;
    assert_eq!(s, 200, "{patched}");
    assert_eq!(patched["events"], json!(ALL));
    assert_eq!(patched["description"], Value::Null);
    let (s, same) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{id}"),
        Some(json!({})),
    )
    .await;
    assert_eq!((s, &same), (200, &patched));
    let (s, body) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{id}"),
        Some(json!({"secret": "x"})),
    )
    .await;
    assert_error(s, &body, 400, "validation_error");

    // Unknown event types, ping, none: 400 unknown_event_type.
    for events in [json!(["link.exploded"]), json!(["ping"]), json!([])] {
        let (s, body) = call(
            &app,
            Method::POST,
            &acc.key,
            HOOKS,
            Some(json!({"url": receiver.url, "events": events})),
        )
        .await;
        assert_error(s, &body, 400, "unknown_event_type");
    }
    let (s, body) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{id}"),
        Some(json!({"events": ["nope"]})),
    )
    .await;
    assert_error(s, &body, 400, "unknown_event_type");
    // Bad URLs even with the flag: not http(s), credentials, too long, a name that does not resolve.
    for url in [
        "ftp://127.0.0.1/hook".to_owned(),
        "http://user:pw@127.0.0.1/hook".to_owned(),
        format!("http://127.0.0.1/{}", "a".repeat(2048)),
        "not a url".to_owned(),
        "http://does-not-exist.invalid/hook".to_owned(),
    ] {
        let (s, body) = call(
            &app,
            Method::POST,
            &acc.key,
            HOOKS,
            Some(json!({"url": url, "events": ["link.created"]})),
        )
        .await;
        assert_error(s, &body, 400, "invalid_webhook_url");
    }
    let (s, body) = call(
        &app,
        Method::POST,
        &acc.key,
        HOOKS,
        Some(json!({"url": receiver.url, "events": ["link.created"], "description": "a".repeat(501)})),
    )
    .await;
    assert_error(s, &body, 400, "validation_error");

    // Rotation: a new secret, shown once; deliveries are signed with it.
    let (s, rotated) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{id}/rotate-secret"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{rotated}");
    let new_secret = rotated["secret"].as_str().unwrap().to_owned();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    create_link(&app, &acc, "https://example.com/rotated").await;
    let got = receiver.wait_for(1).await;
    verify(&new_secret, &got[0]);

    // The activity log has each change, never a secret.
    let (_, log) = call(
        &app,
        Method::GET,
        &acc.key,
        "/api/v1/external/audit-log?limit=100",
        None,
    )
    .await;
    let actions: Vec<&str> = log["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["action"].as_str().filter(|a| a.starts_with("webhook.")))
        .collect();
    assert_eq!(
        actions,
        [
            "webhook.secret_rotated",
            "webhook.updated",
            "webhook.created"
        ]
    );
    assert!(!log.to_string().contains(&secret) && !log.to_string().contains(&new_secret));

    // Delete: 204, then 404; the answers are never cached.
    let resp = app
        .client
        .delete(app.url(&format!("{HOOKS}/{id}")))
        .header("Authorization", format!("Token {}", acc.key))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let (s, body) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("{HOOKS}/{id}"),
        None,
    )
    .await;
    assert_error(s, &body, 404, "not_found");
    for path in [
        format!("{HOOKS}/{id}"),
        format!("{HOOKS}/not-a-uuid"),
        format!("{HOOKS}/{id}/deliveries"),
    ] {
        let (s, body) = call(&app, Method::GET, &acc.key, &path, None).await;
        assert_error(s, &body, 404, "not_found");
    }
    app.stop().await;
}

/// 20 endpoints per account, exact when 25 creations race.
async fn twenty_endpoints_at_most(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let receiver = Receiver::ok().await;
    let answers = futures::future::join_all((0..25).map(|_| {
        call(
            &app,
            Method::POST,
            &acc.key,
            HOOKS,
            Some(json!({"url": receiver.url, "events": ["link.created"]})),
        )
    }))
    .await;
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 20, "{answers:?}");
    for (s, body) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_error(*s, body, 409, "webhook_limit");
    }
    let (_, list) = call(&app, Method::GET, &acc.key, HOOKS, None).await;
    assert_eq!(list["results"].as_array().unwrap().len(), 20);
    app.stop().await;
}

// --- events ----------------------------------------------------------------------------------------------------

async fn every_event_type_is_signed_and_verified(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let receiver = Receiver::ok().await;
    let (hook, secret) = endpoint(&app, &acc, &receiver.url, &ALL).await;

    let created = create_link(&app, &acc, "https://example.com/a").await;
    let link = created["id"].as_str().unwrap().to_owned();
    let as_created = get_link(&app, &acc, &link).await;
    let updated = patch_link(
        &app,
        &acc,
        &link,
        json!({"long_url": "https://example.com/b"}),
    )
    .await;
    let paused = patch_link(&app, &acc, &link, json!({"is_active": false})).await;
    // Two clicks of one report (straight into the store, as the internal route would).
    let now_ms = Micros::now().0 / 1_000;
    let click = |country: &str, device: Device, referer: Option<&str>| ClickEvent {
        host: HOST.to_owned(),
        short_code: Some(created["short_code"].as_str().unwrap().to_owned()),
        group_id: acc.default_group_id.clone(),
        at: now_ms,
        country: Some(country.to_owned()),
        referer_host: referer.map(str::to_owned),
        device,
        id: None,
        ..Default::default()
    };
    app.db
        .record_clicks(
            None,
            vec![
                click("DE", Device::Mobile, Some("news.example")),
                click("FR", Device::Desktop, None),
            ],
        )
        .await
        .unwrap();
    receiver
        .wait("the clicks", |g| {
            g.iter().any(|r| r.kind() == "link.clicked")
        })
        .await;
    let (s, _) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("/api/v1/external/links/{link}"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, group) = call(
        &app,
        Method::POST,
        &acc.key,
        "/api/v1/external/groups",
        Some(json!({"name": "Spring"})),
    )
    .await;
    assert_eq!(s, 201);
    let group_id = group["id"].as_str().unwrap().to_owned();
    let (s, renamed) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("/api/v1/external/groups/{group_id}"),
        Some(json!({"name": "Summer"})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("/api/v1/external/groups/{group_id}"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, ping) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{hook}/test"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{ping}");
    assert_eq!(ping["success"], true);
    assert_eq!(ping["status_code"], 200);

    let got = receiver.wait_for(9).await;
    assert_eq!(got.len(), 9, "one request per event, no more");
    for r in &got {
        verify(&secret, r);
        assert!(r.id.starts_with("msg_") && r.id.len() == 36, "{}", r.id);
        assert_eq!(r.content_type, "application/json");
        assert!(
            r.user_agent.starts_with("Shortlink-Webhooks/"),
            "{}",
            r.user_agent
        );
        let keys: Vec<&String> = r.json.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3, "type, timestamp, data: {}", r.json);
        assert!(r.json["timestamp"].as_str().unwrap().ends_with('Z'));
    }
    let ids: std::collections::BTreeSet<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 9, "each event has its own id");
    let by_kind =
        |kind: &str| -> Vec<&Received> { got.iter().filter(|r| r.kind() == kind).collect() };

    // Link events: the link as listed, after the change; the last state for the deletion.
    let link_events: Vec<(&str, &Value)> = of_link(&got, &link)
        .iter()
        .map(|r| (r.kind(), &r.json["data"]))
        .collect();
    assert_eq!(
        link_events.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [
            "link.created",
            "link.updated",
            "link.updated",
            "link.clicked",
            "link.deleted"
        ],
        "one link's events in commit order"
    );
    assert_eq!(link_events[0].1, &as_created);
    assert_eq!(link_events[1].1, &updated);
    assert_eq!(link_events[2].1, &paused);
    assert_eq!(
        link_events[4].1, &paused,
        "link.deleted carries the last state"
    );
    let clicked = &by_kind("link.clicked")[0].json["data"];
    assert_eq!(clicked["link_id"], link);
    let clicks = clicked["clicks"].as_array().unwrap();
    assert_eq!(clicks.len(), 2, "one event for the report: {clicked}");
    assert_eq!(clicks[0]["country"], "DE");
    assert_eq!(clicks[0]["device"], "mobile");
    assert_eq!(clicks[0]["referer_host"], "news.example");
    assert_eq!(clicks[1]["referer_host"], Value::Null);
    let mut fields: Vec<&str> = clicks[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["country", "device", "referer_host", "timestamp"],
        "never an address"
    );

    // Group events: the group without its key.
    let gc = &by_kind("group.created")[0].json["data"];
    assert_eq!(gc["id"], group_id);
    assert_eq!(gc["name"], "Spring");
    assert!(gc.get("key").is_none() && !gc.to_string().contains(group["key"].as_str().unwrap()));
    assert_eq!(
        by_kind("group.updated")[0].json["data"]["name"],
        renamed["name"]
    );
    let gd = &by_kind("group.deleted")[0].json["data"];
    assert_eq!(gd["name"], "Summer");
    assert_eq!(gd["links_moved"], 0);
    assert_eq!(gd["links_moved_to"], acc.default_group_id);
    assert_eq!(
        by_kind("ping")[0].json["data"],
        json!({"endpoint_id": hook})
    );
    assert_eq!(by_kind("ping")[0].id, ping["event_id"].as_str().unwrap());

    // The delivery log: one successful attempt per event, newest first.
    let log = attempts(&app, &acc, &hook).await;
    assert_eq!(log.len(), 9);
    for a in &log {
        assert_eq!(a["attempt"], 1);
        assert_eq!(a["status_code"], 200);
        assert_eq!(a["error"], Value::Null);
    }
    // Newest first by the attempt's time (the ping is sent at once, so it may overtake the group's deletion
    // that the delivery worker sends).
    let at: Vec<&str> = log.iter().map(|a| a["at"].as_str().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] >= w[1]), "newest first: {at:?}");
    let mut kinds: Vec<&str> = log
        .iter()
        .map(|a| a["event_type"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "group.created",
            "group.deleted",
            "group.updated",
            "link.clicked",
            "link.created",
            "link.deleted",
            "link.updated",
            "link.updated",
            "ping"
        ]
    );
    app.stop().await;
}

/// An endpoint gets only the types it subscribed to; a disabled one nothing.
async fn subscriptions_filter_events(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let creations = Receiver::ok().await;
    let groups = Receiver::ok().await;
    endpoint(&app, &acc, &creations.url, &["link.created"]).await;
    endpoint(&app, &acc, &groups.url, &["group.created"]).await;
    let link = create_link(&app, &acc, "https://example.com/sub").await;
    patch_link(
        &app,
        &acc,
        link["id"].as_str().unwrap(),
        json!({"is_active": false}),
    )
    .await;
    let (s, _) = call(
        &app,
        Method::POST,
        &acc.key,
        "/api/v1/external/groups",
        Some(json!({"name": "G"})),
    )
    .await;
    assert_eq!(s, 201);
    creations.wait_for(1).await;
    groups.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        creations
            .received()
            .iter()
            .map(Received::kind)
            .collect::<Vec<_>>(),
        ["link.created"]
    );
    assert_eq!(
        groups
            .received()
            .iter()
            .map(Received::kind)
            .collect::<Vec<_>>(),
        ["group.created"]
    );
    app.stop().await;
}

// --- retries, schedule, health ---------------------------------------------------------------------------------

async fn retries_on_500_and_timeouts_then_success(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    // A 500, then a timeout (the origin waits 1 s), then success.
    let receiver = Receiver::start(Arc::new(|_, n| match n {
        0 => Reply::Status(500),
        1 => Reply::Sleep(Duration::from_secs(3)),
        _ => Reply::Status(204),
    }))
    .await;
    let (hook, secret) = endpoint(&app, &acc, &receiver.url, &["link.created"]).await;
    create_link(&app, &acc, "https://example.com/retry").await;
    let got = receiver.wait_for(3).await;
    assert!(
        got.iter().all(|r| r.id == got[0].id),
        "one event, three attempts"
    );
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the same body each time"
    );
    for r in &got {
        verify(&secret, r);
    }
    // The log, newest first: success, timeout, 500.
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = attempts(&app, &acc, &hook).await;
        if log.len() == 3 || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(
        (
            log[0]["attempt"].clone(),
            log[0]["status_code"].clone(),
            log[0]["error"].clone()
        ),
        (json!(3), json!(204), Value::Null)
    );
    assert_eq!(log[1]["attempt"], 2);
    assert_eq!(log[1]["status_code"], Value::Null);
    assert!(
        log[1]["error"].as_str().unwrap().contains("timeout"),
        "{}",
        log[1]
    );
    assert!(log[1]["duration_ms"].as_i64().unwrap() >= 900, "{}", log[1]);
    assert_eq!(
        (log[2]["attempt"].clone(), log[2]["status_code"].clone()),
        (json!(1), json!(500))
    );
    assert_eq!(log[2]["error"], "HTTP 500");
    // A success ends the failure run.
    let (_, ep) = call(
        &app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        None,
    )
    .await;
    assert_eq!(ep["failing_since"], Value::Null);
    app.stop().await;
}

/// The real schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h) on the stored time of each next attempt, the
/// clock moved on by setting that time back to now; after the eighth attempt the delivery is dropped with its
/// error kept.
async fn the_schedule_then_dropped_with_the_error_kept(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let app = TestApp::with_settings(test_db, |s| {
        fast(s);
        s.webhooks.retry_scale = 1.0;
    })
    .await;
    app.platform_domain(HOST).await;
    let acc = app.account(true).await;
    let receiver = Receiver::start(Arc::new(|_, _| Reply::Status(503))).await;
    let (hook, _) = endpoint(&app, &acc, &receiver.url, &["link.created"]).await;
    create_link(&app, &acc, "https://example.com/schedule").await;
    let pool = pool(&app).await;
    let schedule = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
    for (n, delay) in schedule.iter().enumerate() {
        receiver.wait_for(n + 1).await;
        // The attempt is recorded just after the receiver answered.
        let deadline = Instant::now() + Duration::from_secs(10);
        let (attempts, next, at): (i64, i64, Option<i64>) = loop {
            let row: Option<(i64, i64, Option<i64>)> = sqlx::query_as(
                "SELECT d.attempts, d.next_attempt_at, (SELECT MAX(at) FROM webhook_attempts a WHERE a.endpoint_id = d.endpoint_id) \
                 FROM webhook_deliveries d WHERE d.endpoint_id = $1",
            )
            .bind(&hook)
            .fetch_optional(&pool)
            .await
            .unwrap();
            if let Some(r) = row.filter(|r| r.0 == n as i64 + 1) {
                break r;
            }
            assert!(Instant::now() < deadline, "attempt {} not recorded", n + 1);
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(attempts, n as i64 + 1);
        let wait = next - at.unwrap();
        assert!(
            (wait - delay * 1_000_000).abs() < 1_000_000,
            "after attempt {}: next in {wait} µs, expected {delay} s",
            n + 1
        );
        // The clock moves on: the retry is due now.
        sqlx::query("UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE endpoint_id = $2")
            .bind(Micros::now().0)
            .bind(&hook)
            .execute(&pool)
            .await
            .unwrap();
    }
    receiver.wait_for(8).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (state, error): (String, Option<String>) = sqlx::query_as(
            "SELECT state, last_error FROM webhook_deliveries WHERE endpoint_id = $1",
        )
        .bind(&hook)
        .fetch_one(&pool)
        .await
        .unwrap();
        if state == "failed" {
            assert_eq!(error.as_deref(), Some("HTTP 503"));
            break;
        }
        assert!(Instant::now() < deadline, "not dropped: {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Dropped: nothing more, even when due.
    sqlx::query("UPDATE webhook_deliveries SET next_attempt_at = 0 WHERE endpoint_id = $1")
        .bind(&hook)
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(receiver.received().len(), 8, "eight attempts in all");
    assert_eq!(attempts(&app, &acc, &hook).await.len(), 8);
    pool.close().await;
    app.stop().await;
}

async fn disabled_after_five_days_of_failures_then_enabled_fresh(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let failing = fail.clone();
    let receiver = Receiver::start(Arc::new(move |_, _| {
        if failing.load(SeqCst) {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    }))
    .await;
    let (hook, _) = endpoint(&app, &acc, &receiver.url, &["link.created", "link.updated"]).await;
    let first = create_link(&app, &acc, "https://example.com/down").await;
    receiver.wait_for(1).await;
    let pool = pool(&app).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, ep) = call(
            &app,
            Method::GET,
            &acc.key,
            &format!("{HOOKS}/{hook}"),
            None,
        )
        .await;
        if ep["failing_since"].is_string() {
            assert_eq!(ep["enabled"], true);
            break;
        }
        assert!(Instant::now() < deadline, "no failure run: {ep}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first link's retry waits far ahead (so it is pending when disabled), moved between two attempts: with
    // none in flight, nothing recorded later can undo the next step.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let moved = sqlx::query(
            "UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE endpoint_id = $2 AND claimed_by IS NULL",
        )
        .bind(Micros::now().0 + DAY_MICROS)
        .bind(&hook)
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
        if moved == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first delivery stayed in flight"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The run began five days ago.
    sqlx::query("UPDATE webhook_endpoints SET failing_since = $1 WHERE id = $2")
        .bind(Micros::now().0 - 5 * DAY_MICROS - 60_000_000)
        .bind(&hook)
        .execute(&pool)
        .await
        .unwrap();
    let n = receiver.received().len();
    create_link(&app, &acc, "https://example.com/down2").await;
    receiver.wait_for(n + 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let ep = loop {
        let (_, ep) = call(
            &app,
            Method::GET,
            &acc.key,
            &format!("{HOOKS}/{hook}"),
            None,
        )
        .await;
        if ep["enabled"] == false {
            break ep;
        }
        assert!(Instant::now() < deadline, "not disabled: {ep}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let reason = ep["disabled_reason"].as_str().unwrap();
    assert!(
        reason.contains("failing continuously since") && reason.contains("HTTP 500"),
        "{reason}"
    );
    // Its pending deliveries were dropped with the reason.
    let pending: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND state = 'pending'",
    )
    .bind(&hook)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(pending, 0);
    let errors: Vec<Option<String>> =
        sqlx::query_scalar("SELECT last_error FROM webhook_deliveries WHERE endpoint_id = $1")
            .bind(&hook)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(
        errors.iter().all(|e| e
            .as_deref()
            .is_some_and(|e| e.starts_with("endpoint disabled"))),
        "{errors:?}"
    );
    // While disabled: nothing is sent, redelivery is refused.
    let got = receiver.received().len();
    patch_link(
        &app,
        &acc,
        first["id"].as_str().unwrap(),
        json!({"is_active": false}),
    )
    .await;
    let first_event = receiver.received()[0].id.clone();
    let (s, body) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{hook}/deliveries/{first_event}/redeliver"),
        None,
    )
    .await;
    assert_error(s, &body, 409, "webhook_disabled");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(receiver.received().len(), got);

    // Enabled again: fresh (no run, no reason), and only new events are sent.
    fail.store(false, SeqCst);
    let (s, ep) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        Some(json!({"enabled": true})),
    )
    .await;
    assert_eq!(s, 200, "{ep}");
    assert_eq!(
        (
            ep["enabled"].clone(),
            ep["failing_since"].clone(),
            ep["disabled_reason"].clone()
        ),
        (json!(true), Value::Null, Value::Null)
    );
    let fresh = create_link(&app, &acc, "https://example.com/up").await;
    let all = receiver.wait_for(got + 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), got + 1, "no backlog");
    assert_eq!(all[got].json["data"]["id"], fresh["id"]);
    // A manual disable says so.
    let (_, ep) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(ep["disabled_reason"], "disabled by the account");
    pool.close().await;
    app.stop().await;
}

/// One link's events wait for each other while one is retried; another link's go past.
async fn ordering_per_link_under_retries(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    // The first two attempts of link a's creation fail (then 5 ms and 300 ms of waiting for its retries).
    let fails = Arc::new(AtomicUsize::new(0));
    let receiver = Receiver::start(Arc::new(move |r, _| {
        let a_created =
            r.kind() == "link.created" && r.json["data"]["long_url"] == "https://example.com/a0";
        if a_created && fails.fetch_add(1, SeqCst) < 2 {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    }))
    .await;
    endpoint(&app, &acc, &receiver.url, &["link.created", "link.updated"]).await;
    let a = create_link(&app, &acc, "https://example.com/a0").await;
    let a_id = a["id"].as_str().unwrap().to_owned();
    for n in 1..=3 {
        patch_link(
            &app,
            &acc,
            &a_id,
            json!({"long_url": format!("https://example.com/a{n}")}),
        )
        .await;
    }
    let b = create_link(&app, &acc, "https://example.com/b").await;
    let b_id = b["id"].as_str().unwrap().to_owned();
    let got = receiver
        .wait("every event of both links", |g| {
            g.iter()
                .filter(|r| r.json["data"]["id"] == a_id.as_str() && r.kind() == "link.updated")
                .count()
                == 3
                && g.iter().any(|r| r.json["data"]["id"] == b_id.as_str())
        })
        .await;
    let a_events: Vec<&Received> = of_link(&got, &a_id);
    let kinds: Vec<&str> = a_events.iter().map(|r| r.kind()).collect();
    // Three attempts of the creation, then the updates in commit order: none overtook the retried creation.
    assert_eq!(
        kinds,
        [
            "link.created",
            "link.created",
            "link.created",
            "link.updated",
            "link.updated",
            "link.updated"
        ]
    );
    let created_attempts = 3;
    let urls: Vec<&str> = a_events[created_attempts..]
        .iter()
        .map(|r| r.json["data"]["long_url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "https://example.com/a1",
            "https://example.com/a2",
            "https://example.com/a3"
        ]
    );
    // The creation's retries took ≥ 300 ms: the other link did not wait for them.
    let b_at = got
        .iter()
        .find(|r| r.json["data"]["id"] == b_id.as_str())
        .unwrap()
        .at;
    assert!(b_at < a_events[2].at, "link b waited for link a's retries");
    app.stop().await;
}

/// One link's deliveries to an endpoint form a queue with one head: a new one waits behind it, and ending the head
/// promotes the next. A queue whose head ended without promoting (which the store's locking should make
/// impossible) is found by the delivery loop's sweep and resumed, then sent.
async fn a_queue_without_a_head_is_resumed(engine: Engine) {
    // A 5 s attempt timeout, and a receiver that holds the link's creation for longer: the head stays in flight
    // while the test looks at its queue.
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        fast(s);
        s.webhooks.timeout = Duration::from_secs(5);
    })
    .await;
    app.platform_domain(HOST).await;
    let acc = app.account(true).await;
    let receiver = Receiver::start(Arc::new(|r, _| {
        if r.kind() == "link.created" {
            Reply::Sleep(Duration::from_secs(10))
        } else {
            Reply::Status(200)
        }
    }))
    .await;
    let (hook, _) = endpoint(&app, &acc, &receiver.url, &["link.created", "link.updated"]).await;
    let pool = pool(&app).await;
    let link = create_link(&app, &acc, "https://example.com/q0").await;
    let id = link["id"].as_str().unwrap();
    receiver.wait_for(1).await;
    patch_link(
        &app,
        &acc,
        id,
        json!({"long_url": "https://example.com/q1"}),
    )
    .await;
    patch_link(
        &app,
        &acc,
        id,
        json!({"long_url": "https://example.com/q2"}),
    )
    .await;
    let queue = || async {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT state, waiting FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY id",
        )
        .bind(&hook)
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    let pending = |w: i64| ("pending".to_owned(), w);
    // The loop fans the updates out a moment after their commits.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while queue().await.len() < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        queue().await,
        [pending(0), pending(1), pending(1)],
        "the head in flight, two waiting behind it"
    );
    // The head ends without promoting the next (its claim cleared, so its own attempt's record changes nothing).
    sqlx::query(
        "UPDATE webhook_deliveries SET state = 'succeeded', claimed_by = NULL, claimed_until = NULL \
         WHERE endpoint_id = $1 AND waiting = 0",
    )
    .bind(&hook)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(
        app.db.promote_stranded_webhook_deliveries().await.unwrap(),
        1
    );
    assert_eq!(
        app.db.promote_stranded_webhook_deliveries().await.unwrap(),
        0
    );
    // The two updates are sent, in order.
    let got = receiver
        .wait("both updates", |g| {
            g.iter().filter(|r| r.kind() == "link.updated").count() >= 2
        })
        .await;
    let urls: Vec<&str> = got
        .iter()
        .filter(|r| r.kind() == "link.updated")
        .map(|r| r.json["data"]["long_url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["https://example.com/q1", "https://example.com/q2"]);
    app.stop().await;
}

/// Two origins on one database, each with its delivery loop: every event is sent exactly once.
async fn two_origins_never_send_one_attempt_twice(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let (_second, second_task) = another_origin(&app.test_db.url, fast).await;
    // A slow receiver builds a backlog both origins work on, and widens the window in which both could take the
    // same row.
    let receiver = Receiver::start(Arc::new(|_, _| Reply::Sleep(Duration::from_millis(300)))).await;
    endpoint(&app, &acc, &receiver.url, &["link.created"]).await;
    let n = 40;
    // One bulk creation: all 40 events are due at once, more than one process may have in flight.
    let links: Vec<Value> = (0..n)
        .map(|i| json!({"long_url": format!("https://example.com/dup{i}")}))
        .collect();
    let (s, body) = call(
        &app,
        Method::POST,
        &acc.key,
        "/api/v1/external/links/bulk-create",
        Some(json!({ "links": links })),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    receiver.wait_for(n).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.received();
    let mut per_id: HashMap<&str, usize> = HashMap::new();
    for r in &got {
        *per_id.entry(&r.id).or_default() += 1;
    }
    assert_eq!(per_id.len(), n);
    assert!(
        per_id.values().all(|c| *c == 1),
        "an event was sent twice: {per_id:?}"
    );
    // One process sends at most PER_ENDPOINT at once to one endpoint: more at once means both were sending.
    let max = receiver.max_in_flight.load(SeqCst);
    assert!(
        max > origin_api::webhooks::PER_ENDPOINT,
        "only one origin sent ({max} at once)"
    );
    drop(_second);
    let _ = second_task.await;
    app.stop().await;
}

// --- SSRF, isolation, rollbacks --------------------------------------------------------------------------------

/// A name in /etc/hosts (not `localhost`) that resolves to a loopback address, if the machine has one.
fn hosts_name_for_loopback() -> Option<String> {
    let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
    hosts.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        let ip: std::net::IpAddr = parts.next()?.parse().ok()?;
        if !ip.is_loopback() {
            return None;
        }
        parts
            .find(|n| !n.starts_with('#') && !n.contains("localhost") && !n.contains(':'))
            .map(str::to_owned)
    })
}

async fn ssrf_refused_without_the_flag(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    // Without --webhooks-allow-private (the default).
    let app = TestApp::with_settings(test_db, |s| {
        fast(s);
        s.webhooks.allow_private = false;
    })
    .await;
    app.platform_domain(HOST).await;
    let acc = app.account(true).await;
    let mut refused = vec![
        "https://127.0.0.1/hook".to_owned(),
        "https://127.1.2.3:8443/hook".to_owned(),
        "https://10.0.0.1/hook".to_owned(),
        "https://10.255.1.2/hook".to_owned(),
        "https://[::1]/hook".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
        "https://localhost/hook".to_owned(),
        "https://192.168.1.1/hook".to_owned(),
        "https://0x7f.1/hook".to_owned(),
        // Plain http is refused too.
        "http://example.com/hook".to_owned(),
    ];
    if let Some(name) = hosts_name_for_loopback() {
        refused.push(format!("https://{name}/hook"));
    }
    for target in &refused {
        let (s, body) = call(
            &app,
            Method::POST,
            &acc.key,
            HOOKS,
            Some(json!({"url": target, "events": ["link.created"]})),
        )
        .await;
        assert_error(s, &body, 400, "invalid_webhook_url");
    }
    // At delivery too: endpoints saved when their host was public (here: written to the store directly, as an
    // origin with the flag would have), whose address is not public when they are delivered to: an IP literal,
    // and a name resolving to loopback (DNS rebinding), when the machine's /etc/hosts has one.
    let receiver = Receiver::ok().await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let other = app.account(true).await;
    let mut targets = vec![format!("https://127.0.0.1:{port}/hook")];
    if let Some(name) = hosts_name_for_loopback() {
        targets.push(format!("https://{name}:{port}/hook"));
    }
    let mut hooks = Vec::new();
    for target in &targets {
        let created = app
            .db
            .create_webhook(
                &other.id,
                &shortlink_store::NewWebhook {
                    url: target.clone(),
                    events: vec![shortlink_store::EventType::LinkCreated],
                    description: None,
                    secret: webhook_sender::WebhookSecret::generate()
                        .expose()
                        .to_owned(),
                },
                &shortlink_store::Actor::Operator,
            )
            .await
            .unwrap();
        hooks.push(created.id);
    }
    create_link(&app, &other, "https://example.com/ssrf").await;
    for hook in &hooks {
        let deadline = Instant::now() + Duration::from_secs(10);
        let log = loop {
            let log = attempts(&app, &other, hook).await;
            if !log.is_empty() {
                break log;
            }
            assert!(Instant::now() < deadline, "no attempt recorded");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(log[0]["status_code"], Value::Null);
        assert_eq!(log[0]["error"], "address not public", "{}", log[0]);
    }
    assert!(
        receiver.received().is_empty(),
        "the private receiver was reached"
    );
    app.stop().await;
}

async fn accounts_are_isolated(engine: Engine) {
    let app = app(engine).await;
    let alice = app.account(true).await;
    let bob = app.account(true).await;
    let alices = Receiver::ok().await;
    let bobs = Receiver::ok().await;
    let (hook, _) = endpoint(&app, &alice, &alices.url, &ALL).await;
    endpoint(&app, &bob, &bobs.url, &ALL).await;
    let a = create_link(&app, &alice, "https://example.com/alice").await;
    let b = create_link(&app, &bob, "https://example.com/bob").await;
    alices.wait_for(1).await;
    bobs.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(alices.received().len(), 1);
    assert_eq!(alices.received()[0].json["data"]["id"], a["id"]);
    assert_eq!(bobs.received()[0].json["data"]["id"], b["id"]);
    // Bob sees nothing of Alice's endpoint.
    let (_, list) = call(&app, Method::GET, &bob.key, HOOKS, None).await;
    assert_eq!(list["results"].as_array().unwrap().len(), 1);
    assert_ne!(list["results"][0]["id"], hook);
    let event = alices.received()[0].id.clone();
    for (method, path, body) in [
        (Method::GET, format!("{HOOKS}/{hook}"), None),
        (
            Method::PATCH,
            format!("{HOOKS}/{hook}"),
            Some(json!({"enabled": false})),
        ),
        (
            Method::PATCH,
            format!("{HOOKS}/{hook}"),
            Some(json!({"url": "http://127.0.0.1:9/x"})),
        ),
        (Method::POST, format!("{HOOKS}/{hook}/rotate-secret"), None),
        (Method::POST, format!("{HOOKS}/{hook}/test"), None),
        (Method::GET, format!("{HOOKS}/{hook}/deliveries"), None),
        (
            Method::POST,
            format!("{HOOKS}/{hook}/deliveries/{event}/redeliver"),
            None,
        ),
        (Method::DELETE, format!("{HOOKS}/{hook}"), None),
    ] {
        let (s, body) = call(&app, method.clone(), &bob.key, &path, body).await;
        assert_error(s, &body, 404, "not_found");
    }
    let (s, ep) = call(
        &app,
        Method::GET,
        &alice.key,
        &format!("{HOOKS}/{hook}"),
        None,
    )
    .await;
    assert_eq!((s, ep["enabled"].clone()), (200, json!(true)));
    assert_eq!(
        alices.received().len(),
        1,
        "Bob's test ping did not reach Alice's receiver"
    );
    app.stop().await;
}

/// A refused or rolled-back change writes no event (the store's own test covers a transaction dropped after the
/// event was written, `store/src/webhooks/tests.rs`).
async fn refused_changes_send_nothing(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let receiver = Receiver::ok().await;
    let (hook, _) = endpoint(&app, &acc, &receiver.url, &ALL).await;
    let link = create_link(&app, &acc, "https://example.com/once").await;
    let id = link["id"].as_str().unwrap().to_owned();
    receiver.wait_for(1).await;
    // Taken short code, a group not of this account, a second delete, the default group.
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/x", "short_code": link["short_code"]}),
        )
        .await;
    assert_eq!(s, 400);
    let (s, _) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("/api/v1/external/links/{id}"),
        Some(json!({"group_id": other.default_group_id})),
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("/api/v1/external/links/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("/api/v1/external/links/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("/api/v1/external/groups/{}", acc.default_group_id),
        None,
    )
    .await;
    assert_eq!(s, 400);
    let got = receiver.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        receiver.received().len(),
        2,
        "{:?}",
        got.iter().map(Received::kind).collect::<Vec<_>>()
    );
    assert_eq!(got[1].kind(), "link.deleted");
    let pool = pool(&app).await;
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 2);
    assert_eq!(attempts(&app, &acc, &hook).await.len(), 2);
    pool.close().await;
    app.stop().await;
}

// --- test pings, redelivery, retention, logs -------------------------------------------------------------------

async fn test_pings_and_redelivery(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let receiver = Receiver::start(Arc::new(|r, _| {
        if r.kind() == "ping" {
            Reply::Status(418)
        } else {
            Reply::Status(200)
        }
    }))
    .await;
    let (hook, secret) = endpoint(&app, &acc, &receiver.url, &["link.created"]).await;
    // A failed ping is a 200 whose outcome says so; it is not retried and leaves the endpoint's health alone.
    let (s, ping) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{hook}/test"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{ping}");
    assert_eq!(
        (
            ping["success"].clone(),
            ping["status_code"].clone(),
            ping["error"].clone()
        ),
        (json!(false), json!(418), json!("HTTP 418"))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1);
    let (_, ep) = call(
        &app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        None,
    )
    .await;
    assert_eq!(ep["failing_since"], Value::Null);
    // A test of a dead receiver answers within the request bound.
    let dead = format!("http://127.0.0.1:{}/gone", crate::common::free_port());
    let (s, _) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        Some(json!({"url": dead})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, down) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{hook}/test"),
        None,
    )
    .await;
    assert_eq!(
        (s, down["success"].clone(), down["status_code"].clone()),
        (200, json!(false), Value::Null)
    );
    assert!(down["error"].is_string(), "{down}");
    let (s, _) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{hook}"),
        Some(json!({"url": receiver.url})),
    )
    .await;
    assert_eq!(s, 200);

    // Redelivery: the same event (id, body) again, as attempt 1 of a fresh schedule.
    create_link(&app, &acc, "https://example.com/again").await;
    let got = receiver.wait_for(2).await;
    let event = got[1].id.clone();
    // Its attempt recorded (the receiver has answered, the loop may not have written it yet): a delivery still
    // being sent is left to finish rather than redelivered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !attempts(&app, &acc, &hook)
        .await
        .iter()
        .any(|a| a["event_id"] == event.as_str())
    {
        assert!(
            Instant::now() < deadline,
            "the attempt of {event} was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, queued) = call(
        &app,
        Method::POST,
        &acc.key,
        &format!("{HOOKS}/{hook}/deliveries/{event}/redeliver"),
        None,
    )
    .await;
    assert_eq!(s, 202, "{queued}");
    assert_eq!(queued, json!({"endpoint_id": hook, "event_id": event}));
    let got = receiver.wait_for(3).await;
    assert_eq!(got[2].id, event);
    assert_eq!(got[2].body, got[1].body);
    verify(&secret, &got[2]);
    let log = attempts(&app, &acc, &hook).await;
    let of_event: Vec<&Value> = log
        .iter()
        .filter(|a| a["event_id"] == event.as_str())
        .collect();
    assert_eq!(of_event.len(), 2);
    assert!(of_event.iter().all(|a| a["attempt"] == 1));
    // Unknown or malformed event ids, another endpoint's event: 404.
    for e in ["msg_00000000000000000000000000000000", "nope", "msg_XYZ"] {
        let (s, body) = call(
            &app,
            Method::POST,
            &acc.key,
            &format!("{HOOKS}/{hook}/deliveries/{e}/redeliver"),
            None,
        )
        .await;
        assert_error(s, &body, 404, "not_found");
    }
    // Pagination of the log: newest first, limit and offset, list-links' error codes.
    let (s, page) = call(
        &app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{hook}/deliveries?limit=1&offset=1"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            page["limit"].clone(),
            page["offset"].clone(),
            page["total"].clone()
        ),
        (json!(1), json!(1), json!(log.len()))
    );
    assert_eq!(page["results"][0], log[1]);
    let (s, body) = call(
        &app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{hook}/deliveries?limit=0"),
        None,
    )
    .await;
    assert_error(s, &body, 400, "invalid_limit");
    let (s, body) = call(
        &app,
        Method::GET,
        &acc.key,
        &format!("{HOOKS}/{hook}/deliveries?offset=-1"),
        None,
    )
    .await;
    assert_error(s, &body, 400, "invalid_offset");
    app.stop().await;
}

async fn old_rows_are_pruned(engine: Engine) {
    let app = app(engine).await;
    let acc = app.account(true).await;
    let receiver = Receiver::ok().await;
    let (hook, _) = endpoint(&app, &acc, &receiver.url, &["link.created"]).await;
    create_link(&app, &acc, "https://example.com/old").await;
    receiver.wait_for(1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while attempts(&app, &acc, &hook).await.is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let in_29_days = Micros(Micros::now().0 + 29 * DAY_MICROS);
    let pruned = retention::prune(&app.db, Retention::default(), in_29_days, || true)
        .await
        .unwrap();
    assert_eq!(pruned.webhook_rows, 0);
    let in_31_days = Micros(Micros::now().0 + 31 * DAY_MICROS);
    let pruned = retention::prune(&app.db, Retention::default(), in_31_days, || true)
        .await
        .unwrap();
    assert_eq!(
        pruned.webhook_rows, 3,
        "the attempt, the delivery, the event"
    );
    assert!(attempts(&app, &acc, &hook).await.is_empty());
    app.stop().await;
}

/// The real `serve` at trace level: no secret, and not the endpoint URL's token, in its log.
async fn secrets_never_reach_the_log(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server_with(&test_db.url, "trace", &["--webhooks-allow-private"], &[]).await;
    let db = Db::connect(&test_db.url, 2).await.unwrap();
    let email = format!("{}@example.com", uuid::Uuid::new_v4().simple());
    let acc = db.create_account(&email, true).await.unwrap();
    let key = db
        .generate_api_key(&acc.id, &shortlink_store::Actor::Operator)
        .await
        .unwrap();
    let key = key.expose().to_owned();
    db.add_domain(
        &shortlink_store::domain::Hostname::parse(HOST).unwrap(),
        &shortlink_store::DomainOwner::Platform,
        None,
        &shortlink_store::Actor::Operator,
    )
    .await
    .unwrap();
    let receiver = Receiver::ok().await;
    let url = format!(
        "{}?token=urltoken-{}",
        receiver.url,
        uuid::Uuid::new_v4().simple()
    );
    let client = reqwest::Client::new();
    let send = |method: Method, path: String, body: Option<Value>| {
        let mut req = client
            .request(method, format!("{}{path}", server.base))
            .header("Authorization", format!("Token {key}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        async move { json(req.send().await.unwrap()).await }
    };
    let (s, created) = send(
        Method::POST,
        HOOKS.to_owned(),
        Some(json!({"url": url, "events": ALL})),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let hook = created["id"].as_str().unwrap().to_owned();
    let (_, rotated) = send(Method::POST, format!("{HOOKS}/{hook}/rotate-secret"), None).await;
    let (s, ping) = send(Method::POST, format!("{HOOKS}/{hook}/test"), None).await;
    assert_eq!((s, ping["success"].clone()), (200, json!(true)));
    let (s, _) = send(
        Method::POST,
        "/api/v1/external/links/create-link".to_owned(),
        Some(json!({"long_url": "https://example.com/log"})),
    )
    .await;
    assert_eq!(s, 201);
    let got = receiver.wait_for(2).await;
    verify(rotated["secret"].as_str().unwrap(), &got[1]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains("webhook"), "the trace log has the deliveries");
    for secret in [
        created["secret"].as_str().unwrap(),
        rotated["secret"].as_str().unwrap(),
        "urltoken-",
    ] {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
    for r in &got {
        assert!(!log.contains(&r.signature), "a signature is in the log");
    }
    db.close().await;
    drop(server);
}

/// An event goes to the endpoints subscribed when its change committed, as they are when the loop fans it out: one
/// deleted or disabled in between gets nothing, one created in between gets nothing either. The test holds the
/// fan-out's lock (PostgreSQL: an advisory lock) to make "in between" last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_goes_to_the_endpoints_subscribed_at_the_change() {
    let app = app(Engine::Postgres).await;
    let acc = app.account(true).await;
    let receivers = [
        Receiver::ok().await,
        Receiver::ok().await,
        Receiver::ok().await,
        Receiver::ok().await,
    ];
    let mut hooks = Vec::new();
    for r in &receivers[..3] {
        hooks.push(endpoint(&app, &acc, &r.url, &["link.created"]).await.0);
    }
    let pool = pool(&app).await;
    let mut holder = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(hashtextextended('webhook-fanout', 0))")
        .execute(&mut *holder)
        .await
        .unwrap();
    let link = create_link(&app, &acc, "https://example.com/fanned").await;
    let (s, body) = call(
        &app,
        Method::DELETE,
        &acc.key,
        &format!("{HOOKS}/{}", hooks[1]),
        None,
    )
    .await;
    assert_eq!(s, 204, "{body}");
    let (s, body) = call(
        &app,
        Method::PATCH,
        &acc.key,
        &format!("{HOOKS}/{}", hooks[2]),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    endpoint(&app, &acc, &receivers[3].url, &["link.created"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        receivers[0].received().is_empty(),
        "sent before the fan-out"
    );
    sqlx::query("SELECT pg_advisory_unlock(hashtextextended('webhook-fanout', 0))")
        .execute(&mut *holder)
        .await
        .unwrap();
    let got = receivers[0].wait_for(1).await;
    assert_eq!(got[0].json["data"]["id"], link["id"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for r in &receivers[1..] {
        assert!(
            r.received().is_empty(),
            "{:?}",
            r.received().iter().map(Received::kind).collect::<Vec<_>>()
        );
    }
    drop(holder);
    pool.close().await;
    app.stop().await;
}

both_engines!(
    endpoints_api,
    twenty_endpoints_at_most,
    every_event_type_is_signed_and_verified,
    subscriptions_filter_events,
    retries_on_500_and_timeouts_then_success,
    the_schedule_then_dropped_with_the_error_kept,
    disabled_after_five_days_of_failures_then_enabled_fresh,
    ordering_per_link_under_retries,
    two_origins_never_send_one_attempt_twice,
    a_queue_without_a_head_is_resumed,
    ssrf_refused_without_the_flag,
    accounts_are_isolated,
    refused_changes_send_nothing,
    test_pings_and_redelivery,
    old_rows_are_pruned,
    secrets_never_reach_the_log,
);
