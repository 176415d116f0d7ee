//! Measurements of origin → edge propagation (not a test: `#[ignore]`, run by `scripts/bench-propagation.sh`).
//!
//! 1. Publisher lag: links created through the API at a steady 100/s for 20 s (20 API keys: the limit is 100 per
//!    key and hour), the worker without `ORIGIN_URL` (only the publisher can make a link work) and without an
//!    isolate cache (each probe reads KV). `/healthz` is sampled every 100 ms; every 10th link is probed every 5 ms
//!    from its `201` until the edge redirects it.
//! 2. Pause: on the same origin and worker, after the run, 50 of the probed links paused one at a time
//!    (`PATCH is_active=false`); the time from each `200` to the edge's first fallback, through the publisher.
//! 3. KV-miss fallback: 100 links created one at a time against an origin without a publisher, the worker with
//!    `ORIGIN_URL`; the time from each `201` to the edge's first redirect, and of a second visit (served from KV).

use std::sync::Arc;
use std::time::{Duration, Instant};

use e2e::origin::{Account, Database, HOST, HOST_FALLBACK, Origin, OriginOptions, free_port};
use e2e::{Options, Worker};
use serde_json::json;
use tokio::sync::Mutex;

const RATE_PER_SECOND: u64 = 100;
const SECONDS: u64 = 20;
const PROBE_EVERY: usize = 10;
const FALLBACK_LINKS: usize = 100;
const PAUSED_LINKS: usize = 50;

fn worker(port: Option<u16>, env: &[(&str, &str)]) -> Arc<Worker> {
    let mut vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if let Some(port) = port {
        vars.push(("PORT".into(), port.to_string()));
    }
    Arc::new(Worker::start_with(Options {
        env: vars,
        ..Options::default()
    }))
}

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

async fn redirects(w: &Worker, path: &str, long_url: &str) -> bool {
    let v = w.visit(HOST, path, &[]).await;
    v.status == 302 && v.header("location") == Some(long_url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run scripts/bench-propagation.sh"]
async fn bench_propagation() {
    // ---- 1. Publisher lag at a steady rate --------------------------------------------------------------------
    let db = Database::new();
    let keys = (RATE_PER_SECOND * SECONDS).div_ceil(100) as usize;
    let accounts: Vec<Account> = (0..keys)
        .map(|i| db.account(&format!("bench{i}@example.com")))
        .collect();
    let worker_port = free_port();
    let origin = Origin::start(
        &db,
        OriginOptions {
            edge_sync_url: Some(format!("http://127.0.0.1:{worker_port}/__shortlink/sync")),
            ..OriginOptions::default()
        },
    )
    .await;
    let w = worker(Some(worker_port), &[("ISOLATE_CACHE_TTL_SECONDS", "0")]);
    // The domain and groups created by the admin CLI reach the edge first.
    let deadline = Instant::now() + Duration::from_secs(30);
    while origin.healthz().await["publisher"]["pending"] != 0 {
        assert!(Instant::now() < deadline, "seed data not published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let samples = Arc::new(Mutex::new((0i64, 0i64)));
    let sampling = {
        let (url, samples) = (origin.url.clone(), samples.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                if let Ok(resp) = client.get(format!("{url}/healthz")).send().await
                    && let Ok(h) = resp.json::<serde_json::Value>().await
                {
                    let p = &h["publisher"];
                    let mut s = samples.lock().await;
                    s.0 = s.0.max(p["pending"].as_i64().unwrap_or(0));
                    s.1 = s.1.max(p["oldest_age_ms"].as_i64().unwrap_or(0));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let apis: Vec<_> = accounts.iter().map(|a| origin.api(a)).collect();
    let total = (RATE_PER_SECOND * SECONDS) as usize;
    let interval = Duration::from_micros(1_000_000 / RATE_PER_SECOND);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        // A steady schedule: request i leaves at i × interval, whatever earlier requests are doing.
        let at = started + interval * i as u32;
        tokio::time::sleep_until(at.into()).await;
        let api = apis[i % apis.len()].clone();
        let w = w.clone();
        tasks.spawn(async move {
            let long_url = format!("https://dest.example/bench/{i}");
            let link = api.create_link(json!({"long_url": long_url})).await;
            if i % PROBE_EVERY != 0 {
                return None;
            }
            let created = Instant::now();
            let path = format!("/{}", link["short_code"].as_str().unwrap_or_default());
            while !redirects(&w, &path, &long_url).await {
                assert!(
                    created.elapsed() < Duration::from_secs(120),
                    "{path} never arrived"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Some((
                created.elapsed(),
                i,
                link["id"].as_str().unwrap_or_default().to_owned(),
                path,
            ))
        });
    }
    let sent_in = started.elapsed();
    let (mut delays, mut probed) = (Vec::new(), Vec::new());
    while let Some(r) = tasks.join_next().await {
        if let Some((d, i, id, path)) = r.expect("probe task") {
            delays.push(d);
            probed.push((i, id, path));
        }
    }
    // Every probe has seen its link; the rest of the outbox drains after at most this long.
    let joined = Instant::now();
    while origin.healthz().await["publisher"]["pending"] != 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drained = joined.elapsed();
    sampling.abort();
    let (max_pending, max_age) = *samples.lock().await;
    let health = origin.healthz().await;
    let lag = sorted_ms(&delays);

    // ---- 2. Pause → the edge's first fallback, through the publisher ---------------------------------------
    let mut paused = Vec::new();
    for (i, id, path) in probed.iter().take(PAUSED_LINKS) {
        // Link i was created with key i mod n; only its own account may change it.
        apis[i % apis.len()]
            .patch_link(id, json!({"is_active": false}))
            .await;
        let patched = Instant::now();
        while !redirects(&w, path, HOST_FALLBACK).await {
            assert!(
                patched.elapsed() < Duration::from_secs(30),
                "{path} never paused"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        paused.push(patched.elapsed());
    }
    let paused = sorted_ms(&paused);
    drop(w);
    drop(origin);

    // ---- 3. KV-miss fallback ----------------------------------------------------------------------------------
    let db2 = Database::new();
    let account = db2.account("fallback@example.com");
    let origin = Origin::start(&db2, OriginOptions::default()).await;
    let w = worker(
        None,
        &[
            ("ORIGIN_URL", origin.url.as_str()),
            ("ORIGIN_SECRET", e2e::origin::INTERNAL_SECRET),
        ],
    );
    let api = origin.api(&account);
    let (mut first, mut second, mut first_try) = (Vec::new(), Vec::new(), 0usize);
    for i in 0..FALLBACK_LINKS {
        let long_url = format!("https://dest.example/fallback/{i}");
        let link = api.create_link(json!({"long_url": long_url})).await;
        let created = Instant::now();
        let path = format!("/{}", link["short_code"].as_str().unwrap_or_default());
        let mut tries = 0;
        while !redirects(&w, &path, &long_url).await {
            tries += 1;
            assert!(
                created.elapsed() < Duration::from_secs(10),
                "{path} never redirected"
            );
        }
        first.push(created.elapsed());
        first_try += usize::from(tries == 0);
        let again = Instant::now();
        assert!(redirects(&w, &path, &long_url).await);
        second.push(again.elapsed());
    }
    let (first, second) = (sorted_ms(&first), sorted_ms(&second));

    println!();
    println!(
        "publisher lag: {total} links at {RATE_PER_SECOND}/s for {SECONDS} s through {keys} API keys \
         (sent in {:.1} s; outbox empty {:.0} ms after the last probe saw its link); publisher at the end: {}",
        sent_in.as_secs_f64(),
        drained.as_secs_f64() * 1000.0,
        health["publisher"]
    );
    println!("| measurement | n | median | p99 | max |");
    println!("|---|---|---|---|---|");
    println!(
        "| 201 → edge redirect, publisher only (KV) | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
        lag.len(),
        percentile(&lag, 50.0),
        percentile(&lag, 99.0),
        lag.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "| PATCH is_active=false (200) → first edge fallback, publisher only (KV) | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
        paused.len(),
        percentile(&paused, 50.0),
        percentile(&paused, 99.0),
        paused.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "| 201 → first edge redirect, KV-miss fallback (ORIGIN_URL) | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        first.len(),
        percentile(&first, 50.0),
        percentile(&first, 99.0),
        first.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "| the same link's next visit (KV / isolate cache) | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        second.len(),
        percentile(&second, 50.0),
        percentile(&second, 99.0),
        second.last().copied().unwrap_or(f64::NAN)
    );
    println!("max publisher.pending: {max_pending}; max publisher.oldest_age_ms: {max_age} ms");
    println!(
        "KV-miss fallback: {first_try} of {FALLBACK_LINKS} links redirected on the first request"
    );
}
