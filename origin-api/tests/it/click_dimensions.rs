//! The click dimensions of issue 26 on both engines: browser and OS classified from the User-Agent the worker
//! forwards (never stored), region and city, the visited URL's UTM parameters, and bot requests counted apart
//! (never in `total` or another dimension), in the link, group and account statistics, JSON and CSV; the bounds
//! the origin puts on what the worker sends.

use crate::common::{Account, Engine, TestApp, TestDb, json};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::Day;
use sqlx::{Column, Row};

pub(crate) const SECRET: &str = "internal-test-secret-0123456789abcdef";
pub(crate) const DAY_MS: i64 = 86_400_000;

pub(crate) const CHROME_ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36";
pub(crate) const SAFARI_IOS: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
const FIREFOX_WINDOWS: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
const EDGE_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// A raw event's browser, OS, region, city and `utm_source`.
type RawFacts = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

pub(crate) async fn app(engine: Engine) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into())
    })
    .await
}

/// Noon (UTC) of `date`, in milliseconds.
fn noon(date: &str) -> i64 {
    Day::parse("date", date).unwrap().0 * DAY_MS + DAY_MS / 2
}

/// A click on `code` (None: a dynamic link of `group`) with the given facts; `extra` adds or replaces fields.
pub(crate) fn click(code: Option<&str>, group: &str, at: i64, ua: &str, extra: Value) -> Value {
    let mut event = json!({"host": "sho.rt", "short_code": code, "group_id": group, "at": at,
                           "device": "mobile", "ua": ua});
    if let (Some(e), Some(x)) = (event.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    event
}

/// Posts events with the worker's secret and returns the answer.
pub(crate) async fn report(app: &TestApp, events: Vec<Value>) -> (u16, Value) {
    json(
        app.client
            .post(app.url("/internal/v1/clicks"))
            .bearer_auth(SECRET)
            .json(&json!({ "batch_id": uuid::Uuid::new_v4().to_string(), "events": events }))
            .send()
            .await
            .unwrap(),
    )
    .await
}

pub(crate) async fn link(app: &TestApp, acc: &Account, code: &str) -> String {
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": format!("https://example.com/{code}"), "short_code": code}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn stats(app: &TestApp, key: &str, path: &str) -> Value {
    let (s, body) = app
        .send(
            Method::GET,
            key,
            &format!("/api/v1/external/{path}?from=2026-03-01&to=2026-03-31"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{path}: {body}");
    body
}

async fn csv(app: &TestApp, key: &str, path: &str) -> String {
    let resp = app
        .get(
            key,
            &format!("/api/v1/external/{path}?from=2026-03-01&to=2026-03-31&format=csv"),
        )
        .await;
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// The known events: six clicks on the link, one on a dynamic link, three bots (two on the link, one a day
/// later; one on a dynamic link).
fn known_events(g: &str) -> Vec<Value> {
    let day1 = noon("2026-03-10");
    let day2 = noon("2026-03-11");
    let munich = json!({"country": "DE", "region": "Bavaria", "city": "Munich",
                        "utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "spring"});
    let berlin =
        json!({"country": "DE", "region": "Berlin", "city": "Berlin", "utm_source": "newsletter"});
    let sf = json!({"country": "US", "region": "California", "city": "San Francisco"});
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(click(Some("abc"), g, day1, CHROME_ANDROID, munich.clone()));
    }
    for _ in 0..2 {
        events.push(click(Some("abc"), g, day1, SAFARI_IOS, berlin.clone()));
    }
    events.push(click(Some("abc"), g, day2, FIREFOX_WINDOWS, sf));
    events.push(click(
        None,
        g,
        day2,
        EDGE_WINDOWS,
        json!({"device": "desktop"}),
    ));
    // Bots carry what the worker knows; none of it may count anywhere but in `bots`.
    let bot = json!({"bot": true, "country": "US", "region": "Ohio", "city": "Columbus",
                     "utm_source": "crawler"});
    events.push(click(Some("abc"), g, day1, GOOGLEBOT, bot.clone()));
    events.push(click(Some("abc"), g, day2, GOOGLEBOT, bot.clone()));
    events.push(click(None, g, day2, GOOGLEBOT, bot));
    events
}

async fn dimensions_in_link_group_and_account_stats(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc").await;
    let g = acc.default_group_id.clone();
    let (s, body) = report(&app, known_events(&g)).await;
    assert_eq!((s, body), (200, json!({"stored": 10})));

    let body = stats(&app, &acc.key, &format!("links/{id}/stats")).await;
    assert_eq!(
        body,
        json!({
            "link_id": id, "from": "2026-03-01", "to": "2026-03-31", "total": 6, "unique_visitors": 0, "bots": 2,
            "by_day": [{"date": "2026-03-10", "clicks": 5, "unique_visitors": 0, "bots": 1},
                       {"date": "2026-03-11", "clicks": 1, "unique_visitors": 0, "bots": 1}],
            "by_country": [{"country": "DE", "clicks": 5}, {"country": "US", "clicks": 1}],
            "by_device": [{"device": "mobile", "clicks": 6}],
            "by_referrer": [{"referer_host": null, "clicks": 6}],
            "by_browser": [{"browser": "chrome", "clicks": 3}, {"browser": "safari", "clicks": 2},
                           {"browser": "firefox", "clicks": 1}],
            "by_os": [{"os": "android", "clicks": 3}, {"os": "ios", "clicks": 2}, {"os": "windows", "clicks": 1}],
            "by_region": [{"country": "DE", "region": "Bavaria", "clicks": 3},
                          {"country": "DE", "region": "Berlin", "clicks": 2},
                          {"country": "US", "region": "California", "clicks": 1}],
            "by_city": [{"country": "DE", "city": "Munich", "clicks": 3},
                        {"country": "DE", "city": "Berlin", "clicks": 2},
                        {"country": "US", "city": "San Francisco", "clicks": 1}],
            "by_utm": {
                "utm_source": [{"value": "newsletter", "clicks": 5}, {"value": null, "clicks": 1}],
                // Ties in byte order, none first.
                "utm_medium": [{"value": null, "clicks": 3}, {"value": "email", "clicks": 3}],
                "utm_campaign": [{"value": null, "clicks": 3}, {"value": "spring", "clicks": 3}],
            },
        })
    );

    // The group and the account: the link's clicks and the dynamic link's (Edge on Windows, country unknown).
    for path in [format!("groups/{g}/stats"), "stats".to_owned()] {
        let body = stats(&app, &acc.key, &path).await;
        assert_eq!(
            (&body["total"], &body["bots"]),
            (&json!(7), &json!(3)),
            "{path}"
        );
        assert_eq!(
            body["by_day"],
            json!([{"date": "2026-03-10", "clicks": 5, "unique_visitors": 0, "bots": 1},
                   {"date": "2026-03-11", "clicks": 2, "unique_visitors": 0, "bots": 2}]),
            "{path}"
        );
        assert_eq!(
            body["by_browser"],
            json!([{"browser": "chrome", "clicks": 3}, {"browser": "safari", "clicks": 2},
                   {"browser": "edge", "clicks": 1}, {"browser": "firefox", "clicks": 1}]),
            "{path}"
        );
        assert_eq!(
            body["by_os"],
            json!([{"os": "android", "clicks": 3}, {"os": "ios", "clicks": 2}, {"os": "windows", "clicks": 2}]),
            "{path}"
        );
        // Unknown country and region: null, listed first among equals.
        assert_eq!(
            body["by_region"],
            json!([{"country": "DE", "region": "Bavaria", "clicks": 3},
                   {"country": "DE", "region": "Berlin", "clicks": 2},
                   {"country": null, "region": null, "clicks": 1},
                   {"country": "US", "region": "California", "clicks": 1}]),
            "{path}"
        );
        assert_eq!(
            body["by_city"][2],
            json!({"country": null, "city": null, "clicks": 1}),
            "{path}"
        );
        assert_eq!(
            body["by_utm"]["utm_source"],
            json!([{"value": "newsletter", "clicks": 5}, {"value": null, "clicks": 2}]),
            "{path}"
        );
        // Nothing of the bots' facts anywhere.
        let text = body.to_string();
        assert!(
            !text.contains("Ohio") && !text.contains("Columbus") && !text.contains("crawler"),
            "{text}"
        );
    }

    // CSV: the new rows after the old ones, places as `<country>/<name>`.
    assert_eq!(
        csv(&app, &acc.key, &format!("links/{id}/stats")).await,
        "dimension,value,clicks\r\n\
         total,,6\r\n\
         unique_visitors,,0\r\n\
         bots,,2\r\n\
         day,2026-03-10,5\r\n\
         day,2026-03-11,1\r\n\
         bots_day,2026-03-10,1\r\n\
         bots_day,2026-03-11,1\r\n\
         country,DE,5\r\n\
         country,US,1\r\n\
         device,mobile,6\r\n\
         referrer,,6\r\n\
         browser,chrome,3\r\n\
         browser,safari,2\r\n\
         browser,firefox,1\r\n\
         os,android,3\r\n\
         os,ios,2\r\n\
         os,windows,1\r\n\
         region,DE/Bavaria,3\r\n\
         region,DE/Berlin,2\r\n\
         region,US/California,1\r\n\
         city,DE/Munich,3\r\n\
         city,DE/Berlin,2\r\n\
         city,US/San Francisco,1\r\n\
         utm_source,newsletter,5\r\n\
         utm_source,,1\r\n\
         utm_medium,,3\r\n\
         utm_medium,email,3\r\n\
         utm_campaign,,3\r\n\
         utm_campaign,spring,3\r\n"
    );
    for path in [format!("groups/{g}/stats"), "stats".to_owned()] {
        let text = csv(&app, &acc.key, &path).await;
        for row in [
            "\r\ntotal,,7\r\nunique_visitors,,0\r\nbots,,3\r\n",
            "\r\nbots_day,2026-03-11,2\r\n",
            "\r\nbrowser,edge,1\r\n",
            "\r\nregion,/,1\r\n",
            "\r\ncity,/,1\r\n",
        ] {
            assert!(text.contains(row), "{path}: {row:?} in {text}");
        }
    }

    // Bots are not in the link's all-time total (the list's sort=clicks), nor stored as raw events.
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let (total,): (i64,) =
        sqlx::query_as("SELECT clicks FROM link_click_totals WHERE link_id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(total, 6);
    assert_eq!(app.db.raw_click_count().await.unwrap(), 7);

    // Deleting the link takes its bots out of the group's and the account's counters with its clicks.
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/links/{id}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let body = stats(&app, &acc.key, "stats").await;
    assert_eq!((&body["total"], &body["bots"]), (&json!(1), &json!(1)));
    assert_eq!(
        body["by_day"],
        json!([{"date": "2026-03-11", "clicks": 1, "unique_visitors": 0, "bots": 1}])
    );
    assert_eq!(
        body["by_browser"],
        json!([{"browser": "edge", "clicks": 1}])
    );
    pool.close().await;
    app.stop().await;
}

async fn bots_alone_are_counted_apart(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc").await;
    let g = acc.default_group_id.clone();
    let bot = |ua: &str| {
        click(
            Some("abc"),
            &g,
            noon("2026-03-05"),
            ua,
            json!({"bot": true, "country": "DE"}),
        )
    };
    let slack = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)";
    let (s, body) = report(&app, vec![bot(GOOGLEBOT), bot(slack), bot("")]).await;
    assert_eq!((s, body), (200, json!({"stored": 3})));
    for path in [
        format!("links/{id}/stats"),
        format!("groups/{g}/stats"),
        "stats".to_owned(),
    ] {
        let body = stats(&app, &acc.key, &path).await;
        assert_eq!(
            (&body["total"], &body["bots"]),
            (&json!(0), &json!(3)),
            "{path}"
        );
        assert_eq!(
            body["by_day"],
            json!([{"date": "2026-03-05", "clicks": 0, "unique_visitors": 0, "bots": 3}]),
            "{path}"
        );
        for list in [
            "by_country",
            "by_device",
            "by_referrer",
            "by_browser",
            "by_os",
            "by_region",
            "by_city",
        ] {
            assert_eq!(body[list], json!([]), "{path} {list}");
        }
        assert_eq!(
            body["by_utm"],
            json!({"utm_source": [], "utm_medium": [], "utm_campaign": []})
        );
        let text = csv(&app, &acc.key, &path).await;
        assert_eq!(
            text,
            "dimension,value,clicks\r\ntotal,,0\r\nunique_visitors,,0\r\nbots,,3\r\nbots_day,2026-03-05,3\r\n",
            "{path}"
        );
    }
    assert_eq!(app.db.raw_click_count().await.unwrap(), 0);
    app.stop().await;
}

async fn facts_are_bounded_and_the_user_agent_never_stored(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let id = link(&app, &acc, "abc").await;
    let g = acc.default_group_id.clone();
    let at = noon("2026-03-20");
    let marker = "UA-MARKER-7f3a";
    // A User-Agent far over the worker's 256 bytes still classifies (the tokens are near its start); its text
    // is nowhere in the database.
    let long_ua = format!(
        "Mozilla/5.0 (Windows NT 10.0; {marker}) Chrome/131.0 Safari/537.36 {}",
        "x".repeat(10_000)
    );
    let city = "Ä".repeat(150);
    let events = vec![
        click(
            Some("abc"),
            &g,
            at,
            &long_ua,
            json!({"country": "de", "region": "Bad\u{0}Region", "city": city,
                   "utm_source": "  spaced  ", "utm_medium": "", "utm_campaign": "=HYPERLINK(\"x\")"}),
        ),
        click(
            Some("abc"),
            &g,
            at,
            &format!("Mozilla/5.0 (iPhone; {marker}) Safari/604.1"),
            json!({"country": "DE", "region": " ", "city": "Köln"}),
        ),
    ];
    let (s, body) = report(&app, events).await;
    assert_eq!((s, body), (200, json!({"stored": 2})));
    let body = stats(&app, &acc.key, &format!("links/{id}/stats")).await;
    assert_eq!(
        body["by_browser"],
        json!([{"browser": "chrome", "clicks": 1}, {"browser": "safari", "clicks": 1}])
    );
    assert_eq!(
        body["by_os"],
        json!([{"os": "ios", "clicks": 1}, {"os": "windows", "clicks": 1}])
    );
    // A region with a control character, or blank, is unknown; a city over 100 characters is cut to 100.
    assert_eq!(
        body["by_region"],
        json!([{"country": "DE", "region": null, "clicks": 2}])
    );
    assert_eq!(
        body["by_city"],
        // Ties in byte order.
        json!([{"country": "DE", "city": "Köln", "clicks": 1},
               {"country": "DE", "city": "Ä".repeat(100), "clicks": 1}])
    );
    assert_eq!(
        body["by_utm"],
        json!({"utm_source": [{"value": null, "clicks": 1}, {"value": "spaced", "clicks": 1}],
               "utm_medium": [{"value": null, "clicks": 2}],
               "utm_campaign": [{"value": null, "clicks": 1}, {"value": "=HYPERLINK(\"x\")", "clicks": 1}]})
    );
    // CSV keeps a visitor's formula inert.
    let text = csv(&app, &acc.key, &format!("links/{id}/stats")).await;
    assert!(
        text.contains("\r\nutm_campaign,\"'=HYPERLINK(\"\"x\"\")\",1\r\n"),
        "{text}"
    );

    // The raw events hold the derived facts, and no column holds the User-Agent or is named for it.
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let rows = sqlx::query("SELECT * FROM clicks")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        for (i, column) in row.columns().iter().enumerate() {
            let name = column.name().to_ascii_lowercase();
            assert!(!name.contains("agent") && name != "ua", "{name}");
            if let Ok(Some(text)) = row.try_get::<Option<String>, _>(i) {
                assert!(
                    !text.contains(marker) && !text.contains("Mozilla"),
                    "{name}: {text}"
                );
            }
        }
    }
    let mut stored: Vec<RawFacts> =
        sqlx::query_as("SELECT browser, os, region, city, utm_source FROM clicks ORDER BY browser")
            .fetch_all(&pool)
            .await
            .unwrap();
    stored.sort();
    assert_eq!(
        stored,
        [
            (
                "chrome".to_owned(),
                "windows".to_owned(),
                None,
                Some("Ä".repeat(100)),
                Some("spaced".to_owned())
            ),
            (
                "safari".to_owned(),
                "ios".to_owned(),
                None,
                Some("Köln".to_owned()),
                None
            ),
        ]
    );
    pool.close().await;

    // A full report with every fact at its bound fits the route's body limit.
    let full = click(
        Some("abc"),
        &g,
        at,
        &"ü".repeat(128),
        json!({"country": "DE", "region": "ü".repeat(100), "city": "ü".repeat(100),
               "utm_source": "ü".repeat(100), "utm_medium": "ü".repeat(100), "utm_campaign": "ü".repeat(100),
               "referer_host": "r".repeat(253), "id": "i".repeat(64)}),
    );
    let events: Vec<Value> = (0..1000)
        .map(|i| {
            let mut e = full.clone();
            e["id"] = json!(format!("{i:064}"));
            e
        })
        .collect();
    let (s, body) = report(&app, events).await;
    assert_eq!((s, body), (200, json!({"stored": 1000})));
    app.stop().await;
}

both_engines!(
    dimensions_in_link_group_and_account_stats,
    bots_alone_are_counted_apart,
    facts_are_bounded_and_the_user_agent_never_stored,
);
