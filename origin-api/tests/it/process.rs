//! The server as a process: it stops cleanly on SIGTERM, and its logs never contain a key.

use crate::common::{Engine, TestApp, TestDb, start_server};
use serde_json::json;
use shortlink_store::Actor;
use std::time::{Duration, Instant};

async fn stops_gracefully_on_sigterm(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let mut server = start_server(&test_db.url, "info").await;
    let pid = server.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "graceful exit, got {exit}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains("shutting down"), "{log}");
}

async fn logs_never_contain_keys(engine: Engine) {
    let test_db = TestDb::new(engine).await;
    let server = start_server(&test_db.url, "trace").await;
    let app = TestApp::on(test_db).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let client = reqwest::Client::new();
    let create = format!("{}/api/v1/external/links/create-link", server.base);
    let list = format!("{}/api/v1/external/links?limit=5", server.base);
    for auth in [
        format!("Token {}", acc.key),
        format!("Bearer {}", acc.key),
        format!("Token {}x", acc.key),
    ] {
        client
            .post(&create)
            .header("Authorization", &auth)
            .json(&json!({"long_url": "https://a.com"}))
            .send()
            .await
            .unwrap();
        client
            .get(&list)
            .header("Authorization", &auth)
            .send()
            .await
            .unwrap();
    }
    let group = app
        .db
        .create_group(&acc.id, "G", &Default::default(), &Actor::Operator)
        .await
        .unwrap();
    client
        .post(format!(
            "{}/api/v1/public/links/validate-dynamic",
            server.base
        ))
        .json(&json!({"group_id": group.id, "signature": "AQ"}))
        .send()
        .await
        .unwrap();
    // Let the log reach the file.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.contains("create-link"),
        "trace logging is on, so requests are logged: {log}"
    );
    let secret = &acc.key["slk_".len()..];
    assert!(!log.contains(secret), "API key in the log");
    assert!(!log.contains(&group.key), "group key in the log");
    drop(server);
    app.stop().await;
}

both_engines!(stops_gracefully_on_sigterm, logs_never_contain_keys);
