//! Authentication and permission (spec 5, 7) on every management endpoint, both engines.

use crate::common::{Engine, TestApp, assert_error, json};
use reqwest::Method;
use shortlink_store::Actor;

const ENDPOINTS: [(&str, &str); 4] = [
    ("POST", "/api/v1/external/links/create-link"),
    ("GET", "/api/v1/external/links"),
    ("GET", "/api/v1/external/links/enabled-domains"),
    ("GET", "/api/v1/external/groups"),
];

async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    auth: Option<String>,
) -> (u16, serde_json::Value, reqwest::header::HeaderMap) {
    let mut req = app.client.request(
        Method::from_bytes(method.as_bytes()).unwrap(),
        app.url(path),
    );
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    if method == "POST" {
        req = req.json(&serde_json::json!({"long_url": "https://example.com"}));
    }
    let resp = req.send().await.unwrap();
    let headers = resp.headers().clone();
    let (s, b) = json(resp).await;
    (s, b, headers)
}

async fn rejects_bad_credentials(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let unknown = format!("slk_{}", "A".repeat(40));
    let bad: Vec<Option<String>> = vec![
        None,
        Some(format!("Bearer {}", acc.key)),
        Some(acc.key.clone()),
        Some("Token".to_owned()),
        Some("Token ".to_owned()),
        Some("Token not-a-key".to_owned()),
        Some(format!("Token {}", &acc.key[..acc.key.len() - 1])),
        Some(format!("Token {unknown}")),
        Some(format!("Basic {}", acc.key)),
    ];
    for (method, path) in ENDPOINTS {
        for auth in &bad {
            let (s, body, headers) = call(&app, method, path, auth.clone()).await;
            assert_error(s, &body, 401, "not_authenticated");
            assert_eq!(
                headers["www-authenticate"], "Token",
                "{method} {path} {auth:?}"
            );
        }
        let (s, body, _) = call(&app, method, path, Some(format!("Token {}", acc.key))).await;
        assert!(s == 200 || s == 201, "{method} {path}: {s} {body}");
    }
    app.stop().await;
}

async fn regenerate_and_revoke(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let old = format!("Token {}", acc.key);
    let new_key = app
        .db
        .generate_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap();
    let new = format!("Token {}", new_key.expose());
    for (method, path) in ENDPOINTS {
        let (s, body, _) = call(&app, method, path, Some(old.clone())).await;
        assert_error(s, &body, 401, "not_authenticated");
    }
    let (s, _, _) = call(&app, "GET", "/api/v1/external/groups", Some(new.clone())).await;
    assert_eq!(s, 200);
    app.db
        .revoke_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap();
    for (method, path) in ENDPOINTS {
        let (s, body, _) = call(&app, method, path, Some(new.clone())).await;
        assert_error(s, &body, 401, "not_authenticated");
    }
    // A new key can be generated after a revoke.
    let again = app
        .db
        .generate_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap();
    let (s, _, _) = call(
        &app,
        "GET",
        "/api/v1/external/groups",
        Some(format!("Token {}", again.expose())),
    )
    .await;
    assert_eq!(s, 200);
    // Only a masked form is kept.
    let masked = app.db.masked_api_key(&acc.id).await.unwrap().unwrap();
    assert!(masked.starts_with("slk_") && masked.contains("****"));
    assert!(masked.ends_with(&again.expose()[again.expose().len() - 4..]));
    assert!(!masked.contains(&again.expose()[4..36]));
    app.stop().await;
}

async fn no_api_access_is_403(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(false).await;
    for (method, path) in ENDPOINTS {
        let (s, body, _) = call(&app, method, path, Some(format!("Token {}", acc.key))).await;
        assert_error(s, &body, 403, "permission_denied");
    }
    app.stop().await;
}

async fn unknown_routes_and_methods(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let auth = Some(format!("Token {}", acc.key));
    for (method, path) in [
        ("GET", "/nope"),
        ("GET", "/api/v1/external/links/x/y"),
        ("POST", "/api/v2/external/groups"),
    ] {
        let (s, body, _) = call(&app, method, path, auth.clone()).await;
        assert_error(s, &body, 404, "not_found");
    }
    for (method, path) in [
        ("GET", "/api/v1/external/links/create-link"),
        ("DELETE", "/api/v1/external/links"),
        ("PUT", "/api/v1/external/groups"),
        ("PUT", "/api/v1/external/links/enabled-domains"),
        ("GET", "/api/v1/external/links/bulk-create"),
        (
            "PUT",
            "/api/v1/external/links/0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10",
        ),
        (
            "GET",
            "/api/v1/external/groups/0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10/rotate-key",
        ),
    ] {
        let (s, body, _) = call(&app, method, path, auth.clone()).await;
        assert_error(s, &body, 405, "method_not_allowed");
    }
    let (s, body, _) = call(&app, "GET", "/healthz", None).await;
    assert_eq!(s, 200);
    assert_eq!(body["status"], "ok");
    assert!(body["publisher"]["pending"].is_i64(), "{body}");
    app.stop().await;
}

both_engines!(
    rejects_bad_credentials,
    regenerate_and_revoke,
    no_api_access_is_403,
    unknown_routes_and_methods
);
