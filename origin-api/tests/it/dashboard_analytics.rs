//! The dashboard's statistics (issue 26) over HTTP on both engines: the link, group and account (Analytics) pages
//! show every dimension, unique visitors and bots over a date range ("From", "To", "Apply"), with the API's range
//! rules; "Export clicks" streams the range's raw events as CSV; visitors' values are escaped; a viewer may read and
//! export; another account's link or group is a 404; signed out, everything sends to sign in. The pages in a real
//! browser, with the edge counting real visits, are in `tests/browser/dashboard.mjs`.

use crate::common::{Engine, TestApp};
use crate::dashboard::{Browser, email, owner_with_key};
use crate::teams::{accept, invite};
use reqwest::StatusCode;
use serde_json::json;
use shortlink_store::domain::{Day, Micros};

/// A click on `code` now, with a place, a campaign and a visitor hash.
fn click(code: &str, group_id: &str, visitor: &str, campaign: &str) -> shortlink_store::ClickEvent {
    serde_json::from_value(json!({
        "host": "sho.rt", "short_code": code, "group_id": group_id, "at": Micros::now().0 / 1000,
        "device": "mobile", "country": "DE", "region": "Bavaria", "city": "Munich",
        "ua": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
               Version/18.1 Mobile/15E148 Safari/604.1",
        "utm_campaign": campaign, "visitor": visitor,
    }))
    .unwrap()
}

async fn statistics_pages_ranges_and_exports(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (mut b, _, key) = owner_with_key(&app).await;
    let (s, link) = app
        .create_json(
            &key,
            json!({"long_url": "https://example.com/s", "short_code": "stats"}),
        )
        .await;
    assert_eq!(s, 201, "{link}");
    let id = link["id"].as_str().unwrap().to_owned();
    let group = link["group_id"].as_str().unwrap().to_owned();
    let v1 = "0000000000000000000000000000000a";
    let v2 = "0000000000000000000000000000000b";
    let xss = "<script>alert(1)</script>";
    app.db
        .record_clicks(
            None,
            vec![
                click("stats", &group, v1, "spring"),
                click("stats", &group, v1, "spring"),
                click("stats", &group, v2, xss),
            ],
        )
        .await
        .unwrap();
    let today = Day::today().to_iso_date();

    // The three pages: totals, unique visitors, every dimension's table, the range form and the export link.
    for (page, export) in [
        (
            format!("/dashboard/links/{id}"),
            format!("/dashboard/links/{id}/clicks.csv"),
        ),
        (
            format!("/dashboard/groups/{group}"),
            format!("/dashboard/groups/{group}/clicks.csv"),
        ),
        (
            "/dashboard/analytics".to_owned(),
            "/dashboard/clicks.csv".to_owned(),
        ),
    ] {
        let got = b.get(&page).await;
        assert_eq!(got.status, StatusCode::OK, "{page}");
        let body = &got.body;
        for want in [
            r#"<dd id="stats-total">3</dd>"#.to_owned(),
            r#"<dd id="stats-uniques">2</dd>"#.to_owned(),
            r#"<dd id="stats-bots">0</dd>"#.to_owned(),
            "<caption>By UTM campaign</caption>".to_owned(),
            "Bavaria, DE".to_owned(),
            "Munich, DE".to_owned(),
            ">safari<".to_owned(),
            ">ios<".to_owned(),
            "Unique visitors per day".to_owned(),
            format!(r#"<form class="range" method="get" action="{page}">"#),
            r#"name="from""#.to_owned(),
            ">Apply</button>".to_owned(),
            format!(r#"href="{export}?from="#),
            ">Export clicks</a>".to_owned(),
            // A visitor's value is text, never markup.
            "&#60;script&#62;alert(1)&#60;/script&#62;".to_owned(),
        ] {
            assert!(body.contains(&want), "{page}: {want} in {body}");
        }
        assert!(!body.contains(xss), "{page}: unescaped");
        // A range: January 2020 has nothing; the API's refusal is shown over the default 30 days.
        let empty = b
            .get(&format!("{page}?from=2020-01-01&to=2020-01-31"))
            .await;
        assert!(
            empty.body.contains(r#"<dd id="stats-total">0</dd>"#),
            "{page}"
        );
        assert!(empty.body.contains(r#"value="2020-01-01""#));
        let refused = b.get(&format!("{page}?from={today}&to=2020-01-31")).await;
        assert_eq!(refused.status, StatusCode::OK);
        assert!(
            refused
                .body
                .contains("from must not be after to. Showing the last 30 days."),
            "{page}"
        );
        assert!(refused.body.contains(r#"<dd id="stats-total">3</dd>"#));

        // The export: the API's CSV, formula-safe, the first visit of each visitor marked.
        let csv = b.get(&format!("{export}?from={today}&to={today}")).await;
        assert_eq!(csv.status, StatusCode::OK, "{export}");
        assert!(
            csv.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/csv")
        );
        assert!(
            csv.headers["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("attachment; filename=\""),
        );
        let lines: Vec<&str> = csv.body.trim_end().split("\r\n").collect();
        assert_eq!(
            lines[0],
            "at,link_id,country,region,city,device,browser,os,referer_host,utm_source,utm_medium,utm_campaign,unique"
        );
        let uniques: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l.rsplit(',').next().unwrap())
            .collect();
        assert_eq!(uniques, ["true", "false", "true"], "{export}");
        assert!(
            lines[3].contains(",<script>alert(1)</script>,"),
            "{}",
            lines[3]
        );
        let bad = b.get(&format!("{export}?from=yesterday")).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{export}");
    }

    // A viewer reads and exports; another account's link and group are not found; signed out: sign in.
    let mut viewer = accept(&app, &invite(&mut b, &email(), "viewer").await).await;
    for path in [
        "/dashboard/analytics".to_owned(),
        format!("/dashboard/links/{id}/clicks.csv"),
        format!("/dashboard/groups/{group}/clicks.csv"),
        "/dashboard/clicks.csv".to_owned(),
    ] {
        assert_eq!(viewer.get(&path).await.status, StatusCode::OK, "{path}");
    }
    let other = app.account(true).await;
    let (s, theirs) = app
        .create_json(&other.key, json!({"long_url": "https://theirs.example/"}))
        .await;
    assert_eq!(s, 201);
    let (theirs, their_group) = (
        theirs["id"].as_str().unwrap(),
        theirs["group_id"].as_str().unwrap(),
    );
    for path in [
        format!("/dashboard/links/{theirs}/clicks.csv"),
        format!("/dashboard/groups/{their_group}/clicks.csv"),
        "/dashboard/links/not-a-uuid/clicks.csv".to_owned(),
        format!("/dashboard/groups/{their_group}"),
    ] {
        assert_eq!(b.get(&path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    let mut stranger = Browser::new(&app);
    for path in [
        "/dashboard/analytics".to_owned(),
        "/dashboard/clicks.csv".to_owned(),
        format!("/dashboard/links/{id}/clicks.csv"),
    ] {
        let out = stranger.get(&path).await;
        assert!(
            out.status == StatusCode::SEE_OTHER && out.location().contains("/dashboard/sign-in"),
            "{path}: {:?}",
            out.status
        );
    }
    app.stop().await;
}

both_engines!(statistics_pages_ranges_and_exports);
