//! Groups through the API (issue "the whole life of a link and a group"): create, read, rename, new settings, a new
//! signing key, delete (its links move to the default group), on both engines, with every error the contract names.

use crate::common::{Engine, TestApp, assert_error};
use reqwest::Method;
use serde_json::{Value, json};

const GROUPS: &str = "/api/v1/external/groups";

fn group_path(id: &str) -> String {
    format!("{GROUPS}/{id}")
}

fn assert_detail(body: &Value, id: &str, name: &str, settings: &Value, is_default: bool) {
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["name"], name, "{body}");
    assert_eq!(&body["settings"], settings, "{body}");
    assert_eq!(body["is_default"], is_default, "{body}");
    let key = body["key"].as_str().unwrap();
    assert_eq!(key.len(), 43, "32 bytes base64url: {key}");
    assert_eq!(body.as_object().unwrap().len(), 5, "{body}");
}

async fn group_life(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let rules = json!({"access": {"block_countries": ["RU"], "block_bots": true,
                                  "fallback_url": "https://example.com/blocked"},
                       "monetization": {"interstitial_seconds": 5}, "analytics": {"enabled": false}});

    // Create: 201 with the key, shown to the owner; settings as normalised.
    let (s, created) = app
        .send(
            Method::POST,
            &a.key,
            GROUPS,
            Some(json!({"name": "  Spring  ", "settings": {"access": {"block_countries": ["ru"], "block_bots": true,
                "fallback_url": "https://example.com/blocked"}, "monetization": {"interstitial_seconds": 5},
                "analytics": {"enabled": false}}})),
        )
        .await;
    assert_eq!(s, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_detail(&created, &id, "Spring", &rules, false);
    let key = created["key"].as_str().unwrap().to_owned();

    // Read: the same, by lower- or upper-case id; the list still has id and name only.
    let (s, read) = app.send(Method::GET, &a.key, &group_path(&id), None).await;
    assert_eq!((s, &read), (200, &created));
    let (s, read) = app
        .send(Method::GET, &a.key, &group_path(&id.to_uppercase()), None)
        .await;
    assert_eq!((s, &read), (200, &created));
    let (s, list) = app.send(Method::GET, &a.key, GROUPS, None).await;
    assert_eq!(s, 200);
    for g in list["results"].as_array().unwrap() {
        assert_eq!(g.as_object().unwrap().len(), 2, "no key in lists: {g}");
    }
    assert!(list.to_string().contains(&id) && !list.to_string().contains(&key));

    // Without settings: no rules.
    let (s, plain) = app
        .send(Method::POST, &a.key, GROUPS, Some(json!({"name": "Plain"})))
        .await;
    assert_eq!(s, 201, "{plain}");
    let no_rules = json!({"access": {"block_bots": false}, "analytics": {"enabled": false}});
    assert_eq!(plain["settings"], no_rules);

    // PATCH: empty is a no-op; name alone keeps the settings; settings alone keep the name and replace all rules.
    let path = group_path(&id);
    let (s, same) = app
        .send(Method::PATCH, &a.key, &path, Some(json!({})))
        .await;
    assert_eq!((s, &same), (200, &created));
    let (s, renamed) = app
        .send(
            Method::PATCH,
            &a.key,
            &path,
            Some(json!({"name": "Summer"})),
        )
        .await;
    assert_eq!(s, 200, "{renamed}");
    assert_detail(&renamed, &id, "Summer", &rules, false);
    assert_eq!(renamed["key"], key.as_str());
    let (s, cleared) = app
        .send(Method::PATCH, &a.key, &path, Some(json!({"settings": {}})))
        .await;
    assert_eq!(s, 200, "{cleared}");
    assert_detail(&cleared, &id, "Summer", &no_rules, false);

    // Rotate: a new key, everything else as it was; GET shows the new one.
    let (s, rotated) = app
        .send(Method::POST, &a.key, &format!("{path}/rotate-key"), None)
        .await;
    assert_eq!(s, 200, "{rotated}");
    assert_detail(&rotated, &id, "Summer", &no_rules, false);
    assert_ne!(rotated["key"], key.as_str());
    let (_, read) = app.send(Method::GET, &a.key, &path, None).await;
    assert_eq!(read, rotated);

    // Delete: its links move to the default group; the group is gone.
    let (s, link) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.com/moved", "group_id": id}),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(link["group_id"], id.as_str());
    let (s, body) = app.send(Method::DELETE, &a.key, &path, None).await;
    assert_eq!((s, body), (204, Value::Null));
    let (s, body) = app.send(Method::GET, &a.key, &path, None).await;
    assert_error(s, &body, 404, "not_found");
    let (s, body) = app.send(Method::DELETE, &a.key, &path, None).await;
    assert_error(s, &body, 404, "not_found");
    let link_path = format!("/api/v1/external/links/{}", link["id"].as_str().unwrap());
    let (s, moved) = app.send(Method::GET, &a.key, &link_path, None).await;
    assert_eq!(s, 200);
    assert_eq!(moved["group_id"], a.default_group_id.as_str());
    let (_, list) = app.send(Method::GET, &a.key, GROUPS, None).await;
    assert!(!list.to_string().contains(&id));

    // The default group: readable, patchable, rotatable, never deletable.
    let default = group_path(&a.default_group_id);
    let (s, def) = app.send(Method::GET, &a.key, &default, None).await;
    assert_eq!(s, 200);
    assert_eq!(def["is_default"], true);
    let (s, body) = app.send(Method::DELETE, &a.key, &default, None).await;
    assert_error(s, &body, 400, "default_group");
    let (s, body) = app.send(Method::GET, &a.key, &default, None).await;
    assert_eq!((s, &body), (200, &def));
    app.stop().await;
}

/// Each bad body → 400 `validation_error` whose detail names the field; nothing is created or changed.
async fn group_validation(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.account(true).await;
    let (_, before) = app.send(Method::GET, &a.key, GROUPS, None).await;
    let default = group_path(&a.default_group_id);
    let (_, default_before) = app.send(Method::GET, &a.key, &default, None).await;
    let long_name = "n".repeat(101);
    let too_many: Vec<String> = (0..251)
        .map(|i| {
            format!(
                "{}{}",
                (b'A' + (i % 26) as u8) as char,
                (b'A' + (i / 26) as u8) as char
            )
        })
        .collect();
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "   "}), "name"),
        (json!({"name": long_name}), "name"),
        (json!({"name": 7}), "name"),
        (
            json!({"name": "x", "settings": {"access": {"block_countries": ["XYZ"]}}}),
            "block_countries",
        ),
        (
            json!({"name": "x", "settings": {"access": {"allow_countries": ["1A"]}}}),
            "allow_countries",
        ),
        (
            json!({"name": "x", "settings": {"access": {"allow_countries": too_many}}}),
            "allow_countries",
        ),
        (
            json!({"name": "x", "settings": {"access": {"fallback_url": "http://example.com/"}}}),
            "fallback_url",
        ),
        (
            json!({"name": "x", "settings": {"access": {"fallback_url": "not a url"}}}),
            "fallback_url",
        ),
        (
            json!({"name": "x", "settings": {"monetization": {"interstitial_seconds": 61}}}),
            "interstitial_seconds",
        ),
        (
            json!({"name": "x", "settings": {"analytics": {"enabled": "yes"}}}),
            "enabled",
        ),
        (json!({"name": "x", "settings": {"acces": {}}}), "acces"),
        (json!({"name": "x", "settings": []}), "settings"),
        (json!({"name": "x", "colour": "red"}), "colour"),
    ] {
        for (method, path, body) in [
            (Method::POST, GROUPS.to_owned(), body.clone()),
            (Method::PATCH, default.clone(), body.clone()),
        ] {
            let (s, err) = app
                .send(method.clone(), &a.key, &path, Some(body.clone()))
                .await;
            assert_error(s, &err, 400, "validation_error");
            let detail = err["detail"].as_str().unwrap();
            assert!(
                detail.contains(field),
                "{method} {body}: {detail} should name {field}"
            );
        }
    }
    // A body that is not an object at all.
    let (s, err) = app
        .send(Method::POST, &a.key, GROUPS, Some(json!([{"name": "x"}])))
        .await;
    assert_error(s, &err, 400, "validation_error");
    let (_, after) = app.send(Method::GET, &a.key, GROUPS, None).await;
    assert_eq!(after, before);
    let (_, default_after) = app.send(Method::GET, &a.key, &default, None).await;
    assert_eq!(default_after, default_before);
    app.stop().await;
}

both_engines!(group_life, group_validation);
