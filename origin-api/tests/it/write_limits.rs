//! The limits on management writes (hardening issue, item 5): a per-key budget of writes in any rolling minute,
//! exact under concurrency and shared by every origin process (the database keeps it), with `X-RateLimit-*` on
//! each write and `429 rate_limited` + `Retry-After` beyond; reads and create-link are apart. Also: the cap on
//! groups per account (exact under concurrency), bulk-create answering every entry after its first 429 at once,
//! the dashboard's own budget, and the bound on PNG QR codes and CSV exports (503 with `Retry-After: 1`).

use crate::common::{Engine, TestApp, TestDb, assert_error, json, start_server_with};
use crate::dashboard::{Browser, email};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shortlink_store::Actor;
use sqlx::Row;
use std::collections::BTreeSet;
use std::time::Duration;

const LINKS: &str = "/api/v1/external/links";
const GROUPS: &str = "/api/v1/external/groups";

fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn header(r: &reqwest::Response, name: &str) -> Option<i64> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().parse().unwrap())
}

/// Any request with the key, answered raw (for the headers).
async fn raw(
    app_base: &str,
    client: &reqwest::Client,
    method: Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = client
        .request(method, format!("{app_base}{path}"))
        .header("Authorization", format!("Token {key}"));
    if let Some(body) = body {
        req = req.json(&body);
    }
    req.send().await.unwrap()
}

/// A link of `key`'s account, by id.
async fn a_link(app: &TestApp, key: &str, path: &str) -> String {
    let (s, link) = app
        .create_json(
            key,
            json!({"long_url": format!("https://example.com/{path}")}),
        )
        .await;
    assert_eq!(s, 201, "{link}");
    link["id"].as_str().unwrap().to_owned()
}

/// Sorts answers of charged writes: the successes' `X-RateLimit-Remaining` values, and how many were refused
/// (each refusal checked: the error shape, `Retry-After` within the minute, the headers at 0).
async fn tally(responses: Vec<reqwest::Response>, limit: i64) -> (Vec<i64>, usize) {
    let (mut remaining, mut refused) = (Vec::new(), 0);
    for r in responses {
        assert_eq!(header(&r, "x-ratelimit-limit"), Some(limit));
        let reset = header(&r, "x-ratelimit-reset").unwrap();
        assert!(
            (now_secs() - 1..=now_secs() + 61).contains(&reset),
            "reset {reset}"
        );
        match r.status().as_u16() {
            200 | 201 | 204 => remaining.push(header(&r, "x-ratelimit-remaining").unwrap()),
            429 => {
                assert_eq!(header(&r, "x-ratelimit-remaining"), Some(0));
                let retry = header(&r, "retry-after").unwrap();
                assert!((1..=60).contains(&retry), "retry-after {retry}");
                let (s, body) = json(r).await;
                assert_error(s, &body, 429, "rate_limited");
                assert!(
                    body["detail"]
                        .as_str()
                        .unwrap()
                        .contains("management writes per minute"),
                    "{body}"
                );
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", r.text().await.unwrap()),
        }
    }
    remaining.sort_unstable();
    (remaining, refused)
}

/// 50 parallel PATCHes with a budget of 30: exactly 30 pass, each seeing one less remaining; the rest are 429.
/// Reads, create-link and another key are not touched by it; every write route spends it.
async fn budget_is_exact_under_concurrency(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let app = TestApp::with_settings(test_db, |s| s.write_limit_per_minute = 30).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = a_link(&app, &acc.key, "a").await;
    let path = format!("{LINKS}/{id}");
    let patches = (0..50).map(|i| {
        raw(
            &app.base,
            &app.client,
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"is_active": i % 2 == 0})),
        )
    });
    let (remaining, refused) = tally(join_all(patches).await, 30).await;
    assert_eq!(
        remaining,
        (0..30).collect::<Vec<i64>>(),
        "one each, in turn"
    );
    assert_eq!(refused, 20);

    // A malformed write is refused before the budget is consulted (400, no headers), as create-link's 400s.
    let bad = raw(
        &app.base,
        &app.client,
        Method::PATCH,
        &acc.key,
        &path,
        Some(json!({"is_active": "yes"})),
    )
    .await;
    assert!(bad.headers().get("x-ratelimit-limit").is_none());
    let (s, body) = json(bad).await;
    assert_error(s, &body, 400, "validation_error");
    // Every write route spends the same budget.
    for (method, p, body) in [
        (Method::DELETE, path.clone(), None),
        (Method::POST, GROUPS.to_owned(), Some(json!({"name": "G"}))),
        (
            Method::PATCH,
            format!("{GROUPS}/{}", acc.default_group_id),
            Some(json!({"name": "D"})),
        ),
        (
            Method::POST,
            format!("{GROUPS}/{}/rotate-key", acc.default_group_id),
            None,
        ),
        (
            Method::DELETE,
            format!("{GROUPS}/{}", acc.default_group_id),
            None,
        ),
    ] {
        let r = raw(&app.base, &app.client, method.clone(), &acc.key, &p, body).await;
        assert_eq!(r.status(), 429, "{method} {p}");
    }
    // Reads are not limited and carry no write headers.
    for p in [path.as_str(), LINKS, GROUPS] {
        let r = app.get(&acc.key, p).await;
        assert_eq!(r.status(), 200, "{p}");
        assert!(r.headers().get("x-ratelimit-limit").is_none(), "{p}");
    }
    // create-link keeps its own hourly 100 (one used so far), apart from the write budget.
    let created = app
        .create(&acc.key, json!({"long_url": "https://example.com/b"}))
        .await;
    assert_eq!(created.status(), 201);
    assert_eq!(header(&created, "x-ratelimit-limit"), Some(100));
    assert_eq!(header(&created, "x-ratelimit-remaining"), Some(98));
    // Another key has a budget of its own.
    let other = app.account(true).await;
    let theirs = a_link(&app, &other.key, "c").await;
    let r = raw(
        &app.base,
        &app.client,
        Method::PATCH,
        &other.key,
        &format!("{LINKS}/{theirs}"),
        Some(json!({"is_active": false})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-remaining"), Some(29));
    // A write that fails after the budget was consulted was counted, and says so.
    let gone = raw(
        &app.base,
        &app.client,
        Method::DELETE,
        &other.key,
        &format!("{LINKS}/{}", uuid::Uuid::new_v4()),
        None,
    )
    .await;
    assert_eq!(gone.status(), 404);
    assert_eq!(header(&gone, "x-ratelimit-remaining"), Some(28));
    app.stop().await;
}

/// Two `serve` processes on one database share one budget: 40 parallel writes split between them with a budget
/// of 20 (one process configured by flag, the other by environment variable) let exactly 20 through.
async fn budget_is_shared_by_processes(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let a = start_server_with(
        &test_db.url,
        "warn",
        &["--write-limit-per-minute", "20"],
        &[],
    )
    .await;
    let b = start_server_with(
        &test_db.url,
        "warn",
        &[],
        &[("WRITE_LIMIT_PER_MINUTE", "20")],
    )
    .await;
    let app = TestApp::on(test_db).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = a_link(&app, &acc.key, "a").await;
    let path = format!("{LINKS}/{id}");
    let writes = (0..40).map(|i| {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        raw(
            base,
            &app.client,
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"forward_query": i % 3 == 0})),
        )
    });
    let (remaining, refused) = tally(join_all(writes).await, 20).await;
    assert_eq!(remaining, (0..20).collect::<Vec<i64>>());
    assert_eq!(refused, 20);
    drop((a, b));
    app.stop().await;
}

/// Budget rows older than the window count for nothing and go at the subject's next write (in its
/// transaction); the maintenance call removes every subject's old rows.
async fn old_budget_rows_are_pruned(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = a_link(&app, &acc.key, "a").await;
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let key_id: String = sqlx::query("SELECT id FROM api_keys WHERE account_id = $1")
        .bind(&acc.id)
        .fetch_one(&pool)
        .await
        .unwrap()
        .try_get("id")
        .unwrap();
    let old = (time::OffsetDateTime::now_utc().unix_timestamp() - 61) * 1_000_000;
    // More than a whole budget, all out of the window.
    let fill = |subject: &str| {
        let rows: Vec<String> = (0..700)
            .map(|i| format!("('{subject}', {})", old - i))
            .collect();
        format!(
            "INSERT INTO write_budget (subject, at) VALUES {}",
            rows.join(", ")
        )
    };
    sqlx::query(&fill(&key_id)).execute(&pool).await.unwrap();
    let r = raw(
        &app.base,
        &app.client,
        Method::PATCH,
        &acc.key,
        &format!("{LINKS}/{id}"),
        Some(json!({"is_active": false})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit"), Some(600), "the default");
    assert_eq!(header(&r, "x-ratelimit-remaining"), Some(599));
    let count = |subject: String| {
        let pool = pool.clone();
        async move {
            sqlx::query("SELECT COUNT(*) AS n FROM write_budget WHERE subject = $1")
                .bind(subject)
                .fetch_one(&pool)
                .await
                .unwrap()
                .try_get::<i64, _>("n")
                .unwrap()
        }
    };
    assert_eq!(count(key_id.clone()).await, 1, "only the write just made");
    // A subject that never writes again (a revoked key) is pruned by the maintenance call.
    sqlx::query(&fill("gone-key")).execute(&pool).await.unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1_000_000;
    assert!(app.db.prune_write_budget(now).await.unwrap() >= 700);
    assert_eq!(count("gone-key".to_owned()).await, 0);
    assert_eq!(count(key_id).await, 1, "a write in the window stays");
    pool.close().await;
    app.stop().await;
}

/// 20 parallel group creations for an account with its default group and a cap of 5: exactly 4 are created,
/// the rest are `400 validation_error`; the dashboard refuses at the cap with the message by the form.
async fn group_cap_is_exact_under_concurrency(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let app = TestApp::with_settings(test_db, |s| s.max_groups_per_account = 5).await;
    let acc = app.account(true).await;
    let creates = (0..20).map(|i| {
        app.send(
            Method::POST,
            &acc.key,
            GROUPS,
            Some(json!({"name": format!("G{i}")})),
        )
    });
    let (mut created, mut refused) = (0, 0);
    for (s, body) in join_all(creates).await {
        match s {
            201 => created += 1,
            400 => {
                assert_error(s, &body, 400, "validation_error");
                assert!(
                    body["detail"]
                        .as_str()
                        .unwrap()
                        .contains("at most 5 groups"),
                    "{body}"
                );
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!((created, refused), (4, 16), "the default group counts");
    let (_, list) = app.send(Method::GET, &acc.key, GROUPS, None).await;
    let groups = list["results"].as_array().unwrap();
    assert_eq!(groups.len(), 5);
    // Room again after a delete.
    let victim = groups
        .iter()
        .find(|g| g["id"] != acc.default_group_id.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("{GROUPS}/{victim}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (s, _) = app
        .send(
            Method::POST,
            &acc.key,
            GROUPS,
            Some(json!({"name": "Again"})),
        )
        .await;
    assert_eq!(s, 201);

    // The dashboard: the same cap, the refusal shown by the form.
    let mut b = Browser::new(&app);
    b.join(&app, &email()).await;
    let csrf = b.get("/dashboard/groups").await.csrf();
    for i in 0..4 {
        let name = format!("D{i}");
        let made = b
            .post("/dashboard/groups", &[("csrf", &csrf), ("name", &name)])
            .await;
        assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    }
    let over = b
        .post("/dashboard/groups", &[("csrf", &csrf), ("name", "D4")])
        .await;
    assert_eq!(over.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(over.body.contains("at most 5 groups"), "{}", over.body);
    app.stop().await;
}

/// bulk-create stops at its first 429: the entries after it are 429 at once, whatever they hold (an invalid
/// entry is not evaluated, so not a 400).
async fn bulk_stops_at_the_first_429(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let path = format!("{LINKS}/bulk-create");
    let links: Vec<Value> = (0..98)
        .map(|i| json!({"long_url": format!("https://example.com/{i}")}))
        .collect();
    let (s, body) = app
        .send(Method::POST, &acc.key, &path, Some(json!({"links": links})))
        .await;
    assert_eq!(s, 200, "{body}");
    let resp = raw(
        &app.base,
        &app.client,
        Method::POST,
        &acc.key,
        &path,
        Some(json!({"links": [
            {"long_url": "https://example.com/a"},
            {"long_url": "https://example.com/b"},
            {"long_url": "https://example.com/c"},
            {"long_url": "not a URL"},
            {"long_url": "https://example.com/d", "short_code": "x"},
        ]})),
    )
    .await;
    assert_eq!(header(&resp, "x-ratelimit-remaining"), Some(0));
    assert!(header(&resp, "retry-after").unwrap() > 0);
    let (s, body) = json(resp).await;
    assert_eq!(s, 200, "{body}");
    let statuses: Vec<(i64, &str)> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_i64().unwrap(),
                r["error_code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (201, ""),
            (201, ""),
            (429, "rate_limited"),
            (429, "rate_limited"),
            (429, "rate_limited"),
        ]
    );
    let (_, list) = json(app.get(&acc.key, LINKS).await).await;
    assert_eq!(list["total"], 100);
    app.stop().await;
}

/// The dashboard's changes have their own budget per account (apart from the key's): with 3 a minute, the
/// fourth pause/resume is a 429 page with `Retry-After` and changes nothing; the API key still writes.
async fn dashboard_changes_have_a_budget(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let app = TestApp::with_settings(test_db, |s| s.write_limit_per_minute = 3).await;
    app.platform_domain("sho.rt").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let csrf = b.get("/dashboard/").await.csrf();
    // Creating a link spends create-link's hourly budget, not this one.
    let made = b
        .post(
            "/dashboard/links",
            &[("csrf", &csrf), ("long_url", "https://example.com/x")],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let id = app
        .db
        .list_links(&account.id, 1, 0, None)
        .await
        .unwrap()
        .results[0]
        .id
        .clone();
    for verb in ["pause", "resume", "pause"] {
        let page = b
            .post(&format!("/dashboard/links/{id}/{verb}"), &[("csrf", &csrf)])
            .await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{verb}: {}", page.body);
    }
    let over = b
        .post(&format!("/dashboard/links/{id}/resume"), &[("csrf", &csrf)])
        .await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
    let retry: i64 = over.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(over.body.contains("Too many changes"), "{}", over.body);
    assert!(
        !app.db.get_link(&account.id, &id).await.unwrap().is_active,
        "the refused resume changed nothing"
    );
    // The account's API key has its own budget.
    let key = app
        .db
        .generate_api_key(&account.id, &Actor::Operator)
        .await
        .unwrap();
    let r = raw(
        &app.base,
        &app.client,
        Method::PATCH,
        key.expose(),
        &format!("{LINKS}/{id}"),
        Some(json!({"is_active": true})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-remaining"), Some(2));
    app.stop().await;
}

both_engines!(
    budget_is_exact_under_concurrency,
    budget_is_shared_by_processes,
    old_budget_rows_are_pruned,
    group_cap_is_exact_under_concurrency,
    bulk_stops_at_the_first_429,
    dashboard_changes_have_a_budget,
);

/// Fires `n` parallel requests of `path` with `key`; answers as (status, Retry-After, body bytes).
async fn burst(app: &TestApp, key: &str, path: &str, n: usize) -> Vec<(u16, Option<i64>, Vec<u8>)> {
    let requests = (0..n).map(|_| async {
        let r = app.get(key, path).await;
        let retry = header(&r, "retry-after");
        (
            r.status().as_u16(),
            retry,
            r.bytes().await.unwrap().to_vec(),
        )
    });
    join_all(requests).await
}

/// Checks a burst's answers: each a 200 or a `503 service_unavailable` with `Retry-After: 1`; true when at least
/// one was a 503 (the bound turned someone away) and at least one a 200.
fn bounded(answers: &[(u16, Option<i64>, Vec<u8>)]) -> bool {
    let mut statuses = BTreeSet::new();
    for (status, retry, body) in answers {
        statuses.insert(*status);
        match status {
            200 => {}
            503 => {
                assert_eq!(*retry, Some(1));
                let body: Value = serde_json::from_slice(body).unwrap();
                assert_error(503, &body, 503, "service_unavailable");
            }
            other => panic!("unexpected {other}"),
        }
    }
    statuses == BTreeSet::from([200, 503])
}

/// PNG QR codes and CSV exports share a process-wide bound: with one place and no wait, a burst of them turns
/// some away with `503` + `Retry-After: 1` while others are served; SVGs and JSON are not bounded. (No database
/// rule is involved: SQLite only.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn png_and_csv_share_a_bound() {
    let test_db = TestDb::new(Engine::Sqlite).await;
    let app = TestApp::with_settings(test_db, |s| {
        s.render_concurrency = 1;
        s.render_wait = Duration::ZERO;
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = a_link(&app, &acc.key, "qr").await;
    let png = format!("{LINKS}/{id}/qr?format=png&size=2048");
    let csv = "/api/v1/external/stats?format=csv";
    // Timing decides which requests overlap: a few bursts, until each kind has been turned away once.
    let (mut png_bounded, mut csv_bounded) = (false, false);
    for _ in 0..20 {
        if !png_bounded {
            png_bounded = bounded(&burst(&app, &acc.key, &png, 30).await);
        }
        if !csv_bounded {
            csv_bounded = bounded(&burst(&app, &acc.key, csv, 30).await);
        }
        if png_bounded && csv_bounded {
            break;
        }
    }
    assert!(png_bounded, "no PNG was turned away");
    assert!(csv_bounded, "no CSV export was turned away");
    // Unbounded: SVGs and JSON statistics.
    let svg = format!("{LINKS}/{id}/qr?size=2048");
    for path in [svg.as_str(), "/api/v1/external/stats"] {
        for (status, _, _) in burst(&app, &acc.key, path, 30).await {
            assert_eq!(status, 200, "{path}");
        }
    }
    // With the default wait (2 s), a burst on one place is served whole: requests queue instead of failing.
    app.stop().await;
    let test_db = TestDb::new(Engine::Sqlite).await;
    let app = TestApp::with_settings(test_db, |s| s.render_concurrency = 1).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = a_link(&app, &acc.key, "qr").await;
    let png = format!("{LINKS}/{id}/qr?format=png&size=512");
    for (status, _, _) in burst(&app, &acc.key, &png, 8).await {
        assert_eq!(status, 200);
    }
    app.stop().await;
}

/// The OpenAPI document shows the write budget where it applies: a 429 with `Retry-After` and the
/// `X-RateLimit-*` headers on every management write, the headers on its success, and no 429 on reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_the_write_budget() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let (s, doc) = json(
        app.client
            .get(app.url("/api/v1/openapi.json"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let writes = [
        ("/api/v1/external/links/{id}", "patch", "200"),
        ("/api/v1/external/links/{id}", "delete", "204"),
        ("/api/v1/external/groups", "post", "201"),
        ("/api/v1/external/groups/{id}", "patch", "200"),
        ("/api/v1/external/groups/{id}", "delete", "204"),
        ("/api/v1/external/groups/{id}/rotate-key", "post", "200"),
    ];
    for (path, method, success) in writes {
        let responses = &doc["paths"][path][method]["responses"];
        let limited = responses["429"]["headers"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path}: no 429 with headers"));
        for h in [
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset",
            "Retry-After",
        ] {
            assert!(limited.contains_key(h), "{method} {path} 429: {h}");
        }
        assert_eq!(
            responses["429"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Error"
        );
        let ok = responses[success]["headers"].as_object().unwrap();
        assert!(ok.contains_key("X-RateLimit-Remaining"), "{method} {path}");
    }
    for (path, method) in [
        ("/api/v1/external/links", "get"),
        ("/api/v1/external/links/{id}", "get"),
        ("/api/v1/external/groups", "get"),
        ("/api/v1/external/groups/{id}", "get"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"]["429"].is_null(),
            "{method} {path} is a read"
        );
    }
    app.stop().await;
}
