//! The create-link limit (spec 8: 100 per hour per key), exact under concurrency, shared by
//! several origin processes through the database.

use crate::common::{Engine, TestApp, TestDb, assert_error, json, start_server};
use serde_json::json;
use shortlink_store::Actor;

async fn count(responses: Vec<reqwest::Response>) -> (usize, usize) {
    let (mut created, mut limited) = (0, 0);
    for r in responses {
        let headers = r.headers().clone();
        let (s, body) = json(r).await;
        match s {
            201 => {
                created += 1;
                assert_eq!(headers["x-ratelimit-limit"], "100");
            }
            429 => {
                limited += 1;
                assert_error(s, &body, 429, "rate_limited");
                let retry: i64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
                assert!((1..=3600).contains(&retry), "retry-after {retry}");
                assert_eq!(headers["x-ratelimit-limit"], "100");
                assert_eq!(headers["x-ratelimit-remaining"], "0");
                assert!(
                    headers["x-ratelimit-reset"]
                        .to_str()
                        .unwrap()
                        .parse::<i64>()
                        .unwrap()
                        > 1_700_000_000
                );
            }
            _ => panic!("unexpected {s}: {body}"),
        }
    }
    (created, limited)
}

async fn exact_under_concurrency(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let requests = (0..130).map(|i| {
        app.create(
            &acc.key,
            json!({"long_url": format!("https://example.com/{i}")}),
        )
    });
    let responses = futures::future::join_all(requests).await;
    assert_eq!(count(responses).await, (100, 30));
    let (_, list) = json(app.get(&acc.key, "/api/v1/external/links?limit=1").await).await;
    assert_eq!(list["total"], 100);
    // Other endpoints are not limited, and another key has its own budget.
    assert_eq!(
        app.get(&acc.key, "/api/v1/external/groups").await.status(),
        200
    );
    let other = app.account(true).await;
    assert_eq!(
        app.create(&other.key, json!({"long_url": "https://example.com"}))
            .await
            .status(),
        201
    );
    // A regenerated key is a new key with a new budget (spec: the limit is per API key).
    let fresh = app
        .db
        .generate_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(
        app.create(fresh.expose(), json!({"long_url": "https://example.com"}))
            .await
            .status(),
        201
    );
    app.stop().await;
}

async fn remaining_counts_down(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut reset = None;
    for i in 0..5 {
        let r = app
            .create(&acc.key, json!({"long_url": "https://example.com"}))
            .await;
        assert_eq!(
            r.headers()["x-ratelimit-remaining"],
            (99 - i).to_string().as_str()
        );
        let this_reset = r.headers()["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .to_owned();
        // The window is rolling: the reset is when the first creation leaves it.
        assert_eq!(reset.get_or_insert(this_reset.clone()), &this_reset);
        assert!(r.headers().get("retry-after").is_none());
    }
    app.stop().await;
}

async fn shared_by_two_processes(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let a = start_server(&test_db.url, "warn").await;
    let b = start_server(&test_db.url, "warn").await;
    let app = TestApp::on(test_db).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let client = reqwest::Client::new();
    let requests = (0..130).map(|i| {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        client
            .post(format!("{base}/api/v1/external/links/create-link"))
            .header("Authorization", format!("Token {}", acc.key))
            .json(&json!({"long_url": format!("https://example.com/{i}")}))
            .send()
    });
    let responses: Vec<_> = futures::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(count(responses).await, (100, 30));
    drop((a, b));
    app.stop().await;
}

both_engines!(
    exact_under_concurrency,
    remaining_counts_down,
    shared_by_two_processes
);
