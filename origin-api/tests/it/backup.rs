//! Backups (issue "Production"): `admin backup --to FILE` copies a live SQLite database, and the restore drill: a
//! backup taken while links are being created, restored by starting a server on the copy, holds every link that was
//! confirmed (201) before the backup began. PostgreSQL is backed up with `pg_dump`, so the command refuses it.

use crate::cli::Cli;
use crate::common::{Engine, TestApp, TestDb, start_server};
use serde_json::json;
use std::sync::{Arc, Mutex};

const ACCOUNTS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backup_under_write_load_restores_every_confirmed_link() {
    let test_db = TestDb::new(Engine::Sqlite).await;
    let url = test_db.url.clone();
    let server = start_server(&url, "warn").await;
    let app = TestApp::on(test_db).await;
    app.platform_domain("sho.rt").await;
    let mut keys = Vec::new();
    for _ in 0..ACCOUNTS {
        keys.push(app.account(true).await.key);
    }

    // Writers: links created through the API without pause; each confirmed id is recorded once its 201 is read.
    let confirmed: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(k, key)| {
            let (key, base, confirmed, stopped) = (
                key.clone(),
                server.base.clone(),
                confirmed.clone(),
                stopped.clone(),
            );
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                for i in 0..100 {
                    if *stopped.borrow() {
                        break;
                    }
                    let r = client
                        .post(format!("{base}/api/v1/external/links/create-link"))
                        .header("Authorization", format!("Token {key}"))
                        .json(&json!({"long_url": format!("https://example.com/{k}/{i}")}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 201);
                    let body: serde_json::Value = r.json().await.unwrap();
                    confirmed
                        .lock()
                        .unwrap()
                        .push((k, body["id"].as_str().unwrap().to_owned()));
                }
            })
        })
        .collect();
    while confirmed.lock().unwrap().len() < 50 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let before: Vec<(usize, String)> = confirmed.lock().unwrap().clone();
    let dir = std::env::temp_dir().join(format!(
        "shortlink-backup-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("copy.db");
    let cli = Cli { url: url.clone() };
    let to = copy.to_str().unwrap().to_owned();
    let out = tokio::task::spawn_blocking(move || cli.ok(&["admin", "backup", "--to", &to]))
        .await
        .unwrap();
    let during = confirmed.lock().unwrap().len();
    let _ = stop.send(true);
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(out["backup"], copy.to_str().unwrap());
    assert_eq!(
        out["bytes"].as_u64(),
        Some(std::fs::metadata(&copy).unwrap().len())
    );
    assert!(
        during > before.len(),
        "the backup ran while links were being created"
    );

    // Never over an existing file.
    let cli = Cli { url: url.clone() };
    let err = cli
        .run(&["admin", "backup", "--to", copy.to_str().unwrap()])
        .unwrap_err();
    assert!(err.contains("exists"), "{err}");

    // Restore: a server on the copy. Every link confirmed before the backup is there, whole.
    let restored_url = format!("sqlite://{}", copy.display());
    let check = sqlx::SqlitePool::connect(&restored_url).await.unwrap();
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&check)
        .await
        .unwrap();
    assert_eq!(integrity, "ok");
    // The unique visitors' salts and hashes stay out of the copy (the live database has today's and tomorrow's).
    let live = sqlx::SqlitePool::connect(&url).await.unwrap();
    let salts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM visitor_salts")
        .fetch_one(&live)
        .await
        .unwrap();
    assert!(salts >= 2, "{salts}");
    live.close().await;
    for table in ["visitor_salts", "day_visitor_keys"] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&check)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table} in the backup");
    }
    check.close().await;
    let restored = start_server(&restored_url, "warn").await;
    let client = reqwest::Client::new();
    for (k, id) in &before {
        let r = client
            .get(format!("{}/api/v1/external/links/{id}", restored.base))
            .header("Authorization", format!("Token {}", keys[*k]))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            200,
            "link {id} confirmed before the backup is missing"
        );
    }
    drop(restored);
    drop(server);
    app.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// PostgreSQL: the command says to use pg_dump, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backup_points_to_pg_dump() {
    let test_db = TestDb::new(Engine::Postgres).await;
    let to =
        std::env::temp_dir().join(format!("shortlink-pg-{}.db", uuid::Uuid::new_v4().simple()));
    let cli = Cli {
        url: test_db.url.clone(),
    };
    let to_s = to.to_str().unwrap().to_owned();
    let err = tokio::task::spawn_blocking(move || cli.run(&["admin", "backup", "--to", &to_s]))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.contains("pg_dump"), "{err}");
    assert!(!to.exists());
}
