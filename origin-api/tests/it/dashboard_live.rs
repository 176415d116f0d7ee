//! The link page's "Live" panel and the Links page's clicks of today (issue 26), over HTTP on both engines: the
//! last hour counted per minute from the raw clicks (older ones and other links' left out), the panel's JSON for its
//! script, a viewer may read it, another account's link is not found, and a signed-out request is sent to sign in.
//! The panel updating in a real browser while the edge counts visits is in `tests/browser/dashboard.mjs`.

use crate::common::{Engine, TestApp};
use crate::dashboard::{Browser, email, owner_with_key};
use crate::teams::{accept, invite};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shortlink_store::domain::Micros;

/// A click on `code` at `minutes_ago` minutes before now, as the worker reports it.
fn click(code: &str, group_id: &str, minutes_ago: i64) -> shortlink_store::ClickEvent {
    let at = Micros::now().0 / 1000 - minutes_ago * 60_000;
    serde_json::from_value(
        json!({"host": "sho.rt", "short_code": code, "group_id": group_id, "at": at,
                                  "device": "desktop"}),
    )
    .unwrap()
}

async fn live_panel_and_clicks_of_today(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (mut b, _, key) = owner_with_key(&app).await;
    let (s, link) = app
        .create_json(
            &key,
            json!({"long_url": "https://example.com/live", "short_code": "live"}),
        )
        .await;
    assert_eq!(s, 201, "{link}");
    let (s, quiet) = app
        .create_json(
            &key,
            json!({"long_url": "https://example.com/quiet", "short_code": "quiet"}),
        )
        .await;
    assert_eq!(s, 201, "{quiet}");
    let id = link["id"].as_str().unwrap().to_owned();
    let group = link["group_id"].as_str().unwrap().to_owned();

    // Before any click: an empty hour, and nothing today.
    let page = b.get(&format!("/dashboard/links/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(">Live</h2>"), "{}", page.body);
    assert!(page.body.contains("0 clicks in the last 60 minutes"));
    assert!(
        page.body
            .contains(&format!("data-poll=\"/dashboard/links/{id}/live\""))
    );
    assert!(
        b.get("/dashboard/")
            .await
            .body
            .contains("Today: <strong>0</strong> clicks")
    );

    // Three clicks now, one 30 minutes ago, one 2 hours ago (outside), two on the other link.
    app.db
        .record_clicks(
            None,
            vec![
                click("live", &group, 0),
                click("live", &group, 0),
                click("live", &group, 0),
                click("live", &group, 30),
                click("live", &group, 120),
                click("quiet", &group, 0),
                click("quiet", &group, 0),
            ],
        )
        .await
        .unwrap();
    let live = b.get(&format!("/dashboard/links/{id}/live")).await;
    assert_eq!(live.status, StatusCode::OK);
    let body: Value = serde_json::from_str(&live.body).unwrap();
    assert_eq!(body["total"], 4, "{body}");
    assert_eq!(body["text"], "4 clicks in the last 60 minutes");
    let chart = body["chart"].as_str().unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("Clicks per minute"));
    assert_eq!(chart.matches("<rect").count(), 60, "a bar per minute");
    assert!(
        chart.contains(": 3</title>") && chart.contains(": 1</title>"),
        "{chart}"
    );
    let page = b.get(&format!("/dashboard/links/{id}")).await;
    assert!(
        page.body.contains("4 clicks in the last 60 minutes"),
        "the snapshot without a script"
    );
    // Today's clicks (UTC): the account's, every link's (those minutes ago that were still today).
    let now_ms = Micros::now().0 / 1000;
    let today = [0, 0, 0, 30, 120, 0, 0]
        .iter()
        .filter(|m| (now_ms - *m * 60_000) / 86_400_000 == now_ms / 86_400_000)
        .count();
    assert!(
        b.get("/dashboard/")
            .await
            .body
            .contains(&format!("Today: <strong>{today}</strong> clicks")),
        "today's clicks"
    );

    // A viewer reads it; another account's link is not found, on the page and the panel; signed out: sign in.
    let mut viewer = accept(&app, &invite(&mut b, &email(), "viewer").await).await;
    let seen = viewer.get(&format!("/dashboard/links/{id}/live")).await;
    assert_eq!(seen.status, StatusCode::OK);
    let other = app.account(true).await;
    let (s, theirs) = app
        .create_json(&other.key, json!({"long_url": "https://theirs.example/"}))
        .await;
    assert_eq!(s, 201);
    let theirs = theirs["id"].as_str().unwrap();
    for path in [
        format!("/dashboard/links/{theirs}/live"),
        "/dashboard/links/not-a-uuid/live".to_owned(),
        "/dashboard/links/00000000-0000-4000-8000-000000000000/live".to_owned(),
    ] {
        assert_eq!(b.get(&path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    let mut stranger = Browser::new(&app);
    let out = stranger.get(&format!("/dashboard/links/{id}/live")).await;
    assert!(
        out.status == StatusCode::SEE_OTHER && out.location().contains("/dashboard/sign-in"),
        "{:?} {}",
        out.status,
        out.location()
    );
    app.stop().await;
}

both_engines!(live_panel_and_clicks_of_today);
