//! POST /api/v1/external/links/create-link (spec 4.1, 7, 8) on both engines.

use crate::common::{Engine, TestApp, assert_error, json};
use serde_json::json;
use shortlink_store::Actor;

fn is_uuid(v: &serde_json::Value) -> bool {
    v.as_str().is_some_and(|s| uuid::Uuid::try_parse(s).is_ok())
}

async fn creates_with_all_fields(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let domain = app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let resp = app
        .create(
            &acc.key,
            json!({"long_url": "https://example.com/x?y=1", "short_code": "My-Code_1"}),
        )
        .await;
    assert_eq!(resp.headers()["x-ratelimit-limit"], "100");
    assert_eq!(resp.headers()["x-ratelimit-remaining"], "99");
    assert!(
        resp.headers()["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 1_700_000_000
    );
    let (status, body) = json(resp).await;
    assert_eq!(status, 201, "{body}");
    assert!(is_uuid(&body["id"]));
    assert_eq!(body["short_code"], "my-code_1");
    assert_eq!(body["short_url"], "https://sho.rt/my-code_1");
    assert_eq!(body["group_id"], acc.default_group_id.as_str());
    assert_eq!(body["domain"], "sho.rt");
    assert_eq!(body["domain_id"], domain.id.as_str());
    let mut keys: Vec<_> = body.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "domain",
            "domain_id",
            "group_id",
            "id",
            "short_code",
            "short_url"
        ]
    );
    app.stop().await;
}

async fn generates_unique_codes(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut codes = std::collections::HashSet::new();
    for _ in 0..20 {
        let (status, body) = app
            .create_json(&acc.key, json!({"long_url": "https://example.com/"}))
            .await;
        assert_eq!(status, 201);
        let code = body["short_code"].as_str().unwrap().to_owned();
        assert!(
            code.len() >= 3
                && code
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
        assert_eq!(body["short_url"], format!("https://sho.rt/{code}"));
        assert!(codes.insert(code));
    }
    app.stop().await;
}

async fn validation_errors(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let long = format!("https://example.com/{}", "a".repeat(2049 - 20));
    assert_eq!(long.len(), 2049);
    let cases = [
        json!({"long_url": "http://example.com"}),
        json!({"long_url": "ftp://example.com"}),
        json!({"long_url": "example.com"}),
        json!({"long_url": ""}),
        json!({"long_url": long}),
        json!({}),
        json!({"short_code": "abc"}),
        json!({"long_url": 5}),
        json!({"long_url": null}),
        json!({"long_url": ["https://example.com"]}),
        json!({"long_url": "https://example.com", "short_code": "ab"}),
        json!({"long_url": "https://example.com", "short_code": "a".repeat(51)}),
        json!({"long_url": "https://example.com", "short_code": "bad code"}),
        json!({"long_url": "https://example.com", "short_code": "bad/code"}),
        json!({"long_url": "https://example.com", "short_code": "ümlaut"}),
        json!({"long_url": "https://example.com", "short_code": 123}),
        json!({"long_url": "https://example.com", "group_id": "not-a-uuid"}),
        json!({"long_url": format!("https://example.com/{}", "語".repeat(2000))}),
        json!({"long_url": "https://example.com/café"}),
        json!({"long_url": "https://example.com", "domain_id": 7}),
        json!([1, 2]),
        json!("https://example.com"),
    ];
    for body in cases {
        let (status, resp) = json(app.create(&acc.key, body.clone()).await).await;
        assert_error(status, &resp, 400, "validation_error");
        let _ = body;
    }
    // Boundaries that must pass.
    let ok = format!("https://example.com/{}", "a".repeat(2048 - 20));
    let (status, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": ok, "short_code": "a".repeat(50)}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = app.create_json(&acc.key, json!({"long_url": "https://example.com", "short_code": "abc", "group_id": null, "domain_id": null})).await;
    assert_eq!(status, 201);
    app.stop().await;
}

async fn malformed_bodies(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let post = |body: &'static str, ctype: Option<&'static str>| {
        let mut req = app
            .client
            .post(app.url("/api/v1/external/links/create-link"))
            .header("Authorization", format!("Token {}", acc.key))
            .body(body);
        if let Some(c) = ctype {
            req = req.header("content-type", c);
        }
        req.send()
    };
    for bad in ["{", "", "not json", "{\"long_url\": \"https://a.com\",}"] {
        let (status, body) = json(post(bad, Some("application/json")).await.unwrap()).await;
        assert_error(status, &body, 400, "invalid_json");
    }
    let (status, body) = json(
        post("{\"long_url\":\"https://a.com\"}", Some("text/plain"))
            .await
            .unwrap(),
    )
    .await;
    assert_error(status, &body, 415, "unsupported_media_type");
    let (status, body) = json(
        post("{\"long_url\":\"https://a.com\"}", None)
            .await
            .unwrap(),
    )
    .await;
    assert_error(status, &body, 415, "unsupported_media_type");
    let (status, _) = json(
        post(
            "{\"long_url\":\"https://a.com\"}",
            Some("application/json; charset=utf-8"),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 201);
    let huge = format!("{{\"long_url\":\"https://a.com/{}\"}}", "a".repeat(100_000));
    let resp = app
        .client
        .post(app.url("/api/v1/external/links/create-link"))
        .header("Authorization", format!("Token {}", acc.key))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    let (status, body) = json(resp).await;
    assert_error(status, &body, 413, "payload_too_large");
    app.stop().await;
}

async fn short_code_exists_per_domain(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let custom = app.custom_domain("go.acme.com", &acc).await;
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com", "short_code": "promo"}),
        )
        .await;
    assert_eq!(s, 201);
    // Stored lowercase, so a different case is the same code; another account too.
    for (key, code) in [(&acc.key, "PROMO"), (&other.key, "promo")] {
        let (s, body) = app
            .create_json(
                key,
                json!({"long_url": "https://b.com", "short_code": code}),
            )
            .await;
        assert_error(s, &body, 400, "short_code_exists");
    }
    // The same code on another domain is free.
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://b.com", "short_code": "promo", "domain_id": custom.id}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    assert_eq!(body["short_url"], "https://go.acme.com/promo");
    // A failed creation does not count against the limit.
    let resp = app
        .create(&acc.key, json!({"long_url": "https://c.com"}))
        .await;
    assert_eq!(resp.headers()["x-ratelimit-remaining"], "97");
    app.stop().await;
}

async fn concurrent_same_code_one_winner(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut keys = Vec::new();
    for _ in 0..4 {
        keys.push(app.account(true).await.key);
    }
    let requests = (0..20).map(|i| {
        app.create(
            &keys[i % 4],
            json!({"long_url": "https://a.com", "short_code": "race"}),
        )
    });
    let responses = futures::future::join_all(requests).await;
    let mut created = 0;
    let mut exists = 0;
    for r in responses {
        let (s, body) = json(r).await;
        match s {
            201 => created += 1,
            400 if body["error_code"] == "short_code_exists" => exists += 1,
            _ => panic!("unexpected {s} {body}"),
        }
    }
    assert_eq!((created, exists), (1, 19));
    app.stop().await;
}

async fn group_fallbacks(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let mine = app.group(&acc, "Campaign").await;
    let theirs = app.group(&other, "Theirs").await;
    let unknown = uuid::Uuid::new_v4().to_string();
    for (requested, expected) in [
        (Some(mine.clone()), mine.clone()),
        (Some(mine.to_uppercase()), mine.clone()),
        (Some(theirs.clone()), acc.default_group_id.clone()),
        (
            Some(other.default_group_id.clone()),
            acc.default_group_id.clone(),
        ),
        (Some(unknown), acc.default_group_id.clone()),
        (None, acc.default_group_id.clone()),
    ] {
        let (s, body) = app
            .create_json(
                &acc.key,
                json!({"long_url": "https://a.com", "group_id": requested}),
            )
            .await;
        assert_eq!(s, 201);
        assert_eq!(
            body["group_id"],
            expected.as_str(),
            "requested {requested:?}"
        );
    }
    app.stop().await;
}

async fn domain_fallbacks(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let first = app.platform_domain("first.rt").await;
    let disabled = app.platform_domain("second.rt").await;
    app.db
        .disable_domain(&disabled.id, &Actor::Operator)
        .await
        .unwrap();
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let mine = app.custom_domain("go.mine.com", &acc).await;
    let inactive = app.custom_domain("old.mine.com", &acc).await;
    app.db
        .disable_domain(&inactive.id, &Actor::Operator)
        .await
        .unwrap();
    let theirs = app.custom_domain("go.theirs.com", &other).await;
    for (requested, expected) in [
        (Some(mine.id.clone()), &mine),
        (Some(first.id.clone()), &first),
        (Some(disabled.id.clone()), &first),
        (Some(inactive.id.clone()), &first),
        (Some(theirs.id.clone()), &first),
        (Some(uuid::Uuid::new_v4().to_string()), &first),
        (None, &first),
    ] {
        let (s, body) = app
            .create_json(
                &acc.key,
                json!({"long_url": "https://a.com", "domain_id": requested}),
            )
            .await;
        assert_eq!(s, 201);
        assert_eq!(
            body["domain_id"],
            expected.id.as_str(),
            "requested {requested:?}"
        );
        assert_eq!(body["domain"], expected.domain.as_str());
    }
    app.stop().await;
}

async fn platform_domain_unavailable(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let (s, body) = app
        .create_json(&acc.key, json!({"long_url": "https://a.com"}))
        .await;
    assert_error(s, &body, 400, "platform_domain_unavailable");
    let d = app.platform_domain("sho.rt").await;
    app.db
        .disable_domain(&d.id, &Actor::Operator)
        .await
        .unwrap();
    let custom = app.custom_domain("go.acme.com", &acc).await;
    let (s, body) = app
        .create_json(&acc.key, json!({"long_url": "https://a.com"}))
        .await;
    assert_error(s, &body, 400, "platform_domain_unavailable");
    // A custom domain passed explicitly still works, as the error message suggests.
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://a.com", "domain_id": custom.id}),
        )
        .await;
    assert_eq!(s, 201);
    app.stop().await;
}

async fn blocked_destinations_refused(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    app.db
        .block_domain(&shortlink_store::domain::Hostname::parse("evil.example").unwrap())
        .await
        .unwrap();
    for url in [
        "https://evil.example/x",
        "https://a.b.EVIL.example./",
        "https://ok.com@evil.example/",
    ] {
        let (s, body) = app.create_json(&acc.key, json!({"long_url": url})).await;
        assert_error(s, &body, 400, "validation_error");
    }
    for url in [
        "https://notevil.example/",
        "https://evil.example.com/",
        "https://evil.example@ok.com/",
    ] {
        let (s, body) = app.create_json(&acc.key, json!({"long_url": url})).await;
        assert_eq!(s, 201, "{url}: {body}");
    }
    app.stop().await;
}

both_engines!(
    creates_with_all_fields,
    generates_unique_codes,
    validation_errors,
    malformed_bodies,
    short_code_exists_per_domain,
    concurrent_same_code_one_winner,
    group_fallbacks,
    domain_fallbacks,
    platform_domain_unavailable,
    blocked_destinations_refused,
);
