//! Smart links (issue 25), the API and storage slice: every field's round trip through create-link, bulk-create,
//! PATCH, GET and the list; each refusal; the password never returned; the KV record carrying what the edge
//! needs (compiled app-link rules, the hash); the click limit republishing the record as expired.

use crate::common::{Account, Engine, TestApp, assert_error};
use kv_model::LinkRecord;
use link_rules::Os;
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::{GroupSettings, Hostname};
use shortlink_store::{Actor, verify_link_password};

/// An app with a platform domain, an account, and a group of it with analytics on (click limits need it).
async fn setup(engine: Engine) -> (TestApp, Account, String) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let settings = GroupSettings::parse(r#"{"analytics":{"enabled":true}}"#).unwrap();
    let counted = app
        .db
        .create_group(&acc.id, "Counted", &settings, &Actor::Operator)
        .await
        .unwrap()
        .id;
    (app, acc, counted)
}

async fn get_link(app: &TestApp, key: &str, id: &str) -> Value {
    let (s, body) = app
        .send(
            Method::GET,
            key,
            &format!("/api/v1/external/links/{id}"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    body
}

async fn patch(app: &TestApp, key: &str, id: &str, body: Value) -> (u16, Value) {
    app.send(
        Method::PATCH,
        key,
        &format!("/api/v1/external/links/{id}"),
        Some(body),
    )
    .await
}

async fn pending_keys(app: &TestApp) -> Vec<String> {
    let batch = app.db.outbox_batch(10_000).await.unwrap();
    batch.into_iter().map(|(_, k)| k).collect()
}

async fn drain(app: &TestApp) {
    let batch = app.db.outbox_batch(10_000).await.unwrap();
    let ids: Vec<i64> = batch.into_iter().map(|(id, _)| id).collect();
    app.db.outbox_remove(&ids).await.unwrap();
}

async fn record(app: &TestApp, key: &str) -> (String, LinkRecord) {
    let raw = app.db.kv_record(key).await.unwrap().expect("a link record");
    let parsed = serde_json::from_str(&raw).unwrap();
    (raw, parsed)
}

fn full_body(group: &str) -> Value {
    json!({
        "long_url": "https://example.com/default",
        "short_code": "smart",
        "group_id": group,
        "rules": [
            {"if": {"country": ["de", "AT"], "language": ["DE"]}, "to": "https://example.com/dach"},
            {"if": {"device": "mobile", "os": ["android", "other"], "query": {"utm_source": "mail", "ref": "*"}},
             "to": "https://example.com/mobile"},
            {"if": {"after": "2030-01-01T00:00:00Z", "before": "2030-02-01T00:00:00Z"}, "to": "https://example.com/jan"}
        ],
        "ios_url": "https://apps.apple.com/app/id1",
        "android_url": "https://play.google.com/store/apps/details?id=x",
        "password": "open sesame",
        "expired_url": "https://example.com/over",
        "max_clicks": 1000,
        "redirect_status": 301,
        "og_title": "  Spring sale  ",
        "og_description": "Everything must go",
        "og_image": "https://cdn.example.com/card.png"
    })
}

async fn every_field_round_trips(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    let (s, created) = app.create_json(&acc.key, full_body(&counted)).await;
    assert_eq!(s, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let link = get_link(&app, &acc.key, id).await;
    assert_eq!(
        link["rules"],
        json!([
            {"if": {"country": ["DE", "AT"], "language": ["de"]}, "to": "https://example.com/dach"},
            {"if": {"device": ["mobile"], "os": ["android", "other"], "query": {"ref": "*", "utm_source": "mail"}},
             "to": "https://example.com/mobile"},
            {"if": {"after": "2030-01-01T00:00:00.000000Z", "before": "2030-02-01T00:00:00.000000Z"},
             "to": "https://example.com/jan"}
        ])
    );
    assert_eq!(link["ios_url"], "https://apps.apple.com/app/id1");
    assert_eq!(
        link["android_url"],
        "https://play.google.com/store/apps/details?id=x"
    );
    assert_eq!(link["password_protected"], true);
    assert_eq!(link["expired_url"], "https://example.com/over");
    assert_eq!(link["max_clicks"], 1000);
    assert_eq!(link["redirect_status"], 301);
    assert_eq!(link["og_title"], "Spring sale", "trimmed");
    assert_eq!(link["og_description"], "Everything must go");
    assert_eq!(link["og_image"], "https://cdn.example.com/card.png");
    // Write-only: neither the password nor its hash anywhere in what the API shows.
    let text = link.to_string();
    assert!(link.get("password").is_none() && !text.contains("open sesame"));
    assert!(!text.contains("pbkdf2"), "{text}");
    // The list shows the same link alike.
    let (s, list) = app
        .send(Method::GET, &acc.key, "/api/v1/external/links", None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(list["results"][0], link);

    // A plain link shows the defaults.
    let (s, plain) = app
        .create_json(&acc.key, json!({"long_url": "https://example.com/plain"}))
        .await;
    assert_eq!(s, 201);
    let plain = get_link(&app, &acc.key, plain["id"].as_str().unwrap()).await;
    for (field, want) in [
        ("rules", json!([])),
        ("ios_url", Value::Null),
        ("android_url", Value::Null),
        ("password_protected", json!(false)),
        ("expired_url", Value::Null),
        ("max_clicks", Value::Null),
        ("redirect_status", json!(302)),
        ("og_title", Value::Null),
        ("og_description", Value::Null),
        ("og_image", Value::Null),
    ] {
        assert_eq!(plain[field], want, "{field}");
    }
    app.stop().await;
}

async fn each_refusal_names_its_field(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    app.db
        .block_domain(&Hostname::parse("evil.example").unwrap())
        .await
        .unwrap();
    let base = |extra: Value| {
        let mut body = json!({"long_url": "https://example.com/", "group_id": counted});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let rule = |when: Value| json!([{"if": when, "to": "https://example.com/r"}]);
    let many: Vec<Value> = (0..21)
        .map(|_| json!({"if": {"os": "ios"}, "to": "https://example.com/r"}))
        .collect();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"ios_url": "not a url"}), "ios_url"),
        (
            json!({"android_url": "http://play.example/x"}),
            "android_url must start with https://",
        ),
        (
            json!({"expired_url": "https://www.evil.example/"}),
            "expired_url points to a blocked domain",
        ),
        (
            json!({"og_image": "https://cdn.evil.example/i.png"}),
            "og_image points to a blocked domain",
        ),
        (
            json!({"rules": [{"if": {"os": "ios"}, "to": "https://ok.example/"},
                             {"if": {"os": "android"}, "to": "https://evil.example/"}]}),
            "rules[1].to points to a blocked domain",
        ),
        (
            json!({"rules": [{"if": {"os": "ios"}, "to": "http://a.example/"}]}),
            "rules[0].to must start with https://",
        ),
        (json!({"rules": many}), "at most 20"),
        (
            json!({"rules": rule(json!({}))}),
            "rules[0].if must hold at least one condition",
        ),
        (
            json!({"rules": rule(json!({"country": ["Germany"]}))}),
            "rules[0].if.country[0]",
        ),
        (
            json!({"rules": rule(json!({"os": ["ios", "beos"]}))}),
            "rules[0].if.os[1]",
        ),
        (
            json!({"rules": rule(json!({"device": "watch"}))}),
            "rules[0].if.device[0]",
        ),
        (
            json!({"rules": rule(json!({"planet": "mars"}))}),
            "unknown field \"planet\"",
        ),
        (
            json!({"rules": rule(json!({"query": {"a": "x".repeat(101)}}))}),
            "rules[0].if.query.a",
        ),
        (
            json!({"rules": rule(json!({"after": "tomorrow"}))}),
            "rules[0].if.after",
        ),
        (json!({"rules": {"if": {}}}), "rules must be a list"),
        (
            json!({"redirect_status": 303}),
            "redirect_status must be 301, 302, 307 or 308",
        ),
        (json!({"max_clicks": 0}), "max_clicks must be an integer"),
        (
            json!({"password": "x".repeat(129)}),
            "password must be 8 to 128 characters",
        ),
        (
            json!({"password": ""}),
            "password must be 8 to 128 characters",
        ),
        (
            json!({"password": "seven77"}),
            "password must be 8 to 128 characters",
        ),
        (
            json!({"og_title": "x".repeat(201)}),
            "og_title must be at most 200",
        ),
        (
            json!({"og_description": "x".repeat(501)}),
            "og_description must be at most 500",
        ),
    ];
    for (extra, want) in cases {
        let (s, body) = app.create_json(&acc.key, base(extra.clone())).await;
        assert_error(s, &body, 400, "validation_error");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(want), "{extra}: {detail}");
    }
    // A click limit needs analytics in the link's group: the default group has none.
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/", "max_clicks": 5}),
        )
        .await;
    assert_error(s, &body, 400, "validation_error");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("max_clicks needs click analytics")
    );
    // Nothing was created by any of these.
    let (_, list) = app
        .send(Method::GET, &acc.key, "/api/v1/external/links", None)
        .await;
    assert_eq!(list["total"], 0);
    app.stop().await;
}

async fn patch_sets_clears_and_refuses(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    let (_, created) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/", "short_code": "pp1"}),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    drain(&app).await;

    // Absent fields stay; given ones change; the edge follows.
    let (s, link) = patch(
        &app,
        &acc.key,
        &id,
        json!({"rules": [{"if": {"os": "macos"}, "to": "https://example.com/mac"}], "password": "pw-long-enough",
               "redirect_status": 308, "og_title": "Hello", "expired_url": "https://example.com/gone",
               "ios_url": "https://apps.apple.com/app/id2", "android_url": "https://play.example/a",
               "og_description": "D", "og_image": "https://example.com/i.png"}),
    )
    .await;
    assert_eq!(s, 200, "{link}");
    assert_eq!(link["password_protected"], true);
    assert_eq!(link["redirect_status"], 308);
    assert_eq!(link["rules"][0]["if"]["os"], json!(["macos"]));
    assert_eq!(pending_keys(&app).await, ["link:sho.rt:pp1"]);
    drain(&app).await;
    // A title-only patch leaves the edge alone; a preview-only one does not.
    let (s, _) = patch(&app, &acc.key, &id, json!({"title": "t"})).await;
    assert_eq!(s, 200);
    assert!(pending_keys(&app).await.is_empty());
    let (s, link) = patch(&app, &acc.key, &id, json!({"og_title": "Hi again"})).await;
    assert_eq!((s, &link["og_title"]), (200, &json!("Hi again")));
    assert_eq!(link["redirect_status"], 308, "absent stays");
    assert_eq!(pending_keys(&app).await, ["link:sho.rt:pp1"]);

    // A click limit: refused in a group without analytics, accepted once moved to one that counts; moving it
    // back with its limit is refused, and the refused PATCH changes nothing.
    let (s, body) = patch(&app, &acc.key, &id, json!({"max_clicks": 10})).await;
    assert_error(s, &body, 400, "validation_error");
    let (s, link) = patch(
        &app,
        &acc.key,
        &id,
        json!({"max_clicks": 10, "group_id": counted}),
    )
    .await;
    assert_eq!((s, &link["max_clicks"]), (200, &json!(10)), "{link}");
    let (s, body) = patch(
        &app,
        &acc.key,
        &id,
        json!({"group_id": acc.default_group_id, "og_title": "changed?"}),
    )
    .await;
    assert_error(s, &body, 400, "validation_error");
    let link = get_link(&app, &acc.key, &id).await;
    assert_eq!(link["group_id"], counted.as_str());
    assert_eq!(link["og_title"], "Hi again");

    // Each PATCH refusal names its field; unknown fields stay refused.
    for (body, want) in [
        (
            json!({"rules": [{"if": {"os": "dos"}, "to": "https://a.example/"}]}),
            "rules[0].if.os[0]",
        ),
        (json!({"ios_url": "http://a.example/"}), "ios_url"),
        (json!({"redirect_status": 200}), "redirect_status"),
        (json!({"max_clicks": -1}), "max_clicks"),
        (json!({"password": "x".repeat(129)}), "password"),
        (json!({"passwrd": "x"}), "passwrd"),
    ] {
        let (s, b) = patch(&app, &acc.key, &id, body.clone()).await;
        assert_error(s, &b, 400, "validation_error");
        assert!(b["detail"].as_str().unwrap().contains(want), "{body}: {b}");
    }

    // null clears every field (redirect_status back to 302, rules to none, the password removed).
    let (s, link) = patch(
        &app,
        &acc.key,
        &id,
        json!({"rules": null, "ios_url": null, "android_url": null, "password": null, "expired_url": null,
               "max_clicks": null, "redirect_status": null, "og_title": null, "og_description": null,
               "og_image": null}),
    )
    .await;
    assert_eq!(s, 200, "{link}");
    for (field, want) in [
        ("rules", json!([])),
        ("ios_url", Value::Null),
        ("android_url", Value::Null),
        ("password_protected", json!(false)),
        ("expired_url", Value::Null),
        ("max_clicks", Value::Null),
        ("redirect_status", json!(302)),
        ("og_title", Value::Null),
        ("og_description", Value::Null),
        ("og_image", Value::Null),
    ] {
        assert_eq!(link[field], want, "{field}");
    }
    // With everything cleared the record is a plain link's again.
    let (raw, _) = record(&app, "link:sho.rt:pp1").await;
    for field in [
        "rules",
        "password_hash",
        "expired_url",
        "redirect_status",
        "preview",
    ] {
        assert!(!raw.contains(field), "{raw}");
    }
    // `[]` removes rules as `null` does; a password set again shows as protected.
    let (_, link) = patch(
        &app,
        &acc.key,
        &id,
        json!({"rules": [], "password": "again and again"}),
    )
    .await;
    assert_eq!(
        (&link["rules"], &link["password_protected"]),
        (&json!([]), &json!(true))
    );
    app.stop().await;
}

async fn bulk_create_takes_the_fields(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    let (s, body) = app
        .send(
            Method::POST,
            &acc.key,
            "/api/v1/external/links/bulk-create",
            Some(json!({"links": [
                full_body(&counted),
                {"long_url": "https://example.com/b", "rules": [{"if": {"os": "amiga"}, "to": "https://example.com/"}]},
                {"long_url": "https://example.com/c", "password": "c-password", "redirect_status": 307},
            ]})),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["status"], 201, "{body}");
    assert_eq!(results[1]["status"], 400);
    assert_eq!(results[1]["error_code"], "validation_error");
    assert!(
        results[1]["detail"]
            .as_str()
            .unwrap()
            .contains("rules[0].if.os[0]")
    );
    assert_eq!(results[2]["status"], 201);
    let first = get_link(&app, &acc.key, results[0]["link"]["id"].as_str().unwrap()).await;
    assert_eq!(first["rules"].as_array().unwrap().len(), 3);
    assert_eq!(first["max_clicks"], 1000);
    let third = get_link(&app, &acc.key, results[2]["link"]["id"].as_str().unwrap()).await;
    assert_eq!(
        (&third["password_protected"], &third["redirect_status"]),
        (&json!(true), &json!(307))
    );
    app.stop().await;
}

/// The id of the account's link with `code`.
async fn link_id(app: &TestApp, acc: &Account, code: &str) -> String {
    let (s, b) = app
        .send(
            Method::GET,
            &acc.key,
            "/api/v1/external/links?limit=100",
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["short_code"] == code)
        .and_then(|l| l["id"].as_str())
        .unwrap()
        .to_owned()
}

async fn the_kv_record_carries_what_the_edge_needs(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    // A plain link's record has none of the smart-link fields: byte for byte what it was, but for the origin's
    // word that its destination is not blocked (`vouched`).
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/plain", "short_code": "plain"}),
        )
        .await;
    assert_eq!(s, 201);
    let (raw, plain) = record(&app, "link:sho.rt:plain").await;
    let expected = LinkRecord {
        group_settings: plain.group_settings.clone(),
        vouched: true,
        ..LinkRecord::new(
            "https://example.com/plain",
            acc.default_group_id.clone(),
            true,
        )
    };
    assert_eq!(raw, serde_json::to_string(&expected).unwrap());

    drain(&app).await;
    let (s, _) = app.create_json(&acc.key, full_body(&counted)).await;
    assert_eq!(s, 201);
    assert_eq!(pending_keys(&app).await, ["link:sho.rt:smart"]);
    let (raw, rec) = record(&app, "link:sho.rt:smart").await;
    assert!(!raw.contains("open sesame"));
    // The app links first, as `os` rules, then the link's own rules in order.
    let tos: Vec<&str> = rec.rules.iter().map(|r| r.to.as_str()).collect();
    assert_eq!(
        tos,
        [
            "https://apps.apple.com/app/id1",
            "https://play.google.com/store/apps/details?id=x",
            "https://example.com/dach",
            "https://example.com/mobile",
            "https://example.com/jan",
        ]
    );
    assert_eq!(rec.rules[0].when.os, [Os::Ios]);
    assert_eq!(rec.rules[1].when.os, [Os::Android]);
    assert_eq!(rec.rules[2].when.country, ["DE", "AT"]);
    assert_eq!(
        rec.rules[3].when.query,
        [
            ("ref".to_owned(), "*".to_owned()),
            ("utm_source".to_owned(), "mail".to_owned())
        ],
        "[name, value] pairs, by name"
    );
    assert_eq!(rec.rules[4].when.after, Some(1_893_456_000_000), "UNIX ms");
    assert_eq!(rec.rules[4].when.before, Some(1_896_134_400_000));
    let hash = rec.password_hash.as_deref().unwrap();
    assert!(
        hash.starts_with(&format!(
            "pbkdf2-sha256${}$",
            shortlink_store::LINK_PASSWORD_ITERATIONS
        )),
        "{hash}"
    );
    assert_eq!(
        shortlink_store::LINK_PASSWORD_ITERATIONS,
        50_000,
        "BENCHMARKS.md, \"Link passwords\""
    );
    assert!(verify_link_password("open sesame", hash));
    assert!(!verify_link_password("open sesamE", hash));
    assert_eq!(rec.expired_url.as_deref(), Some("https://example.com/over"));
    assert_eq!(rec.redirect_status, Some(301));
    let preview = rec.preview.clone().unwrap();
    assert_eq!(preview.title.as_deref(), Some("Spring sale"));
    assert_eq!(
        preview.image.as_deref(),
        Some("https://cdn.example.com/card.png")
    );
    assert!(
        !raw.contains("max_clicks"),
        "the origin counts, not the worker: {raw}"
    );
    assert_eq!(rec.expires_at, None);
    // The worker's KV-miss lookup answers the same fields.
    let resolved = kv_model::ResolvedLink::new(rec.clone(), None);
    assert_eq!(resolved.link().rules, rec.rules);
    // The worker asks for the password: the link is published active, with its hash; without its password it is
    // published without one.
    assert!(rec.is_active, "a protected link is published active");
    let id = link_id(&app, &acc, "smart").await;
    let (s, b) = app
        .send(
            Method::PATCH,
            &acc.key,
            &format!("/api/v1/external/links/{id}"),
            Some(json!({"password": null})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["is_active"], true, "the link itself stays active");
    let (_, open) = record(&app, "link:sho.rt:smart").await;
    assert!(open.is_active && open.password_hash.is_none());
    app.stop().await;
}

fn click(group: &str, n: usize) -> Vec<shortlink_store::ClickEvent> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (0..n)
        .map(|_| shortlink_store::ClickEvent {
            host: "sho.rt".to_owned(),
            short_code: Some("limited".to_owned()),
            group_id: group.to_owned(),
            at: now_ms,
            country: None,
            referer_host: None,
            device: shortlink_store::Device::Desktop,
            id: None,
            ..Default::default()
        })
        .collect()
}

async fn reaching_max_clicks_republishes_the_record_expired(engine: Engine) {
    let (app, acc, counted) = setup(engine).await;
    let (s, created) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/", "short_code": "limited", "group_id": counted,
                   "max_clicks": 3, "expired_url": "https://example.com/sold-out"}),
        )
        .await;
    assert_eq!(s, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    drain(&app).await;
    let key = "link:sho.rt:limited";

    app.db
        .record_clicks(None, click(&counted, 2))
        .await
        .unwrap();
    assert!(pending_keys(&app).await.is_empty(), "below the limit");
    assert_eq!(record(&app, key).await.1.expires_at, None);
    // The report that reaches the limit puts the key in the outbox, in its own transaction.
    app.db
        .record_clicks(None, click(&counted, 1))
        .await
        .unwrap();
    assert_eq!(pending_keys(&app).await, [key]);
    let (_, rec) = record(&app, key).await;
    assert_eq!(rec.expires_at, Some(0), "expired since the epoch");
    assert!(rec.expired(1));
    assert_eq!(
        rec.expired_url.as_deref(),
        Some("https://example.com/sold-out")
    );
    drain(&app).await;
    // Clicks past the limit (in flight when it was reached) republish it again, as expired: a report never
    // depends on having seen the limit's crossing itself (a PATCH may lower the limit while a report runs).
    app.db
        .record_clicks(None, click(&counted, 2))
        .await
        .unwrap();
    assert_eq!(pending_keys(&app).await, [key]);
    assert_eq!(record(&app, key).await.1.expires_at, Some(0));
    drain(&app).await;
    // One report crossing the limit by several clicks at once is a crossing too: raise the limit to 7, then 3
    // more clicks (5 → 8).
    let (s, link) = patch(&app, &acc.key, &id, json!({"max_clicks": 7})).await;
    assert_eq!(s, 200, "{link}");
    assert_eq!(
        record(&app, key).await.1.expires_at,
        None,
        "under the new limit"
    );
    drain(&app).await;
    app.db
        .record_clicks(None, click(&counted, 3))
        .await
        .unwrap();
    assert_eq!(pending_keys(&app).await, [key]);
    assert_eq!(record(&app, key).await.1.expires_at, Some(0));
    // Removing the limit opens the link again.
    let (s, _) = patch(&app, &acc.key, &id, json!({"max_clicks": null})).await;
    assert_eq!(s, 200);
    assert_eq!(record(&app, key).await.1.expires_at, None);
    app.stop().await;
}

both_engines!(
    every_field_round_trips,
    each_refusal_names_its_field,
    patch_sets_clears_and_refuses,
    bulk_create_takes_the_fields,
    the_kv_record_carries_what_the_edge_needs,
    reaching_max_clicks_republishes_the_record_expired,
);
