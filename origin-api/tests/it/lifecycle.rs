//! The life of a link through the API (issue "the whole life of a link"): read, change, pause, expire, delete,
//! bulk creation, and what each change puts in the edge's read model, on both engines.

use crate::common::{TestApp, assert_error, json};
use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

const LINKS: &str = "/api/v1/external/links";

fn link_path(id: &str) -> String {
    format!("{LINKS}/{id}")
}

/// A time `secs` from now, RFC 3339 UTC.
fn in_secs(secs: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

async fn read_link(app: &TestApp, key: &str, id: &str) -> (u16, Value) {
    app.send(Method::GET, key, &link_path(id), None).await
}

async fn patch(app: &TestApp, key: &str, id: &str, body: Value) -> (u16, Value) {
    app.send(Method::PATCH, key, &link_path(id), Some(body))
        .await
}

async fn total(app: &TestApp, key: &str) -> i64 {
    let (s, list) = json(app.get(key, LINKS).await).await;
    assert_eq!(s, 200);
    list["total"].as_i64().unwrap()
}

async fn get_patch_delete(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let expires = in_secs(3600);
    let (s, created) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.com/a?x=1", "short_code": "Life", "expires_at": expires,
                   "forward_query": false}),
        )
        .await;
    assert_eq!(s, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();

    // GET: the link as listed, with the new fields; the list carries them too.
    let (s, link) = read_link(&app, &a.key, &id).await;
    assert_eq!(s, 200, "{link}");
    assert_eq!(link["short_code"], "life");
    assert_eq!(link["is_active"], true);
    assert_eq!(link["forward_query"], false);
    let shown = link["expires_at"].as_str().unwrap();
    assert_eq!(&shown[..19], &expires[..19], "{shown} vs {expires}");
    assert!(shown.ends_with('Z') && shown.len() == 27, "{shown}");
    let (_, list) = json(app.get(&a.key, LINKS).await).await;
    assert_eq!(list["results"][0], link);
    // Uppercase ids name the same link.
    let (s, upper) = read_link(&app, &a.key, &id.to_uppercase()).await;
    assert_eq!((s, &upper), (200, &link));

    // Without the new fields: never expires, forwards the query.
    let (_, plain) = app
        .create_json(&a.key, json!({"long_url": "https://example.com/plain"}))
        .await;
    let (_, plain) = read_link(&app, &a.key, plain["id"].as_str().unwrap()).await;
    assert_eq!(plain["expires_at"], Value::Null);
    assert_eq!(plain["forward_query"], true);

    // An empty PATCH changes nothing.
    let (s, same) = patch(&app, &a.key, &id, json!({})).await;
    assert_eq!((s, &same), (200, &link));
    // Pause, resume, new destination, no expiry, forward the query: each answered with the link as it now is.
    let (s, paused) = patch(&app, &a.key, &id, json!({"is_active": false})).await;
    assert_eq!(s, 200);
    assert_eq!(paused["is_active"], false);
    assert_eq!(paused["long_url"], "https://example.com/a?x=1");
    let (_, resumed) = patch(&app, &a.key, &id, json!({"is_active": true})).await;
    assert_eq!(resumed["is_active"], true);
    let (s, changed) = patch(
        &app,
        &a.key,
        &id,
        json!({"long_url": "https://example.org/new", "expires_at": null, "forward_query": true}),
    )
    .await;
    assert_eq!(s, 200, "{changed}");
    assert_eq!(changed["long_url"], "https://example.org/new");
    assert_eq!(changed["expires_at"], Value::Null);
    assert_eq!(changed["forward_query"], true);
    assert_eq!(changed["created_at"], link["created_at"]);
    assert_eq!(read_link(&app, &a.key, &id).await.1, changed);

    // Another of the account's groups; a group of nobody's, or a malformed one, is a validation error.
    let second = app.group(&a, "Second").await;
    let (s, moved) = patch(&app, &a.key, &id, json!({"group_id": second})).await;
    assert_eq!(
        (s, moved["group_id"].as_str()),
        (200, Some(second.as_str()))
    );
    for bad in [
        json!({"group_id": uuid::Uuid::new_v4().to_string()}),
        json!({"group_id": "not-a-uuid"}),
        json!({"long_url": "http://example.com/"}),
        json!({"long_url": "https://exa mple.com/"}),
        json!({"is_active": "no"}),
        json!({"is_active": null, "colour": "red"}),
        json!({"forward_query": 1}),
        json!({"expires_at": "2020-01-01T00:00:00Z"}),
        json!({"expires_at": "tomorrow"}),
        json!({"expires_at": "2099-01-01T00:00:00+02:00"}),
        json!({"expires_at": 4_102_444_800_i64}),
        json!([{"is_active": false}]),
    ] {
        let (s, body) = patch(&app, &a.key, &id, bad).await;
        assert_error(s, &body, 400, "validation_error");
    }
    assert_eq!(
        read_link(&app, &a.key, &id).await.1,
        moved,
        "a refused PATCH changes nothing"
    );
    // Not JSON at all.
    let resp = app
        .client
        .patch(app.url(&link_path(&id)))
        .header("Authorization", format!("Token {}", a.key))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (s, body) = json(resp).await;
    assert_error(s, &body, 400, "invalid_json");

    // Unknown and malformed ids: 404, on every method.
    for bad_id in [
        uuid::Uuid::new_v4().to_string(),
        "nope".to_owned(),
        "%FF".to_owned(),
    ] {
        for method in [Method::GET, Method::PATCH, Method::DELETE] {
            let body = (method == Method::PATCH).then(|| json!({"is_active": false}));
            let (s, e) = app
                .send(method.clone(), &a.key, &link_path(&bad_id), body)
                .await;
            assert_error(s, &e, 404, "not_found");
        }
    }

    // Delete: 204, then gone from GET and the list and its total; the code is free again.
    let before = total(&app, &a.key).await;
    let (s, body) = app
        .send(Method::DELETE, &a.key, &link_path(&id), None)
        .await;
    assert_eq!((s, body), (204, Value::Null));
    let (s, e) = read_link(&app, &a.key, &id).await;
    assert_error(s, &e, 404, "not_found");
    assert_eq!(total(&app, &a.key).await, before - 1);
    let (_, list) = json(app.get(&a.key, LINKS).await).await;
    assert!(!list.to_string().contains(&id));
    let (s, e) = app
        .send(Method::DELETE, &a.key, &link_path(&id), None)
        .await;
    assert_error(s, &e, 404, "not_found");
    let (s, again) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.net/", "short_code": "life"}),
        )
        .await;
    assert_eq!(s, 201, "{again}");
    assert_ne!(again["id"], created["id"]);
    app.stop().await;
}

/// What each change leaves in the edge's read model (the publisher writes these records).
async fn changes_reach_the_read_model(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let (_, created) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.com/", "short_code": "edge"}),
        )
        .await;
    let id = created["id"].as_str().unwrap();
    let record = || async {
        app.db
            .kv_record("link:sho.rt:edge")
            .await
            .unwrap()
            .map(|r| serde_json::from_str::<Value>(&r).unwrap())
    };
    let fresh = record().await.unwrap();
    assert_eq!(fresh["is_active"], true);
    assert!(
        fresh.get("expires_at").is_none() && fresh.get("forward_query").is_none(),
        "{fresh}"
    );

    let expires = in_secs(600);
    patch(
        &app,
        &a.key,
        id,
        json!({"is_active": false, "forward_query": false, "expires_at": expires}),
    )
    .await;
    let changed = record().await.unwrap();
    assert_eq!(changed["is_active"], false);
    assert_eq!(changed["forward_query"], false);
    let at = time::OffsetDateTime::parse(&expires, &time::format_description::well_known::Rfc3339)
        .unwrap();
    // Stored in microseconds, published in milliseconds rounded up (never reached early).
    let micros = (at.unix_timestamp_nanos() / 1_000) as i64;
    assert_eq!(
        changed["expires_at"].as_i64().unwrap(),
        (micros + 999).div_euclid(1_000)
    );

    // The outbox holds a row for each change (the publisher reads the record then).
    let pending: Vec<String> = app
        .db
        .outbox_batch(100)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, k)| k)
        .collect();
    assert!(
        pending.iter().filter(|k| *k == "link:sho.rt:edge").count() >= 2,
        "{pending:?}"
    );

    app.send(Method::DELETE, &a.key, &link_path(id), None).await;
    assert_eq!(
        record().await,
        None,
        "a deleted link's key is deleted from KV"
    );
    app.stop().await;
}

/// Deleting does not give creations back: the limit counts every link the key created in the hour.
async fn delete_keeps_the_rate_limit(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let bodies: Vec<Value> = (0..100)
        .map(|i| json!({"long_url": format!("https://example.com/{i}")}))
        .collect();
    let (s, bulk) = app
        .send(
            Method::POST,
            &a.key,
            &format!("{LINKS}/bulk-create"),
            Some(json!({"links": bodies})),
        )
        .await;
    assert_eq!(s, 200, "{bulk}");
    let ids: Vec<String> = bulk["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["status"], 201, "{r}");
            r["link"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    for id in &ids[..10] {
        let (s, _) = app.send(Method::DELETE, &a.key, &link_path(id), None).await;
        assert_eq!(s, 204);
    }
    assert_eq!(total(&app, &a.key).await, 90);
    let (s, body) = app
        .create_json(&a.key, json!({"long_url": "https://example.com/more"}))
        .await;
    assert_error(s, &body, 429, "rate_limited");
    app.stop().await;
}

async fn bulk_create(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let path = format!("{LINKS}/bulk-create");
    // The whole request refused, nothing created: no list, an empty one, more than 100, unknown fields, an entry
    // that is not an object.
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"long_url": format!("https://example.com/{i}")}))
        .collect();
    for bad in [
        json!({}),
        json!({"links": []}),
        json!({"links": many}),
        json!({"links": {}}),
        json!({"links": [], "extra": 1}),
        json!({"links": [{"long_url": "https://example.com/ok"}, "not an object"]}),
        json!({"links": [null]}),
    ] {
        let (s, body) = app.send(Method::POST, &a.key, &path, Some(bad)).await;
        assert_error(s, &body, 400, "validation_error");
    }
    assert_eq!(total(&app, &a.key).await, 0);

    // Each entry answered in order, as create-link would answer it alone.
    app.create_json(
        &a.key,
        json!({"long_url": "https://example.com/", "short_code": "taken"}),
    )
    .await;
    let resp = app
        .client
        .post(app.url(&path))
        .header("Authorization", format!("Token {}", a.key))
        .json(&json!({"links": [
            {"long_url": "https://example.com/1", "short_code": "first"},
            {"long_url": "http://example.com/"},
            {"long_url": "https://example.com/2", "short_code": "taken"},
            {"long_url": 42},
            {"long_url": "https://example.com/3", "expires_at": "yesterday"},
            {"long_url": "https://example.com/4", "forward_query": false},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-ratelimit-remaining"], "97");
    let (s, body) = json(resp).await;
    assert_eq!(s, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    let statuses: Vec<(i64, &str)> = results
        .iter()
        .map(|r| {
            (
                r["status"].as_i64().unwrap(),
                r["error_code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (201, ""),
            (400, "validation_error"),
            (400, "short_code_exists"),
            (400, "validation_error"),
            (400, "validation_error"),
            (201, "")
        ]
    );
    assert_eq!(results[0]["link"]["short_url"], "https://sho.rt/first");
    assert!(results[1]["detail"].as_str().unwrap().contains("https://"));
    assert!(
        results[3]["detail"].as_str().unwrap().contains("long_url"),
        "{}",
        results[3]
    );
    assert_eq!(
        results[1].as_object().unwrap().len(),
        3,
        "status, error_code, detail"
    );
    let last = results[5]["link"]["id"].as_str().unwrap();
    assert_eq!(
        read_link(&app, &a.key, last).await.1["forward_query"],
        false
    );
    assert_eq!(total(&app, &a.key).await, 3);
    app.stop().await;
}

/// Bulk and single creations racing on one key: exactly 100 succeed, the rest are 429 (in entries or answers).
async fn bulk_and_single_share_the_limit(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let path = format!("{LINKS}/bulk-create");
    let bulk = |n: usize, tag: usize| {
        let links: Vec<Value> = (0..n)
            .map(|i| json!({"long_url": format!("https://example.com/{tag}/{i}")}))
            .collect();
        app.send(Method::POST, &a.key, &path, Some(json!({"links": links})))
    };
    let single = |i: usize| {
        app.create_json(
            &a.key,
            json!({"long_url": format!("https://example.com/s/{i}")}),
        )
    };
    let (bulks, singles) = tokio::join!(
        join_all([bulk(40, 1), bulk(40, 2), bulk(40, 3)]),
        join_all((0..20).map(single)),
    );
    let mut created = 0;
    let mut limited = 0;
    for (s, body) in bulks {
        assert_eq!(s, 200, "{body}");
        for r in body["results"].as_array().unwrap() {
            match r["status"].as_i64().unwrap() {
                201 => created += 1,
                429 => {
                    assert_eq!(r["error_code"], "rate_limited");
                    limited += 1;
                }
                other => panic!("{other}: {r}"),
            }
        }
    }
    for (s, _) in singles {
        match s {
            201 => created += 1,
            429 => limited += 1,
            other => panic!("{other}"),
        }
    }
    assert_eq!((created, limited), (100, 40));
    assert_eq!(total(&app, &a.key).await, 100);
    app.stop().await;
}

/// `GET links/{id}/qr`: SVG by default, PNG of `size` × `size`; each decodes to the link's short URL.
async fn qr_codes(engine: crate::common::Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let (s, created) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.com/qr", "short_code": "Scan-Me"}),
        )
        .await;
    assert_eq!(s, 201);
    let short_url = created["short_url"].as_str().unwrap();
    let path = format!("{}/qr", link_path(created["id"].as_str().unwrap()));
    let fetch = |query: &'static str| {
        let url = app.url(&format!("{path}{query}"));
        let req = app
            .client
            .get(url)
            .header("Authorization", format!("Token {}", a.key));
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let kind = resp
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned());
            (
                status,
                kind.unwrap_or_default(),
                resp.bytes().await.unwrap(),
            )
        }
    };
    for (query, kind, size) in [
        ("", "image/svg+xml", 256),
        ("?format=svg&size=64", "image/svg+xml", 64),
        ("?format=png", "image/png", 256),
        ("?format=png&size=64", "image/png", 64),
        ("?size=2048&format=png", "image/png", 2048),
        ("?format=png&size=333&cachebust=1", "image/png", 333),
    ] {
        let (s, got, body) = fetch(query).await;
        assert_eq!((s, got.as_str()), (200, kind), "{query}");
        let decoded = if kind == "image/png" {
            link_qr::decode::png(&body)
        } else {
            link_qr::decode::svg(&body)
        };
        assert_eq!(
            decoded.unwrap(),
            (size, size, short_url.to_owned()),
            "{query}"
        );
    }
    for query in [
        "?size=63",
        "?size=2049",
        "?size=abc",
        "?size=",
        "?size=256.5",
        "?size=%2B256",
        "?format=gif",
        "?format=PNG",
        "?size=64&size=128",
        "?format=png&format=svg",
    ] {
        let (s, kind, body) = fetch(query).await;
        assert_eq!(kind, "application/json", "{query}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_error(s, &body, 400, "validation_error");
    }
    // Gone with the link; no code for an unknown id or without a key.
    let (s, _) = app
        .send(
            Method::DELETE,
            &a.key,
            &link_path(created["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (s, body) = app.send(Method::GET, &a.key, &path, None).await;
    assert_error(s, &body, 404, "not_found");
    let (s, body) = app.send(Method::GET, "slk_nope", &path, None).await;
    assert_error(s, &body, 401, "not_authenticated");
    app.stop().await;
}

both_engines!(
    get_patch_delete,
    qr_codes,
    changes_reach_the_read_model,
    delete_keeps_the_rate_limit,
    bulk_create,
    bulk_and_single_share_the_limit,
);
