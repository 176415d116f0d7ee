//! The publisher through the Cloudflare KV REST sink: bulk write (`PUT …/bulk`) and bulk delete
//! (`POST …/bulk/delete`) with the API token, retried until they land. The real API is not
//! reachable from tests, so a local server stands in for it and records what it is sent; the
//! worker-sync sink is tested end to end against the real worker (`tests/`, workerd).

use crate::common::{Engine, TestApp, TestDb, json};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{post, put};
use axum::{Json, Router};
use kv_model::LinkRecord;
use origin_api::publisher::Sink;
use serde_json::{Value, json};
use shortlink_store::Actor;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) puts: Vec<(String, String)>,
    pub(crate) deletes: Vec<String>,
    /// Requests still to refuse with a 500, to exercise the retries.
    refuse: usize,
    refused: usize,
    bad_requests: Vec<String>,
}

pub(crate) type Shared = Arc<Mutex<Recorded>>;

fn authorised(rec: &Shared, headers: &HeaderMap, acc: &str, ns: &str) -> Result<(), StatusCode> {
    let mut r = rec.lock().unwrap();
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth != "Bearer cf-token" || acc != "acc123" || ns != "ns456" {
        r.bad_requests.push(format!("{auth} {acc} {ns}"));
        return Err(StatusCode::FORBIDDEN);
    }
    if r.refuse > 0 {
        r.refuse -= 1;
        r.refused += 1;
        return Err(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Ok(())
}

async fn bulk_put(
    State(rec): State<Shared>,
    Path((acc, ns)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Vec<Value>>,
) -> (StatusCode, Json<Value>) {
    if let Err(s) = authorised(&rec, &headers, &acc, &ns) {
        return (s, Json(json!({"success": false})));
    }
    let mut r = rec.lock().unwrap();
    for item in body {
        // The API takes string values.
        r.puts.push((
            item["key"].as_str().unwrap().to_owned(),
            item["value"].as_str().unwrap().to_owned(),
        ));
    }
    (
        StatusCode::OK,
        Json(json!({"success": true, "errors": [], "messages": []})),
    )
}

async fn bulk_delete(
    State(rec): State<Shared>,
    Path((acc, ns)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Vec<String>>,
) -> (StatusCode, Json<Value>) {
    if let Err(s) = authorised(&rec, &headers, &acc, &ns) {
        return (s, Json(json!({"success": false})));
    }
    rec.lock().unwrap().deletes.extend(body);
    (
        StatusCode::OK,
        Json(json!({"success": true, "errors": [], "messages": []})),
    )
}

pub(crate) async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An origin on `engine` publishing to a stand-in for the Cloudflare KV API that refuses its first `refuse`
/// requests, and what the stand-in was sent.
pub(crate) async fn app_publishing_to_kv_api(engine: Engine, refuse: usize) -> (TestApp, Shared) {
    let rec: Shared = Arc::new(Mutex::new(Recorded {
        refuse,
        ..Default::default()
    }));
    let api = Router::new()
        .route(
            "/client/v4/accounts/{acc}/storage/kv/namespaces/{ns}/bulk",
            put(bulk_put),
        )
        .route(
            "/client/v4/accounts/{acc}/storage/kv/namespaces/{ns}/bulk/delete",
            post(bulk_delete),
        )
        .with_state(rec.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_base = format!("http://{}/client/v4", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, api).await.unwrap() });
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.sink = Some(Sink::CloudflareKv {
            api_base,
            account_id: "acc123".to_owned(),
            namespace_id: "ns456".to_owned(),
            api_token: "cf-token".into(),
        });
    })
    .await;
    (app, rec)
}

async fn publishes_to_cloudflare_kv(engine: Engine) {
    let (app, rec) = app_publishing_to_kv_api(engine, 2).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let group = app.group(&acc, "Temp").await;
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com/x", "short_code": "abc", "group_id": group}),
        )
        .await;
    assert_eq!(s, 201);

    let has_put = |key: &str| rec.lock().unwrap().puts.iter().any(|(k, _)| k == key);
    wait_until("the link, its group and domain in KV", || {
        has_put("link:sho.rt:abc") && has_put(&format!("group:{group}")) && has_put("domain:sho.rt")
    })
    .await;
    let value = rec
        .lock()
        .unwrap()
        .puts
        .iter()
        .rev()
        .find(|(k, _)| k == "link:sho.rt:abc")
        .unwrap()
        .1
        .clone();
    let record: LinkRecord = serde_json::from_str(&value).unwrap();
    assert_eq!(
        record,
        LinkRecord {
            group_settings: record.group_settings.clone(),
            vouched: true,
            ..LinkRecord::new("https://a.com/x", group.clone(), true)
        }
    );
    assert!(
        record.group_settings.is_some(),
        "the group's settings ride along"
    );
    // Without their defaults: a plain group's settings, and the link's copy, are `{}` (kv_model::GroupSettings says
    // why: a new edge isolate parses the copy before its first redirect).
    assert!(
        value.contains(r#""group_settings":{}"#),
        "a plain group's copy is {{}}: {value}"
    );
    let group_value = rec
        .lock()
        .unwrap()
        .puts
        .iter()
        .rev()
        .find(|(k, _)| *k == format!("group:{group}"))
        .unwrap()
        .1
        .clone();
    assert!(
        group_value.ends_with(r#""settings":{}}"#),
        "a plain group's settings are {{}}: {group_value}"
    );

    // Deleting the group: a bulk delete of its key, and the moved link written again.
    app.db
        .delete_group(None, &group, &Actor::Operator)
        .await
        .unwrap();
    let group_key = format!("group:{group}");
    wait_until("the group's deletion", || {
        rec.lock().unwrap().deletes.contains(&group_key)
    })
    .await;
    wait_until("the moved link", || {
        rec.lock()
            .unwrap()
            .puts
            .iter()
            .rev()
            .find(|(k, _)| k == "link:sho.rt:abc")
            .is_some_and(|(_, v)| {
                serde_json::from_str::<LinkRecord>(v).unwrap().group_id == acc.default_group_id
            })
    })
    .await;

    // The refused batches were retried, nothing is left behind, and nothing came unauthenticated.
    let (_, health) = json(app.client.get(app.url("/healthz")).send().await.unwrap()).await;
    assert!(
        health["publisher"]["failures"].as_u64().unwrap() >= 2,
        "{health}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.db.outbox_lag().await.unwrap().pending > 0 {
        assert!(Instant::now() < deadline, "the outbox did not drain");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let r = rec.lock().unwrap();
        assert_eq!(r.refused, 2);
        assert!(r.bad_requests.is_empty(), "{:?}", r.bad_requests);
    }
    app.stop().await;
}

both_engines!(publishes_to_cloudflare_kv);
