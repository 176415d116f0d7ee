//! Click reports store what they add to each day as deltas, which the origin folds into the day rows in the
//! background (migration 0022): on both engines, the statistics count the deltas not folded yet exactly once, say
//! the same before and after folding (JSON and CSV, link, group and account, across days and blocks), a link
//! deleted while its deltas wait takes all its clicks out of its group and account, a deleted group's deltas are
//! left out, and folds running beside reports and each other fold every delta once.

use crate::click_dimensions::{CHROME_ANDROID, DAY_MS, SAFARI_IOS, SECRET, click, link, report};
use crate::common::{Account, Engine, TestApp, TestDb};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::Db;
use shortlink_store::domain::Day;
use std::time::Duration;

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// An origin whose own fold waits an hour after its first (empty) round: the deltas stay until a test folds them.
async fn held_app(engine: Engine) -> TestApp {
    TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into());
        s.click_fold_interval = Duration::from_secs(3600);
    })
    .await
}

fn range() -> (String, String) {
    let today = Day::today().0;
    (Day(today - 45).to_iso_date(), Day(today).to_iso_date())
}

async fn stats(app: &TestApp, key: &str, path: &str) -> Value {
    let (from, to) = range();
    let (s, body) = app
        .send(
            Method::GET,
            key,
            &format!("/api/v1/external/{path}?from={from}&to={to}"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{path}: {body}");
    body
}

async fn csv(app: &TestApp, key: &str, path: &str) -> String {
    let (from, to) = range();
    let resp = app
        .get(
            key,
            &format!("/api/v1/external/{path}?from={from}&to={to}&format=csv"),
        )
        .await;
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// Every statistic the account's key can read of `paths`, JSON and CSV.
async fn everything(app: &TestApp, key: &str, paths: &[String]) -> Vec<(Value, String)> {
    let mut all = Vec::new();
    for p in paths {
        all.push((stats(app, key, p).await, csv(app, key, p).await));
    }
    all
}

/// Noon (UTC) `days` before today, in milliseconds; for today, the day's start (a click is never in the future).
fn days_ago(days: i64) -> i64 {
    let day = (Day::today().0 - days) * DAY_MS;
    if days == 0 { day } else { day + DAY_MS / 2 }
}

async fn link_in(app: &TestApp, acc: &Account, code: &str, group: &str) -> String {
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": format!("https://example.com/{code}"), "short_code": code,
                   "group_id": group}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

fn by(stats: &Value, list: &str, field: &str, value: &str) -> i64 {
    stats[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[field] == value)
        .map_or(0, |e| e["clicks"].as_i64().unwrap())
}

async fn counts_deltas_once_and_the_same_after_folding(engine: Engine) {
    let app = held_app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let promo = app.group(&acc, "Promo").await;
    let abc = link(&app, &acc, "abc").await;
    let def = link_in(&app, &acc, "def", &promo).await;
    let de = json!({"country": "DE", "region": "Bavaria", "city": "Munich", "utm_source": "mail"});
    let us = json!({"country": "US", "region": "California", "city": "San Francisco"});
    // Three reports: today, yesterday and 40 days ago (another 32-day block), bots, a dynamic link of Promo.
    let g = &acc.default_group_id;
    let mut first = Vec::new();
    for _ in 0..4 {
        first.push(click(
            Some("abc"),
            g,
            days_ago(0),
            CHROME_ANDROID,
            de.clone(),
        ));
    }
    first.push(click(
        Some("def"),
        &promo,
        days_ago(0),
        SAFARI_IOS,
        us.clone(),
    ));
    first.push(click(
        Some("abc"),
        g,
        days_ago(0),
        GOOGLEBOT,
        json!({"bot": true}),
    ));
    assert_eq!(report(&app, first).await, (200, json!({"stored": 6})));
    let second = vec![
        click(Some("abc"), g, days_ago(1), SAFARI_IOS, us.clone()),
        click(Some("def"), &promo, days_ago(1), CHROME_ANDROID, de.clone()),
        click(None, &promo, days_ago(1), CHROME_ANDROID, us.clone()),
    ];
    assert_eq!(report(&app, second).await, (200, json!({"stored": 3})));
    let third = vec![
        click(Some("abc"), g, days_ago(40), CHROME_ANDROID, de.clone()),
        click(Some("abc"), g, days_ago(40), CHROME_ANDROID, de.clone()),
    ];
    assert_eq!(report(&app, third).await, (200, json!({"stored": 2})));
    assert!(
        app.db.pending_click_deltas().await.unwrap() > 0,
        "the reports wait as deltas"
    );

    // Before any fold: the deltas alone make the figures.
    let account = stats(&app, &acc.key, "stats").await;
    assert_eq!(account["total"], 10);
    assert_eq!(account["bots"], 1);
    assert_eq!(by(&account, "by_country", "country", "DE"), 7);
    assert_eq!(by(&account, "by_country", "country", "US"), 3);
    assert_eq!(by(&account, "by_city", "city", "Munich"), 7);
    let abc_stats = stats(&app, &acc.key, &format!("links/{abc}/stats")).await;
    assert_eq!(abc_stats["total"], 7);
    assert_eq!(abc_stats["by_day"].as_array().unwrap().len(), 3);
    assert_eq!(by(&abc_stats, "by_browser", "browser", "chrome"), 6);
    let promo_stats = stats(&app, &acc.key, &format!("groups/{promo}/stats")).await;
    assert_eq!(promo_stats["total"], 3, "def twice and the dynamic link");

    let paths = [
        "stats".to_owned(),
        format!("links/{abc}/stats"),
        format!("links/{def}/stats"),
        format!("groups/{promo}/stats"),
        format!("groups/{g}/stats"),
    ];
    let before = everything(&app, &acc.key, &paths).await;
    assert_eq!(before[0].0, account);
    assert!(
        app.fold_clicks().await >= 3 * 3,
        "each report's link, group and account deltas"
    );
    assert_eq!(app.db.pending_click_deltas().await.unwrap(), 0);
    let after = everything(&app, &acc.key, &paths).await;
    assert_eq!(before, after, "folding changes no figure");
    // Read again: the year-old block is cached now, and still the same.
    assert_eq!(everything(&app, &acc.key, &paths).await, after);

    // New clicks on top of folded days count once more each; then abc is deleted with its deltas waiting.
    let more = vec![
        click(Some("abc"), g, days_ago(0), SAFARI_IOS, us.clone()),
        click(Some("def"), &promo, days_ago(0), SAFARI_IOS, us.clone()),
    ];
    assert_eq!(report(&app, more).await, (200, json!({"stored": 2})));
    assert_eq!(stats(&app, &acc.key, "stats").await["total"], 12);
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/links/{abc}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let account = stats(&app, &acc.key, "stats").await;
    assert_eq!(account["total"], 4, "def's three and the dynamic link's");
    assert_eq!(account["bots"], 0, "abc's bot went with it");
    assert_eq!(by(&account, "by_country", "country", "US"), 3);
    assert_eq!(by(&account, "by_country", "country", "DE"), 1);
    let default_group = stats(&app, &acc.key, &format!("groups/{g}/stats")).await;
    assert_eq!(default_group["total"], 0);
    let paths = [
        "stats".to_owned(),
        format!("links/{def}/stats"),
        format!("groups/{promo}/stats"),
        format!("groups/{g}/stats"),
    ];
    let before = everything(&app, &acc.key, &paths).await;
    app.fold_clicks().await;
    assert_eq!(app.db.pending_click_deltas().await.unwrap(), 0);
    assert_eq!(everything(&app, &acc.key, &paths).await, before);
    app.stop().await;
}

async fn a_deleted_group_s_deltas_are_left_out(engine: Engine) {
    let app = held_app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let promo = app.group(&acc, "Promo").await;
    link_in(&app, &acc, "def", &promo).await;
    let events = vec![
        click(Some("def"), &promo, days_ago(0), SAFARI_IOS, json!({})),
        click(None, &promo, days_ago(0), SAFARI_IOS, json!({})),
    ];
    assert_eq!(report(&app, events).await, (200, json!({"stored": 2})));
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/groups/{promo}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    // The group's deltas are dropped by the fold (its day rows went with it); the link's and account's stay.
    assert!(app.fold_clicks().await >= 3);
    assert_eq!(app.db.pending_click_deltas().await.unwrap(), 0);
    assert_eq!(stats(&app, &acc.key, "stats").await["total"], 2);
    let (s, _) = app
        .send(
            Method::GET,
            &acc.key,
            &format!("/api/v1/external/groups/{promo}/stats"),
            None,
        )
        .await;
    assert_eq!(s, 404);
    app.stop().await;
}

async fn folds_beside_reports_and_each_other_fold_each_delta_once(engine: Engine) {
    let app = held_app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(link(&app, &acc, &format!("ln{i}")).await);
    }
    let g = acc.default_group_id.clone();
    let (reports, per_report) = (24, 50);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Two folders beside the origin's: one on the test's pool, one on a pool of its own.
    let other = Db::connect(&app.test_db.url, 2).await.unwrap();
    let mut folders = Vec::new();
    for db in [app.db.clone(), other.clone()] {
        let done = done.clone();
        folders.push(tokio::spawn(async move {
            let mut folded = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                folded += db.fold_click_deltas().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            folded
        }));
    }
    let mut senders = Vec::new();
    for r in 0..reports {
        let (base, client, g) = (app.base.clone(), app.client.clone(), g.clone());
        senders.push(tokio::spawn(async move {
            let events: Vec<Value> = (0..per_report)
                .map(|i| {
                    let day = if (r + i) % 7 == 0 { 1 } else { 0 };
                    click(
                        Some(&format!("ln{}", (r + i) % 5)),
                        &g,
                        days_ago(day),
                        CHROME_ANDROID,
                        json!({"country": if i % 2 == 0 { "DE" } else { "FR" }}),
                    )
                })
                .collect();
            let resp = client
                .post(format!("{base}/internal/v1/clicks"))
                .bearer_auth(SECRET)
                .json(&json!({"batch_id": uuid::Uuid::new_v4().to_string(), "events": events}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut folded = 0;
    for f in folders {
        folded += f.await.unwrap();
    }
    folded += app.fold_clicks().await;
    assert!(folded > 0);
    assert_eq!(app.db.pending_click_deltas().await.unwrap(), 0);
    let total = (reports * per_report) as i64;
    let account = stats(&app, &acc.key, "stats").await;
    assert_eq!(account["total"], total);
    assert_eq!(by(&account, "by_country", "country", "DE"), total / 2);
    assert_eq!(by(&account, "by_device", "device", "mobile"), total);
    let mut sum = 0;
    for id in &ids {
        let s = stats(&app, &acc.key, &format!("links/{id}/stats")).await;
        assert_eq!(s["total"], total / 5, "{id}");
        sum += s["total"].as_i64().unwrap();
    }
    assert_eq!(sum, total);
    other.close().await;
    app.stop().await;
}

crate::both_engines!(
    counts_deltas_once_and_the_same_after_folding,
    a_deleted_group_s_deltas_are_left_out,
    folds_beside_reports_and_each_other_fold_each_delta_once
);
