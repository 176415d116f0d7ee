//! The worker's log lines (edge-worker/src/log.rs) in workerd: every failure the worker absorbs into a fallback
//! leaves one structured line, and no line carries visitor data. The main case is the misconfiguration an operator
//! is most likely to make: a worker whose `ORIGIN_SECRET` is not the real origin's `INTERNAL_API_SECRET`, which
//! visitors never see (they get fallbacks, clicks silently vanish) and only the log reveals.

use std::net::TcpListener;
use std::time::Duration;

use e2e::origin::{Database, HOST, Origin, OriginOptions};
use e2e::{BROWSER_UA, DEFAULT_FALLBACK, Options, SYNC_SECRET, Worker, dynamic_path, group, link};
use serde_json::{Value, json};
use shared_crypto::GroupKey;

/// How long a log line of work done after the response (`wait_until`) may take to reach the test.
const LOG_DEADLINE: Duration = Duration::from_secs(10);

/// What a visitor sends that must never reach a log: an address (as Cloudflare and proxies pass it), a User-Agent,
/// a Referer with a path, and a query. Each carries a marker the test looks for in the worker's whole output.
const VISITOR_IP: &str = "203.0.113.77";
const UA_MARKER: &str = "visitor-ua-marker";
const QUERY: &str = "utm_campaign=query-marker";
const REFERER: &str = "https://referrer.example/private/path-marker?ref=1";

/// A browser visit carrying all of the visitor data above.
async fn visit_as_a_person(w: &Worker, path: &str) -> e2e::Visit {
    let ua = format!("{BROWSER_UA} {UA_MARKER}");
    w.visit(
        HOST,
        &format!("{path}?{QUERY}"),
        &[
            ("User-Agent", &ua),
            ("CF-Connecting-IP", VISITOR_IP),
            ("X-Forwarded-For", VISITOR_IP),
            ("X-Real-IP", VISITOR_IP),
            ("Referer", REFERER),
        ],
    )
    .await
}

/// Panics if the worker's output holds any of the visitor data, or any of `also` (secrets).
fn assert_no_visitor_data(w: &Worker, also: &[&str]) {
    let output = w.output().join("\n");
    let visitor = [
        VISITOR_IP,
        UA_MARKER,
        "query-marker",
        "path-marker",
        "referrer.example",
    ];
    for needle in visitor.iter().chain(also) {
        assert!(
            !output.contains(needle),
            "the worker's output contains {needle:?}:\n{output}"
        );
    }
}

#[tokio::test]
async fn a_wrong_origin_secret_is_logged_and_no_visitor_data_is() {
    let db = Database::new();
    let origin = Origin::start(&db, OriginOptions::default()).await;
    let account = db.account("logs@example.com");
    // No publisher: the link exists at the origin only, so the worker's KV misses it and asks the origin.
    let created = origin
        .api(&account)
        .link("https://dest.example/created", None)
        .await;
    let code = created["short_code"]
        .as_str()
        .expect("short_code")
        .to_owned();

    let wrong_secret = "not-the-origin-secret";
    let w = Worker::start_with(Options {
        env: vec![
            ("ORIGIN_URL".into(), origin.url.clone()),
            ("ORIGIN_SECRET".into(), wrong_secret.into()),
        ],
        ..Options::default()
    });

    // The KV-miss lookup: the origin answers 401, the visitor gets the fallback, the log says why.
    let v = visit_as_a_person(&w, &format!("/{code}")).await;
    v.assert_redirect(DEFAULT_FALLBACK);
    let line = w
        .wait_for_log("origin_lookup_failed", LOG_DEADLINE, |_| true)
        .await;
    assert_eq!(
        line,
        json!({"event": "origin_lookup_failed", "host": HOST, "short_code": code.to_lowercase(),
               "failure": "status", "status": 401}),
    );

    // Click reports: a link KV has, in a group with analytics on. The visitor is redirected; the report after the
    // response is refused with 401 and dropped (the same batch would be refused again), and logged.
    let group_id = "4f1d2c3b-5a69-4e78-8d9c-0a1b2c3d4e5f";
    w.sync(
        vec![
            (
                format!("link:{HOST}:counted"),
                link("https://dest.example/counted", group_id, true),
            ),
            (
                format!("group:{group_id}"),
                group(
                    &GroupKey::from_bytes([0x51; 32]),
                    json!({"analytics": {"enabled": true}}),
                ),
            ),
        ],
        vec![],
    )
    .await;
    let v = visit_as_a_person(&w, "/counted").await;
    v.assert_destination(&format!("https://dest.example/counted?{QUERY}"));
    let line = w
        .wait_for_log("origin_clicks_failed", LOG_DEADLINE, |_| true)
        .await;
    assert_eq!(
        line,
        json!({"event": "origin_clicks_failed", "failure": "status", "status": 401, "events": 1,
               "action": "drop"}),
    );

    // Every line is one of the fixed events, and nothing the visitors sent (nor the secret) is in the output.
    let events: Vec<Value> = w.log_events();
    assert!(
        events
            .iter()
            .all(|e| e["event"] == "origin_lookup_failed" || e["event"] == "origin_clicks_failed"),
        "{events:?}"
    );
    assert_no_visitor_data(&w, &[wrong_secret]);
}

#[tokio::test]
async fn a_missing_kv_binding_is_logged_and_visitors_get_the_default_fallback() {
    let w = Worker::start_with(Options {
        env: vec![("NO_KV".into(), "1".into())],
        ..Options::default()
    });
    // Each visit to a link takes the first-visit path (its plan's reads fail in the entry module, and a failed read
    // leaves nothing in the isolate), then the full path, which finds no binding and falls back; `/` the full path.
    let dynamic = dynamic_path("4f1d2c3b-5a69-4e78-8d9c-0a1b2c3d4e5f", "not-a-token");
    for path in [
        "/somecode",
        dynamic.as_str(),
        "/somecode",
        dynamic.as_str(),
        "/",
    ] {
        let v = w.visit(HOST, path, &[]).await;
        assert_eq!(v.status, 302, "{path}");
        v.assert_redirect(DEFAULT_FALLBACK);
    }
    let line = w
        .wait_for_log("kv_binding_missing", LOG_DEADLINE, |_| true)
        .await;
    assert_eq!(
        line,
        json!({"event": "kv_binding_missing", "binding": "SHORTLINK_KV", "via": "visit"})
    );
    // The sync route cannot write either, and says why.
    let (status, body) = w
        .sync_as(
            Some(SYNC_SECRET),
            json!({"put": [], "delete": []}).to_string(),
        )
        .await;
    assert_eq!(
        (status, &body["error"]),
        (503, &json!("kv_binding_missing")),
        "{body}"
    );
    let events = w.log_events();
    assert!(
        events.iter().all(|e| e["event"] == "kv_binding_missing"),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_origin_that_does_not_answer_is_logged_as_a_timeout() {
    // A listener that never accepts: the connection is made (the kernel's backlog), no answer ever comes.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", silent.local_addr().expect("address"));
    let w = Worker::start_with(Options {
        env: vec![
            ("ORIGIN_URL".into(), url),
            (
                "ORIGIN_SECRET".into(),
                "a-secret-for-the-silent-origin".into(),
            ),
        ],
        ..Options::default()
    });
    let v = visit_as_a_person(&w, "/slow").await;
    v.assert_redirect(DEFAULT_FALLBACK);
    let line = w
        .wait_for_log("origin_lookup_failed", LOG_DEADLINE, |_| true)
        .await;
    assert_eq!(
        line,
        json!({"event": "origin_lookup_failed", "host": HOST, "short_code": "slow", "failure": "timeout"}),
    );
    assert_no_visitor_data(&w, &["a-secret-for-the-silent-origin"]);
}

#[tokio::test]
async fn refused_sync_requests_are_logged_without_the_token() {
    let w = Worker::start();
    let (status, _) = w
        .sync_as(Some("a-wrong-token"), json!({"put": []}).to_string())
        .await;
    assert_eq!(status, 401);
    let (status, _) = w.sync_as(None, json!({"put": []}).to_string()).await;
    assert_eq!(status, 401);
    let (status, _) = w
        .sync_as(
            Some(e2e::SYNC_SECRET),
            r#"{"put":[{"key":"other:x","value":{}}]}"#.into(),
        )
        .await;
    assert_eq!(status, 400);

    for reason in ["wrong_token", "missing_token"] {
        w.wait_for_log("sync_refused", LOG_DEADLINE, |l| {
            l["status"] == 401 && l["reason"] == reason
        })
        .await;
    }
    w.wait_for_log("sync_refused", LOG_DEADLINE, |l| {
        l["status"] == 400 && l["reason"] == "invalid_key: other:x"
    })
    .await;
    let output = w.output().join("\n");
    assert!(!output.contains("a-wrong-token"), "{output}");
    assert!(!output.contains(e2e::SYNC_SECRET), "{output}");
}
