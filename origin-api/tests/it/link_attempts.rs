//! The throttle of a protected link's password form (issue 25), as the worker asks for it, on both engines: 10
//! attempts per link and address in 15 minutes, exact under parallel reservations; a right password gives its
//! attempt back; IPv6 visitors counted per /64; the routes refuse bad input and callers without the secret.

use crate::common::{Engine, TestApp, TestDb, assert_error, json};
use serde_json::{Value, json};

const SECRET: &str = "internal-test-secret-0123456789abcdef";

async fn app(engine: Engine) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into())
    })
    .await
}

async fn call(app: &TestApp, path: &str, bearer: &str, body: Value) -> (u16, Value) {
    json(
        app.client
            .post(app.url(path))
            .bearer_auth(bearer)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn reserve(app: &TestApp, code: &str, address: &str) -> Value {
    let (s, b) = call(
        app,
        "/internal/v1/password-attempts",
        SECRET,
        json!({"host": "sho.rt", "code": code, "address": address}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b
}

async fn give_back(app: &TestApp, code: &str, address: &str, at: &Value) {
    let resp = app
        .client
        .post(app.url("/internal/v1/password-attempts/give-back"))
        .bearer_auth(SECRET)
        .json(&json!({"host": "sho.rt", "code": code, "address": address, "at": at}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
}

async fn ten_attempts_per_link_and_address(engine: Engine) {
    let app = app(engine).await;
    // 25 reservations at once from one address: exactly 10 go ahead.
    let answers =
        futures::future::join_all((0..25).map(|_| reserve(&app, "secret", "198.51.100.9"))).await;
    let allowed = answers.iter().filter(|a| a["allowed"] == true).count();
    assert_eq!(allowed, 10, "{answers:?}");
    let refused: Vec<&Value> = answers.iter().filter(|a| a["allowed"] == false).collect();
    assert_eq!(refused.len(), 15);
    for r in &refused {
        let wait = r["retry_after"].as_i64().unwrap();
        assert!((1..=900).contains(&wait), "{r}");
        assert_eq!(r.as_object().unwrap().len(), 2, "{r}");
    }
    // Other addresses and other links have budgets of their own; an IPv6 visitor counts by its /64.
    assert_eq!(
        reserve(&app, "secret", "198.51.100.10").await["allowed"],
        true
    );
    assert_eq!(
        reserve(&app, "other", "198.51.100.9").await["allowed"],
        true
    );
    for i in 0..10 {
        assert_eq!(
            reserve(&app, "secret", &format!("2001:db8:1:2::{i:x}")).await["allowed"],
            true,
            "{i}"
        );
    }
    assert_eq!(
        reserve(&app, "secret", "2001:db8:1:2:ffff::1").await["allowed"],
        false,
        "the same /64"
    );
    assert_eq!(
        reserve(&app, "secret", "2001:db8:1:3::1").await["allowed"],
        true
    );
    // A right password gives its attempt back: the address has one again, and only one.
    let fresh = "203.0.113.5";
    let mut last = Value::Null;
    for _ in 0..10 {
        last = reserve(&app, "secret", fresh).await;
        assert_eq!(last["allowed"], true);
    }
    assert_eq!(reserve(&app, "secret", fresh).await["allowed"], false);
    give_back(&app, "secret", fresh, &last["at"]).await;
    assert_eq!(reserve(&app, "secret", fresh).await["allowed"], true);
    assert_eq!(reserve(&app, "secret", fresh).await["allowed"], false);
    // Giving back what is not there changes nothing.
    give_back(&app, "secret", fresh, &json!(1)).await;
    assert_eq!(reserve(&app, "secret", fresh).await["allowed"], false);
    app.stop().await;
}

async fn bad_requests_are_refused(engine: Engine) {
    let app = app(engine).await;
    let path = "/internal/v1/password-attempts";
    let ok = json!({"host": "sho.rt", "code": "abc", "address": "192.0.2.1"});
    // Only the edge.
    let (s, _) = call(
        &app,
        path,
        "not-the-secret-0123456789abcdef0123",
        ok.clone(),
    )
    .await;
    assert_eq!(s, 401);
    for (body, what) in [
        (
            json!({"host": "sho.rt", "code": "abc", "address": "not an ip"}),
            "address",
        ),
        (
            json!({"host": "sho.rt", "code": "abc", "address": ""}),
            "address",
        ),
        (
            json!({"host": "Sho.rt", "code": "abc", "address": "192.0.2.1"}),
            "host",
        ),
        (
            json!({"host": "", "code": "abc", "address": "192.0.2.1"}),
            "host",
        ),
        (
            json!({"host": "a".repeat(254), "code": "abc", "address": "192.0.2.1"}),
            "host",
        ),
        (
            json!({"host": "sho.rt", "code": "a/b", "address": "192.0.2.1"}),
            "code",
        ),
        (
            json!({"host": "sho.rt", "code": "a".repeat(65), "address": "192.0.2.1"}),
            "code",
        ),
        (json!({"host": "sho.rt", "code": "abc"}), "address"),
        (
            json!({"host": "sho.rt", "code": "abc", "address": "192.0.2.1", "password": "x"}),
            "password",
        ),
    ] {
        let (s, b) = call(&app, path, SECRET, body.clone()).await;
        assert_error(s, &b, 400, "validation_error");
        assert!(b["detail"].as_str().unwrap().contains(what), "{body} → {b}");
    }
    let (s, b) = call(&app, "/internal/v1/password-attempts/give-back", SECRET, ok).await;
    assert_error(s, &b, 400, "validation_error");
    assert!(b["detail"].as_str().unwrap().contains("at"), "{b}");
    // A body past the bound is refused before it is parsed.
    let (s, b) = call(
        &app,
        path,
        SECRET,
        json!({"host": "sho.rt", "code": "abc", "address": "x".repeat(2000)}),
    )
    .await;
    assert_error(s, &b, 413, "payload_too_large");
    app.stop().await;
}

crate::both_engines!(ten_attempts_per_link_and_address, bad_requests_are_refused);
