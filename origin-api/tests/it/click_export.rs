//! The raw click export of issue 26 on both engines: a link's, a group's and the account's events, oldest first,
//! with exactly the contract's fields (never an address, a User-Agent or a visitor hash), as NDJSON and CSV (formula
//! safe); bots never exported; the statistics' range errors; other accounts' links and groups 404; the retention
//! header; and keyset batches that lose and repeat nothing across equal instants.

use crate::click_dimensions::{CHROME_ANDROID, DAY_MS, SAFARI_IOS, app, click, link, report};
use crate::common::{Engine, TestApp, assert_error};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::Day;

/// The NDJSON export at `path`: (status, the `X-Retention-From` header, each line parsed).
pub(crate) async fn ndjson(
    app: &TestApp,
    key: &str,
    path: &str,
) -> (u16, Option<String>, Vec<Value>) {
    let resp = app.get(key, path).await;
    let status = resp.status().as_u16();
    let retention = resp
        .headers()
        .get("x-retention-from")
        .map(|v| v.to_str().unwrap().to_owned());
    if status == 200 {
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "application/x-ndjson"
        );
    }
    let text = resp.text().await.unwrap();
    let lines = if status == 200 {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        vec![serde_json::from_str(&text).unwrap()]
    };
    (status, retention, lines)
}

async fn group(app: &TestApp, key: &str, name: &str) -> String {
    let (s, body) = app
        .send(
            Method::POST,
            key,
            "/api/v1/external/groups",
            Some(json!({ "name": name })),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn fields_order_and_formats(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let a = link(&app, &acc, "exp-a").await;
    let g2 = group(&app, &acc.key, "Second").await;
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/b", "short_code": "exp-b", "group_id": g2}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    let b = body["id"].as_str().unwrap().to_owned();
    let today = Day::today();
    let day = |d: i64| (today.0 + d) * DAY_MS;
    let g1 = acc.default_group_id.clone();
    let events = vec![
        // Out of order on purpose: the export sorts by time.
        click(
            Some("exp-a"),
            &g1,
            day(-1) + 3_000,
            SAFARI_IOS,
            json!({"country": "US"}),
        ),
        click(
            Some("exp-a"),
            &g1,
            day(-2) + 1_234,
            CHROME_ANDROID,
            json!({"country": "de", "region": "Bavaria", "city": "Munich", "referer_host": "News.Example",
                   "utm_source": "=cmd|' /C calc'!A0", "utm_medium": "email", "utm_campaign": "fall, sale"}),
        ),
        click(
            Some("exp-b"),
            &g2,
            day(-1) + 1_000,
            CHROME_ANDROID,
            json!({}),
        ),
        click(None, &g2, day(-1) + 2_000, SAFARI_IOS, json!({})),
        // A bot is counted apart, never an event; a click 40 days ago is outside the default range.
        click(
            Some("exp-a"),
            &g1,
            day(-1),
            "Googlebot",
            json!({"bot": true}),
        ),
        click(Some("exp-a"), &g1, day(-40), SAFARI_IOS, json!({})),
    ];
    assert_eq!(report(&app, events).await, (200, json!({"stored": 6})));

    let (s, retention, lines) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/links/{a}/clicks"),
    )
    .await;
    assert_eq!((s, retention), (200, None));
    let day2 = Day(today.0 - 2).to_iso_date();
    assert_eq!(
        lines[0],
        json!({"at": format!("{day2}T00:00:01.234000Z"), "link_id": a, "country": "DE", "region": "Bavaria",
               "city": "Munich", "device": "mobile", "browser": "chrome", "os": "android",
               "referer_host": "news.example", "utm_source": "=cmd|' /C calc'!A0", "utm_medium": "email",
               "utm_campaign": "fall, sale", "unique": null})
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        (&lines[1]["browser"], &lines[1]["os"], &lines[1]["region"]),
        (&json!("safari"), &json!("ios"), &json!(null))
    );
    for l in &lines {
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 13, "{l}");
    }

    // CSV: the header, the same events, a formula neutralised, a comma quoted.
    let resp = app
        .get(
            &acc.key,
            &format!("/api/v1/external/links/{a}/clicks?format=csv"),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/csv; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    let rows: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(
        rows[0],
        "at,link_id,country,region,city,device,browser,os,referer_host,utm_source,utm_medium,utm_campaign,unique"
    );
    assert_eq!(
        rows[1],
        format!(
            "{day2}T00:00:01.234000Z,{a},DE,Bavaria,Munich,mobile,chrome,android,news.example,\
             '=cmd|' /C calc'!A0,email,\"fall, sale\","
        )
    );
    assert_eq!((rows.len(), rows[3]), (4, ""), "{text}");

    // The group's: its link's and its dynamic link's; the account's: every event in the range, oldest first.
    let (_, _, lines) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/groups/{g2}/clicks"),
    )
    .await;
    let links: Vec<&Value> = lines.iter().map(|l| &l["link_id"]).collect();
    assert_eq!(links, [&json!(b), &json!(null)]);
    let (_, _, lines) = ndjson(&app, &acc.key, "/api/v1/external/clicks").await;
    let links: Vec<&Value> = lines.iter().map(|l| &l["link_id"]).collect();
    assert_eq!(links, [&json!(a), &json!(b), &json!(null), &json!(a)]);
    // A range reaching 40 days back has the old click too.
    let from = Day(today.0 - 45).to_iso_date();
    let (_, retention, lines) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/clicks?from={from}"),
    )
    .await;
    assert_eq!((lines.len(), retention), (5, None));

    // The statistics' range errors, and a format of the statistics that is not one here.
    for (query, message) in [
        ("from=2024-02-01&to=2024-01-01", "from must not be after to"),
        ("format=json", "format must be ndjson or csv"),
        (
            "to=2024-13-01",
            "to must be a UTC date YYYY-MM-DD from 1970-01-01 to 9999-12-31",
        ),
        (
            "from=2000-01-01&to=2024-01-01",
            "from and to must span at most 3660 days",
        ),
    ] {
        let (s, _, body) = ndjson(
            &app,
            &acc.key,
            &format!("/api/v1/external/links/{a}/clicks?{query}"),
        )
        .await;
        assert_error(s, &body[0], 400, "validation_error");
        assert_eq!(body[0]["detail"], message, "{query}");
    }
    // Beyond the retention period (90 days by default): what is kept, and from when.
    let (s, retention, _) = ndjson(&app, &acc.key, "/api/v1/external/clicks?from=2020-01-01").await;
    assert_eq!((s, retention), (200, Some(Day(today.0 - 89).to_iso_date())));
    // The first whole day kept has no header; the day before it (partly pruned already) has.
    let kept = Day(today.0 - 89).to_iso_date();
    let (_, retention, _) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/clicks?from={kept}"),
    )
    .await;
    assert_eq!(retention, None);
    let partly = Day(today.0 - 90).to_iso_date();
    let (_, retention, _) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/clicks?from={partly}"),
    )
    .await;
    assert_eq!(retention, Some(kept));

    // Another account sees none of it: 404 for the link and the group, its own (empty) account export.
    let other = app.account(true).await;
    for path in [
        format!("/api/v1/external/links/{a}/clicks"),
        format!("/api/v1/external/groups/{g2}/clicks"),
        "/api/v1/external/links/not-a-uuid/clicks".to_owned(),
    ] {
        let (s, _, body) = ndjson(&app, &other.key, &path).await;
        assert_error(s, &body[0], 404, "not_found");
    }
    let (s, _, lines) = ndjson(&app, &other.key, "/api/v1/external/clicks").await;
    assert_eq!((s, lines.len()), (200, 0));
    let resp = app
        .client
        .get(app.url("/api/v1/external/clicks"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    app.stop().await;
}

/// 2,500 events, most at one instant, cross the export's batches of 1,000: each comes exactly once, in the order
/// stored.
async fn batches_lose_and_repeat_nothing(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let a = link(&app, &acc, "many").await;
    let g = acc.default_group_id.clone();
    let at = (Day::today().0 - 1) * DAY_MS;
    for chunk in 0..3 {
        let events: Vec<Value> = (0..1_000)
            .filter(|i| chunk * 1_000 + i < 2_500)
            .map(|i| {
                let t = if i % 10 == 0 { at + i } else { at };
                click(
                    Some("many"),
                    &g,
                    t,
                    CHROME_ANDROID,
                    json!({"utm_campaign": format!("c{}", chunk * 1_000 + i)}),
                )
            })
            .collect();
        let n = events.len();
        assert_eq!(report(&app, events).await, (200, json!({"stored": n})));
    }
    let (s, _, lines) = ndjson(
        &app,
        &acc.key,
        &format!("/api/v1/external/links/{a}/clicks"),
    )
    .await;
    assert_eq!((s, lines.len()), (200, 2_500));
    let mut seen = std::collections::HashSet::new();
    for w in lines.windows(2) {
        assert!(
            w[0]["at"].as_str() <= w[1]["at"].as_str(),
            "{} {}",
            w[0],
            w[1]
        );
    }
    for l in &lines {
        assert!(
            seen.insert(l["utm_campaign"].as_str().unwrap().to_owned()),
            "{l}"
        );
    }
    app.stop().await;
}

crate::both_engines!(fields_order_and_formats, batches_lose_and_repeat_nothing);
