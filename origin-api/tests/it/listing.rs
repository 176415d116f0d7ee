//! GET links (4.2), enabled-domains (4.3) and groups (4.4) on both engines.

use crate::common::{Engine, TestApp, assert_error, json};
use serde_json::{Value, json};
use shortlink_store::Actor;

async fn pages_newest_first(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    app.create(&other.key, json!({"long_url": "https://other.com"}))
        .await;
    let mut codes = Vec::new();
    for i in 0..25 {
        let (s, body) = app.create_json(&acc.key, json!({"long_url": format!("https://example.com/{i}"), "short_code": format!("code{i:02}")})).await;
        assert_eq!(s, 201);
        codes.push(body["short_code"].as_str().unwrap().to_owned());
    }
    codes.reverse();
    let (s, body) = json(app.get(&acc.key, "/api/v1/external/links").await).await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            body["offset"].clone(),
            body["limit"].clone(),
            body["total"].clone()
        ),
        (json!(0), json!(20), json!(25))
    );
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 20);
    let first = &results[0];
    let mut keys: Vec<_> = first.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "android_url",
            "created_at",
            "domain",
            "expired_url",
            "expires_at",
            "forward_query",
            "group_id",
            "id",
            "ios_url",
            "is_active",
            "long_url",
            "max_clicks",
            "og_description",
            "og_image",
            "og_title",
            "password_protected",
            "redirect_status",
            "rules",
            "short_code",
            "tags",
            "title"
        ]
    );
    assert_eq!(first["short_code"], "code24");
    assert_eq!(first["long_url"], "https://example.com/24");
    assert_eq!(first["domain"], "sho.rt");
    assert_eq!(first["group_id"], acc.default_group_id.as_str());
    assert_eq!(first["is_active"], true);
    let created = first["created_at"].as_str().unwrap();
    assert_eq!(created.len(), 27, "{created}");
    assert!(
        created.ends_with('Z') && created.as_bytes()[19] == b'.' && created.as_bytes()[10] == b'T',
        "{created}"
    );
    assert!(created[20..26].bytes().all(|b| b.is_ascii_digit()));
    // Paging through all of them as the spec describes.
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let (_, page) = json(
            app.get(
                &acc.key,
                &format!("/api/v1/external/links?limit=7&offset={offset}"),
            )
            .await,
        )
        .await;
        assert_eq!(page["limit"], 7);
        assert_eq!(page["offset"], offset);
        for r in page["results"].as_array().unwrap() {
            seen.push(r["short_code"].as_str().unwrap().to_owned());
        }
        let total = page["total"].as_u64().unwrap();
        offset += 7;
        if offset >= total {
            break;
        }
    }
    assert_eq!(seen, codes);
    let (_, page) = json(
        app.get(&acc.key, "/api/v1/external/links?offset=1000")
            .await,
    )
    .await;
    assert_eq!(page["results"], json!([]));
    assert_eq!(page["total"], 25);
    app.stop().await;
}

async fn filters(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    for url in [
        "https://a.com/x",
        "https://a.com/x",
        "https://a.com/xy",
        "https://a.com/100%_off",
        "https://a.com/100abcoff",
        "https://b.com/x",
    ] {
        assert_eq!(
            app.create(&acc.key, json!({"long_url": url}))
                .await
                .status(),
            201
        );
    }
    let q = |query: &str| {
        let path = format!("/api/v1/external/links?{query}");
        let app = &app;
        let key = acc.key.clone();
        async move {
            let (s, body) = json(app.get(&key, &path).await).await;
            assert_eq!(s, 200, "{body}");
            let urls: Vec<String> = body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["long_url"].as_str().unwrap().to_owned())
                .collect();
            (body["total"].as_i64().unwrap(), urls)
        }
    };
    let enc = |s: &str| form_encode(s);
    assert_eq!(
        q(&format!("long_url={}", enc("https://a.com/x"))).await.0,
        2
    );
    assert_eq!(
        q(&format!("long_url={}&match=exact", enc("https://a.com/x")))
            .await
            .0,
        2
    );
    assert_eq!(
        q(&format!(
            "long_url={}&match=startswith",
            enc("https://a.com/x")
        ))
        .await
        .0,
        3
    );
    assert_eq!(
        q(&format!(
            "long_url={}&match=startswith",
            enc("https://a.com/")
        ))
        .await
        .0,
        5
    );
    // % and _ are literal characters, not wildcards.
    let (total, urls) = q(&format!(
        "long_url={}&match=startswith",
        enc("https://a.com/100%_")
    ))
    .await;
    assert_eq!(
        (total, urls),
        (1, vec!["https://a.com/100%_off".to_owned()])
    );
    assert_eq!(
        q(&format!(
            "long_url={}&match=startswith",
            enc("https://a.com/_")
        ))
        .await
        .0,
        0
    );
    assert_eq!(
        q(&format!("long_url={}", enc("https://a.com/100%_off")))
            .await
            .0,
        1
    );
    assert_eq!(
        q(&format!(
            "long_url={}&match=startswith&limit=1",
            enc("https://")
        ))
        .await,
        (6, vec!["https://b.com/x".to_owned()])
    );
    assert_eq!(q("long_url=nothing").await, (0, vec![]));
    app.stop().await;
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn bad_query_values(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let long = "a".repeat(2049);
    for (query, code) in [
        ("limit=0", "invalid_limit"),
        ("limit=101", "invalid_limit"),
        ("limit=abc", "invalid_limit"),
        ("limit=-5", "invalid_limit"),
        ("limit=", "invalid_limit"),
        ("limit=10&limit=20", "invalid_limit"),
        ("offset=-1", "invalid_offset"),
        ("offset=1.5", "invalid_offset"),
        ("offset=99999999999999999999999", "invalid_offset"),
        ("match=prefix", "invalid_match"),
        ("match=", "invalid_match"),
        (&format!("long_url={long}"), "invalid_long_url"),
    ] {
        let (s, body) = json(
            app.get(&acc.key, &format!("/api/v1/external/links?{query}"))
                .await,
        )
        .await;
        assert_error(s, &body, 400, code);
    }
    for ok in [
        "limit=1",
        "limit=100",
        "offset=0",
        "match=startswith",
        "unknown=1",
        &format!("long_url={}", "a".repeat(2048)),
    ] {
        let (s, body) = json(
            app.get(&acc.key, &format!("/api/v1/external/links?{ok}"))
                .await,
        )
        .await;
        assert_eq!(s, 200, "{ok}: {body}");
    }
    app.stop().await;
}

async fn enabled_domains_sorted_and_scoped(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let z = app.platform_domain("zz.rt").await;
    let a = app.platform_domain("aa.rt").await;
    let off = app.platform_domain("off.rt").await;
    app.db
        .disable_domain(&off.id, &Actor::Operator)
        .await
        .unwrap();
    let mine = app.custom_domain("mm.acme.com", &acc).await;
    let gone = app.custom_domain("bb.acme.com", &acc).await;
    app.db
        .disable_domain(&gone.id, &Actor::Operator)
        .await
        .unwrap();
    app.custom_domain("cc.theirs.com", &other).await;
    let (s, body) = json(
        app.get(&acc.key, "/api/v1/external/links/enabled-domains")
            .await,
    )
    .await;
    assert_eq!(s, 200);
    let want: Value = json!({"results": [
        {"id": a.id, "domain": "aa.rt"},
        {"id": mine.id, "domain": "mm.acme.com"},
        {"id": z.id, "domain": "zz.rt"},
    ]});
    assert_eq!(body, want);
    app.stop().await;
}

async fn groups_sorted_and_scoped(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let b = app.group(&acc, "beta").await;
    let a = app.group(&acc, "Alpha").await;
    let z = app.group(&acc, "zeta").await;
    app.group(&other, "aaa-not-mine").await;
    let (s, body) = json(app.get(&acc.key, "/api/v1/external/groups").await).await;
    assert_eq!(s, 200);
    let want = json!({"results": [
        {"id": a, "name": "Alpha"},
        {"id": b, "name": "beta"},
        {"id": acc.default_group_id, "name": "Default"},
        {"id": z, "name": "zeta"},
    ]});
    assert_eq!(body, want);
    app.stop().await;
}

both_engines!(
    pages_newest_first,
    filters,
    bad_query_values,
    enabled_domains_sorted_and_scoped,
    groups_sorted_and_scoped
);
