//! Click analytics at scale, on both engines: click reports counted once per batch id (also when two deliveries
//! race), day counters that agree with the raw events, the statistics of a link, a group and the account over a
//! range of days as JSON and CSV, raw-event retention that leaves the statistics as they were, and the
//! migration's backfill of counters from clicks recorded before it.

use crate::common::{Account, Engine, TestApp, TestDb, assert_error, json};
use origin_api::retention::{self, Pruned, Retention};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::Actor;
use shortlink_store::domain::{Day, Micros};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Raw clicks kept 90 days (the default), the activity log its default.
const CLICKS_90: Retention = Retention {
    click_days: 90,
    audit_days: 365,
};

const SECRET: &str = "internal-test-secret-0123456789abcdef";
const DAY_MS: i64 = 86_400_000;

async fn app(engine: Engine) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into())
    })
    .await
}

fn now_ms() -> i64 {
    Micros::now().0 / 1_000
}

/// Noon (UTC) of `date`, in milliseconds.
fn noon(date: &str) -> i64 {
    Day::parse("date", date).unwrap().0 * DAY_MS + DAY_MS / 2
}

fn today() -> Day {
    Day::today()
}

/// A click on `code` (None: a dynamic link of `group`).
fn click(
    code: Option<&str>,
    group: &str,
    at: i64,
    country: Option<&str>,
    referer: Option<&str>,
    device: &str,
) -> Value {
    json!({"host": "sho.rt", "short_code": code, "group_id": group, "at": at,
           "country": country, "referer_host": referer, "device": device})
}

async fn report(app: &TestApp, body: Value) -> (u16, Value) {
    json(
        app.client
            .post(app.url("/internal/v1/clicks"))
            .bearer_auth(SECRET)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Posts events without a batch id and checks they were all stored.
async fn store(app: &TestApp, events: Vec<Value>) {
    let n = events.len();
    let (s, body) = report(app, json!({ "events": events })).await;
    assert_eq!((s, body), (200, json!({ "stored": n })));
}

async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    app.send(Method::GET, key, path, None).await
}

async fn link(app: &TestApp, acc: &Account, code: &str, group: Option<&str>) -> String {
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": format!("https://example.com/{code}"), "short_code": code, "group_id": group}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn raw_clicks(app: &TestApp) -> i64 {
    app.db.raw_click_count().await.unwrap()
}

async fn ingest_counts_each_batch_once(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    let t = now_ms();
    let events = json!([
        click(Some("abc"), g, t, Some("DE"), None, "mobile"),
        click(None, g, t, None, None, "desktop"),
    ]);
    let stats_path = format!("/api/v1/external/links/{id}/stats");
    let total = |path: String| {
        let app = &app;
        let key = acc.key.clone();
        async move {
            let (s, body) = get(app, &key, &path).await;
            assert_eq!(s, 200, "{body}");
            body["total"].as_i64().unwrap()
        }
    };

    let batch = uuid::Uuid::new_v4().to_string();
    let (s, body) = report(&app, json!({"batch_id": batch, "events": events})).await;
    assert_eq!((s, body), (200, json!({"stored": 2})));
    // Redelivered, in any spelling of the same UUID: answered, not counted.
    for again in [batch.clone(), batch.to_uppercase(), batch.replace('-', "")] {
        let (s, body) = report(&app, json!({"batch_id": again, "events": events})).await;
        assert_eq!((s, body), (200, json!({"stored": 0, "duplicate": true})));
    }
    assert_eq!(total(stats_path.clone()).await, 1);
    assert_eq!(total("/api/v1/external/stats".to_owned()).await, 2);
    assert_eq!(raw_clicks(&app).await, 2);

    // Without a batch id (older workers), every delivery counts; `null` is the same as absent.
    for body in [
        json!({"events": events}),
        json!({"batch_id": null, "events": events}),
    ] {
        let (s, body) = report(&app, body).await;
        assert_eq!((s, body), (200, json!({"stored": 2})));
    }
    assert_eq!(total(stats_path.clone()).await, 3);

    // A batch id that is not a UUID is refused, and nothing is stored.
    for bad in [
        json!("batch-1"),
        json!(""),
        json!(42),
        json!("a".repeat(10_000)),
    ] {
        let (s, body) = report(&app, json!({"batch_id": bad, "events": events})).await;
        assert_error(s, &body, 400, "validation_error");
        assert!(
            body["detail"].as_str().unwrap().contains("batch_id"),
            "{body}"
        );
    }
    assert_eq!(total(stats_path.clone()).await, 3);

    // Eight deliveries of one batch at once: exactly one stores it.
    let batch = uuid::Uuid::new_v4().to_string();
    let body = json!({"batch_id": batch, "events": events});
    let answers = futures::future::join_all((0..8).map(|_| report(&app, body.clone()))).await;
    assert_eq!(stored_and_duplicates(&answers, 2), (1, 7), "{answers:?}");
    assert_eq!(total(stats_path.clone()).await, 4);
    assert_eq!(raw_clicks(&app).await, 8);

    // Four batches delivered four times each, all at once in crossed orders: the click writer puts several in
    // one transaction (on PostgreSQL several transactions run at once, and they claim their batch ids in one
    // order, never waiting on each other in a cycle). Every delivery is answered, each batch stored once.
    let batches: Vec<String> = (0..4).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let crossed = (0..4).flat_map(|round| {
        let (batches, events) = (&batches, &events);
        (0..4).map(move |i| {
            let b = if round % 2 == 0 { i } else { 3 - i };
            json!({"batch_id": batches[b], "events": events})
        })
    });
    let answers = futures::future::join_all(crossed.map(|body| report(&app, body))).await;
    assert_eq!(stored_and_duplicates(&answers, 2), (4, 12), "{answers:?}");
    assert_eq!(total(stats_path).await, 8);
    assert_eq!(raw_clicks(&app).await, 16);
    app.stop().await;
}

/// Of click reports' answers, how many stored `events` events and how many were answered as duplicates.
fn stored_and_duplicates(answers: &[(u16, Value)], events: i64) -> (usize, usize) {
    let count = |want: Value| {
        answers
            .iter()
            .filter(|(s, b)| *s == 200 && *b == want)
            .count()
    };
    (
        count(json!({"stored": events})),
        count(json!({"stored": 0, "duplicate": true})),
    )
}

/// The raw events of a scope (`column` = id), counted by one expression, as the stats would list them.
async fn raw_counts(
    pool: &sqlx::AnyPool,
    column: &str,
    id: &str,
    expr: &str,
) -> BTreeMap<String, i64> {
    let sql = format!(
        "SELECT {expr} AS v, COUNT(*) AS n FROM clicks WHERE {column} = $1 GROUP BY {expr}"
    );
    sqlx::query_as::<_, (String, i64)>(&sql)
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

fn listed(body: &Value, list: &str, field: &str) -> BTreeMap<String, i64> {
    body[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[field].as_str().unwrap_or_default().to_owned(),
                e["clicks"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn counters_agree_with_the_raw_events(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let group = app.group(&acc, "Campaign").await;
    let abc = link(&app, &acc, "abc", None).await;
    let def = link(&app, &acc, "def", Some(&group)).await;
    let countries = [Some("DE"), Some("us"), None, Some("X"), Some("FR")];
    let referers = [
        None,
        Some("News.Example"),
        Some("a.example"),
        Some("bad host"),
    ];
    let devices = ["mobile", "tablet", "desktop", "other", "watch"];
    let start = today().plus(-6).0 * DAY_MS;
    let mut events = Vec::new();
    for i in 0..600usize {
        let (code, g) = match i % 3 {
            0 => (Some("abc"), acc.default_group_id.as_str()),
            1 => (Some("DEF"), group.as_str()),
            _ => (None, group.as_str()),
        };
        let at = start + (i as i64 * 7_919_000) % (6 * DAY_MS);
        events.push(click(
            code,
            g,
            at,
            countries[i % 5],
            referers[i % 4],
            devices[i % 5],
        ));
    }
    // Three reports with batch ids, one event for a link that does not exist.
    events.push(click(Some("gone"), &group, start, None, None, "mobile"));
    for chunk in events.chunks(201) {
        let (s, _) = report(
            &app,
            json!({"batch_id": uuid::Uuid::new_v4().to_string(), "events": chunk}),
        )
        .await;
        assert_eq!(s, 200);
    }
    assert_eq!(raw_clicks(&app).await, 600);

    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let range = format!(
        "from={}&to={}",
        today().plus(-10).to_iso_date(),
        today().to_iso_date()
    );
    for (path, column, id) in [
        (format!("links/{abc}/stats"), "link_id", abc.as_str()),
        (format!("links/{def}/stats"), "link_id", def.as_str()),
        (format!("groups/{group}/stats"), "group_id", group.as_str()),
        (
            format!("groups/{}/stats", acc.default_group_id),
            "group_id",
            acc.default_group_id.as_str(),
        ),
        ("stats".to_owned(), "account_id", acc.id.as_str()),
    ] {
        let (s, body) = get(&app, &acc.key, &format!("/api/v1/external/{path}?{range}")).await;
        assert_eq!(s, 200, "{path}: {body}");
        let days: BTreeMap<String, i64> =
            raw_counts(&pool, column, id, "CAST(at / 86400000000 AS TEXT)")
                .await
                .into_iter()
                .map(|(d, n)| (Day(d.parse().unwrap()).to_iso_date(), n))
                .collect();
        assert_eq!(listed(&body, "by_day", "date"), days, "{path}");
        assert_eq!(body["total"].as_i64().unwrap(), days.values().sum::<i64>());
        for (list, field, expr) in [
            ("by_country", "country", "COALESCE(country, '')"),
            ("by_device", "device", "device"),
            ("by_referrer", "referer_host", "COALESCE(referer_host, '')"),
        ] {
            assert_eq!(
                listed(&body, list, field),
                raw_counts(&pool, column, id, expr).await,
                "{path} {list}"
            );
            // Most clicks first.
            let counts: Vec<i64> = body[list]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["clicks"].as_i64().unwrap())
                .collect();
            assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{path} {list}");
        }
    }
    // What was normalised: countries uppercase (an invalid one unknown), hosts lowercase, an unknown device
    // `other`, a referrer that cannot be a host dropped.
    let (_, body) = get(&app, &acc.key, &format!("/api/v1/external/stats?{range}")).await;
    let countries = listed(&body, "by_country", "country");
    assert_eq!(countries.keys().collect::<Vec<_>>(), ["", "DE", "FR", "US"]);
    assert_eq!(countries[""], 240);
    let referrers = listed(&body, "by_referrer", "referer_host");
    assert_eq!(
        referrers,
        BTreeMap::from([
            (String::new(), 300),
            ("a.example".to_owned(), 150),
            ("news.example".to_owned(), 150)
        ])
    );
    assert_eq!(listed(&body, "by_device", "device")["other"], 240);
    pool.close().await;
    app.stop().await;
}

async fn date_ranges(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    let day_ms = |d: Day| d.0 * DAY_MS + 1_000;
    let mut events = vec![
        click(Some("abc"), g, day_ms(today()), None, None, "mobile"),
        click(
            Some("abc"),
            g,
            day_ms(today().plus(-29)),
            None,
            None,
            "mobile",
        ),
        click(
            Some("abc"),
            g,
            day_ms(today().plus(-30)),
            None,
            None,
            "mobile",
        ),
    ];
    for date in ["2024-01-01", "2024-01-31", "2024-02-01"] {
        events.push(click(Some("abc"), g, noon(date), None, None, "mobile"));
    }
    // The last millisecond of a day is that day; the next one is the next day.
    events.push(click(
        Some("abc"),
        g,
        noon("2024-03-01") + DAY_MS / 2 - 1,
        None,
        None,
        "tablet",
    ));
    events.push(click(
        Some("abc"),
        g,
        noon("2024-03-01") + DAY_MS / 2,
        None,
        None,
        "tablet",
    ));
    store(&app, events).await;
    let path = format!("/api/v1/external/links/{id}/stats");

    // Default: the last 30 days, today included.
    let (s, body) = get(&app, &acc.key, &path).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        (&body["from"], &body["to"], &body["total"]),
        (
            &json!(today().plus(-29).to_iso_date()),
            &json!(today().to_iso_date()),
            &json!(2)
        )
    );
    assert_eq!(
        body["by_day"],
        json!([{"date": today().plus(-29).to_iso_date(), "clicks": 1, "unique_visitors": 0, "bots": 0},
               {"date": today().to_iso_date(), "clicks": 1, "unique_visitors": 0, "bots": 0}])
    );
    for (query, total, days) in [
        (
            "from=2024-01-01&to=2024-01-31",
            2,
            vec!["2024-01-01", "2024-01-31"],
        ),
        ("from=2024-01-31&to=2024-01-31", 1, vec!["2024-01-31"]),
        ("from=2024-01-02&to=2024-01-30", 0, vec![]),
        // `to` alone: the 30 days ending then.
        ("to=2024-01-31", 1, vec!["2024-01-31"]),
        (
            "from=2024-02-29&to=2024-03-02",
            2,
            vec!["2024-03-01", "2024-03-02"],
        ),
        // Unknown parameters are ignored.
        (
            "cache=1&from=2024-01-01&to=2024-02-01&x",
            3,
            vec!["2024-01-01", "2024-01-31", "2024-02-01"],
        ),
        // The longest range.
        (
            "from=2015-01-01&to=2025-01-07",
            5,
            vec![
                "2024-01-01",
                "2024-01-31",
                "2024-02-01",
                "2024-03-01",
                "2024-03-02",
            ],
        ),
    ] {
        let (s, body) = get(&app, &acc.key, &format!("{path}?{query}")).await;
        assert_eq!(s, 200, "{query}: {body}");
        assert_eq!(body["total"], total, "{query}");
        let listed: Vec<&str> = body["by_day"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["date"].as_str().unwrap())
            .collect();
        assert_eq!(listed, days, "{query}");
    }
    for (query, param) in [
        ("from=2024-02-01&to=2024-01-31", "from"),
        ("from=2024-1-1", "from"),
        ("from=2024-01-01T00:00:00Z", "from"),
        ("to=2023-02-29", "to"),
        ("to=tomorrow", "to"),
        ("to=1969-12-31", "to"),
        ("from=2015-01-01&to=2025-01-08", "from and to"),
        ("from=2024-01-01&from=2024-01-02", "from"),
        ("to=2024-01-01&to=2024-01-01", "to"),
        ("format=xml", "format"),
        ("format=", "format"),
        ("format=json&format=csv", "format"),
    ] {
        for p in [path.clone(), "/api/v1/external/stats".to_owned()] {
            let (s, body) = get(&app, &acc.key, &format!("{p}?{query}")).await;
            assert_error(s, &body, 400, "validation_error");
            assert!(
                body["detail"].as_str().unwrap().starts_with(param),
                "{query}: {body}"
            );
        }
    }
    app.stop().await;
}

async fn csv_answers(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    let at = noon("2024-03-01");
    let mut events = Vec::new();
    for (referer, n) in [
        (Some("news.example"), 3),
        (Some("=cmd|x!a0"), 2),
        (Some("-2+3"), 1),
        (Some("a,b\"c"), 1),
        (Some("has space"), 1),
        (None, 1),
    ] {
        for _ in 0..n {
            events.push(click(Some("abc"), g, at, Some("DE"), referer, "desktop"));
        }
    }
    events.push(click(None, g, at + DAY_MS, None, Some("@evil"), "mobile"));
    store(&app, events).await;
    let range = "from=2024-03-01&to=2024-03-02";
    let resp = app
        .get(
            &acc.key,
            &format!("/api/v1/external/links/{id}/stats?format=csv&{range}"),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/csv; charset=utf-8"
    );
    // The referrer with a space was dropped at ingestion; ties are in byte order (none first); formulas are
    // guarded, commas and quotes quoted.
    assert_eq!(
        resp.text().await.unwrap(),
        "dimension,value,clicks\r\n\
         total,,9\r\n\
         unique_visitors,,0\r\n\
         bots,,0\r\n\
         day,2024-03-01,9\r\n\
         country,DE,9\r\n\
         device,desktop,9\r\n\
         referrer,news.example,3\r\n\
         referrer,,2\r\n\
         referrer,'=cmd|x!a0,2\r\n\
         referrer,'-2+3,1\r\n\
         referrer,\"a,b\"\"c\",1\r\n\
         browser,other,9\r\n\
         os,other,9\r\n\
         region,DE/,9\r\n\
         city,DE/,9\r\n\
         utm_source,,9\r\n\
         utm_medium,,9\r\n\
         utm_campaign,,9\r\n"
    );
    let resp = app
        .get(
            &acc.key,
            &format!("/api/v1/external/stats?{range}&format=csv"),
        )
        .await;
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/csv; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    assert!(
        text.starts_with(
            "dimension,value,clicks\r\ntotal,,10\r\nunique_visitors,,0\r\nbots,,0\r\n"
        ),
        "{text}"
    );
    assert!(text.contains("\r\nday,2024-03-02,1\r\n"), "{text}");
    assert!(text.contains("\r\ncountry,,1\r\n"), "{text}");
    assert!(text.contains("\r\nreferrer,'@evil,1\r\n"), "{text}");
    assert!(text.ends_with("\r\n"));
    let resp = app
        .get(
            &acc.key,
            &format!("/api/v1/external/groups/{g}/stats?format=csv&{range}"),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("total,,10\r\n"));
    // format=json is the default.
    let (s, body) = get(
        &app,
        &acc.key,
        &format!("/api/v1/external/stats?{range}&format=json"),
    )
    .await;
    assert_eq!((s, &body["total"]), (200, &json!(10)));
    // Errors stay JSON.
    let (s, body) = get(&app, &acc.key, "/api/v1/external/stats?format=csv&from=x").await;
    assert_error(s, &body, 400, "validation_error");
    app.stop().await;
}

async fn group_and_account_stats(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let g1 = app.group(&acc, "One").await;
    let g2 = app.group(&acc, "Two").await;
    let dg = acc.default_group_id.clone();
    let l1 = link(&app, &acc, "one", Some(&g1)).await;
    link(&app, &acc, "two", None).await;
    let day1 = noon("2024-05-01");
    let mut events = Vec::new();
    events.extend((0..2).map(|_| click(Some("one"), &g1, day1, Some("DE"), None, "mobile")));
    events.push(click(Some("two"), &dg, day1, Some("FR"), None, "desktop"));
    events.extend((0..3).map(|_| click(None, &g1, day1, Some("US"), Some("x.example"), "tablet")));
    events.push(click(None, &dg, day1, None, None, "other"));
    store(&app, events).await;
    // The link moves: its later clicks count for its new group, its earlier ones stay with the old.
    let (s, _) = app
        .send(
            Method::PATCH,
            &acc.key,
            &format!("/api/v1/external/links/{l1}"),
            Some(json!({"group_id": g2})),
        )
        .await;
    assert_eq!(s, 200);
    store(
        &app,
        (0..4)
            .map(|_| click(Some("one"), &g1, day1 + DAY_MS, None, None, "mobile"))
            .collect(),
    )
    .await;
    let range = "from=2024-04-01&to=2024-05-31";
    let stats = |path: String| {
        let app = &app;
        let key = acc.key.clone();
        async move {
            let (s, body) = get(app, &key, &format!("/api/v1/external/{path}?{range}")).await;
            assert_eq!(s, 200, "{path}: {body}");
            body
        }
    };
    let one = stats(format!("groups/{g1}/stats")).await;
    assert_eq!(
        one,
        json!({
            "group_id": g1, "from": "2024-04-01", "to": "2024-05-31", "total": 5, "unique_visitors": 0, "bots": 0,
            "by_day": [{"date": "2024-05-01", "clicks": 5, "unique_visitors": 0, "bots": 0}],
            "by_country": [{"country": "US", "clicks": 3}, {"country": "DE", "clicks": 2}],
            "by_device": [{"device": "tablet", "clicks": 3}, {"device": "mobile", "clicks": 2}],
            "by_referrer": [{"referer_host": "x.example", "clicks": 3}, {"referer_host": null, "clicks": 2}],
            "by_browser": [{"browser": "other", "clicks": 5}],
            "by_os": [{"os": "other", "clicks": 5}],
            "by_region": [{"country": "US", "region": null, "clicks": 3}, {"country": "DE", "region": null, "clicks": 2}],
            "by_city": [{"country": "US", "city": null, "clicks": 3}, {"country": "DE", "city": null, "clicks": 2}],
            "by_utm": {"utm_source": [{"value": null, "clicks": 5}], "utm_medium": [{"value": null, "clicks": 5}],
                       "utm_campaign": [{"value": null, "clicks": 5}]},
        })
    );
    assert_eq!(stats(format!("groups/{g2}/stats")).await["total"], 4);
    assert_eq!(stats(format!("groups/{dg}/stats")).await["total"], 2);
    assert_eq!(stats(format!("links/{l1}/stats")).await["total"], 6);
    let all = stats("stats".to_owned()).await;
    let fields: BTreeSet<&str> = all
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields,
        BTreeSet::from([
            "from",
            "to",
            "total",
            "unique_visitors",
            "bots",
            "by_day",
            "by_country",
            "by_device",
            "by_referrer",
            "by_browser",
            "by_os",
            "by_region",
            "by_city",
            "by_utm",
        ])
    );
    assert_eq!(all["total"], 11);
    assert_eq!(
        all["by_day"],
        json!([{"date": "2024-05-01", "clicks": 7, "unique_visitors": 0, "bots": 0}, {"date": "2024-05-02", "clicks": 4, "unique_visitors": 0, "bots": 0}])
    );
    assert_eq!(
        all["by_device"],
        json!([{"device": "mobile", "clicks": 6}, {"device": "tablet", "clicks": 3},
               {"device": "desktop", "clicks": 1}, {"device": "other", "clicks": 1}])
    );

    // Deleting a link deletes its clicks and digests: every statistic forgets it.
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/links/{l1}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let all = stats("stats".to_owned()).await;
    assert_eq!(all["total"], 5);
    // A day whose clicks all went is not listed, nor a device left with none.
    assert_eq!(
        all["by_day"],
        json!([{"date": "2024-05-01", "clicks": 5, "unique_visitors": 0, "bots": 0}])
    );
    assert_eq!(
        all["by_device"],
        json!([{"device": "tablet", "clicks": 3}, {"device": "desktop", "clicks": 1}, {"device": "other", "clicks": 1}])
    );
    assert_eq!(stats(format!("groups/{g1}/stats")).await["total"], 3);
    let two = stats(format!("groups/{g2}/stats")).await;
    assert_eq!(
        (
            &two["total"],
            &two["by_day"],
            &two["by_country"],
            &two["by_device"],
            &two["by_referrer"]
        ),
        (&json!(0), &json!([]), &json!([]), &json!([]), &json!([]))
    );
    assert_eq!(raw_clicks(&app).await, 5);
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let (left,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM link_click_digests WHERE link_id = $1")
            .bind(&l1)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(left, 0);
    pool.close().await;
    // A deleted group's statistics are gone (404); its dynamic links' clicks stay in the account's.
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/groups/{g1}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (s, body) = get(
        &app,
        &acc.key,
        &format!("/api/v1/external/groups/{g1}/stats"),
    )
    .await;
    assert_error(s, &body, 404, "not_found");
    assert_eq!(stats("stats".to_owned()).await["total"], 5);
    app.stop().await;
}

async fn raw_events_expire_and_statistics_stay(engine: Engine) {
    // Kept for a century: the task `serve` runs at start must not prune what this part prunes itself.
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into());
        s.click_retention_days = 36_500;
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    let t = now_ms();
    let batch = uuid::Uuid::new_v4().to_string();
    let events: Vec<Value> = [200, 200, 200, 100, 100, 0]
        .iter()
        .map(|days| {
            click(
                Some("abc"),
                g,
                t - days * DAY_MS,
                Some("DE"),
                None,
                "mobile",
            )
        })
        .collect();
    let (s, _) = report(&app, json!({"batch_id": batch, "events": events})).await;
    assert_eq!(s, 200);
    let path = format!(
        "/api/v1/external/links/{id}/stats?from={}",
        today().plus(-365).to_iso_date()
    );
    let (_, before) = get(&app, &acc.key, &path).await;
    assert_eq!(before["total"], 6);

    let pruned = retention::prune(&app.db, CLICKS_90, Micros::now(), || true)
        .await
        .unwrap();
    assert_eq!(
        pruned,
        Pruned {
            clicks: 3 + 2,
            batch_ids: 0,
            event_ids: 0,
            sign_in_rows: 0,
            write_budget_rows: 0,
            audit_rows: 0,
            webhook_rows: 0,
        }
    );
    assert_eq!(raw_clicks(&app).await, 1);
    let (_, after) = get(&app, &acc.key, &path).await;
    assert_eq!(after, before);
    // Batch ids are remembered for 7 days: a week later, a redelivery is counted again.
    let (_, dup) = report(&app, json!({"batch_id": batch, "events": []})).await;
    assert_eq!(dup["duplicate"], true);
    let later = Micros(Micros::now().0 + 8 * DAY_MS * 1_000);
    let pruned = retention::prune(&app.db, CLICKS_90, later, || true)
        .await
        .unwrap();
    assert_eq!(pruned.batch_ids, 1);
    let (_, again) = report(&app, json!({"batch_id": batch, "events": []})).await;
    assert_eq!(again, json!({"stored": 0}));
    app.stop().await;

    // The task `serve` runs prunes on its own, every interval.
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into());
        s.click_retention_days = 2;
        s.prune_interval = Duration::from_millis(100);
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    store(
        &app,
        [3, 3, 0]
            .iter()
            .map(|days| click(Some("abc"), g, t - days * DAY_MS, None, None, "mobile"))
            .collect(),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while raw_clicks(&app).await != 1 {
        assert!(Instant::now() < deadline, "the raw clicks were not pruned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, body) = get(
        &app,
        &acc.key,
        &format!("/api/v1/external/links/{id}/stats"),
    )
    .await;
    assert_eq!(body["total"], 3);
    app.stop().await;
}

async fn migration_counts_earlier_clicks(engine: Engine) {
    let test_db = TestDb::migrated_to(engine, 4).await;
    let pool = sqlx::AnyPool::connect(&test_db.url).await.unwrap();
    let (acc, group, domain, link) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    for (sql, binds) in [
        (
            "INSERT INTO accounts (id, email, api_access, default_group_id, created_at) VALUES ($1, 'm@example.com', 1, $2, 0)",
            vec![acc.as_str(), group.as_str()],
        ),
        (
            "INSERT INTO groups (id, account_id, name, key, settings, created_at) VALUES ($1, $2, 'Default', 'k', '{}', 0)",
            vec![group.as_str(), acc.as_str()],
        ),
        (
            "INSERT INTO domains (id, host, is_platform, enabled, created_at) VALUES ($1, 'sho.rt', 1, 1, 0)",
            vec![domain.as_str()],
        ),
        (
            "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at) \
             VALUES ($1, $2, $3, $4, 'abc', 'https://example.com/', 0)",
            vec![link.as_str(), acc.as_str(), group.as_str(), domain.as_str()],
        ),
    ] {
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(b);
        }
        q.execute(&pool).await.unwrap();
    }
    // Two days of clicks on the link and one dynamic click, as the old ingestion stored them.
    let day = |date: &str| noon(date) * 1_000;
    for (link_id, at, country, referer, device) in [
        (
            Some(link.as_str()),
            day("2024-06-01"),
            Some("DE"),
            None,
            "mobile",
        ),
        (
            Some(link.as_str()),
            day("2024-06-01"),
            None,
            Some("a.example"),
            "mobile",
        ),
        (
            Some(link.as_str()),
            day("2024-06-02"),
            Some("DE"),
            Some("a.example"),
            "desktop",
        ),
        (None, day("2024-06-02"), Some("US"), None, "tablet"),
    ] {
        sqlx::query(
            "INSERT INTO clicks (account_id, link_id, group_id, at, country, referer_host, device) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&acc)
        .bind(link_id)
        .bind(&group)
        .bind(at)
        .bind(country)
        .bind(referer)
        .bind(device)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    // Migrated before the server starts: its retention task would prune these old raw clicks at once.
    let db = test_db.migrate_rest().await;
    db.close().await;
    let app = TestApp::on(test_db).await;
    let key = app
        .db
        .generate_api_key(&acc, &Actor::Operator)
        .await
        .unwrap()
        .expose()
        .to_owned();
    let range = "from=2024-06-01&to=2024-06-30";
    let (s, body) = get(
        &app,
        &key,
        &format!("/api/v1/external/links/{link}/stats?{range}"),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "link_id": link, "from": "2024-06-01", "to": "2024-06-30", "total": 3, "unique_visitors": 0, "bots": 0,
            "by_day": [{"date": "2024-06-01", "clicks": 2, "unique_visitors": 0, "bots": 0}, {"date": "2024-06-02", "clicks": 1, "unique_visitors": 0, "bots": 0}],
            "by_country": [{"country": "DE", "clicks": 2}, {"country": null, "clicks": 1}],
            "by_device": [{"device": "mobile", "clicks": 2}, {"device": "desktop", "clicks": 1}],
            "by_referrer": [{"referer_host": "a.example", "clicks": 2}, {"referer_host": null, "clicks": 1}],
            // Clicks stored before the new dimensions were never classified: they are in none of them.
            "by_browser": [], "by_os": [], "by_region": [], "by_city": [],
            "by_utm": {"utm_source": [], "utm_medium": [], "utm_campaign": []},
        })
    );
    let (_, body) = get(
        &app,
        &key,
        &format!("/api/v1/external/groups/{group}/stats?{range}"),
    )
    .await;
    assert_eq!(body["total"], 4);
    // New clicks add to the backfilled counters.
    app.db
        .record_clicks(
            None,
            vec![shortlink_store::ClickEvent {
                host: "sho.rt".to_owned(),
                short_code: Some("abc".to_owned()),
                group_id: group.clone(),
                at: noon("2024-06-01"),
                country: Some("DE".to_owned()),
                referer_host: None,
                device: shortlink_store::Device::Mobile,
                id: None,
                ..Default::default()
            }],
        )
        .await
        .unwrap();
    let (_, body) = get(
        &app,
        &key,
        &format!("/api/v1/external/links/{link}/stats?{range}"),
    )
    .await;
    assert_eq!(
        body["by_day"][0],
        json!({"date": "2024-06-01", "clicks": 3, "unique_visitors": 0, "bots": 0})
    );
    assert_eq!(body["by_country"][0], json!({"country": "DE", "clicks": 3}));
    app.stop().await;
}

/// Events with ids (the worker's queue consumer gives each its message id) count once each, however they are
/// grouped into reports: Queues regroups the messages of a batch it delivers again, so the batch id alone would
/// not recognise them.
async fn events_with_ids_count_once_in_any_grouping(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc", None).await;
    let g = acc.default_group_id.as_str();
    let t = now_ms();
    let with_id = |message: &str| {
        let mut e = click(Some("abc"), g, t, Some("DE"), None, "mobile");
        e["id"] = json!(message);
        e
    };
    let total = || async {
        let (s, body) = get(
            &app,
            &acc.key,
            &format!("/api/v1/external/links/{id}/stats"),
        )
        .await;
        assert_eq!(s, 200, "{body}");
        body["total"].as_i64().unwrap()
    };
    let batch = || uuid::Uuid::new_v4().to_string();
    let first = json!({"batch_id": batch(), "events": [with_id("m1"), with_id("m2")]});
    assert_eq!(report(&app, first).await, (200, json!({"stored": 2})));
    // Delivered again in another grouping, with a new message: only the new one counts.
    let regrouped = json!({"batch_id": batch(), "events": [with_id("m2"), with_id("m3")]});
    assert_eq!(report(&app, regrouped).await, (200, json!({"stored": 1})));
    // Without a batch id, and twice in one report: still once.
    let again = json!({"events": [with_id("m1"), with_id("m4"), with_id("m4")]});
    assert_eq!(report(&app, again).await, (200, json!({"stored": 1})));
    assert_eq!(total().await, 4);
    assert_eq!(raw_clicks(&app).await, 4);
    // Events without ids are counted as before; an id that is not printable ASCII (or too long) counts as none.
    let plain = click(Some("abc"), g, t, None, None, "desktop");
    let mut odd = plain.clone();
    odd["id"] = json!("x".repeat(65));
    let unnamed = json!({"events": [plain.clone(), plain, odd.clone(), odd]});
    assert_eq!(report(&app, unnamed).await, (200, json!({"stored": 4})));
    assert_eq!(total().await, 8);

    // Eight reports carrying one event id at once, each with its own batch id: it counts once.
    let racing: Vec<_> = (0..8)
        .map(|_| {
            report(
                &app,
                json!({"batch_id": batch(), "events": [with_id("m9")]}),
            )
        })
        .collect();
    let answers = futures::future::join_all(racing).await;
    let stored: i64 = answers
        .iter()
        .map(|(s, b)| {
            assert_eq!(*s, 200, "{b}");
            b["stored"].as_i64().unwrap()
        })
        .sum();
    assert_eq!(stored, 1, "{answers:?}");
    assert_eq!(total().await, 9);

    // Event ids are remembered for 7 days, like batch ids.
    let later = Micros(Micros::now().0 + 8 * DAY_MS * 1_000);
    let pruned = retention::prune(&app.db, CLICKS_90, later, || true)
        .await
        .unwrap();
    assert_eq!(pruned.event_ids, 5);
    let late = json!({"events": [with_id("m1")]});
    assert_eq!(report(&app, late).await, (200, json!({"stored": 1})));
    app.stop().await;
}

/// Clicks of one value per country in a statistics answer: {"DE": 3, …}.
fn countries(stats: &Value) -> BTreeMap<String, i64> {
    stats["by_country"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["country"].as_str().unwrap_or("").to_owned(),
                c["clicks"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Ranges of many weeks read 32-day blocks from a cache that the first read builds and every read checks against
/// the days' revisions: the cache is read (a block changed behind the store's back shows), a late click on an old
/// day is counted at once, and so is a deleted link's absence from its account's blocks.
async fn long_ranges_use_checked_blocks(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let a = link(&app, &acc, "blocks-a", None).await;
    let b = link(&app, &acc, "blocks-b", None).await;
    let group = acc.default_group_id.clone();
    let last = today().0;
    let first = last - 120;
    // Every day a click on a (DE on even days, FR on odd ones), every even day one on b (US); just after midnight,
    // so today's is not in the future.
    let mut events = Vec::new();
    for d in first..=last {
        let at = d * DAY_MS + 1_000;
        let country = if d % 2 == 0 { "DE" } else { "FR" };
        events.push(click(
            Some("blocks-a"),
            &group,
            at,
            Some(country),
            None,
            "mobile",
        ));
        if d % 2 == 0 {
            events.push(click(
                Some("blocks-b"),
                &group,
                at,
                Some("US"),
                None,
                "desktop",
            ));
        }
    }
    let on_b = (first..=last).filter(|d| d % 2 == 0).count() as i64;
    let de = on_b;
    let fr = 121 - de;
    store(&app, events).await;
    // The blocks are built from day rows: the reports' deltas folded into them first.
    app.fold_clicks().await;
    let range = format!(
        "from={}&to={}",
        Day(first).to_iso_date(),
        Day(last).to_iso_date()
    );
    let link_path = format!("/api/v1/external/links/{a}/stats?{range}");
    let account_path = format!("/api/v1/external/stats?{range}");
    let (s, one) = get(&app, &acc.key, &link_path).await;
    assert_eq!(s, 200, "{one}");
    assert_eq!(one["total"], 121);
    assert_eq!(one["by_day"].as_array().unwrap().len(), 121);
    assert_eq!(
        countries(&one),
        BTreeMap::from([("DE".into(), de), ("FR".into(), fr)])
    );
    // The read stored the blocks wholly inside the range and over (120 days hold at least two).
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let blocks: Vec<(i64,)> = sqlx::query_as(
        "SELECT period FROM link_click_digests WHERE link_id = $1 AND span = 'block' ORDER BY period",
    )
    .bind(&a)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(blocks.len() >= 2, "{blocks:?}");
    assert!(
        blocks
            .iter()
            .all(|(b,)| b * 32 >= first && b * 32 + 31 < last)
    );
    assert_eq!(get(&app, &acc.key, &link_path).await.1, one, "read again");
    // The cache is what is read: a block emptied behind the store's back (its revision kept) loses its countries,
    // while the days (never cached) still count every click.
    let block = blocks[0].0;
    let in_block = |c: &str| {
        (block * 32..block * 32 + 32)
            .filter(|d| (d % 2 == 0) == (c == "DE"))
            .count() as i64
    };
    sqlx::query("UPDATE link_click_digests SET data = $1 WHERE link_id = $2 AND span = 'block' AND period = $3")
        .bind(vec![1_u8])
        .bind(&a)
        .bind(block)
        .execute(&pool)
        .await
        .unwrap();
    let (_, emptied) = get(&app, &acc.key, &link_path).await;
    assert_eq!(emptied["total"], 121);
    assert_eq!(
        countries(&emptied),
        BTreeMap::from([
            ("DE".into(), de - in_block("DE")),
            ("FR".into(), fr - in_block("FR"))
        ])
    );
    // A late click on a day of that block bumps the day's revision: the block is built again, with it.
    let late = block * 32 + 5;
    store(
        &app,
        vec![click(
            Some("blocks-a"),
            &group,
            late * DAY_MS + 7_000,
            Some("JP"),
            None,
            "tablet",
        )],
    )
    .await;
    app.fold_clicks().await;
    let (_, after) = get(&app, &acc.key, &link_path).await;
    assert_eq!(after["total"], 122);
    assert_eq!(
        countries(&after),
        BTreeMap::from([("DE".into(), de), ("FR".into(), fr), ("JP".into(), 1)])
    );
    let day = after["by_day"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["date"] == Day(late).to_iso_date())
        .unwrap()
        .clone();
    assert_eq!(day["clicks"], 2);
    // The account's blocks (built now, read again) lose a deleted link's clicks.
    let (_, account) = get(&app, &acc.key, &account_path).await;
    assert_eq!(account["total"], 122 + on_b);
    assert_eq!(get(&app, &acc.key, &account_path).await.1, account);
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/links/{b}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (_, without) = get(&app, &acc.key, &account_path).await;
    assert_eq!(without["total"], 122);
    assert_eq!(
        countries(&without),
        BTreeMap::from([("DE".into(), de), ("FR".into(), fr), ("JP".into(), 1)])
    );
    assert_eq!(
        without["by_device"],
        json!([{"device": "mobile", "clicks": 121}, {"device": "tablet", "clicks": 1}])
    );
    // And the deleted link keeps no rows, blocks included.
    let (left,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM link_click_digests WHERE link_id = $1")
            .bind(&b)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(left, 0);
    pool.close().await;
    app.stop().await;
}

both_engines!(
    ingest_counts_each_batch_once,
    events_with_ids_count_once_in_any_grouping,
    counters_agree_with_the_raw_events,
    date_ranges,
    csv_answers,
    group_and_account_stats,
    raw_events_expire_and_statistics_stay,
    migration_counts_earlier_clicks,
    long_ranges_use_checked_blocks,
);
