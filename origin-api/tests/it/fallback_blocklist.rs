//! Fallback URLs against the blocklist (hardening issue, item 4, the origin's side): a group's
//! `access.fallback_url` and a domain's `fallback_url` whose host, or a parent domain of it, is on the blocked
//! domain list are refused like a link's destination, in the API (`400 validation_error`), the dashboard (the
//! group form shows why) and the operator CLI (a message, a non-zero exit). Both engines.

use crate::cli::Cli;
use crate::common::{Engine, TestApp, assert_error};
use crate::dashboard::{Browser, email};
use reqwest::{Method, StatusCode};
use serde_json::json;
use shortlink_store::domain::Hostname;

const GROUPS: &str = "/api/v1/external/groups";

fn with_fallback(url: &str) -> serde_json::Value {
    json!({"access": {"block_bots": true, "fallback_url": url}})
}

async fn block(app: &TestApp, domain: &str) {
    app.db
        .block_domain(&Hostname::parse(domain).unwrap())
        .await
        .unwrap();
}

async fn api_refuses_blocked_group_fallbacks(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    block(&app, "blocked.example").await;
    let acc = app.account(true).await;
    for url in [
        "https://blocked.example/",
        "https://deep.sub.BLOCKED.example/landing",
    ] {
        let (s, body) = app
            .send(
                Method::POST,
                &acc.key,
                GROUPS,
                Some(json!({"name": "G", "settings": with_fallback(url)})),
            )
            .await;
        assert_error(s, &body, 400, "validation_error");
        assert!(
            body["detail"].as_str().unwrap().contains("fallback_url"),
            "{body}"
        );
    }
    let (_, list) = app.send(Method::GET, &acc.key, GROUPS, None).await;
    assert_eq!(
        list["results"].as_array().unwrap().len(),
        1,
        "nothing created"
    );

    // A fine fallback is taken; replacing it with a blocked one is refused and changes nothing.
    let (s, group) = app
        .send(
            Method::POST,
            &acc.key,
            GROUPS,
            Some(json!({"name": "G", "settings": with_fallback("https://notblocked.example/")})),
        )
        .await;
    assert_eq!(s, 201, "{group}");
    let path = format!("{GROUPS}/{}", group["id"].as_str().unwrap());
    let (s, body) = app
        .send(
            Method::PATCH,
            &acc.key,
            &path,
            Some(json!({"settings": with_fallback("https://x.blocked.example/")})),
        )
        .await;
    assert_error(s, &body, 400, "validation_error");
    let (_, now) = app.send(Method::GET, &acc.key, &path, None).await;
    assert_eq!(
        now["settings"]["access"]["fallback_url"],
        "https://notblocked.example/"
    );
    // A rename alone does not touch the settings (nor re-check them).
    let (s, _) = app
        .send(Method::PATCH, &acc.key, &path, Some(json!({"name": "H"})))
        .await;
    assert_eq!(s, 200);
    app.stop().await;
}

async fn cli_refuses_blocked_fallbacks(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let cli = Cli {
        url: app.test_db.url.clone(),
    };
    cli.ok(&["admin", "blocklist", "add", "--domain", "blocked.example"]);
    let acc = cli.ok(&["admin", "account", "create", "--email", "ops@example.com"]);
    let account = acc["id"].as_str().unwrap().to_owned();
    let settings = r#"{"access":{"fallback_url":"https://www.blocked.example/x"}}"#;
    let err = cli
        .run(&[
            "admin",
            "group",
            "create",
            "--account",
            &account,
            "--name",
            "G",
            "--settings",
            settings,
        ])
        .unwrap_err();
    assert!(
        err.starts_with("error: ") && err.contains("fallback_url points to a blocked domain"),
        "{err}"
    );
    let group = cli.ok(&[
        "admin",
        "group",
        "create",
        "--account",
        &account,
        "--name",
        "G",
    ]);
    let err = cli
        .run(&[
            "admin",
            "group",
            "update",
            "--id",
            group["id"].as_str().unwrap(),
            "--settings",
            settings,
        ])
        .unwrap_err();
    assert!(
        err.contains("fallback_url points to a blocked domain"),
        "{err}"
    );
    let groups = cli.ok(&["admin", "group", "list", "--account", &account]);
    assert_eq!(groups["results"].as_array().unwrap().len(), 2);
    assert!(groups["results"][1]["settings"]["access"]["fallback_url"].is_null());

    for owner in [vec!["--platform"], vec!["--account", account.as_str()]] {
        let mut args = vec![
            "admin",
            "domain",
            "add",
            "--host",
            "links.example.com",
            "--fallback-url",
            "https://blocked.example/",
        ];
        args.extend(owner);
        let err = cli.run(&args).unwrap_err();
        assert!(
            err.contains("fallback_url points to a blocked domain"),
            "{err}"
        );
    }
    assert!(
        app.db.enabled_domains(&account).await.unwrap().is_empty(),
        "no domain was added"
    );
    cli.ok(&[
        "admin",
        "domain",
        "add",
        "--host",
        "links.example.com",
        "--platform",
        "--fallback-url",
        "https://fine.example/",
    ]);
    app.stop().await;
}

async fn dashboard_shows_a_blocked_fallback(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    block(&app, "blocked.example").await;
    let mut b = Browser::new(&app);
    let address = email();
    b.join(&app, &address).await;
    let account = app.db.find_account(&address).await.unwrap();
    let path = format!("/dashboard/groups/{}", account.default_group_id);
    let csrf = b.get(&path).await.csrf();
    let refused = b
        .post(
            &format!("{path}/settings"),
            &[
                ("csrf", &csrf),
                ("allow", ""),
                ("block", "RU"),
                ("fallback", "https://a.blocked.example/sorry"),
                ("interstitial", ""),
            ],
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.body
    );
    assert!(
        refused
            .body
            .contains("Fallback URL for blocked visitors points to a blocked domain"),
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("https://a.blocked.example/sorry"),
        "the form keeps what was typed"
    );
    let group = app
        .db
        .group(Some(&account.id), &account.default_group_id)
        .await
        .unwrap();
    assert!(group.settings.access.fallback_url.is_none());
    assert!(
        group.settings.access.block_countries.is_empty(),
        "nothing saved"
    );
    app.stop().await;
}

both_engines!(
    api_refuses_blocked_group_fallbacks,
    cli_refuses_blocked_fallbacks,
    dashboard_shows_a_blocked_fallback,
);
