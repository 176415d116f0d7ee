//! Clicks through Cloudflare Queues (edge-worker/src/click_queue.rs) in workerd, with the real origin as a
//! process: the worker sends each counted click to the queue, consumes it, and reports batches to the origin with
//! a `batch_id`. Clicks made while the origin is down all arrive once it is back, each counted once; a batch the
//! origin refuses ends in the dead-letter queue, as the worker sent it.

use std::time::Duration;

use e2e::origin::{
    Account, Database, Group, HOST, INTERNAL_SECRET, Origin, OriginOptions, free_port,
};
use e2e::{BROWSER_UA, Options, Worker, eventually, group, link};
use serde_json::{Value, json};

/// How long a click may take from the visit to the statistics once the origin answers: the consumer's batch
/// timeout (1 s in the test configuration) and retry delay (1 s), with room for a loaded machine.
const DELIVERY: Duration = Duration::from_secs(30);

/// A worker with the click queue, reporting to the origin on `origin_port` with `secret`.
fn queue_worker(origin_port: u16, secret: &str) -> Worker {
    Worker::start_with(Options {
        env: vec![
            ("CLICK_QUEUE".into(), "1".into()),
            (
                "ORIGIN_URL".into(),
                format!("http://127.0.0.1:{origin_port}"),
            ),
            ("ORIGIN_SECRET".into(), secret.into()),
        ],
        ..Options::default()
    })
}

/// An account with a link in a group with analytics on, created at the origin and put in the worker's KV (this
/// test is about clicks, not publishing). Returns the account, the link's id and its path.
async fn tracked_link(db: &Database, origin: &Origin, w: &Worker) -> (Account, String, String) {
    let account = db.account("queue@example.com");
    let settings = json!({"analytics": {"enabled": true}});
    let tracked: Group = db.group(&account, "tracked", settings.clone());
    let created = origin
        .api(&account)
        .link("https://dest.example/queued", Some(&tracked.id))
        .await;
    let code = created["short_code"]
        .as_str()
        .expect("short_code")
        .to_owned();
    w.sync(
        vec![
            (
                format!("link:{HOST}:{}", code.to_lowercase()),
                link("https://dest.example/queued", &tracked.id, true),
            ),
            (
                format!("group:{}", tracked.id),
                group(&tracked.signing_key(), settings),
            ),
        ],
        vec![],
    )
    .await;
    let id = created["id"].as_str().expect("id").to_owned();
    (account, id, format!("/{code}"))
}

/// A browser's visit from `country`, which counts.
async fn click(w: &Worker, path: &str, country: &str) {
    w.visit(
        HOST,
        path,
        &[("User-Agent", BROWSER_UA), ("CF-IPCountry", country)],
    )
    .await
    .assert_destination("https://dest.example/queued");
}

async fn total(origin: &Origin, account: &Account, id: &str) -> i64 {
    origin.api(account).stats(id).await["total"]
        .as_i64()
        .unwrap_or(-1)
}

#[tokio::test]
async fn clicks_made_while_the_origin_is_down_all_arrive_after_it_returns() {
    let db = Database::new();
    let port = free_port();
    let w = queue_worker(port, INTERNAL_SECRET);
    let options = OriginOptions {
        port: Some(port),
        edge_sync_url: None,
        ..OriginOptions::default()
    };
    let mut origin = Origin::start(&db, options.clone()).await;
    let (account, id, path) = tracked_link(&db, &origin, &w).await;

    // With the origin up, a click goes through the queue into the statistics.
    click(&w, &path, "DE").await;
    eventually(DELIVERY, "the first click is counted", || async {
        total(&origin, &account, &id).await == 1
    })
    .await;

    // The origin goes down; visitors are still redirected, and their clicks wait in the queue.
    origin.kill();
    let countries = ["FR", "US", "JP", "BR", "IN", "NL", "SE", "PL", "ES", "IT"];
    for country in countries.iter().cycle().take(30) {
        click(&w, &path, country).await;
    }
    // The consumer tried and could not deliver: the batch is kept for a retry.
    let line = w
        .wait_for_log("queue_clicks_failed", DELIVERY, |_| true)
        .await;
    assert_eq!(line["action"], "retry", "{line}");
    assert_eq!(line["failure"], "transport", "{line}");

    // Back on the same address: every click made meanwhile arrives, and none twice.
    let origin = Origin::start(&db, options).await;
    eventually(
        DELIVERY,
        "the 30 clicks made while down are counted",
        || async { total(&origin, &account, &id).await >= 31 },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = origin.api(&account).stats(&id).await;
    assert_eq!(stats["total"], 31, "each click once: {stats}");
    let by_country: Vec<(String, i64)> = stats["by_country"]
        .as_array()
        .expect("by_country")
        .iter()
        .map(|c| {
            (
                c["country"].as_str().unwrap_or_default().to_owned(),
                c["clicks"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(by_country.iter().map(|(_, n)| n).sum::<i64>(), 31);
    assert!(by_country.contains(&("FR".into(), 3)), "{by_country:?}");
    assert!(by_country.contains(&("DE".into(), 1)), "{by_country:?}");
    assert!(w.dead_letters().await.is_empty(), "nothing was refused");
}

#[tokio::test]
async fn a_batch_the_origin_refuses_goes_to_the_dead_letter_queue() {
    let db = Database::new();
    let port = free_port();
    // The wrong secret: the origin answers 401, which retrying cannot change.
    let w = queue_worker(port, "not-the-origin-secret");
    let origin = Origin::start(
        &db,
        OriginOptions {
            port: Some(port),
            edge_sync_url: None,
            ..OriginOptions::default()
        },
    )
    .await;
    let (account, id, path) = tracked_link(&db, &origin, &w).await;
    for country in ["DE", "FR", "US"] {
        click(&w, &path, country).await;
    }
    eventually(
        DELIVERY,
        "three events in the dead-letter queue",
        || async { w.dead_letters().await.len() >= 3 },
    )
    .await;
    let dead: Vec<Value> = w.dead_letters().await;
    assert_eq!(dead.len(), 3, "{dead:?}");
    let mut countries: Vec<&str> = dead.iter().filter_map(|e| e["country"].as_str()).collect();
    countries.sort_unstable();
    assert_eq!(countries, ["DE", "FR", "US"]);
    for event in &dead {
        assert_eq!(event["host"], HOST, "{event}");
        assert_eq!(event["short_code"], path[1..].to_lowercase(), "{event}");
        assert_eq!(event["device"], "desktop", "{event}");
    }
    let line = w
        .wait_for_log("queue_clicks_failed", DELIVERY, |l| {
            l["action"] == "dead_letter"
        })
        .await;
    assert_eq!(line["status"], 401, "{line}");
    assert_eq!(total(&origin, &account, &id).await, 0, "nothing counted");
}
