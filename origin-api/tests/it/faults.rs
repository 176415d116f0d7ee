//! Faults: the database goes away under load, or SQLite stays locked. Requests fail cleanly
//! (503 in the error shape, never a panic or a 500), the origin recovers by itself, and no
//! link it confirmed with a 201 is lost.

use crate::common::{Engine, TestApp, TestDb, assert_error, json};
use serde_json::json;
use sqlx::Connection;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Runs `pg_ctlcluster … main <action>` on the local cluster (the one the tests use).
fn postgres_cluster(action: &str) -> bool {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("a local PostgreSQL cluster (/etc/postgresql)")
        .flatten()
        .next()
        .unwrap()
        .file_name();
    std::process::Command::new("pg_ctlcluster")
        .args([
            "--skip-systemctl-redirect",
            &version.to_string_lossy(),
            "main",
            action,
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts the cluster again even if the test fails half-way, so later tests find it up.
struct RestartOnDrop;

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        // Starting a running cluster fails harmlessly.
        let _ = postgres_cluster("start");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_and_back_under_load() {
    // The server is stopped below: no other test of this binary may be using it meanwhile.
    let exclusive = crate::common::postgres_exclusive().await;
    let app = TestApp::on(TestDb::postgres_while_exclusive(&exclusive).await).await;
    app.platform_domain("sho.rt").await;
    let mut keys = Vec::new();
    for _ in 0..8 {
        keys.push(app.account(true).await.key);
    }
    // A key of its own for the recovery probe, so the clients' creations cannot exhaust it.
    let probe = app.account(true).await.key;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Eight clients create and list in a loop until told to stop; each returns what it saw.
    let clients: Vec<_> =
        keys.iter()
            .cloned()
            .enumerate()
            .map(|(c, key)| {
                let (client, base, stop) = (app.client.clone(), app.base.clone(), stop.clone());
                tokio::spawn(async move {
                    let (mut created, mut statuses, mut n) = (Vec::new(), Vec::new(), 0);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        n += 1;
                        let resp =
                            if n % 3 == 0 {
                                client
                                    .get(format!("{base}/api/v1/external/links?limit=5"))
                                    .header("Authorization", format!("Token {key}"))
                                    .send()
                                    .await
                            } else {
                                client.post(format!("{base}/api/v1/external/links/create-link"))
                            .header("Authorization", format!("Token {key}"))
                            .json(&json!({"long_url": format!("https://example.com/{c}/{n}")}))
                            .send().await
                            };
                        let Ok(resp) = resp else { continue };
                        let (s, body) = json(resp).await;
                        if s == 201 {
                            created.push(body["id"].as_str().unwrap().to_owned());
                        } else if s != 200 && s != 429 {
                            assert_error(s, &body, 503, "service_unavailable");
                        }
                        statuses.push(s);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    (created, statuses)
                })
            })
            .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Down for longer than the pool's 5 s acquire timeout, so requests do fail meanwhile (a quick
    // restart is absorbed: the pool reconnects and requests merely wait).
    let _guard = RestartOnDrop;
    assert!(
        tokio::task::spawn_blocking(|| postgres_cluster("stop"))
            .await
            .unwrap(),
        "pg_ctlcluster stop"
    );
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        tokio::task::spawn_blocking(|| postgres_cluster("start"))
            .await
            .unwrap(),
        "pg_ctlcluster start"
    );
    // The origin recovers by itself: creations succeed again without restarting it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body) = app
            .create_json(&probe, json!({"long_url": "https://example.com/after"}))
            .await;
        if s == 201 {
            break;
        }
        assert_error(s, &body, 503, "service_unavailable");
        assert!(
            Instant::now() < deadline,
            "the origin did not recover after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut created = HashSet::new();
    let mut statuses = Vec::new();
    for c in clients {
        let (ids, s) = c
            .await
            .expect("a client panicked: an unexpected status (see above)");
        created.extend(ids);
        statuses.extend(s);
    }
    assert!(statuses.contains(&201), "load ran: {statuses:?}");
    // The outage was felt: some requests failed, cleanly (their shape is checked above).
    assert!(
        statuses.contains(&503),
        "no request saw the restart: {statuses:?}"
    );
    eprintln!(
        "statuses: {} × 201, {} × 200, {} × 429, {} × 503",
        statuses.iter().filter(|s| **s == 201).count(),
        statuses.iter().filter(|s| **s == 200).count(),
        statuses.iter().filter(|s| **s == 429).count(),
        statuses.iter().filter(|s| **s == 503).count()
    );
    // Every link confirmed with a 201 is in the database.
    let mut conn = sqlx::AnyConnection::connect(&app.test_db.url)
        .await
        .unwrap();
    for id in &created {
        let found = sqlx::query("SELECT id FROM links WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
        assert!(found.is_some(), "link {id} was confirmed but is gone");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_busy_is_waited_out_then_a_clean_error() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut locker = sqlx::AnyConnection::connect(&app.test_db.url)
        .await
        .unwrap();

    // A short lock is waited out (busy timeout): the request succeeds.
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let request = app.create(
        &acc.key,
        json!({"long_url": "https://example.com/short-lock"}),
    );
    let release = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    };
    let (resp, ()) = tokio::join!(request, release);
    let (s, body) = json(resp).await;
    assert_eq!(s, 201, "{body}");

    // A lock held past the bound gives a clean 503, and nothing half-written.
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = Instant::now();
    let (s, body) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/long-lock", "short_code": "locked"}),
        )
        .await;
    assert_error(s, &body, 503, "service_unavailable");
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "waited for the busy timeout first"
    );
    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    let (s, body) = json(app.get(&acc.key, "/api/v1/external/links").await).await;
    assert_eq!((s, body["total"].clone()), (200, json!(1)), "{body}");
    // And the service carries on.
    let (s, _) = app
        .create_json(
            &acc.key,
            json!({"long_url": "https://example.com/after", "short_code": "locked"}),
        )
        .await;
    assert_eq!(s, 201);
    app.stop().await;
}
