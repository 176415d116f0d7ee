//! POST /api/v1/public/links/validate-dynamic (spec 4.6) on both engines: success true only
//! for a token that decrypts under the group's key, carries a valid payload, is not expired,
//! and whose destination is accepted; 400 for bodies it cannot evaluate; 429 per client IP.

use crate::common::{Engine, TestApp, TestDb, assert_error, json};
use serde_json::{Value, json};
use shared_crypto::{GroupKey, Payload, TokenCipher};
use shortlink_store::Actor;
use shortlink_store::domain::{GroupSettings, Hostname};

const PATH: &str = "/api/v1/public/links/validate-dynamic";

async fn post(app: &TestApp, body: Value) -> (u16, Value) {
    json(
        app.client
            .post(app.url(PATH))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn seal(key: &str, payload: &Payload) -> String {
    TokenCipher::new(&GroupKey::from_base64url(key).unwrap())
        .seal_random(payload)
        .unwrap()
}

fn payload(url: &str, back: Option<&str>, expires_at: Option<i64>) -> Payload {
    let mut p = Payload::new(url);
    p.back_param = back.map(str::to_owned);
    p.expires_at = expires_at;
    p
}

/// The token with one character replaced by a different one.
fn tamper(token: &str, at: usize) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

async fn success(app: &TestApp, group_id: &str, token: &str) -> bool {
    let (status, body) = post(app, json!({"group_id": group_id, "signature": token})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    body["success"].as_bool().unwrap()
}

async fn evaluates_tokens(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let group = app
        .db
        .create_group(&acc.id, "Dyn", &GroupSettings::default(), &Actor::Operator)
        .await
        .unwrap();
    let other = app
        .db
        .create_group(
            &acc.id,
            "Other",
            &GroupSettings::default(),
            &Actor::Operator,
        )
        .await
        .unwrap();
    app.db
        .block_domain(&Hostname::parse("blocked.example").unwrap())
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let valid = [
        payload("https://dest.example/path", None, None),
        payload("http://dest.example/upgraded", None, None),
        payload("https://dest.example/p", Some("utm=1"), Some(now + 3600)),
        payload("https://notblocked.example/", None, None),
    ];
    for p in &valid {
        assert!(
            success(&app, &group.id, &seal(&group.key, p)).await,
            "{p:?}"
        );
    }
    // Upper-case UUIDs name the same group.
    assert!(success(&app, &group.id.to_uppercase(), &seal(&group.key, &valid[0])).await);

    let good = seal(&group.key, &valid[0]);
    let long = format!("https://dest.example/{}", "a".repeat(2049 - 21));
    assert_eq!(long.len(), 2049);
    let cipher = TokenCipher::new(&GroupKey::from_base64url(&group.key).unwrap());
    let invalid: Vec<(String, String)> = vec![
        // cannot be decrypted
        (group.id.clone(), seal(&other.key, &valid[0])),
        (group.id.clone(), tamper(&good, 20)),
        (group.id.clone(), tamper(&good, good.len() - 2)),
        (group.id.clone(), "not a token".to_owned()),
        (group.id.clone(), String::new()),
        (group.id.clone(), format!("{good}==")),
        // payload invalid
        (
            group.id.clone(),
            cipher.seal_plaintext(b"not json", [1; 12]),
        ),
        (
            group.id.clone(),
            cipher.seal_plaintext(br#"{"back_param":"x"}"#, [2; 12]),
        ),
        (
            group.id.clone(),
            cipher.seal_plaintext(br#"{"destination_url":42}"#, [3; 12]),
        ),
        // expired
        (
            group.id.clone(),
            seal(
                &group.key,
                &payload("https://dest.example/", None, Some(now - 1)),
            ),
        ),
        // destination not accepted
        (
            group.id.clone(),
            seal(&group.key, &payload("ftp://dest.example/", None, None)),
        ),
        (
            group.id.clone(),
            seal(&group.key, &payload("javascript:alert(1)", None, None)),
        ),
        (
            group.id.clone(),
            seal(&group.key, &payload(&long, None, None)),
        ),
        (
            group.id.clone(),
            seal(
                &group.key,
                &payload(&long[..long.len() - 3], Some("abcd"), None),
            ),
        ),
        (
            group.id.clone(),
            seal(&group.key, &payload("https://blocked.example/", None, None)),
        ),
        (
            group.id.clone(),
            seal(
                &group.key,
                &payload("https://a.b.blocked.example/", None, None),
            ),
        ),
        // group does not exist
        (uuid::Uuid::new_v4().to_string(), good.clone()),
        ("not-a-uuid".to_owned(), good.clone()),
    ];
    assert!(
        success(
            &app,
            &group.id,
            &seal(&group.key, &payload(&long[..long.len() - 1], None, None))
        )
        .await,
        "2048 is allowed"
    );
    for (i, (gid, token)) in invalid.into_iter().enumerate() {
        assert!(
            !success(&app, &gid, &token).await,
            "case {i}: {gid} {token}"
        );
    }
    // Deleting the group invalidates its tokens (spec 2).
    app.db
        .delete_group(None, &group.id, &Actor::Operator)
        .await
        .unwrap();
    assert!(!success(&app, &group.id, &good).await);
    app.stop().await;
}

async fn malformed_requests(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    for body in [
        json!({}),
        json!({"group_id": "x"}),
        json!({"signature": "x"}),
        json!({"group_id": 1, "signature": "x"}),
        json!([]),
    ] {
        let (s, b) = post(&app, body).await;
        assert_error(s, &b, 400, "validation_error");
    }
    let send = |body: String, ctype: &'static str| {
        app.client
            .post(app.url(PATH))
            .header("content-type", ctype)
            .body(body)
            .send()
    };
    let (s, b) = json(send("{".to_owned(), "application/json").await.unwrap()).await;
    assert_error(s, &b, 400, "invalid_json");
    let (s, b) = json(send("{}".to_owned(), "text/plain").await.unwrap()).await;
    assert_error(s, &b, 415, "unsupported_media_type");
    let huge = format!(r#"{{"group_id":"x","signature":"{}"}}"#, "A".repeat(10_000));
    let (s, b) = json(send(huge, "application/json").await.unwrap()).await;
    assert_error(s, &b, 413, "payload_too_large");
    let (s, b) = json(app.client.get(app.url(PATH)).send().await.unwrap()).await;
    assert_error(s, &b, 405, "method_not_allowed");
    app.stop().await;
}

async fn limited_per_client_ip(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.validate_burst = 5;
        s.validate_per_minute = 1;
        s.client_ip_header = Some("X-Forwarded-For".to_owned());
    })
    .await;
    let body = json!({"group_id": uuid::Uuid::new_v4().to_string(), "signature": "x"});
    let from = |ip: &str| {
        app.client
            .post(app.url(PATH))
            .header("x-forwarded-for", ip)
            .json(&body)
            .send()
    };
    // Behind one proxy the client is the right-most entry: what the client wrote to its left changes nothing.
    for left in [
        "10.0.0.1",
        "10.0.0.2",
        "192.0.2.9",
        "not an address",
        "10.0.0.5",
    ] {
        let header = format!("{left}, 203.0.113.7");
        assert_eq!(from(&header).await.unwrap().status(), 200);
    }
    let resp = from("203.0.113.7").await.unwrap();
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let (s, b) = json(resp).await;
    assert_error(s, &b, 429, "rate_limited");
    // Another client is unaffected.
    assert_eq!(from("198.51.100.1").await.unwrap().status(), 200);
    app.stop().await;
}

both_engines!(evaluates_tokens, malformed_requests, limited_per_client_ip);
