//! The link export (issue 24), on both engines: the CSV's columns and values (formula-safe cells, tags joined with
//! `|`, group names, clicks), NDJSON, every list filter and sort applied as the list applies it, the keyset
//! batches walking every order without a gap or a repeat, isolation between accounts, and the errors.

use crate::common::{Account, Engine, TestApp, TestDb, assert_error};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::{Day, ListQuery, Micros};
use shortlink_store::{StatsScope, ValueCount};
use sqlx::Connection as _;

const LINKS: &str = "/api/v1/external/links";
const EXPORT: &str = "/api/v1/external/links/export";
const HEADER: [&str; 14] = [
    "id",
    "short_url",
    "short_code",
    "domain",
    "long_url",
    "title",
    "tags",
    "group_id",
    "group_name",
    "is_active",
    "created_at",
    "expires_at",
    "forward_query",
    "clicks",
];

async fn create(app: &TestApp, acc: &Account, body: Value) -> Value {
    let (s, b) = app.create_json(&acc.key, body).await;
    assert_eq!(s, 201, "{b}");
    b
}

/// An export's status, content type and body.
async fn export(app: &TestApp, key: &str, query: &str) -> (u16, String, String) {
    let resp = app.get(key, &format!("{EXPORT}?{query}")).await;
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, resp.text().await.unwrap())
}

/// A CSV export's records (header checked), each as a map from column to value. The imports' tests read it too.
pub(crate) async fn csv_rows(
    app: &TestApp,
    acc: &Account,
    query: &str,
) -> Vec<std::collections::HashMap<String, String>> {
    let (s, ctype, body) = export(app, &acc.key, query).await;
    assert_eq!(s, 200, "{query}: {body}");
    assert_eq!(ctype, "text/csv; charset=utf-8");
    assert!(body.ends_with("\r\n") || body.is_empty(), "{body}");
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(header, HEADER, "{query}");
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            header
                .iter()
                .cloned()
                .zip(r.iter().map(str::to_owned))
                .collect()
        })
        .collect()
}

async fn codes_of(app: &TestApp, acc: &Account, query: &str) -> Vec<String> {
    csv_rows(app, acc, query)
        .await
        .into_iter()
        .map(|r| r["short_code"].clone())
        .collect()
}

/// The list's order of every match (at most 100), to hold the export against.
async fn listed_codes(app: &TestApp, acc: &Account, query: &str) -> Vec<String> {
    let (s, b) = app
        .send(
            Method::GET,
            &acc.key,
            &format!("{LINKS}?limit=100&{query}"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["short_code"].as_str().unwrap().to_owned())
        .collect()
}

/// Every column, formula-safe cells, NDJSON with the same fields, and the filters and sorts as the list has them.
async fn columns_formats_and_filters(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let other = app.account(true).await;
    let spring = app.group(&acc, "Spring, \"22\"").await;
    let theirs = app.group(&other, "Theirs").await;
    let a = create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/a?x=1,2", "short_code": "aaa", "title": "=HYPERLINK(\"x\")",
               "tags": ["promo", "Mail"], "group_id": spring, "expires_at": "2031-01-02T03:04:05Z",
               "forward_query": true}),
    )
    .await;
    create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/b", "short_code": "bbb"}),
    )
    .await;
    let c = create(
        &app,
        &acc,
        json!({"long_url": "https://shop.example/c", "short_code": "ccc", "title": "Third", "tags": ["promo"]}),
    )
    .await;
    app.pause_link(&acc.key, c["id"].as_str().unwrap()).await;
    create(
        &app,
        &other,
        json!({"long_url": "https://example.com/theirs", "short_code": "zzz", "tags": ["promo"],
               "group_id": theirs}),
    )
    .await;
    // Two clicks on aaa.
    let now = Micros::now().0 / 1000;
    let click = |at: i64| shortlink_store::ClickEvent {
        host: "sho.rt".to_owned(),
        short_code: Some("aaa".to_owned()),
        group_id: spring.clone(),
        at,
        country: None,
        referer_host: None,
        device: shortlink_store::Device::Mobile,
        id: None,
        ..Default::default()
    };
    app.db
        .record_clicks(None, vec![click(now), click(now - 86_400_000)])
        .await
        .unwrap();

    let (s, a) = app
        .send(
            Method::GET,
            &acc.key,
            &format!("{LINKS}/{}", a["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let rows = csv_rows(&app, &acc, "").await;
    let codes: Vec<&str> = rows.iter().map(|r| r["short_code"].as_str()).collect();
    assert_eq!(
        codes,
        ["ccc", "bbb", "aaa"],
        "newest first, the other account's link left out"
    );
    let r = &rows[2];
    assert_eq!(r["id"], a["id"].as_str().unwrap());
    assert_eq!(r["short_url"], "https://sho.rt/aaa");
    assert_eq!(r["domain"], "sho.rt");
    assert_eq!(r["long_url"], "https://example.com/a?x=1,2");
    assert_eq!(r["title"], "'=HYPERLINK(\"x\")", "a formula is defused");
    assert_eq!(r["tags"], "Mail|promo");
    assert_eq!(r["group_id"], spring);
    assert_eq!(r["group_name"], "Spring, \"22\"");
    assert_eq!(r["is_active"], "true");
    assert_eq!(r["created_at"], a["created_at"].as_str().unwrap());
    assert_eq!(r["expires_at"], "2031-01-02T03:04:05.000000Z");
    assert_eq!(r["forward_query"], "true");
    assert_eq!(r["clicks"], "2");
    let b = &rows[1];
    assert_eq!(
        (
            b["title"].as_str(),
            b["tags"].as_str(),
            b["expires_at"].as_str()
        ),
        ("", "", "")
    );
    assert_eq!(
        (b["group_id"].as_str(), b["clicks"].as_str()),
        (acc.default_group_id.as_str(), "0")
    );
    assert_eq!(rows[0]["is_active"], "false");

    // NDJSON: the same links and fields, typed.
    let (s, ctype, body) = export(&app, &acc.key, "format=ndjson&sort=short_code").await;
    assert_eq!((s, ctype.as_str()), (200, "application/x-ndjson"));
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        json!({"id": a["id"], "short_url": "https://sho.rt/aaa", "short_code": "aaa", "domain": "sho.rt",
               "long_url": "https://example.com/a?x=1,2", "title": "=HYPERLINK(\"x\")", "tags": ["Mail", "promo"],
               "group_id": spring, "group_name": "Spring, \"22\"", "is_active": true,
               "created_at": a["created_at"], "expires_at": "2031-01-02T03:04:05.000000Z",
               "forward_query": true, "clicks": 2})
    );
    assert_eq!(lines[1]["title"], Value::Null);
    assert_eq!(lines[1]["expires_at"], Value::Null);
    assert_eq!(lines[1]["tags"], json!([]));

    // Every filter and sort selects and orders as the list does; limit and offset are not the export's.
    let group_q = format!("group_id={spring}");
    let theirs_q = format!("group_id={theirs}");
    for query in [
        "",
        "tag=PROMO",
        "tag=promo&tag=mail",
        "tag=nope",
        "q=example.com",
        "q=thi",
        "is_active=false",
        "is_active=true&sort=-created_at",
        "domain=sho.rt&sort=short_code",
        "domain=other.example",
        "long_url=https%3A%2F%2Fexample.com%2F&match=startswith",
        "sort=clicks",
        group_q.as_str(),
        theirs_q.as_str(),
    ] {
        assert_eq!(
            codes_of(&app, &acc, query).await,
            listed_codes(&app, &acc, query).await,
            "{query}"
        );
    }
    assert_eq!(codes_of(&app, &acc, "limit=1&offset=2").await.len(), 3);
    assert!(
        codes_of(&app, &acc, &theirs_q).await.is_empty(),
        "another account's group: nothing"
    );
    app.stop().await;
}

/// The keyset batches walk each order exactly as the list pages it: batches of 2 over links with equal creation
/// times, equal codes on two domains and equal click counts.
async fn batches_walk_every_order(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let custom = app.custom_domain("go.example.com", &acc).await;
    for (i, code) in ["kk1", "kk2", "kk3", "kk4", "kk5", "kk6", "kk7"]
        .iter()
        .enumerate()
    {
        create(
            &app,
            &acc,
            json!({"long_url": format!("https://example.com/{i}"), "short_code": code}),
        )
        .await;
    }
    create(
        &app,
        &acc,
        json!({"long_url": "https://example.com/dup", "short_code": "kk3", "domain_id": custom.id}),
    )
    .await;
    // Ties: three links created in the same microsecond, and clicks that tie.
    let mut conn = sqlx::AnyConnection::connect(&app.test_db.url)
        .await
        .unwrap();
    // The click totals keep a copy of the (otherwise never changed) creation time: both move together.
    for sql in [
        "UPDATE links SET created_at = 1700000000000000 WHERE short_code IN ('kk2', 'kk4', 'kk6')",
        "UPDATE link_click_totals SET created_at = 1700000000000000 \
         WHERE link_id IN (SELECT id FROM links WHERE short_code IN ('kk2', 'kk4', 'kk6'))",
    ] {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    let now = Micros::now().0 / 1000;
    let click = |code: &str| shortlink_store::ClickEvent {
        host: "sho.rt".to_owned(),
        short_code: Some(code.to_owned()),
        group_id: acc.default_group_id.clone(),
        at: now,
        country: None,
        referer_host: None,
        device: shortlink_store::Device::Desktop,
        id: None,
        ..Default::default()
    };
    app.db
        .record_clicks(
            None,
            ["kk1", "kk5", "kk5", "kk7", "kk2", "kk2"]
                .into_iter()
                .map(click)
                .collect(),
        )
        .await
        .unwrap();
    for sort in ["created_at", "-created_at", "short_code", "clicks"] {
        let query = ListQuery::parse(Some(&format!("sort={sort}&limit=100"))).unwrap();
        let want: Vec<String> = app
            .db
            .search_links(&acc.id, &query)
            .await
            .unwrap()
            .results
            .into_iter()
            .map(|l| l.id)
            .collect();
        assert_eq!(want.len(), 8);
        for batch in [1, 2, 3, 8] {
            let mut got = Vec::new();
            let mut cursor = None;
            loop {
                let b = app
                    .db
                    .export_links(&acc.id, &query, cursor.as_ref(), batch)
                    .await
                    .unwrap();
                assert!(b.links.len() <= batch as usize);
                got.extend(b.links.into_iter().map(|e| e.link.id));
                match b.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(got, want, "sort={sort}, batches of {batch}");
        }
    }
    app.stop().await;
}

/// Refusals: each filter's code as the list's, `invalid_format`, and 401 without a key.
async fn export_errors(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acc = app.account(true).await;
    for (query, code) in [
        ("format=xml", "invalid_format"),
        ("format=", "invalid_format"),
        ("format=csv&format=ndjson", "invalid_format"),
        ("q=a", "invalid_q"),
        ("tag=a%2Fb", "invalid_tag"),
        ("group_id=nope", "invalid_group_id"),
        ("domain=not_a_host", "invalid_domain"),
        ("is_active=yes", "invalid_is_active"),
        ("sort=newest", "invalid_sort"),
        ("match=prefix", "invalid_match"),
    ] {
        let (s, _, body) = export(&app, &acc.key, query).await;
        let b: Value = serde_json::from_str(&body).unwrap();
        assert_error(s, &b, 400, code);
    }
    let resp = app.client.get(app.url(EXPORT)).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    // An account without links exports the header alone.
    let (s, _, body) = export(&app, &acc.key, "").await;
    assert_eq!(
        (s, body.as_str()),
        (200, format!("{}\r\n", HEADER.join(",")).as_str())
    );
    let (s, _, body) = export(&app, &acc.key, "format=ndjson").await;
    assert_eq!((s, body.as_str()), (200, ""));
    app.stop().await;
}

/// Each link's stored total of clicks (the export's `clicks`, the list's `sort=clicks`) is exact under concurrent
/// click reports over the same links in different orders (on PostgreSQL they lock the link rows in id order, so
/// this also finds a deadlock), and matches its day counters.
async fn click_totals_stay_exact(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let codes = ["tot1", "tot2", "tot3", "tot4", "tot5"];
    for code in codes {
        create(
            &app,
            &acc,
            json!({"long_url": "https://example.com/", "short_code": code}),
        )
        .await;
    }
    let now = Micros::now().0 / 1000;
    let mut tasks = Vec::new();
    for task in 0..8usize {
        let db = app.db.clone();
        let group = acc.default_group_id.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..5usize {
                // Each report names every link, starting at a different one (and so in a different order).
                let events = (0..10)
                    .map(|i| shortlink_store::ClickEvent {
                        host: "sho.rt".to_owned(),
                        short_code: Some(codes[(task + round + i) % codes.len()].to_owned()),
                        group_id: group.clone(),
                        at: now - (i as i64 % 3) * 86_400_000,
                        country: None,
                        referer_host: None,
                        device: shortlink_store::Device::Desktop,
                        id: None,
                        ..Default::default()
                    })
                    .collect();
                db.record_clicks(None, events).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rows = csv_rows(&app, &acc, "sort=clicks").await;
    assert_eq!(rows.len(), 5);
    for r in &rows {
        assert_eq!(
            r["clicks"], "80",
            "8 tasks × 5 reports × 2 clicks of {}",
            r["short_code"]
        );
        let stats = app
            .send(
                Method::GET,
                &acc.key,
                &format!("{LINKS}/{}/stats", r["id"]),
                None,
            )
            .await
            .1;
        assert_eq!(stats["total"], 80, "the day counters agree");
    }
    app.stop().await;
}

/// Migration 0014 fills the stored totals from the day counters of the clicks before it, migration 0018 carries
/// them into their own table, and migration 0020 (with the origin's start) turns the counters into digests.
async fn migration_totals_earlier_clicks(engine: Engine) {
    let test_db = TestDb::migrated_to(engine, 13).await;
    let pool = sqlx::AnyPool::connect(&test_db.url).await.unwrap();
    let (acc, group, domain) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let (clicked, quiet) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let statements: Vec<(&str, Vec<&str>)> = vec![
        (
            "INSERT INTO accounts (id, email, api_access, default_group_id, created_at) VALUES ($1, 'm@example.com', 1, $2, 0)",
            vec![&acc, &group],
        ),
        (
            "INSERT INTO groups (id, account_id, name, key, settings, created_at) VALUES ($1, $2, 'Default', 'k', '{}', 0)",
            vec![&group, &acc],
        ),
        (
            "INSERT INTO domains (id, host, is_platform, enabled, created_at) VALUES ($1, 'sho.rt', 1, 1, 0)",
            vec![&domain],
        ),
        (
            "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at) \
             VALUES ($1, $2, $3, $4, 'abc', 'https://example.com/', 0), ($5, $2, $3, $4, 'def', 'https://example.com/', 1)",
            vec![&clicked, &acc, &group, &domain, &quiet],
        ),
        // Two days, three clicks, each counted in all three dimensions.
        (
            "INSERT INTO link_click_counts (link_id, day, dimension, value, group_id, clicks) VALUES \
             ($1, 19000, 'device', 'mobile', $2, 2), ($1, 19001, 'device', 'desktop', $2, 1), \
             ($1, 19000, 'country', 'DE', $2, 2), ($1, 19001, 'country', '', $2, 1), \
             ($1, 19000, 'referrer', '', $2, 2), ($1, 19001, 'referrer', 'a.example', $2, 1)",
            vec![&clicked, &group],
        ),
        (
            "INSERT INTO account_click_counts (account_id, day, dimension, value, clicks) VALUES \
             ($1, 19000, 'device', 'mobile', 2), ($1, 19001, 'device', 'desktop', 1), \
             ($1, 19000, 'country', 'DE', 2), ($1, 19001, 'country', '', 1), \
             ($1, 19000, 'referrer', '', 2), ($1, 19001, 'referrer', 'a.example', 1)",
            vec![&acc],
        ),
    ];
    for (sql, binds) in statements {
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(b);
        }
        q.execute(&pool).await.unwrap();
    }
    pool.close().await;
    let db = test_db.migrate_rest().await;
    let query = ListQuery::parse(Some("sort=clicks")).unwrap();
    let batch = db.export_links(&acc, &query, None, 10).await.unwrap();
    let got: Vec<(&str, i64)> = batch
        .links
        .iter()
        .map(|e| (e.link.short_code.as_str(), e.clicks))
        .collect();
    assert_eq!(got, [("abc", 3), ("def", 0)]);
    // Migration 0020: the day counters became digests (moved at start, in Rust), with every dimension, and are gone.
    for scope in [StatsScope::Link(&clicked), StatsScope::Account] {
        let stats = db
            .click_stats(&acc, scope, Day(18999), Day(19002))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stats.total, 3, "{scope:?}");
        let days: Vec<(i64, i64)> = stats.by_day.iter().map(|d| (d.day.0, d.clicks)).collect();
        assert_eq!(days, [(19000, 2), (19001, 1)]);
        let values = |v: &[ValueCount]| -> Vec<(Option<String>, i64)> {
            v.iter().map(|c| (c.value.clone(), c.clicks)).collect()
        };
        assert_eq!(
            values(&stats.by_country),
            [(Some("DE".into()), 2), (None, 1)]
        );
        assert_eq!(
            values(&stats.by_device),
            [(Some("mobile".into()), 2), (Some("desktop".into()), 1)]
        );
        assert_eq!(
            values(&stats.by_referrer),
            [(None, 2), (Some("a.example".into()), 1)]
        );
    }
    let pool = sqlx::AnyPool::connect(&test_db.url).await.unwrap();
    for table in [
        "link_click_counts",
        "group_click_counts",
        "account_click_counts",
    ] {
        let gone = sqlx::query(&format!("SELECT 1 FROM {table}"))
            .fetch_optional(&pool)
            .await;
        assert!(gone.is_err(), "{table} is dropped");
    }
    pool.close().await;
    // A second start has nothing to move.
    db.migrate().await.unwrap();
    db.close().await;
}

both_engines!(
    click_totals_stay_exact,
    migration_totals_earlier_clicks,
    columns_formats_and_filters,
    batches_walk_every_order,
    export_errors,
);
