//! Isolation between accounts, on both engines: no endpoint lets one account read, use or
//! learn of another account's links, groups, group keys or custom domains.
//!
//! Already covered elsewhere and not repeated here: groups and enabled-domains lists are
//! scoped (listing.rs), another account's group or custom domain falls back on create-link
//! (create_link.rs, checking the chosen id), another account's link stats are 404
//! (outbox.rs; here also byte-identical to an unknown id's, for group statistics and CSV too). This file adds what those do not check: filtered lists and totals, that a
//! response never carries the other account's ids, hostnames or keys, that their codes on
//! their custom domain do not collide with ours, that 404 for their link is byte-identical to
//! 404 for an unknown one, and validate-dynamic across accounts.

use crate::common::{Account, Engine, TestApp, assert_error, json};
use reqwest::Method;
use serde_json::{Value, json};
use shared_crypto::{GroupKey, Payload, TokenCipher};
use shortlink_store::domain::GroupSettings;
use shortlink_store::{Actor, ClickEvent, Device, Ingested};

/// Everything of `b` that `a` must never see, as strings to look for in raw responses.
struct Secrets {
    group_ids: Vec<String>,
    group_keys: Vec<String>,
    domain_id: String,
    host: String,
    link_ids: Vec<String>,
}

/// Account `b` with a second group, an active custom domain and links on it and on the
/// platform domain, all with the same destinations `a` will use.
async fn other_account(app: &TestApp) -> (Account, Secrets) {
    let b = app.account(true).await;
    let group = app
        .db
        .create_group(&b.id, "Theirs", &GroupSettings::default(), &Actor::Operator)
        .await
        .unwrap();
    let default_key = app
        .db
        .group_key(&b.default_group_id)
        .await
        .unwrap()
        .unwrap();
    let domain = app.custom_domain("go.theirs.example", &b).await;
    let mut link_ids = Vec::new();
    for body in [
        json!({"long_url": "https://shared.example/a", "short_code": "promo", "domain_id": domain.id, "group_id": group.id}),
        json!({"long_url": "https://shared.example/a"}),
        json!({"long_url": "https://shared.example/b"}),
        json!({"long_url": "https://only-theirs.example/x"}),
    ] {
        let (s, created) = json(app.create(&b.key, body).await).await;
        assert_eq!(s, 201, "{created}");
        link_ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let secrets = Secrets {
        group_ids: vec![b.default_group_id.clone(), group.id],
        group_keys: vec![default_key, group.key],
        domain_id: domain.id,
        host: domain.domain,
        link_ids,
    };
    (b, secrets)
}

/// Raw text of a response, with its status.
async fn text(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

fn assert_reveals_nothing(what: &str, body: &str, theirs: &Secrets) {
    let needles = theirs
        .group_ids
        .iter()
        .chain(&theirs.group_keys)
        .chain(&theirs.link_ids)
        .chain([&theirs.domain_id, &theirs.host]);
    for needle in needles {
        assert!(
            !body.to_lowercase().contains(&needle.to_lowercase()),
            "{what} reveals {needle}: {body}"
        );
    }
}

async fn lists_show_only_own_links_and_totals(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (b, theirs) = other_account(&app).await;
    let a = app.account(true).await;
    let mut mine = Vec::new();
    for url in ["https://shared.example/a", "https://shared.example/c"] {
        let (s, created) = app.create_json(&a.key, json!({"long_url": url})).await;
        assert_eq!(s, 201);
        mine.push(created["id"].as_str().unwrap().to_owned());
    }

    // (query, a's total, b's total): same destinations in both accounts, counted apart.
    for (query, a_total, b_total) in [
        ("", 2, 4),
        ("limit=1&offset=1", 2, 4),
        ("offset=10", 2, 4),
        ("long_url=https%3A%2F%2Fshared.example%2Fa", 1, 2),
        (
            "long_url=https%3A%2F%2Fshared.example%2Fa&match=exact",
            1,
            2,
        ),
        (
            "long_url=https%3A%2F%2Fshared.example%2F&match=startswith",
            2,
            3,
        ),
        ("long_url=https%3A%2F%2Fonly-theirs.example%2Fx", 0, 1),
        (
            "long_url=https%3A%2F%2Fonly-theirs.example&match=startswith",
            0,
            1,
        ),
        ("long_url=https%3A%2F%2F&match=startswith", 2, 4),
    ] {
        let path = format!("/api/v1/external/links?{query}");
        let (s, raw) = text(app.get(&a.key, &path).await).await;
        assert_eq!(s, 200, "{query}: {raw}");
        assert_reveals_nothing(&format!("list ?{query}"), &raw, &theirs);
        let body: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(body["total"], a_total, "{query}");
        for link in body["results"].as_array().unwrap() {
            assert!(mine.contains(&link["id"].as_str().unwrap().to_owned()));
        }

        let (s, body) = json(app.get(&b.key, &path).await).await;
        assert_eq!(s, 200);
        assert_eq!(body["total"], b_total, "b: {query}");
        for link in body["results"].as_array().unwrap() {
            let id = link["id"].as_str().unwrap().to_owned();
            assert!(theirs.link_ids.contains(&id) && !mine.contains(&id));
        }
    }

    for path in [
        "/api/v1/external/groups",
        "/api/v1/external/links/enabled-domains",
    ] {
        let (s, raw) = text(app.get(&a.key, path).await).await;
        assert_eq!(s, 200);
        assert_reveals_nothing(path, &raw, &theirs);
    }
    // Positive control: the same request shows b its own custom domain.
    let (_, raw) = text(
        app.get(&b.key, "/api/v1/external/links/enabled-domains")
            .await,
    )
    .await;
    assert!(raw.contains(&theirs.host), "{raw}");
    app.stop().await;
}

async fn create_link_never_uses_or_reveals_theirs(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let platform = app.platform_domain("sho.rt").await;
    let (b, theirs) = other_account(&app).await;
    let a = app.account(true).await;

    // Their group and their custom domain together, and the code they hold on that domain:
    // the link goes to our default group on the platform domain, and "promo" is free there.
    let (s, raw) = text(
        app.create(
            &a.key,
            json!({
                "long_url": "https://mine.example/",
                "short_code": "promo",
                "group_id": theirs.group_ids[1],
                "domain_id": theirs.domain_id,
            }),
        )
        .await,
    )
    .await;
    assert_eq!(s, 201, "{raw}");
    assert_reveals_nothing("create-link", &raw, &theirs);
    let created: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(created["group_id"], a.default_group_id.as_str());
    assert_eq!(created["domain_id"], platform.id.as_str());
    assert_eq!(created["short_url"], "https://sho.rt/promo");

    // Their default group, upper-cased ids: same fallback.
    for body in [
        json!({"long_url": "https://mine.example/2", "group_id": theirs.group_ids[0].to_uppercase()}),
        json!({"long_url": "https://mine.example/3", "domain_id": theirs.domain_id.to_uppercase()}),
    ] {
        let (s, raw) = text(app.create(&a.key, body).await).await;
        assert_eq!(s, 201, "{raw}");
        assert_reveals_nothing("create-link", &raw, &theirs);
    }
    // Their code on the platform domain is taken for everyone (codes are unique per domain),
    // but the refusal names nothing of theirs.
    let (s, created_b) = app
        .create_json(
            &b.key,
            json!({"long_url": "https://theirs.example/", "short_code": "taken"}),
        )
        .await;
    assert_eq!(s, 201);
    let (s, raw) = text(
        app.create(
            &a.key,
            json!({"long_url": "https://mine.example/", "short_code": "taken"}),
        )
        .await,
    )
    .await;
    assert_eq!(s, 400, "{raw}");
    assert_reveals_nothing("short_code_exists", &raw, &theirs);
    assert!(!raw.contains(created_b["id"].as_str().unwrap()));

    // b's links are untouched: still 5, none in a's groups.
    let (_, body) = json(app.get(&b.key, "/api/v1/external/links").await).await;
    assert_eq!(body["total"], 5);
    for link in body["results"].as_array().unwrap() {
        assert!(
            theirs
                .group_ids
                .contains(&link["group_id"].as_str().unwrap().to_owned())
        );
    }
    app.stop().await;
}

async fn their_stats_look_like_unknown(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (b, theirs) = other_account(&app).await;
    let a = app.account(true).await;
    // A click on b's platform-domain link (codes there are generated: look it up).
    let (_, list) = json(
        app.get(
            &b.key,
            "/api/v1/external/links?long_url=https%3A%2F%2Fonly-theirs.example%2Fx",
        )
        .await,
    )
    .await;
    let link = &list["results"][0];
    let stored = app
        .db
        .record_clicks(
            None,
            vec![ClickEvent {
                host: "sho.rt".to_owned(),
                short_code: Some(link["short_code"].as_str().unwrap().to_owned()),
                group_id: b.default_group_id.clone(),
                at: 1_800_000_000_000,
                country: Some("FR".to_owned()),
                referer_host: None,
                device: Device::Desktop,
                id: None,
                ..Default::default()
            }],
        )
        .await
        .unwrap();
    assert_eq!(stored, Ingested::Stored(1));
    let id = link["id"].as_str().unwrap();
    let range = "?from=2027-01-01&to=2027-01-31";
    // Their link and group, in any spelling, answer exactly as unknown ids do (JSON and CSV alike).
    for (kind, their_id) in [("links", id), ("groups", b.default_group_id.as_str())] {
        let path = |id: &str| format!("/api/v1/external/{kind}/{id}/stats");
        // Positive control: b sees the click.
        let (s, body) = json(app.get(&b.key, &format!("{}{range}", path(their_id))).await).await;
        assert_eq!((s, &body["total"]), (200, &json!(1)));
        for query in [range, "?format=csv"] {
            let unknown_path = format!("{}{query}", path(&uuid::Uuid::new_v4().to_string()));
            let unknown = text(app.get(&a.key, &unknown_path).await).await;
            assert_eq!(unknown.0, 404);
            for their in [their_id.to_owned(), their_id.to_uppercase()] {
                let their_path = format!("{}{query}", path(&their));
                let (s, raw) = text(app.get(&a.key, &their_path).await).await;
                assert_eq!((s, &raw), (unknown.0, &unknown.1), "{their_path}");
                assert_reveals_nothing("stats", &raw, &theirs);
            }
        }
    }
    // a's whole-account statistics hold none of b's clicks.
    for query in [range, "?format=csv&from=2027-01-01&to=2027-01-31"] {
        let (s, raw) = text(
            app.get(&a.key, &format!("/api/v1/external/stats{query}"))
                .await,
        )
        .await;
        assert_eq!(s, 200);
        assert!(!raw.contains("FR"), "{raw}");
        assert_reveals_nothing("account stats", &raw, &theirs);
    }
    let (_, mine) = json(
        app.get(&a.key, &format!("/api/v1/external/stats{range}"))
            .await,
    )
    .await;
    assert_eq!(mine["total"], 0);
    let (_, all_of_b) = json(
        app.get(&b.key, &format!("/api/v1/external/stats{range}"))
            .await,
    )
    .await;
    assert_eq!(all_of_b["total"], 1);
    app.stop().await;
}

async fn validate_dynamic_is_per_group_key(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (_b, theirs) = other_account(&app).await;
    let a = app.account(true).await;
    let mine = app
        .db
        .create_group(&a.id, "Mine", &GroupSettings::default(), &Actor::Operator)
        .await
        .unwrap();
    let seal = |key: &str| {
        TokenCipher::new(&GroupKey::from_base64url(key).unwrap())
            .seal_random(&Payload::new("https://dest.example/"))
            .unwrap()
    };
    let check = |group_id: String, signature: String| {
        let app = &app;
        async move {
            let (s, raw) = text(
                app.client
                    .post(app.url("/api/v1/public/links/validate-dynamic"))
                    .json(&json!({"group_id": group_id, "signature": signature}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(s, 200, "{raw}");
            let body: Value = serde_json::from_str(&raw).unwrap();
            assert_eq!(body.as_object().unwrap().len(), 1, "{raw}");
            body["success"].as_bool().unwrap()
        }
    };
    let my_token = seal(&mine.key);
    // Positive controls: each key validates under its own group.
    assert!(check(mine.id.clone(), my_token.clone()).await);
    assert!(check(theirs.group_ids[1].clone(), seal(&theirs.group_keys[1])).await);
    // A token made with our key never validates under their group ids, nor theirs under ours.
    for their_group in &theirs.group_ids {
        assert!(!check(their_group.clone(), my_token.clone()).await);
        assert!(!check(their_group.to_uppercase(), my_token.clone()).await);
    }
    assert!(!check(mine.id.clone(), seal(&theirs.group_keys[0])).await);
    assert!(!check(a.default_group_id.clone(), seal(&theirs.group_keys[1])).await);
    app.stop().await;
}

/// Every route that takes a link or group id (issue 12): their ids, in any case, answer byte for byte like an unknown
/// id, whatever the method, and nothing of theirs changes. Our link cannot be moved into their group.
async fn their_links_and_groups_look_like_unknown(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (b, theirs) = other_account(&app).await;
    let a = app.account(true).await;
    let snapshot = |key: String| {
        let app = &app;
        let group_ids = theirs.group_ids.clone();
        async move {
            let mut all = vec![
                app.send(Method::GET, &key, "/api/v1/external/links", None)
                    .await,
            ];
            for id in group_ids {
                all.push(
                    app.send(
                        Method::GET,
                        &key,
                        &format!("/api/v1/external/groups/{id}"),
                        None,
                    )
                    .await,
                );
            }
            all
        }
    };
    let before = snapshot(b.key.clone()).await;
    assert!(before.iter().all(|(s, _)| *s == 200), "{before:?}");

    let routes: [(Method, &str, &str, Option<Value>); 8] = [
        (Method::GET, "links", "", None),
        (
            Method::PATCH,
            "links",
            "",
            Some(json!({"is_active": false, "long_url": "https://mine.example/"})),
        ),
        (Method::DELETE, "links", "", None),
        (Method::GET, "links", "/qr", None),
        (Method::GET, "groups", "", None),
        (
            Method::PATCH,
            "groups",
            "",
            Some(json!({"name": "Mine now", "settings": {}})),
        ),
        (Method::DELETE, "groups", "", None),
        (Method::POST, "groups", "/rotate-key", None),
    ];
    for (method, resource, tail, body) in routes {
        let path = |id: &str| format!("/api/v1/external/{resource}/{id}{tail}");
        let mut req = app
            .client
            .request(
                method.clone(),
                app.url(&path(&uuid::Uuid::new_v4().to_string())),
            )
            .header("Authorization", format!("Token {}", a.key));
        if let Some(body) = &body {
            req = req.json(body);
        }
        let unknown = text(req.send().await.unwrap()).await;
        assert_eq!(unknown.0, 404, "{method} {resource}{tail}: {}", unknown.1);
        let ids = if resource == "links" {
            &theirs.link_ids
        } else {
            &theirs.group_ids
        };
        for id in ids.iter().flat_map(|id| [id.clone(), id.to_uppercase()]) {
            let mut req = app
                .client
                .request(method.clone(), app.url(&path(&id)))
                .header("Authorization", format!("Token {}", a.key));
            if let Some(body) = &body {
                req = req.json(body);
            }
            let got = text(req.send().await.unwrap()).await;
            assert_eq!(got, unknown, "{method} {}", path(&id));
            assert_reveals_nothing("by id", &got.1, &theirs);
        }
    }

    // Our link into their group: refused like an unknown group, and our link stays where it was.
    let (s, mine) = app
        .create_json(&a.key, json!({"long_url": "https://mine.example/"}))
        .await;
    assert_eq!(s, 201);
    let mine_path = format!("/api/v1/external/links/{}", mine["id"].as_str().unwrap());
    let (_, mine_before) = app.send(Method::GET, &a.key, &mine_path, None).await;
    for group in &theirs.group_ids {
        let (s, err) = app
            .send(
                Method::PATCH,
                &a.key,
                &mine_path,
                Some(json!({"group_id": group})),
            )
            .await;
        assert_error(s, &err, 400, "validation_error");
        assert_reveals_nothing("patch group_id", &err.to_string(), &theirs);
    }
    let (_, mine_after) = app.send(Method::GET, &a.key, &mine_path, None).await;
    assert_eq!(mine_after, mine_before);

    // Nothing of theirs changed: links (active, same destinations, same total) and groups (same names, keys).
    assert_eq!(snapshot(b.key.clone()).await, before);
    app.stop().await;
}

both_engines!(
    their_links_and_groups_look_like_unknown,
    lists_show_only_own_links_and_totals,
    create_link_never_uses_or_reveals_theirs,
    their_stats_look_like_unknown,
    validate_dynamic_is_per_group_key,
);
