//! What an operator sees (issue "Production"): request ids, the access log (text or JSON), Prometheus metrics on
//! their own listener, and `/internal/v1/…` on a listener of their own. Each test runs the real `origin-api serve`
//! process, as an operator would.

use crate::common::{Engine, FREE_ADDR, TestApp, TestDb, start_server_with};
use serde_json::{Value, json};

const SECRET: &str = "internal-secret-for-tests-0123456789abcdef";

/// The JSON log lines of target `access`.
fn access_lines(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "access")
        .collect()
}

async fn access_log_and_request_ids(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server_with(&test_db.url, "info", &[], &[("LOG_FORMAT", "json")]).await;
    let app = TestApp::on(test_db).await;
    let acc = app.account(true).await;
    let client = reqwest::Client::new();
    let get = |path: &str, id: Option<&str>| {
        let mut req = client
            .get(format!("{}{path}", server.base))
            .header("Authorization", format!("Token {}", acc.key));
        if let Some(id) = id {
            req = req.header("x-request-id", id);
        }
        req.send()
    };
    let id_of = |r: &reqwest::Response| r.headers()["x-request-id"].to_str().unwrap().to_owned();

    // A client's id comes back; none, or an unusable one, gets a fresh UUID.
    let r = get("/healthz", Some("trace-abc-123")).await.unwrap();
    assert_eq!(id_of(&r), "trace-abc-123");
    let made = id_of(&get("/healthz", None).await.unwrap());
    assert!(uuid::Uuid::try_parse(&made).is_ok(), "{made}");
    let long = "x".repeat(129);
    let replaced = id_of(&get("/healthz", Some(&long)).await.unwrap());
    assert!(uuid::Uuid::try_parse(&replaced).is_ok(), "{replaced}");

    // A route with an id and a query holding a secret; an unknown path.
    let link = uuid::Uuid::new_v4().to_string();
    let r = get(
        &format!("/api/v1/external/links/{link}?token=s3cr3t-value"),
        Some("req-404"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 404);
    let r = get("/no/such/path", Some("req-unmatched")).await.unwrap();
    assert_eq!(r.status(), 404);

    let raw = std::fs::read_to_string(&server.log).unwrap();
    for secret in [acc.key.as_str(), "s3cr3t-value", link.as_str()] {
        assert!(!raw.contains(secret), "the log holds {secret}: {raw}");
    }
    let lines = access_lines(&server.log);
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no access line for {id}: {raw}"))
            .clone()
    };
    let line = by_id("req-404");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["fields"]["method"], "GET");
    assert_eq!(line["fields"]["route"], "/api/v1/external/links/{id}");
    assert_eq!(line["fields"]["status"], 404);
    assert!(line["fields"]["latency_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(by_id("req-unmatched")["fields"]["route"], "unmatched");
    assert_eq!(by_id("trace-abc-123")["fields"]["route"], "/healthz");
    assert_eq!(by_id(&made)["fields"]["status"], 200);
    drop(server);
    app.stop().await;
}

/// A metric's value in the Prometheus text, by its whole series name (with labels, as rendered).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

async fn metrics_on_their_own_listener(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server_with(
        &test_db.url,
        "warn",
        &["--metrics-listen", FREE_ADDR],
        &[("INTERNAL_API_SECRET", SECRET)],
    )
    .await;
    let listen = server.addrs[0].clone();
    let app = TestApp::on(test_db).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let client = reqwest::Client::new();
    let create = format!("{}/api/v1/external/links/create-link", server.base);
    for i in 0..101 {
        client
            .post(&create)
            .header("Authorization", format!("Token {}", acc.key))
            .json(&json!({"long_url": format!("https://example.com/{i}")}))
            .send()
            .await
            .unwrap();
    }
    let clicks = client
        .post(format!("{}/internal/v1/clicks", server.base))
        .bearer_auth(SECRET)
        .json(&json!({"events": [
            {"host": "sho.rt", "group_id": acc.default_group_id, "at": 1_800_000_000_000i64, "device": "mobile"},
            {"host": "sho.rt", "group_id": acc.default_group_id, "at": 1_800_000_000_001i64, "device": "desktop"},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(clicks.status(), 200);

    let scrape = client
        .get(format!("http://{listen}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(
        scrape.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = scrape.text().await.unwrap();
    let created = r#"http_requests_total{method="POST",route="/api/v1/external/links/create-link",status="201"}"#;
    let refused = r#"http_requests_total{method="POST",route="/api/v1/external/links/create-link",status="429"}"#;
    assert_eq!(metric(&text, created), Some(100.0), "{text}");
    assert_eq!(metric(&text, refused), Some(1.0), "{text}");
    assert_eq!(
        metric(&text, r#"rate_limit_refusals_total{limit="create_link"}"#),
        Some(1.0)
    );
    assert_eq!(metric(&text, "click_events_ingested_total"), Some(2.0));
    let all_le = r#"http_request_duration_seconds_bucket{method="POST",route="/api/v1/external/links/create-link",le="+Inf"}"#;
    assert_eq!(metric(&text, all_le), Some(101.0), "{text}");
    // No publisher in this process: the 100 links (and the seeding) wait in the outbox.
    assert!(
        metric(&text, "publisher_pending_rows").unwrap() >= 100.0,
        "{text}"
    );
    assert_eq!(metric(&text, "database_up"), Some(1.0));
    assert!(metric(&text, r#"database_pool_connections{state="open"}"#).unwrap() >= 1.0);
    assert!(text.contains("publisher_published_keys_total"), "{text}");
    // Metrics only there, and only metrics there.
    let public = client
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let other = client
        .get(format!("http://{listen}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    drop(server);
    app.stop().await;
}

async fn internal_routes_on_their_own_listener(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server_with(
        &test_db.url,
        "warn",
        &["--internal-listen", FREE_ADDR],
        &[("INTERNAL_API_SECRET", SECRET)],
    )
    .await;
    let internal = server.addrs[0].clone();
    let app = TestApp::on(test_db).await;
    let acc = app.account(true).await;
    let client = reqwest::Client::new();
    let clicks = |base: String| {
        client
            .post(format!("{base}/internal/v1/clicks"))
            .bearer_auth(SECRET)
            .json(&json!({"events": [
                {"host": "sho.rt", "group_id": acc.default_group_id, "at": 1_800_000_000_000i64, "device": "mobile"}
            ]}))
            .send()
    };
    assert_eq!(clicks(server.base.clone()).await.unwrap().status(), 404);
    assert_eq!(
        clicks(format!("http://{internal}")).await.unwrap().status(),
        200
    );
    // The public API is not on the internal listener.
    let r = client
        .get(format!("http://{internal}/api/v1/external/groups"))
        .header("Authorization", format!("Token {}", acc.key))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .get(format!("{}/api/v1/external/groups", server.base))
        .header("Authorization", format!("Token {}", acc.key))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(server);
    app.stop().await;
}

/// A mistyped LOG_FORMAT stops the process with a clear message instead of logging in a format nobody parses.
#[test]
fn unknown_log_format_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_origin-api"))
        .arg("migrate")
        .env("LOG_FORMAT", "jsonl")
        .env("DATABASE_URL", "sqlite::memory:")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOG_FORMAT must be text or json"));
}

both_engines!(
    access_log_and_request_ids,
    metrics_on_their_own_listener,
    internal_routes_on_their_own_listener,
);
