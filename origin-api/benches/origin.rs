//! Origin benchmark: click-report ingestion (events/s through `POST /internal/v1/clicks`, reports of 1,000
//! events) and statistics latency after it, statistics latency for one link with 10,000,000 clicks over a year,
//! the raw click export of 1,000,000 events,
//! create-link throughput, list-links latency, and PATCH / DELETE of one link by id, over real HTTP, on SQLite and PostgreSQL, with one account holding 1,000,000 links. Prints a Markdown table.
//!
//! `cargo bench -p origin-api --bench origin` (env: `BENCH_LINKS`, default 1000000;
//! `BENCH_CREATES`, default 10000; `BENCH_EDITS`, default 5000; `BENCH_CLICK_EVENTS`, default 200000, 0 skips
//! ingestion; `BENCH_CLICK_LINKS`, default 1000, the links the clicks spread over; `BENCH_STATS_CLICKS`, default
//! 10000000, the clicks of the one link whose statistics are read at scale, 0 skips it; `BENCH_EVENT_IDS=1`, each
//! ingested event with its own id, as the worker's queue consumer sends them; `TEST_POSTGRES_URL`;
//! `BENCH_EXPORT_EVENTS`, default 1000000, the raw events of the one link whose click export is read, 0 skips it;
//! `BENCH_VISITORS`, 0, 1 or 2, see [`ClickLoad`]; `BENCH_IN_FLIGHT`, default 4, the click reports sent at once;
//! `BENCH_CLICK_WRITERS`, PostgreSQL's click-writer transactions at once, default the store's;
//! `BENCH_ENGINES=sqlite,postgres`).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use origin_api::startup::{Application, Settings};
use shortlink_store::domain::Hostname;
use shortlink_store::{Actor, Db, DomainOwner, SeedScope};
use sqlx::Connection;
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Fresh {
    url: String,
    cleanup: Option<String>,
}

async fn fresh_db(engine: &str) -> Fresh {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    if engine == "sqlite" {
        let dir = std::env::temp_dir().join(format!("shortlink-bench-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        Fresh {
            url: format!("sqlite://{}", dir.join("bench.db").display()),
            cleanup: None,
        }
    } else {
        let admin = std::env::var("TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let schema = format!("bench_{tag}");
        let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut conn)
            .await
            .unwrap();
        let sep = if admin.contains('?') { '&' } else { '?' };
        Fresh {
            url: format!("{admin}{sep}options=-c%20search_path%3D{schema}"),
            cleanup: Some(schema),
        }
    }
}

async fn drop_db(fresh: &Fresh) {
    if let Some(schema) = &fresh.cleanup {
        let admin = std::env::var("TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

/// Inserts `n` links for one account in batches, as fast as the engine allows, and sets
/// the account's counter: the fixture, not part of what is measured.
async fn fill(db_url: &str, account: &str, group: &str, domain: &str, prefix: &str, n: usize) {
    let pool = sqlx::AnyPool::connect(db_url).await.unwrap();
    let base = 1_700_000_000_000_000i64;
    let batch = 500;
    let mut i = 0;
    while i < n {
        let mut tx = pool.begin().await.unwrap();
        for _ in 0..20 {
            if i >= n {
                break;
            }
            let end = (i + batch).min(n);
            let mut sql = String::from(
                "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, is_active, created_at) VALUES ",
            );
            for (k, _) in (i..end).enumerate() {
                let p = k * 4;
                if k > 0 {
                    sql.push(',');
                }
                sql.push_str(&format!(
                    "(${}, $1, $2, $3, ${}, ${}, 1, ${})",
                    p + 4,
                    p + 5,
                    p + 6,
                    p + 7
                ));
            }
            let mut q = sqlx::query(&sql).bind(account).bind(group).bind(domain);
            for j in i..end {
                q = q
                    .bind(uuid::Uuid::new_v4().to_string())
                    .bind(format!("{prefix}{j}"))
                    .bind(format!("https://example.com/p/{j}"))
                    .bind(base + j as i64);
            }
            q.execute(&mut *tx).await.unwrap();
            i = end;
        }
        tx.commit().await.unwrap();
    }
    sqlx::query("UPDATE accounts SET link_count = link_count + $1 WHERE id = $2")
        .bind(n as i64)
        .bind(account)
        .execute(&pool)
        .await
        .unwrap();
    if db_url.starts_with("postgres") {
        sqlx::query("ANALYZE links").execute(&pool).await.unwrap();
    }
    pool.close().await;
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Row {
    engine: String,
    what: String,
    value: String,
}

/// Runs `n` requests built by `request`, `concurrency` in flight; every answer must be `want`. Returns the rate
/// and the p50 / p99 of each request's own time.
async fn run_timed(
    n: usize,
    concurrency: usize,
    want: u16,
    request: impl Fn(usize) -> reqwest::RequestBuilder,
) -> (f64, Duration, Duration) {
    let started = Instant::now();
    let mut samples: Vec<(u16, Duration)> = futures::stream::iter(0..n)
        .map(|i| {
            let req = request(i);
            async move {
                let t = Instant::now();
                let status = req.send().await.map(|r| r.status().as_u16()).unwrap_or(0);
                (status, t.elapsed())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let rate = n as f64 / started.elapsed().as_secs_f64();
    assert!(
        samples.iter().all(|(s, _)| *s == want),
        "every answer is {want}"
    );
    samples.sort_by_key(|(_, d)| *d);
    let times: Vec<Duration> = samples.into_iter().map(|(_, d)| d).collect();
    (rate, percentile(&times, 0.5), percentile(&times, 0.99))
}

#[allow(clippy::too_many_arguments)]
async fn bench_engine(
    engine: &str,
    links: usize,
    creates: usize,
    edits: usize,
    clicks: ClickLoad,
    stats_clicks: usize,
    export_events: usize,
    rows: &mut Vec<Row>,
) {
    sqlx::any::install_default_drivers();
    let fresh = fresh_db(engine).await;
    let db = Db::connect(&fresh.url, 4).await.unwrap();
    db.migrate().await.unwrap();
    let domain = db
        .add_domain(
            &Hostname::parse("sho.rt").unwrap(),
            &DomainOwner::Platform,
            None,
            &Actor::Operator,
        )
        .await
        .unwrap();
    let mut settings = Settings::new(fresh.url.clone());
    settings.internal_secret = Some(INTERNAL_SECRET.into());
    settings.click_writers = std::env::var("BENCH_CLICK_WRITERS")
        .ok()
        .and_then(|v| v.parse().ok());
    let app = Application::build(&settings).await.unwrap();
    let base = format!("http://{}", app.addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();

    if stats_clicks > 0 {
        bench_stats_at_scale(
            engine,
            &fresh.url,
            &db,
            &domain.id,
            &base,
            &client,
            stats_clicks,
            rows,
        )
        .await;
    }
    if export_events > 0 {
        bench_click_export(
            engine,
            &fresh.url,
            &db,
            &domain.id,
            &base,
            &client,
            export_events,
            rows,
        )
        .await;
    }
    if clicks.events > 0 {
        bench_ingest(
            engine, &fresh.url, &db, &domain.id, &base, &client, clicks, rows,
        )
        .await;
    }

    // create-link throughput: many keys so the 100/hour limit never binds.
    let keys_needed = creates.div_ceil(100);
    let mut keys = Vec::with_capacity(keys_needed);
    for i in 0..keys_needed {
        let acc = db
            .create_account(&format!("bench{i}@example.com"), true)
            .await
            .unwrap();
        keys.push(
            db.generate_api_key(&acc.id, &Actor::Operator)
                .await
                .unwrap()
                .expose()
                .to_owned(),
        );
    }
    let concurrency = 32;
    let (rate, p50, p99) = run_timed(creates, concurrency, 201, |i| {
        client
            .post(format!("{base}/api/v1/external/links/create-link"))
            .header("Authorization", format!("Token {}", keys[i % keys.len()]))
            .json(&serde_json::json!({"long_url": format!("https://example.org/{i}")}))
    })
    .await;
    rows.push(Row {
        engine: engine.into(),
        what: format!(
            "create-link, {creates} requests, {concurrency} in flight, {keys_needed} keys"
        ),
        value: format!("{rate:.0} creations/s (p50 {} / p99 {})", ms(p50), ms(p99)),
    });

    // list latency on an account with `links` links.
    let acc = db.create_account("big@example.com", true).await.unwrap();
    let key = db
        .generate_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap()
        .expose()
        .to_owned();
    let t = Instant::now();
    fill(
        &fresh.url,
        &acc.id,
        &acc.default_group_id,
        &domain.id,
        "f",
        links,
    )
    .await;
    eprintln!("{engine}: filled {links} links in {:?}", t.elapsed());
    let deep = links / 2;
    let probe = (links / 250).max(1);
    let queries = [
        (
            "first page (limit=20), total included".to_owned(),
            "limit=20".to_owned(),
        ),
        (
            format!("deep page (offset={deep})"),
            format!("limit=20&offset={deep}"),
        ),
        (
            "exact filter (1 match)".to_owned(),
            format!("long_url=https%3A%2F%2Fexample.com%2Fp%2F{probe}"),
        ),
        (
            format!("startswith filter (prefix …/p/{probe})"),
            format!("long_url=https%3A%2F%2Fexample.com%2Fp%2F{probe}&match=startswith"),
        ),
    ];
    for (label, query) in queries {
        let url = format!("{base}/api/v1/external/links?{query}");
        let mut samples = Vec::new();
        let mut total = 0;
        for i in 0..220 {
            let t = Instant::now();
            let resp = client
                .get(&url)
                .header("Authorization", format!("Token {key}"))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let body: serde_json::Value = resp.json().await.unwrap();
            if i >= 20 {
                samples.push(t.elapsed());
            }
            total = body["total"].as_i64().unwrap();
        }
        samples.sort();
        rows.push(Row {
            engine: engine.into(),
            what: format!("list: {label}, total={total}"),
            value: format!(
                "p50 {} / p99 {}",
                ms(percentile(&samples, 0.5)),
                ms(percentile(&samples, 0.99))
            ),
        });
    }

    bench_dashboard(
        engine,
        &db,
        &base,
        &acc.id,
        &acc.default_group_id,
        links,
        rows,
    )
    .await;

    // PATCH and DELETE by id among the `links`: distinct links spread over the whole table, so each request
    // finds its row by the primary key, checks the owner, writes the row, the counter (DELETE) and an outbox row.
    let pool = sqlx::AnyPool::connect(&fresh.url).await.unwrap();
    let step = (links / (2 * edits)).max(1);
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM links WHERE account_id = $1 ORDER BY created_at LIMIT $2",
    )
    .bind(&acc.id)
    .bind((2 * edits * step) as i64)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .step_by(step)
    .collect();
    pool.close().await;
    assert!(
        ids.len() >= 2 * edits,
        "{} ids for {edits} edits",
        ids.len()
    );
    let link_url = |i: usize| format!("{base}/api/v1/external/links/{}", ids[i]);
    let (rate, p50, p99) = run_timed(edits, concurrency, 200, |i| {
        client
            .patch(link_url(i))
            .header("Authorization", format!("Token {key}"))
            .json(&serde_json::json!({"is_active": false, "long_url": format!("https://example.net/{i}")}))
    })
    .await;
    rows.push(Row {
        engine: engine.into(),
        what: format!(
            "PATCH links/{{id}} (pause + new long_url), {edits} requests, {concurrency} in flight"
        ),
        value: format!("{rate:.0} requests/s (p50 {} / p99 {})", ms(p50), ms(p99)),
    });
    let (rate, p50, p99) = run_timed(edits, concurrency, 204, |i| {
        client
            .delete(link_url(edits + i))
            .header("Authorization", format!("Token {key}"))
    })
    .await;
    rows.push(Row {
        engine: engine.into(),
        what: format!("DELETE links/{{id}}, {edits} requests, {concurrency} in flight"),
        value: format!("{rate:.0} requests/s (p50 {} / p99 {})", ms(p50), ms(p99)),
    });

    let _ = stop.send(());
    let _ = server.await;
    db.close().await;
    drop_db(&fresh).await;
}

const INTERNAL_SECRET: &str = "bench-internal-secret-0123456789";
/// Events per click report (the route's maximum).
const REPORT_EVENTS: usize = 1_000;

#[derive(Clone, Copy)]
struct ClickLoad {
    /// Events to ingest in all.
    events: usize,
    /// Links they spread over (plus a few dynamic-link groups).
    links: usize,
    /// Whether each event carries its own id, as the worker's queue consumer sends them.
    event_ids: bool,
    /// Unique visitors (issue 26): 0, events over the last 29 days without visitor hashes; 1, today's events
    /// without; 2, today's events each with a visitor hash (a third of them a visitor's second or later click), the
    /// case a day of production traffic is. 1 and 2 side by side give the hashes' cost.
    visitors: u8,
}

/// xorshift64*: a fixed, dependency-free sequence, so every run ingests the same events.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % below
    }
}

/// An account with an API key and `links` links (`{prefix}0`, `{prefix}1`, …) in its default group; returns it,
/// its key and the id of its link `{prefix}0`.
async fn account_with_links(
    db: &Db,
    url: &str,
    domain_id: &str,
    email: &str,
    prefix: &str,
    links: usize,
) -> (shortlink_store::NewAccount, String, String) {
    let acc = db.create_account(email, true).await.unwrap();
    let key = db
        .generate_api_key(&acc.id, &Actor::Operator)
        .await
        .unwrap()
        .expose()
        .to_owned();
    fill(
        url,
        &acc.id,
        &acc.default_group_id,
        domain_id,
        prefix,
        links,
    )
    .await;
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let first: String =
        sqlx::query_scalar("SELECT id FROM links WHERE account_id = $1 AND short_code = $2")
            .bind(&acc.id)
            .bind(format!("{prefix}0"))
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    (acc, key, first)
}

/// `GET /api/v1/external/{path}` as `key`, 100 times after 20 for warm-up; one row with the p50 and p99.
async fn stats_latency(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    path: &str,
    row: (&str, String),
    rows: &mut Vec<Row>,
) {
    let mut samples = Vec::new();
    for i in 0..120 {
        let t = Instant::now();
        let resp = client
            .get(format!("{base}/api/v1/external/{path}"))
            .header("Authorization", format!("Token {key}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let _ = resp.bytes().await.unwrap();
        if i >= 20 {
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    rows.push(Row {
        engine: row.0.into(),
        what: row.1,
        value: format!(
            "p50 {} / p99 {}",
            ms(percentile(&samples, 0.5)),
            ms(percentile(&samples, 0.99))
        ),
    });
}

/// Click-report ingestion: `load.events` events in reports of 1,000, each with a batch id, 4 reports in flight
/// (the worker's consumers deliver concurrently), spread over `load.links` links (90%) and 4 dynamic-link groups
/// (10%), 20 countries, 4 devices and 50 referrer hosts (a third without), 6 browsers, 5 regions and 10 cities a
/// country, UTM parameters on half, 2 % bots, each report a short window of the last 29 days. Then the
/// statistics' latency over them.
#[allow(clippy::too_many_arguments)]
async fn bench_ingest(
    engine: &str,
    url: &str,
    db: &Db,
    domain_id: &str,
    base: &str,
    client: &reqwest::Client,
    load: ClickLoad,
    rows: &mut Vec<Row>,
) {
    let (acc, key, link_id) =
        account_with_links(db, url, domain_id, "clicks@example.com", "c", load.links).await;
    let mut groups = Vec::new();
    for i in 0..4 {
        let g = db
            .create_group(
                &acc.id,
                &format!("dynamic {i}"),
                &Default::default(),
                &Actor::Operator,
            )
            .await
            .unwrap();
        groups.push(g.id);
    }
    let countries = [
        "US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "NL", "ES", "IT", "PL", "SE", "MX", "AU",
        "KR", "TR", "ID", "NG", "ZA",
    ];
    let devices = ["mobile", "desktop", "tablet", "other"];
    // The new dimensions (issue 26): real User-Agents of six browsers, 5 regions and 10 cities per country, UTM
    // parameters on half the clicks, and 2 % bots.
    let agents = [
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
        "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
    ];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut seq = Sequence(0x9e37_79b9_7f4a_7c15);
    // As the worker reports them: each report holds the clicks of a short window, and the reports follow each
    // other through the last 29 days (all of it in the statistics' default range).
    let reports = load.events.div_ceil(REPORT_EVENTS);
    let span_ms = if load.visitors == 0 {
        29 * 86_400_000
    } else {
        // Since midnight (UTC): the day whose visitors are counted.
        (now_ms % 86_400_000).max(60_000)
    };
    let visitors = (load.events * 2 / 3).max(1);
    let window_ms = (span_ms / reports as i64).max(1);
    // Built before the clock starts: the client's JSON work is not the origin's.
    let bodies: Vec<String> = (0..reports)
        .map(|b| {
            let n = REPORT_EVENTS.min(load.events - b * REPORT_EVENTS);
            let start = now_ms - span_ms + b as i64 * window_ms;
            let events: Vec<serde_json::Value> = (0..n)
                .map(|_| {
                    let at = start + seq.next(window_ms as usize) as i64;
                    let referer = match seq.next(3) {
                        0 => None,
                        _ => Some(format!("site{}.example", seq.next(50))),
                    };
                    let (code, group) = match seq.next(10) {
                        0 => (None, groups[seq.next(groups.len())].clone()),
                        _ => (
                            Some(format!("c{}", seq.next(load.links))),
                            acc.default_group_id.clone(),
                        ),
                    };
                    let mut event = serde_json::json!({
                        "host": "sho.rt", "short_code": code, "group_id": group, "at": at,
                        "country": countries[seq.next(countries.len())],
                        "referer_host": referer, "device": devices[seq.next(devices.len())],
                    });
                    event["ua"] = agents[seq.next(agents.len())].into();
                    event["region"] = format!("Region {}", seq.next(5)).into();
                    event["city"] = format!("City {}", seq.next(10)).into();
                    if seq.next(2) == 0 {
                        event["utm_source"] = format!("source{}", seq.next(5)).into();
                        event["utm_medium"] = format!("medium{}", seq.next(3)).into();
                        event["utm_campaign"] = format!("campaign{}", seq.next(20)).into();
                    }
                    if seq.next(50) == 0 {
                        event["bot"] = true.into();
                    }
                    if load.event_ids {
                        event["id"] = uuid::Uuid::new_v4().simple().to_string().into();
                    }
                    if load.visitors == 2 {
                        event["visitor"] = format!("{:032x}", seq.next(visitors)).into();
                    }
                    event
                })
                .collect();
            serde_json::json!({"batch_id": uuid::Uuid::new_v4().to_string(), "events": events})
                .to_string()
        })
        .collect();
    let concurrency = env_usize("BENCH_IN_FLIGHT", 4).max(1);
    let (rate, p50, p99) = run_timed(bodies.len(), concurrency, 200, |i| {
        client
            .post(format!("{base}/internal/v1/clicks"))
            .bearer_auth(INTERNAL_SECRET)
            .header("content-type", "application/json")
            .body(bodies[i].clone())
    })
    .await;
    rows.push(Row {
        engine: engine.into(),
        what: format!(
            "click reports: {} events{} in reports of {REPORT_EVENTS}, {concurrency} in flight{}, over {} links and 4 groups",
            load.events,
            match (load.event_ids, load.visitors) {
                (false, 0) => "",
                (true, 0) => " with ids",
                (false, 1) => " (today)",
                (true, 1) => " with ids (today)",
                (false, _) => " with visitor hashes (today)",
                (true, _) => " with ids and visitor hashes (today)",
            },
            match std::env::var("BENCH_CLICK_WRITERS") {
                Ok(n) if engine == "postgres" => format!(" ({n} writers)"),
                _ => String::new(),
            },
            load.links
        ),
        value: format!(
            "{:.0} events/s (per report p50 {} / p99 {})",
            rate * load.events as f64 / bodies.len() as f64,
            ms(p50),
            ms(p99)
        ),
    });
    // The reports leave deltas that the origin folds into the day rows every second (store/src/digests/fold.rs):
    // ingestion only keeps up if folding does, so the time it takes to fold what is left counts too.
    let ingest_s = bodies.len() as f64 / rate;
    let left = db.pending_click_deltas().await.unwrap();
    let catching_up = Instant::now();
    while db.pending_click_deltas().await.unwrap() > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let catch_up_s = catching_up.elapsed().as_secs_f64();
    rows.push(Row {
        engine: engine.into(),
        what: "  the same, until every delta is folded into the day rows".to_owned(),
        value: format!(
            "{:.0} events/s ({left} deltas left at the end, folded {catch_up_s:.2} s later)",
            load.events as f64 / (ingest_s + catch_up_s)
        ),
    });
    // Every event was counted once.
    let stats = |path: String| {
        client
            .get(format!("{base}/api/v1/external/{path}"))
            .header("Authorization", format!("Token {key}"))
    };
    let body: serde_json::Value = stats("stats".into())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Every event counted once: as a click, or (the 2 % flagged) as a bot.
    let counted = body["total"].as_u64().unwrap() + body["bots"].as_u64().unwrap();
    assert_eq!(counted, load.events as u64, "{body}");
    assert!(body["bots"].as_u64().unwrap() > 0, "{body}");
    let uniques = body["unique_visitors"].as_u64().unwrap();
    if load.visitors == 2 {
        // At most one per visitor and link, and some visitors came back.
        assert!(
            uniques > 0 && uniques < body["total"].as_u64().unwrap(),
            "{body}"
        );
    } else {
        assert_eq!(uniques, 0, "{body}");
    }

    for (label, path) in [
        ("account stats, 30 days", "stats".to_owned()),
        (
            "group stats (links' group), 30 days",
            format!("groups/{}/stats", acc.default_group_id),
        ),
        ("link stats, 30 days", format!("links/{link_id}/stats")),
        ("account stats, 30 days, CSV", "stats?format=csv".to_owned()),
    ] {
        let row = (engine, format!("{label} after ingestion"));
        stats_latency(client, base, &key, &path, row, rows).await;
    }
}

/// This process's resident memory: now, and its peak since [`reset_peak_memory`] (KiB, from `/proc/self/status`).
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak resident memory (`VmHWM`) to the current (Linux: `5` into `/proc/self/clear_refs`).
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Raw click export (issue 26): one link with `events` raw events over the last 30 days, written straight into
/// `clicks` (one `INSERT … SELECT` over a recursive counter, both engines), then exported whole as NDJSON and as
/// CSV through the API, the body read as it streams. Events/s, and the process's peak memory over its memory
/// before (the origin runs in this process): a constant-memory export adds about one batch, whatever the count.
#[allow(clippy::too_many_arguments)]
async fn bench_click_export(
    engine: &str,
    url: &str,
    db: &Db,
    domain_id: &str,
    base: &str,
    client: &reqwest::Client,
    events: usize,
    rows: &mut Vec<Row>,
) {
    use shortlink_store::domain::Day;
    let (acc, key, link_id) =
        account_with_links(db, url, domain_id, "export@example.com", "x", 1).await;
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let today = Day::today();
    let first_us = today.plus(-29).0 * 86_400_000_000;
    // Spread evenly over the 30 days.
    let step_us = (30 * 86_400_000_000 / events.max(1) as i64).max(1);
    let filled = Instant::now();
    sqlx::query(
        "INSERT INTO clicks (account_id, link_id, group_id, at, country, region, city, device, browser, os, \
         referer_host, utm_source, utm_medium, utm_campaign) \
         WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < $4) \
         SELECT $1, $2, $3, $5 + g * $6, \
           CASE g % 4 WHEN 0 THEN 'US' WHEN 1 THEN 'DE' WHEN 2 THEN 'FR' ELSE NULL END, \
           CASE g % 3 WHEN 0 THEN 'Bavaria' ELSE NULL END, CASE g % 5 WHEN 0 THEN 'Munich' ELSE 'Berlin' END, \
           CASE g % 2 WHEN 0 THEN 'mobile' ELSE 'desktop' END, 'chrome', 'android', \
           CASE g % 3 WHEN 0 THEN 'news.example' ELSE NULL END, \
           CASE g % 2 WHEN 0 THEN 'newsletter' ELSE NULL END, 'email', 'fall sale' FROM s",
    )
    .bind(acc.id.as_str())
    .bind(link_id.as_str())
    .bind(acc.default_group_id.as_str())
    .bind(events as i64)
    .bind(first_us)
    .bind(step_us)
    .execute(&pool)
    .await
    .unwrap();
    if url.starts_with("postgres") {
        sqlx::query("ANALYZE clicks").execute(&pool).await.unwrap();
    }
    pool.close().await;
    eprintln!("{engine}: {events} raw events in {:?}", filled.elapsed());
    for format in ["ndjson", "csv"] {
        let (before, _) = memory_kib();
        reset_peak_memory();
        let started = Instant::now();
        let resp = client
            .get(format!(
                "{base}/api/v1/external/links/{link_id}/clicks?from={}&format={format}",
                today.plus(-29).to_iso_date()
            ))
            .header("Authorization", format!("Token {key}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut resp = resp;
        let (mut lines, mut bytes) = (0usize, 0usize);
        while let Some(chunk) = resp.chunk().await.unwrap() {
            bytes += chunk.len();
            lines += chunk.iter().filter(|b| **b == b'\n').count();
        }
        let elapsed = started.elapsed();
        let (_, peak) = memory_kib();
        let header = usize::from(format == "csv");
        assert_eq!(lines, events + header, "every event exported once");
        rows.push(Row {
            engine: engine.into(),
            what: format!("raw click export, {format}: one link, {events} events"),
            value: format!(
                "{:.0} events/s ({:.1} s, {:.0} MB); peak memory +{:.1} MiB over {:.0} MiB before",
                events as f64 / elapsed.as_secs_f64(),
                elapsed.as_secs_f64(),
                bytes as f64 / 1e6,
                peak.saturating_sub(before) as f64 / 1024.0,
                before as f64 / 1024.0
            ),
        });
    }
}

/// Statistics at scale: one link with `clicks` clicks spread over the last 365 days (about 27,000 a day at the
/// default 10,000,000), by 100 countries and unknown, 4 devices, 200 referrer hosts and none, 7 browsers and
/// systems, 300 regions, 1,000 cities and 21 values of each UTM parameter, skewed so a few
/// values take most clicks, as real traffic does. The day digests are generated directly (a row per day, 365 in
/// each of the link, group and account tables, each with the day's 1,670 values, as ingestion writes them for such
/// traffic), because the statistics read only these; ingesting 10,000,000 events first would measure ingestion
/// again, which the row above does. The first year read builds the 32-day block cache; the timed ones use it. Then the latency of the link's statistics over 30 days (the default) and the whole year,
/// and of the account's over the year.
#[allow(clippy::too_many_arguments)]
async fn bench_stats_at_scale(
    engine: &str,
    url: &str,
    db: &Db,
    domain_id: &str,
    base: &str,
    client: &reqwest::Client,
    clicks: usize,
    rows: &mut Vec<Row>,
) {
    use shortlink_store::domain::Day;
    let (acc, key, link_id) =
        account_with_links(db, url, domain_id, "stats@example.com", "s", 1).await;
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    // Zipf-like shares: value k gets a share proportional to 1 / (k + 1).
    fn split(total: i64, values: &[String]) -> Vec<(&str, i64)> {
        let weights: Vec<f64> = (0..values.len()).map(|k| 1.0 / (k as f64 + 1.0)).collect();
        let sum: f64 = weights.iter().sum();
        let mut counts: Vec<i64> = weights
            .iter()
            .map(|w| (total as f64 * w / sum).floor() as i64)
            .collect();
        counts[0] += total - counts.iter().sum::<i64>();
        values.iter().map(String::as_str).zip(counts).collect()
    }
    let mut countries: Vec<String> = (0..100)
        .map(|i| format!("{}{}", (b'A' + i / 26) as char, (b'A' + i % 26) as char))
        .collect();
    countries.push(String::new());
    let devices: Vec<String> = ["mobile", "desktop", "tablet", "other"]
        .map(String::from)
        .to_vec();
    let mut referrers: Vec<String> = vec![String::new()];
    referrers.extend((0..200).map(|i| format!("site{i}.example")));
    // The new dimensions (issue 26), as the digests key them: 7 browsers and systems, 3 regions and 10 cities in
    // each of the 100 countries (a place is its country, a TAB, its name), 20 values of each UTM parameter and
    // none.
    let browsers: Vec<String> = [
        "chrome", "safari", "edge", "firefox", "samsung", "opera", "other",
    ]
    .map(String::from)
    .to_vec();
    let systems: Vec<String> = [
        "android", "ios", "windows", "macos", "linux", "chromeos", "other",
    ]
    .map(String::from)
    .to_vec();
    let places = |n: usize, what: &str| -> Vec<String> {
        countries
            .iter()
            .flat_map(|c| (0..n).map(move |i| format!("{c}\t{what} {i}")))
            .collect()
    };
    let (regions, cities) = (places(3, "Region"), places(10, "City"));
    let utm = |name: &str| -> Vec<String> {
        let mut v = vec![String::new()];
        v.extend((0..20).map(|i| format!("{name}{i}")));
        v
    };
    let (sources, media, campaigns) = (utm("source"), utm("medium"), utm("campaign"));
    let today = Day::today();
    let first = today.plus(-364);
    // Each day's (dimension, value, clicks).
    let mut days: Vec<shortlink_store::SeedDay<'_>> = Vec::new();
    let per_day = clicks as i64 / 365;
    for d in 0..365 {
        let day = first.plus(d);
        let total = per_day + if d < clicks as i64 % 365 { 1 } else { 0 };
        let mut counts = Vec::new();
        for (dimension, values) in [
            ("country", &countries),
            ("device", &devices),
            ("referrer", &referrers),
            ("browser", &browsers),
            ("os", &systems),
            ("region", &regions),
            ("city", &cities),
            ("utm_source", &sources),
            ("utm_medium", &media),
            ("utm_campaign", &campaigns),
        ] {
            for (value, n) in split(total, values) {
                if n > 0 {
                    counts.push((dimension, value, n));
                }
            }
        }
        days.push((day.0, counts));
    }
    for scope in [
        SeedScope::Link {
            link_id: &link_id,
            group_id: &acc.default_group_id,
        },
        SeedScope::Group(&acc.default_group_id),
        SeedScope::Account(&acc.id),
    ] {
        db.seed_day_counts(scope, &days).await.unwrap();
    }
    if url.starts_with("postgres") {
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();
    }
    pool.close().await;

    let year = format!("from={}&to={}", first.to_iso_date(), today.to_iso_date());
    let stats = |path: &str| {
        client
            .get(format!("{base}/api/v1/external/{path}"))
            .header("Authorization", format!("Token {key}"))
    };
    let body: serde_json::Value = stats(&format!("links/{link_id}/stats?{year}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["total"].as_u64(),
        Some(clicks as u64),
        "every click counted once"
    );
    assert_eq!(body["by_day"].as_array().map(Vec::len), Some(365));
    for (label, path) in [
        (
            "link stats, last 30 days (default)",
            format!("links/{link_id}/stats"),
        ),
        (
            "link stats, the whole year",
            format!("links/{link_id}/stats?{year}"),
        ),
        (
            "link stats, the whole year, CSV",
            format!("links/{link_id}/stats?{year}&format=csv"),
        ),
        ("account stats, the whole year", format!("stats?{year}")),
    ] {
        let row = (
            engine,
            format!("{label}: one link with {clicks} clicks over 365 days"),
        );
        stats_latency(client, base, &key, &path, row, rows).await;
    }
}

/// The dashboard's pages for the account with `links` links: server time (p50/p99 over 200 requests after 20 of
/// warm-up, the client on the same machine) and the gzipped transfer size of each page.
async fn bench_dashboard(
    engine: &str,
    db: &Db,
    base: &str,
    account: &str,
    group: &str,
    links: usize,
    rows: &mut Vec<Row>,
) {
    let password =
        shortlink_store::domain::Password::new("bench-password", "bench-password").unwrap();
    // The account's owner user, made by setting the password of the account's email.
    db.set_password("big@example.com", &password).await.unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = client
        .post(format!("{base}/dashboard/sign-in"))
        .form(&[("email", "big@example.com"), ("password", "bench-password")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let a_link = db.list_links(account, 1, 0, None).await.unwrap().results[0]
        .id
        .clone();
    let last_page = links.div_ceil(20).max(1) / 2;
    let pages = [
        (
            "links page: first page, total included".to_owned(),
            "/dashboard/".to_owned(),
        ),
        (
            format!("links page: page {last_page}"),
            format!("/dashboard/?page={last_page}"),
        ),
        (
            "group page".to_owned(),
            format!("/dashboard/groups/{group}"),
        ),
        (
            "link page (QR, 30-day chart, tables)".to_owned(),
            format!("/dashboard/links/{a_link}"),
        ),
    ];
    for (label, path) in pages {
        let url = format!("{base}{path}");
        let mut samples = Vec::new();
        let mut gzipped = 0;
        for i in 0..220 {
            let t = Instant::now();
            let resp = client
                .get(&url)
                .header("cookie", &cookie)
                .header("accept-encoding", "gzip")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            gzipped = resp.bytes().await.unwrap().len();
            if i >= 20 {
                samples.push(t.elapsed());
            }
        }
        samples.sort();
        rows.push(Row {
            engine: engine.into(),
            what: format!("dashboard {label}, {links} links"),
            value: format!(
                "p50 {} / p99 {}, {:.1} KB gzipped",
                ms(percentile(&samples, 0.5)),
                ms(percentile(&samples, 0.99)),
                gzipped as f64 / 1024.0
            ),
        });
    }
}

fn main() {
    let links = env_usize("BENCH_LINKS", 1_000_000);
    let creates = env_usize("BENCH_CREATES", 10_000);
    let edits = env_usize("BENCH_EDITS", 5_000);
    let clicks = ClickLoad {
        events: env_usize("BENCH_CLICK_EVENTS", 200_000),
        links: env_usize("BENCH_CLICK_LINKS", 1_000).max(1),
        event_ids: env_usize("BENCH_EVENT_IDS", 0) == 1,
        visitors: u8::try_from(env_usize("BENCH_VISITORS", 0).min(2)).unwrap_or(0),
    };
    let stats_clicks = env_usize("BENCH_STATS_CLICKS", 10_000_000);
    let export_events = env_usize("BENCH_EXPORT_EVENTS", 1_000_000);
    let engines = std::env::var("BENCH_ENGINES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for engine in engines.split(',') {
        rt.block_on(bench_engine(
            engine.trim(),
            links,
            creates,
            edits,
            clicks,
            stats_clicks,
            export_events,
            &mut rows,
        ));
    }
    println!("| engine | measurement | result |\n|---|---|---|");
    for r in rows {
        println!("| {} | {} | {} |", r.engine, r.what, r.value);
    }
}
