//! Measurements of webhook delivery (not a test: `#[ignore]`, run by `scripts/bench-webhooks.sh`), issue 27's
//! "Speed": the real origin as a process (`origin-api serve --webhooks-allow-private`, a release build unless the
//! script is told otherwise, `--write-limit-per-minute 1000000` so the load is not refused), receivers on loopback
//! in this process, on SQLite and PostgreSQL (a fresh database and origin for each part).
//!
//! 1. `link.created` latency: 320 links created at a steady 10/s through 4 API keys (create-link allows 100 per key
//!    and hour), each account with one endpoint on a receiver that answers `200` at once; the time from each
//!    `201` (as the client got it) to the receiver's arrival.
//! 2. Sustained load: one account, one endpoint (`link.clicked`), one receiver answering `200` at once; 100 links
//!    (one bulk-create), then a click report (`POST /internal/v1/clicks`, as the edge sends them) with one click on
//!    each link every 200 ms for 60 s: 100 `link.clicked` events each, 500 events/s into the outbox. (Made with
//!    `PATCH`es instead, 500 API requests/s saturate the debug-build origin on 2 cores before the outbox does: see
//!    BENCHMARKS.md.) Every second: the backlog (deliveries `pending` in the database, read with `sqlite3` /
//!    `psql`), events committed and delivered. Then the time until the backlog is empty.
//! 3. Create-link latency with 0 endpoints vs with 20 endpoints of which 10 are dead (5 on a port where nothing
//!    listens, 5 on a receiver that accepts and never answers, so each attempt lasts the 10 s timeout), the other
//!    10 on a live receiver: two accounts of each kind, 10 interleaved rounds of 20 creations per kind (the order
//!    alternating), one at a time at 20/s, in one origin.
//!
//! `WEBHOOK_BENCH_ENGINES=sqlite` (or `postgres`) runs one engine only.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use e2e::origin::{
    Account, Api, Database, Engine, HOST, INTERNAL_SECRET, Origin, OriginOptions, free_port,
};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Mutex;

const LATENCY_LINKS: usize = 320;
const LATENCY_RATE: u64 = 10;
const LOAD_RATE: u64 = 500;
const LOAD_SECONDS: u64 = 60;
const LOAD_LINKS: usize = 100;
const ROUNDS: usize = 10;
const PER_ROUND: usize = 20;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted_ms(durations: &[Duration]) -> Vec<f64> {
    let mut v: Vec<f64> = durations.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// --- receivers -------------------------------------------------------------------------------------------------

/// What the live receiver saw: every request counted, and the first arrival of each link's `link.created`.
#[derive(Default)]
struct Seen {
    requests: AtomicU64,
    created: Mutex<HashMap<String, Instant>>,
}

async fn receive(State(seen): State<Arc<Seen>>, body: Bytes) -> StatusCode {
    let at = Instant::now();
    seen.requests.fetch_add(1, Relaxed);
    if let Ok(v) = serde_json::from_slice::<Value>(&body)
        && v["type"] == "link.created"
        && let Some(id) = v["data"]["id"].as_str()
    {
        seen.created
            .lock()
            .expect("receiver lock")
            .entry(id.to_owned())
            .or_insert(at);
    }
    StatusCode::OK
}

/// A receiver on loopback answering `200` at once; its URL.
async fn live_receiver(seen: Arc<Seen>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let app = axum::Router::new().fallback(receive).with_state(seen);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/hook")
}

/// A receiver that accepts connections and never answers (each attempt lasts the origin's timeout); its URL.
async fn black_hole() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{addr}/hook")
}

// --- helpers ---------------------------------------------------------------------------------------------------

async fn origin(db: &Database) -> Origin {
    Origin::start(
        db,
        OriginOptions {
            args: vec![
                "--webhooks-allow-private".into(),
                "--write-limit-per-minute".into(),
                "1000000".into(),
            ],
            ..OriginOptions::default()
        },
    )
    .await
}

async fn subscribe(api: &Api, url: &str, events: &[&str]) {
    api.call(
        Method::POST,
        "webhooks",
        Some(&json!({"url": url, "events": events})),
        201,
    )
    .await;
}

fn accounts(db: &Database, prefix: &str, n: usize) -> Vec<Account> {
    (0..n)
        .map(|i| db.account(&format!("{prefix}{i}@example.com")))
        .collect()
}

fn pending(db: &Database) -> i64 {
    // Events not yet fanned out count too (one endpoint: one delivery each).
    db.query(
        "SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending') \
         + (SELECT COUNT(*) FROM webhook_fanout)",
    )
    .trim()
    .parse()
    .unwrap_or(-1)
}

// --- the three measurements ------------------------------------------------------------------------------------

struct Latency {
    ms: Vec<f64>,
    created_ms: Vec<f64>,
}

async fn created_latency(engine: Engine) -> Latency {
    let db = Database::on(engine);
    let keys = LATENCY_LINKS.div_ceil(80);
    let accounts = accounts(&db, "latency", keys);
    let origin = origin(&db).await;
    let seen: Arc<Seen> = Arc::default();
    let url = live_receiver(seen.clone()).await;
    let apis: Vec<Api> = accounts.iter().map(|a| origin.api(a)).collect();
    for api in &apis {
        subscribe(api, &url, &["link.created"]).await;
    }
    let interval = Duration::from_micros(1_000_000 / LATENCY_RATE);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..LATENCY_LINKS {
        tokio::time::sleep_until((started + interval * i as u32).into()).await;
        let api = apis[i % apis.len()].clone();
        tasks.spawn(async move {
            let sent = Instant::now();
            let link = api
                .create_link(json!({"long_url": format!("https://dest.example/latency/{i}")}))
                .await;
            let created = Instant::now();
            (
                link["id"].as_str().expect("id").to_owned(),
                created,
                created - sent,
            )
        });
    }
    let mut links = Vec::new();
    while let Some(r) = tasks.join_next().await {
        links.push(r.expect("create task"));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = seen.created.lock().expect("lock").len();
        if n >= LATENCY_LINKS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {n} of {LATENCY_LINKS} link.created arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let arrived = seen.created.lock().expect("lock").clone();
    let delays: Vec<Duration> = links
        .iter()
        .map(|(id, created, _)| arrived[id].saturating_duration_since(*created))
        .collect();
    let api_ms: Vec<Duration> = links.iter().map(|(_, _, d)| *d).collect();
    Latency {
        ms: sorted_ms(&delays),
        created_ms: sorted_ms(&api_ms),
    }
}

struct Sustained {
    committed_per_s: f64,
    delivered_per_s: f64,
    backlog: Vec<i64>,
    drain: Option<Duration>,
    failed_requests: u64,
}

async fn sustained(engine: Engine) -> Sustained {
    let db = Arc::new(Database::on(engine));
    let account = db.account("load@example.com");
    let origin = origin(&db).await;
    let seen: Arc<Seen> = Arc::default();
    let url = live_receiver(seen.clone()).await;
    let api = origin.api(&account);
    subscribe(&api, &url, &["link.clicked"]).await;
    let body = json!({"links": (0..LOAD_LINKS)
        .map(|i| json!({"long_url": format!("https://dest.example/load/{i}")}))
        .collect::<Vec<_>>()});
    let created = api
        .call(Method::POST, "links/bulk-create", Some(&body), 200)
        .await;
    let codes: Arc<Vec<String>> = Arc::new(
        created["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                r["link"]["short_code"]
                    .as_str()
                    .expect("created")
                    .to_owned()
            })
            .collect(),
    );
    assert_eq!(codes.len(), LOAD_LINKS);

    let committed = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The sampler: every second, (backlog, committed, delivered).
    let sampler = {
        let (db, committed, seen, stop) =
            (db.clone(), committed.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let start = Instant::now();
            let mut k = 1u32;
            while !stop.load(Relaxed) {
                tokio::time::sleep_until((start + Duration::from_secs(1) * k).into()).await;
                k += 1;
                let c = committed.load(Relaxed);
                let d = seen.requests.load(Relaxed);
                let db = db.clone();
                let backlog = tokio::task::spawn_blocking(move || pending(&db))
                    .await
                    .expect("sampler");
                samples.push((backlog, c, d));
            }
            samples
        })
    };
    // A report with one click on each link every 1/REPORTS_PER_SECOND s: LOAD_LINKS `link.clicked` events each.
    let reports = (LOAD_RATE * LOAD_SECONDS) as usize / LOAD_LINKS;
    let interval = Duration::from_micros(1_000_000 * LOAD_LINKS as u64 / LOAD_RATE);
    let client = reqwest::Client::new();
    let clicks_url = format!("{}/internal/v1/clicks", origin.url);
    let group_id = account.default_group_id.clone();
    let started = Instant::now();
    let delivered_before = seen.requests.load(Relaxed);
    let mut tasks = tokio::task::JoinSet::new();
    for r in 0..reports {
        tokio::time::sleep_until((started + interval * r as u32).into()).await;
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as i64;
        let events: Vec<Value> = codes
            .iter()
            .map(|code| {
                json!({"host": HOST, "short_code": code, "group_id": group_id, "at": at,
                       "country": "DE", "referer_host": null, "device": "desktop"})
            })
            .collect();
        let (client, url, committed, failed) = (
            client.clone(),
            clicks_url.clone(),
            committed.clone(),
            failed.clone(),
        );
        tasks.spawn(async move {
            let stored = match client
                .post(&url)
                .bearer_auth(INTERNAL_SECRET)
                .json(&json!({"events": events}))
                .send()
                .await
            {
                Ok(resp) if resp.status().is_success() => resp
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["stored"].as_u64()),
                _ => None,
            };
            match stored {
                // One event per link of the report.
                Some(n) if n as usize == LOAD_LINKS => {
                    committed.fetch_add(LOAD_LINKS as u64, Relaxed);
                }
                _ => {
                    failed.fetch_add(1, Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let load_time = started.elapsed();
    let delivered_in_load = seen.requests.load(Relaxed) - delivered_before;
    let committed_total = committed.load(Relaxed);
    let ended = Instant::now();
    let mut drain = None;
    while ended.elapsed() < Duration::from_secs(120) {
        let db2 = db.clone();
        if tokio::task::spawn_blocking(move || pending(&db2))
            .await
            .expect("pending")
            == 0
        {
            drain = Some(ended.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Relaxed);
    let samples = sampler.await.expect("sampler");
    let backlog: Vec<i64> = samples
        .iter()
        .take(load_time.as_secs() as usize)
        .map(|s| s.0)
        .collect();
    drop(origin);
    Sustained {
        committed_per_s: committed_total as f64 / load_time.as_secs_f64(),
        delivered_per_s: delivered_in_load as f64 / load_time.as_secs_f64(),
        backlog,
        drain,
        failed_requests: failed.load(Relaxed),
    }
}

struct Isolation {
    none: Vec<f64>,
    twenty: Vec<f64>,
    live_deliveries: u64,
    live_expected: u64,
}

async fn create_with_dead_endpoints(engine: Engine) -> Isolation {
    let db = Database::on(engine);
    let quiet = accounts(&db, "quiet", 2);
    let busy = accounts(&db, "busy", 2);
    let origin = origin(&db).await;
    let seen: Arc<Seen> = Arc::default();
    let live = live_receiver(seen.clone()).await;
    let hole = black_hole().await;
    let refused = format!("http://127.0.0.1:{}/hook", free_port());
    let events = ["link.created", "link.updated", "link.deleted"];
    for account in &busy {
        let api = origin.api(account);
        for i in 0..20 {
            let url = match i % 4 {
                0 | 2 => &live,
                1 => &hole,
                _ => &refused,
            };
            subscribe(&api, url, &events).await;
        }
    }
    let quiet: Vec<Api> = quiet.iter().map(|a| origin.api(a)).collect();
    let busy: Vec<Api> = busy.iter().map(|a| origin.api(a)).collect();
    let (mut none, mut twenty) = (Vec::new(), Vec::new());
    let interval = Duration::from_millis(50);
    let mut next = Instant::now();
    let mut n = 0usize;
    for round in 0..ROUNDS {
        let order: [bool; 2] = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for with_endpoints in order {
            let api = if with_endpoints {
                &busy[round % 2]
            } else {
                &quiet[round % 2]
            };
            for _ in 0..PER_ROUND {
                tokio::time::sleep_until(next.into()).await;
                next += interval;
                n += 1;
                let sent = Instant::now();
                api.create_link(json!({"long_url": format!("https://dest.example/iso/{n}")}))
                    .await;
                let took = sent.elapsed();
                if with_endpoints {
                    twenty.push(took);
                } else {
                    none.push(took);
                }
            }
        }
    }
    // 10 live endpoints of each creation's 20.
    let live_expected = (twenty.len() * 10) as u64;
    let live_deliveries = seen.requests.load(Relaxed);
    drop(origin);
    Isolation {
        none: sorted_ms(&none),
        twenty: sorted_ms(&twenty),
        live_deliveries,
        live_expected,
    }
}

// --- the run ---------------------------------------------------------------------------------------------------

struct Figures {
    engine: &'static str,
    latency: Latency,
    sustained: Sustained,
    isolation: Isolation,
    load: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run scripts/bench-webhooks.sh"]
async fn bench_webhooks() {
    let only = std::env::var("WEBHOOK_BENCH_ENGINES").unwrap_or_default();
    let mut runs = Vec::new();
    for (engine, name) in [(Engine::Sqlite, "SQLite"), (Engine::Postgres, "PostgreSQL")] {
        if !only.is_empty() && !only.to_lowercase().contains(&name.to_lowercase()[..6]) {
            continue;
        }
        let mut load = vec![loadavg()];
        eprintln!("{name}: link.created latency …");
        let latency = created_latency(engine).await;
        load.push(loadavg());
        eprintln!("{name}: sustained {LOAD_RATE}/s for {LOAD_SECONDS} s …");
        let sustained = sustained(engine).await;
        load.push(loadavg());
        eprintln!("{name}: create-link with 0 vs 20 endpoints (10 dead) …");
        let isolation = create_with_dead_endpoints(engine).await;
        load.push(loadavg());
        runs.push(Figures {
            engine: name,
            latency,
            sustained,
            isolation,
            load,
        });
    }

    println!();
    let header: Vec<&str> = runs.iter().map(|r| r.engine).collect();
    println!("| measurement | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(runs.len()));
    let row = |name: &str, f: &dyn Fn(&Figures) -> String| {
        let cells: Vec<String> = runs.iter().map(f).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    row(
        &format!(
            "1. `link.created` 201 → receiver, {LATENCY_LINKS} links at {LATENCY_RATE}/s: p50 / p99 / max"
        ),
        &|r| {
            let l = &r.latency.ms;
            format!(
                "{:.0} / {:.0} / {:.0} ms",
                percentile(l, 50.0),
                percentile(l, 99.0),
                l.last().copied().unwrap_or(f64::NAN)
            )
        },
    );
    row("   (create-link 201 during it: p50 / p99)", &|r| {
        let l = &r.latency.created_ms;
        format!("{:.1} / {:.1} ms", percentile(l, 50.0), percentile(l, 99.0))
    });
    row(
        &format!(
            "2. {LOAD_RATE} `link.clicked`/s for {LOAD_SECONDS} s: committed / delivered per s"
        ),
        &|r| {
            format!(
                "{:.0} / {:.0}{}",
                r.sustained.committed_per_s,
                r.sustained.delivered_per_s,
                if r.sustained.failed_requests > 0 {
                    format!(" ({} reports failed)", r.sustained.failed_requests)
                } else {
                    String::new()
                }
            )
        },
    );
    row(
        "   backlog (pending deliveries) at 1 s / 10 s / 30 s / end / max",
        &|r| {
            let b = &r.sustained.backlog;
            let at = |s: usize| {
                b.get(s.saturating_sub(1))
                    .map_or("-".to_owned(), |v| v.to_string())
            };
            format!(
                "{} / {} / {} / {} / {}",
                at(1),
                at(10),
                at(30),
                b.last().map_or("-".to_owned(), |v| v.to_string()),
                b.iter().max().copied().unwrap_or(0)
            )
        },
    );
    row("   backlog empty after the load stopped", &|r| {
        r.sustained
            .drain
            .map_or("not within 120 s".to_owned(), |d| {
                format!("{:.1} s", d.as_secs_f64())
            })
    });
    row(
        &format!(
            "3. create-link, 0 endpoints: p50 / p99 / mean ({} × {PER_ROUND})",
            ROUNDS
        ),
        &|r| stats(&r.isolation.none),
    );
    row("   20 endpoints (10 dead): p50 / p99 / mean", &|r| {
        stats(&r.isolation.twenty)
    });
    row("   ratio 20 / 0: p50, p99", &|r| {
        let (a, b) = (&r.isolation.none, &r.isolation.twenty);
        format!(
            "{:.2}, {:.2}",
            percentile(b, 50.0) / percentile(a, 50.0),
            percentile(b, 99.0) / percentile(a, 99.0)
        )
    });
    row("   live endpoints' deliveries during it", &|r| {
        format!(
            "{} of {}",
            r.isolation.live_deliveries, r.isolation.live_expected
        )
    });
    row("load average before / after each part", &|r| {
        r.load.join(" → ")
    });
    for r in &runs {
        println!(
            "{}: backlog every second during the load: {:?}",
            r.engine, r.sustained.backlog
        );
    }
}

fn stats(sorted: &[f64]) -> String {
    let mean = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64;
    format!(
        "{:.1} / {:.1} / {:.1} ms",
        percentile(sorted, 50.0),
        percentile(sorted, 99.0),
        mean
    )
}
