//! The activity log (issue 23, "Activity log"): every change through the API, the dashboard or the operator CLI
//! writes exactly one row in the change's own transaction, a refused or rolled-back change none; `GET
//! /api/v1/external/audit-log` pages it by list-links' rules, newest first, the key's account's rows only; the
//! hourly task prunes rows past `--audit-retention-days`.

use crate::cli::Cli;
use crate::common::{Account, Engine, TestApp, TestDb, assert_error, json};
use crate::dashboard::{Browser, email};
use origin_api::retention::{self, Retention};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shortlink_store::domain::{Hostname, Micros};
use shortlink_store::{Actor, StoreError};
use sqlx::Connection;
use std::time::{Duration, Instant};

const LOG: &str = "/api/v1/external/audit-log";
const DAY_MICROS: i64 = 86_400_000_000;

/// A page of the log as the key sees it (status, body).
async fn page(app: &TestApp, key: &str, query: &str) -> (u16, Value) {
    json(app.get(key, &format!("{LOG}{query}")).await).await
}

/// The key's whole log (at most 100 rows), newest first.
async fn rows(app: &TestApp, key: &str) -> Vec<Value> {
    let (s, body) = page(app, key, "?limit=100").await;
    assert_eq!(s, 200, "{body}");
    let results = body["results"].as_array().unwrap().clone();
    assert_eq!(body["total"], results.len(), "fits on one page: {body}");
    results
}

/// How many rows the key's account has.
async fn total(app: &TestApp, key: &str) -> i64 {
    let (s, body) = page(app, key, "?limit=1").await;
    assert_eq!(s, 200, "{body}");
    body["total"].as_i64().unwrap()
}

/// Runs `change` and checks it wrote exactly one row, which it returns (checked for shape and actor).
async fn one_row<F: std::future::Future<Output = ()>>(
    app: &TestApp,
    acc: &Account,
    change: F,
) -> Value {
    let before = total(app, &acc.key).await;
    change.await;
    let (s, body) = page(app, &acc.key, "?limit=1").await;
    assert_eq!(s, 200);
    assert_eq!(body["total"], before + 1, "exactly one row: {body}");
    let row = body["results"][0].clone();
    assert_row_shape(&row);
    row
}

/// The API's row: exactly these fields; `id` a decimal string; `at` ISO 8601 UTC with microseconds.
fn assert_row_shape(row: &Value) {
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "action",
            "actor",
            "at",
            "details",
            "id",
            "target_id",
            "target_type"
        ]
    );
    let id = row["id"].as_str().unwrap();
    assert!(
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
        "{row}"
    );
    let at = row["at"].as_str().unwrap();
    assert!(
        at.len() == 27 && at.ends_with('Z') && Micros::parse_rfc3339_utc("at", at).is_ok(),
        "{at}"
    );
    assert!(row["details"].is_object(), "{row}");
}

/// An API-key row about `target` of `target_type`, doing `action`.
fn assert_api_row(row: &Value, action: &str, target_type: &str, target: &str) {
    assert_eq!(row["action"], action, "{row}");
    assert_eq!(row["actor"], json!({"type": "api_key"}), "{row}");
    assert_eq!(row["target_type"], target_type, "{row}");
    assert_eq!(row["target_id"], target, "{row}");
}

/// Every change an API key can make writes one row, with its actor, action, target and details; a patch that
/// changes nothing writes none. Secrets never reach the log.
async fn each_api_change_writes_one_row(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;

    // Links: create, pause, resume, edit, delete.
    let mut created = Value::Null;
    let row = one_row(&app, &acc, async {
        let (s, body) = app
            .create_json(
                &acc.key,
                json!({"long_url": "https://example.com/a", "short_code": "abc"}),
            )
            .await;
        assert_eq!(s, 201, "{body}");
        created = body;
    })
    .await;
    let link = created["id"].as_str().unwrap().to_owned();
    assert_api_row(&row, "link.created", "link", &link);
    assert_eq!(
        row["details"],
        json!({"short_url": "https://sho.rt/abc", "long_url": "https://example.com/a",
               "group_id": acc.default_group_id, "expires_at": null, "forward_query": true})
    );

    let path = format!("/api/v1/external/links/{link}");
    let patch = |body: Value| app.send(Method::PATCH, &acc.key, &path, Some(body));
    let row = one_row(&app, &acc, async {
        assert_eq!(patch(json!({"is_active": false})).await.0, 200);
    })
    .await;
    assert_api_row(&row, "link.paused", "link", &link);
    assert_eq!(
        row["details"],
        json!({"short_url": "https://sho.rt/abc", "is_active": false})
    );
    let row = one_row(&app, &acc, async {
        assert_eq!(patch(json!({"is_active": true})).await.0, 200);
    })
    .await;
    assert_api_row(&row, "link.resumed", "link", &link);
    let row = one_row(&app, &acc, async {
        let (s, body) = patch(
            json!({"long_url": "https://example.com/b", "is_active": false,
                                     "expires_at": null, "forward_query": false}),
        )
        .await;
        assert_eq!(s, 200, "{body}");
    })
    .await;
    assert_api_row(&row, "link.updated", "link", &link);
    assert_eq!(
        row["details"],
        json!({"short_url": "https://sho.rt/abc", "long_url": "https://example.com/b",
               "is_active": false, "expires_at": null, "forward_query": false})
    );
    // A patch of nothing changes nothing.
    let before = total(&app, &acc.key).await;
    assert_eq!(patch(json!({})).await.0, 200);
    assert_eq!(total(&app, &acc.key).await, before);

    // Groups: create, rename and change settings, rotate the key, delete.
    let mut group = Value::Null;
    let row = one_row(&app, &acc, async {
        let (s, body) = app
            .send(
                Method::POST,
                &acc.key,
                "/api/v1/external/groups",
                Some(json!({"name": "Promo"})),
            )
            .await;
        assert_eq!(s, 201, "{body}");
        group = body;
    })
    .await;
    let group_id = group["id"].as_str().unwrap().to_owned();
    let first_key = group["key"].as_str().unwrap().to_owned();
    assert_api_row(&row, "group.created", "group", &group_id);
    assert_eq!(row["details"]["name"], "Promo");
    assert!(!row.to_string().contains(&first_key), "no key in the log");

    let group_path = format!("/api/v1/external/groups/{group_id}");
    let row = one_row(&app, &acc, async {
        let (s, body) = app
            .send(
                Method::PATCH,
                &acc.key,
                &group_path,
                Some(json!({"name": "Promo 2", "settings": {"analytics": {"enabled": true}}})),
            )
            .await;
        assert_eq!(s, 200, "{body}");
    })
    .await;
    assert_api_row(&row, "group.updated", "group", &group_id);
    assert_eq!(
        row["details"],
        json!({"name": "Promo 2", "previous_name": "Promo",
               "settings": {"analytics": {"enabled": true}}})
    );
    let mut rotated = Value::Null;
    let row = one_row(&app, &acc, async {
        let (s, body) = app
            .send(
                Method::POST,
                &acc.key,
                &format!("{group_path}/rotate-key"),
                None,
            )
            .await;
        assert_eq!(s, 200, "{body}");
        rotated = body;
    })
    .await;
    assert_api_row(&row, "group.key_rotated", "group", &group_id);
    assert_eq!(row["details"], json!({"name": "Promo 2"}));
    let new_key = rotated["key"].as_str().unwrap();
    assert!(!row.to_string().contains(new_key) && !row.to_string().contains(&first_key));
    let row = one_row(&app, &acc, async {
        let (s, _) = app.send(Method::DELETE, &acc.key, &group_path, None).await;
        assert_eq!(s, 204);
    })
    .await;
    assert_api_row(&row, "group.deleted", "group", &group_id);
    assert_eq!(row["details"], json!({"name": "Promo 2", "links_moved": 0}));

    let row = one_row(&app, &acc, async {
        let (s, _) = app.send(Method::DELETE, &acc.key, &path, None).await;
        assert_eq!(s, 204);
    })
    .await;
    assert_api_row(&row, "link.deleted", "link", &link);
    assert_eq!(
        row["details"],
        json!({"short_url": "https://sho.rt/abc", "short_code": "abc", "domain": "sho.rt",
               "long_url": "https://example.com/b"})
    );

    // The whole log, newest first: the key's generation (by the test fixture, as the operator) comes last.
    let actions: Vec<String> = rows(&app, &acc.key)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        actions,
        [
            "link.deleted",
            "group.deleted",
            "group.key_rotated",
            "group.updated",
            "group.created",
            "link.updated",
            "link.resumed",
            "link.paused",
            "link.created",
            "api_key.generated",
        ]
    );
    let all = rows(&app, &acc.key).await;
    let ids: Vec<u64> = all
        .iter()
        .map(|r| r["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert!(
        !all.iter().any(|r| r.to_string().contains(&acc.key)),
        "never the API key"
    );
    app.stop().await;
}

/// Bulk creation writes one row per created link, in request order, and none for a refused entry.
async fn bulk_create_writes_one_row_per_link(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let before = total(&app, &acc.key).await;
    let (s, body) = app
        .send(
            Method::POST,
            &acc.key,
            "/api/v1/external/links/bulk-create",
            Some(json!({"links": [
                {"long_url": "https://example.com/1", "short_code": "one"},
                {"long_url": "http://not-https.example/"},
                {"long_url": "https://example.com/2", "short_code": "two"},
                {"long_url": "https://example.com/3", "short_code": "one"},
                {"long_url": "https://example.com/4"},
            ]})),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let statuses: Vec<i64> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 400, 201, 400, 201]);
    let created: Vec<&str> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["link"]["id"].as_str())
        .collect();
    let log = rows(&app, &acc.key).await;
    assert_eq!(log.len() as i64, before + 3);
    // Newest first: the last created link's row is first.
    for (row, id) in log.iter().zip(created.iter().rev()) {
        assert_api_row(row, "link.created", "link", id);
    }
    assert_eq!(log[2]["details"]["short_url"], "https://sho.rt/one");
    app.stop().await;
}

/// Concurrent creations by two accounts (on SQLite, committed together by the batched writer): each created link
/// has exactly one row, in its own account's log; a request that lost a race for its short code has none.
async fn concurrent_creations_one_row_each(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let b = app.account(true).await;
    let requests = (0..30).map(|i| {
        let (key, body) = match i % 3 {
            0 => (
                &a.key,
                json!({"long_url": format!("https://example.com/{i}"), "short_code": "race"}),
            ),
            1 => (
                &a.key,
                json!({"long_url": format!("https://example.com/{i}")}),
            ),
            _ => (
                &b.key,
                json!({"long_url": format!("https://example.com/{i}")}),
            ),
        };
        app.create_json(key, body)
    });
    let answers = futures::future::join_all(requests).await;
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(
        created, 21,
        "one of ten wins the code, and twenty without one"
    );
    for acc in [&a, &b] {
        let (_, list) = json(app.get(&acc.key, "/api/v1/external/links?limit=100").await).await;
        let mut links: Vec<&str> = list["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        links.sort_unstable();
        let log = rows(&app, &acc.key).await;
        let mut logged: Vec<&str> = log
            .iter()
            .filter(|r| r["action"] == "link.created")
            .map(|r| {
                assert_eq!(r["actor"], json!({"type": "api_key"}));
                r["target_id"].as_str().unwrap()
            })
            .collect();
        logged.sort_unstable();
        assert_eq!(logged, links);
    }
    app.stop().await;
}

/// A refused change writes no row: a taken short code, a blocked destination, an unknown or another account's
/// group or link, the default group, a group name too long.
async fn refused_changes_write_no_row(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    app.db
        .block_domain(&Hostname::parse("blocked.example").unwrap())
        .await
        .unwrap();
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let theirs = app.group(&other, "Theirs").await;
    let (s, link) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/", "short_code": "taken"}),
        )
        .await;
    assert_eq!(s, 201);
    let link_path = format!("/api/v1/external/links/{}", link["id"].as_str().unwrap());
    let before = total(&app, &acc.key).await;
    let other_before = total(&app, &other.key).await;

    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/2", "short_code": "taken"}),
        )
        .await;
    assert_error(s, &body, 400, "short_code_exists");
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://www.blocked.example/x"}),
        )
        .await;
    assert_error(s, &body, 400, "validation_error");
    let unknown = uuid::Uuid::new_v4().to_string();
    let refusals: Vec<(Method, String, Option<Value>, u16)> = vec![
        (
            Method::PATCH,
            link_path.clone(),
            Some(json!({"long_url": "https://blocked.example/"})),
            400,
        ),
        (
            Method::PATCH,
            link_path.clone(),
            Some(json!({"group_id": unknown})),
            400,
        ),
        (
            Method::PATCH,
            link_path.clone(),
            Some(json!({"group_id": theirs})),
            400,
        ),
        (
            Method::PATCH,
            link_path.clone(),
            Some(json!({"is_active": "no"})),
            400,
        ),
        (
            Method::PATCH,
            format!("/api/v1/external/links/{unknown}"),
            Some(json!({"is_active": false})),
            404,
        ),
        (
            Method::DELETE,
            format!("/api/v1/external/links/{unknown}"),
            None,
            404,
        ),
        (
            Method::POST,
            "/api/v1/external/groups".to_owned(),
            Some(json!({"name": "x".repeat(101)})),
            400,
        ),
        (
            Method::POST,
            "/api/v1/external/groups".to_owned(),
            Some(json!({"name": "Blocked",
                        "settings": {"access": {"fallback_url": "https://blocked.example/"}}})),
            400,
        ),
        (
            Method::PATCH,
            format!("/api/v1/external/groups/{theirs}"),
            Some(json!({"name": "Mine now"})),
            404,
        ),
        (
            Method::POST,
            format!("/api/v1/external/groups/{theirs}/rotate-key"),
            None,
            404,
        ),
        (
            Method::DELETE,
            format!("/api/v1/external/groups/{theirs}"),
            None,
            404,
        ),
        (
            Method::DELETE,
            format!("/api/v1/external/groups/{}", acc.default_group_id),
            None,
            400,
        ),
    ];
    for (method, path, body, want) in refusals {
        let (s, answer) = app.send(method.clone(), &acc.key, &path, body).await;
        assert_eq!(s, want, "{method} {path}: {answer}");
    }
    assert_eq!(total(&app, &acc.key).await, before, "no row for a refusal");
    assert_eq!(
        total(&app, &other.key).await,
        other_before,
        "nothing in the other account's log either"
    );
    app.stop().await;
}

/// Over a limit, nothing is changed and nothing is logged: create-link's 100 an hour, and the budget of
/// management writes.
async fn rate_limited_changes_write_no_row(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.write_limit_per_minute = 1;
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let links: Vec<Value> = (0..100)
        .map(|i| json!({"long_url": format!("https://example.com/{i}")}))
        .collect();
    let (s, body) = app
        .send(
            Method::POST,
            &acc.key,
            "/api/v1/external/links/bulk-create",
            Some(json!({ "links": links })),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let before = total(&app, &acc.key).await;
    assert_eq!(before, 101, "the key's generation and 100 creations");
    let (s, body) = app
        .create_json(&acc.key, json!({"long_url": "https://example.com/over"}))
        .await;
    assert_error(s, &body, 429, "rate_limited");
    assert_eq!(total(&app, &acc.key).await, before);

    let id = body_link_id(&app, &acc).await;
    let path = format!("/api/v1/external/links/{id}");
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(total(&app, &acc.key).await, before + 1);
    let (s, body) = app.send(Method::DELETE, &acc.key, &path, None).await;
    assert_error(s, &body, 429, "rate_limited");
    assert_eq!(total(&app, &acc.key).await, before + 1);
    app.stop().await;
}

/// The id of the account's newest link.
async fn body_link_id(app: &TestApp, acc: &Account) -> String {
    let (_, list) = json(app.get(&acc.key, "/api/v1/external/links?limit=1").await).await;
    list["results"][0]["id"].as_str().unwrap().to_owned()
}

/// Of concurrent deletes of one link or group, one commits and writes its row; the others roll back and leave
/// none.
async fn concurrent_deletes_leave_one_row(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let (_, link) = app
        .create_json(&acc.key, json!({"long_url": "https://example.com/"}))
        .await;
    let link = link["id"].as_str().unwrap().to_owned();
    let group = app.group(&acc, "Doomed").await;
    let before = total(&app, &acc.key).await;
    let deletes = (0..8).map(|_| app.db.delete_link(&acc.id, &link, &Actor::ApiKey));
    let outcomes = futures::future::join_all(deletes).await;
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Ok(()) | Err(StoreError::NotFound(_))))
    );
    let deletes = (0..8).map(|_| app.db.delete_group(Some(&acc.id), &group, &Actor::ApiKey));
    let outcomes = futures::future::join_all(deletes).await;
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
    let log = rows(&app, &acc.key).await;
    assert_eq!(log.len() as i64, before + 2);
    assert_api_row(&log[0], "group.deleted", "group", &group);
    assert_api_row(&log[1], "link.deleted", "link", &link);
    app.stop().await;
}

/// `limit` and `offset` by list-links' rules and codes; pages walk the log newest first.
async fn pagination_as_list_links(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    for i in 0..24 {
        let (s, _) = app
            .create_json(
                &acc.key,
                json!({"long_url": format!("https://example.com/{i}")}),
            )
            .await;
        assert_eq!(s, 201);
    }
    let (s, first) = page(&app, &acc.key, "").await;
    assert_eq!(s, 200);
    assert_eq!(
        (&first["offset"], &first["limit"], &first["total"]),
        (&json!(0), &json!(20), &json!(25))
    );
    assert_eq!(first["results"].as_array().unwrap().len(), 20);
    let all = rows(&app, &acc.key).await;
    let mut walked = Vec::new();
    let mut offset = 0;
    loop {
        let (s, body) = page(&app, &acc.key, &format!("?limit=7&offset={offset}")).await;
        assert_eq!(s, 200);
        assert_eq!(
            (&body["limit"], &body["offset"]),
            (&json!(7), &json!(offset))
        );
        walked.extend(body["results"].as_array().unwrap().iter().cloned());
        offset += 7;
        if offset >= body["total"].as_i64().unwrap() {
            break;
        }
    }
    assert_eq!(walked, all);
    assert_eq!(all.last().unwrap()["action"], "api_key.generated");
    let (_, beyond) = page(&app, &acc.key, "?offset=1000000000&limit=100").await;
    assert_eq!(
        (&beyond["total"], &beyond["results"]),
        (&json!(25), &json!([]))
    );
    // Unknown parameters are ignored, list-links' filter parameters included.
    let (s, body) = page(&app, &acc.key, "?limit=1&match=prefix&long_url=x&cache=1").await;
    assert_eq!((s, body["results"].as_array().unwrap().len()), (200, 1));

    let long = "a".repeat(10);
    for (query, code) in [
        ("limit=0", "invalid_limit"),
        ("limit=101", "invalid_limit"),
        ("limit=abc", "invalid_limit"),
        ("limit=-5", "invalid_limit"),
        ("limit=", "invalid_limit"),
        ("limit=+5", "invalid_limit"),
        ("limit=10&limit=20", "invalid_limit"),
        ("offset=-1", "invalid_offset"),
        ("offset=1.5", "invalid_offset"),
        ("offset=", "invalid_offset"),
        ("offset=1000000001", "invalid_offset"),
        ("offset=99999999999999999999999", "invalid_offset"),
        ("offset=1&offset=1", "invalid_offset"),
        (&format!("limit={long}"), "invalid_limit"),
    ] {
        let (s, body) = page(&app, &acc.key, &format!("?{query}")).await;
        assert_error(s, &body, 400, code);
        // The same answer as list links.
        let listed = json(
            app.get(&acc.key, &format!("/api/v1/external/links?{query}"))
                .await,
        )
        .await;
        assert_eq!((s, body), listed, "{query}");
    }

    // Key-authenticated like every management route.
    let anonymous = app.client.get(app.url(LOG)).send().await.unwrap();
    let (s, body) = json(anonymous).await;
    assert_error(s, &body, 401, "not_authenticated");
    let (s, body) = page(&app, "slk_0000000000000000000000000000000000000000", "").await;
    assert_error(s, &body, 401, "not_authenticated");
    let no_api = app.account(false).await;
    let (s, body) = page(&app, &no_api.key, "").await;
    assert_error(s, &body, 403, "permission_denied");
    let (s, body) = app.send(Method::POST, &acc.key, LOG, None).await;
    assert_error(s, &body, 405, "method_not_allowed");
    app.stop().await;
}

/// Another account's key never sees these rows, and its own changes never land in this log.
async fn accounts_see_their_own_log_only(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let a = app.account(true).await;
    let b = app.account(true).await;
    let (_, link) = app
        .create_json(
            &a.key,
            json!({"long_url": "https://example.com/a", "short_code": "mine"}),
        )
        .await;
    let group = app.group(&a, "Secret plans").await;
    let (_, theirs) = app
        .create_json(&b.key, json!({"long_url": "https://example.com/b"}))
        .await;
    let a_log = rows(&app, &a.key).await;
    let b_log = rows(&app, &b.key).await;
    assert_eq!(a_log.len(), 3, "{a_log:?}");
    assert_eq!(b_log.len(), 2, "{b_log:?}");
    let b_text = serde_json::to_string(&b_log).unwrap();
    for secret in [
        link["id"].as_str().unwrap(),
        group.as_str(),
        "Secret plans",
        "mine",
        a.id.as_str(),
    ] {
        assert!(!b_text.contains(secret), "{secret} leaked: {b_text}");
    }
    assert!(
        !serde_json::to_string(&a_log)
            .unwrap()
            .contains(theirs["id"].as_str().unwrap())
    );
    // The row ids of the other account are not reachable by paging either.
    let (_, b_page) = page(&app, &b.key, "?offset=2").await;
    assert_eq!(b_page["results"], json!([]));
    app.stop().await;
}

/// The operator's commands are logged as the operator; a platform domain is no account's and in no log.
async fn cli_changes_are_the_operators(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let cli = Cli {
        url: app.test_db.url.clone(),
    };
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    cli.ok(&["admin", "domain", "add", "--host", "sho.rt", "--platform"]);
    let account = s(&cli.ok(&["admin", "account", "create", "--email", &email()])["id"]);
    let key = s(&cli.ok(&["admin", "api-key", "generate", "--account", &account])["api_key"]);
    let group = cli.ok(&[
        "admin",
        "group",
        "create",
        "--account",
        &account,
        "--name",
        "Ops",
    ]);
    let group_id = s(&group["id"]);
    cli.ok(&[
        "admin",
        "group",
        "update",
        "--id",
        &group_id,
        "--settings",
        r#"{"access":{"block_bots":true}}"#,
    ]);
    cli.ok(&["admin", "group", "delete", "--id", &group_id]);
    let domain = cli.ok(&[
        "admin",
        "domain",
        "add",
        "--host",
        "links.customer.example",
        "--account",
        &account,
    ]);
    let domain_id = s(&domain["id"]);
    cli.ok(&["admin", "domain", "disable", "--id", &domain_id]);
    let (status, link) = app
        .create_json(
            &key,
            json!({"long_url": "https://example.com/", "short_code": "ops"}),
        )
        .await;
    assert_eq!(status, 201, "{link}");
    let link_id = s(&link["id"]);
    cli.ok(&["admin", "link", "pause", "--id", &link_id]);
    cli.ok(&["admin", "link", "resume", "--id", &link_id]);
    cli.ok(&["admin", "link", "delete", "--id", &link_id]);
    cli.ok(&["admin", "api-key", "revoke", "--account", &account]);
    // Revoking twice revokes nothing the second time: no row.
    cli.ok(&["admin", "api-key", "revoke", "--account", &account]);
    let key = s(&cli.ok(&["admin", "api-key", "generate", "--account", &account])["api_key"]);

    let log = rows(&app, &key).await;
    // Oldest first: (actor type, action, target id).
    let seen: Vec<(String, String, String)> = log
        .iter()
        .rev()
        .map(|r| (s(&r["actor"]["type"]), s(&r["action"]), s(&r["target_id"])))
        .collect();
    let op =
        |action: &str, target: &str| ("operator".to_owned(), action.to_owned(), target.to_owned());
    let mut want = vec![
        op("api_key.generated", "?"),
        op("group.created", &group_id),
        op("group.updated", &group_id),
        op("group.deleted", &group_id),
        op("domain.added", &domain_id),
        op("domain.disabled", &domain_id),
        (
            "api_key".to_owned(),
            "link.created".to_owned(),
            link_id.clone(),
        ),
        op("link.paused", &link_id),
        op("link.resumed", &link_id),
        op("link.deleted", &link_id),
        op("api_key.revoked", "?"),
        op("api_key.generated", "?"),
    ];
    // Key row ids are not printed by the CLI: take them from the log, and check they are the keys' own.
    for (i, w) in want.iter_mut().enumerate() {
        if w.2 == "?" {
            w.2 = seen[i].2.clone();
        }
    }
    assert_eq!(seen, want);
    assert_eq!(want[0].2, want[10].2, "the revoked key is the first one");
    assert_ne!(want[0].2, want[11].2);
    for r in &log {
        if r["actor"]["type"] == "operator" {
            assert_eq!(r["actor"], json!({"type": "operator"}));
        }
    }
    let by_action = |a: &str| log.iter().find(|r| r["action"] == a).unwrap().clone();
    assert_eq!(
        by_action("group.updated")["details"],
        json!({"name": "Ops", "settings": {"access": {"block_bots": true}}})
    );
    assert_eq!(
        by_action("domain.added")["details"],
        json!({"domain": "links.customer.example", "fallback_url": null})
    );
    assert_eq!(
        by_action("domain.disabled")["details"],
        json!({"domain": "links.customer.example"})
    );
    let generated: Vec<&Value> = log
        .iter()
        .filter(|r| r["action"] == "api_key.generated")
        .map(|r| &r["details"])
        .collect();
    assert_eq!(
        generated,
        [&json!({"replaced": false}), &json!({"replaced": false})]
    );
    assert!(!serde_json::to_string(&log).unwrap().contains(&key));
    app.stop().await;
}

/// The dashboard's changes are the signed-in user's, with their email.
async fn dashboard_changes_are_the_users(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let csrf = b.get("/dashboard/").await.csrf();
    let made = b
        .post(
            "/dashboard/links",
            &[
                ("csrf", csrf.as_str()),
                ("long_url", "https://example.com/docs"),
                ("short_code", "docs"),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let page = app.db.list_links(&account.id, 20, 0, None).await.unwrap();
    let id = page.results[0].id.clone();
    let paused = b
        .post(
            &format!("/dashboard/links/{id}/pause"),
            &[("csrf", &csrf), ("back", "list")],
        )
        .await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER, "{}", paused.body);
    let log = app.db.audit_log(&account.id, 100, 0).await.unwrap();
    let user_rows: Vec<(&str, &str)> = log
        .results
        .iter()
        .filter(|r| r.actor_type == "user" && r.target_type == "link")
        .map(|r| (r.action.as_str(), r.target_id.as_str()))
        .collect();
    assert_eq!(
        user_rows,
        [("link.paused", id.as_str()), ("link.created", id.as_str())]
    );
    assert!(
        log.results
            .iter()
            .filter(|r| r.actor_type == "user")
            .all(|r| r.actor_email.as_deref() == Some(address.as_str()))
    );
    app.stop().await;
}

/// Moves rows of the log back in time by `days` (the test's stand-in for waiting a year).
async fn age_rows(app: &TestApp, target_id: &str, days: i64) {
    let mut conn = sqlx::AnyConnection::connect(&app.test_db.url)
        .await
        .unwrap();
    sqlx::query("UPDATE audit_log SET at = at - $1 WHERE target_id = $2")
        .bind(days * DAY_MICROS)
        .bind(target_id)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// Rows older than the retention go, newer ones stay; `serve` prunes on its own with `--audit-retention-days`.
async fn retention_prunes_old_rows_only(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut ids = Vec::new();
    for code in ["old", "older", "new"] {
        let (_, link) = app
            .create_json(
                &acc.key,
                json!({"long_url": "https://example.com/", "short_code": code}),
            )
            .await;
        ids.push(link["id"].as_str().unwrap().to_owned());
    }
    age_rows(&app, &ids[0], 366).await;
    age_rows(&app, &ids[1], 400).await;
    assert_eq!(total(&app, &acc.key).await, 4);
    let keep = Retention {
        click_days: 90,
        audit_days: 365,
    };
    let pruned = retention::prune(&app.db, keep, Micros::now(), || true)
        .await
        .unwrap();
    assert_eq!(pruned.audit_rows, 2);
    let left: Vec<String> = rows(&app, &acc.key)
        .await
        .iter()
        .map(|r| r["target_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left.len(), 2);
    assert_eq!(left[0], ids[2]);
    // Nothing else is old enough; a year and a day on, everything is.
    let again = retention::prune(&app.db, keep, Micros::now(), || true)
        .await
        .unwrap();
    assert_eq!(again.audit_rows, 0);
    let later = Micros(Micros::now().0 + 366 * DAY_MICROS);
    let all = retention::prune(&app.db, keep, later, || true)
        .await
        .unwrap();
    assert_eq!(all.audit_rows, 2);
    assert_eq!(total(&app, &acc.key).await, 0);
    app.stop().await;

    // The task `serve` runs, with the setting.
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.audit_retention_days = 2;
        s.prune_interval = Duration::from_millis(100);
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let (_, link) = app
        .create_json(&acc.key, json!({"long_url": "https://example.com/"}))
        .await;
    let link = link["id"].as_str().unwrap().to_owned();
    age_rows(&app, &link, 3).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while total(&app, &acc.key).await != 1 {
        assert!(Instant::now() < deadline, "the old row was not pruned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(rows(&app, &acc.key).await[0]["action"], "api_key.generated");
    app.stop().await;
}

/// `--audit-retention-days` is 1 to 36500.
#[test]
fn the_retention_flag_is_bounded() {
    for bad in ["0", "36501", "x"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_origin-api"))
            .args(["serve", "--audit-retention-days", bad])
            .env("DATABASE_URL", "sqlite://unused-never-created.db")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad} accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--audit-retention-days"), "{stderr}");
    }
}

both_engines!(
    each_api_change_writes_one_row,
    bulk_create_writes_one_row_per_link,
    concurrent_creations_one_row_each,
    refused_changes_write_no_row,
    rate_limited_changes_write_no_row,
    concurrent_deletes_leave_one_row,
    pagination_as_list_links,
    accounts_see_their_own_log_only,
    cli_changes_are_the_operators,
    dashboard_changes_are_the_users,
    retention_prunes_old_rows_only,
);
