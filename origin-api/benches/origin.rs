//! Origin benchmark: create-link throughput and list-links latency over real HTTP, on SQLite
//! and PostgreSQL, with one account holding 1,000,000 links. Prints a Markdown table.
//!
//! `cargo bench -p origin-api --bench origin` (env: `BENCH_LINKS`, default 1000000;
//! `BENCH_CREATES`, default 10000; `TEST_POSTGRES_URL`; `BENCH_ENGINES=sqlite,postgres`).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use origin_api::startup::{Application, Settings};
use shortlink_store::domain::Hostname;
use shortlink_store::{Db, DomainOwner};
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
async fn fill(db_url: &str, account: &str, group: &str, domain: &str, n: usize) {
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
                    .bind(format!("f{j}"))
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

async fn bench_engine(engine: &str, links: usize, creates: usize, rows: &mut Vec<Row>) {
    sqlx::any::install_default_drivers();
    let fresh = fresh_db(engine).await;
    let db = Db::connect(&fresh.url, 4).await.unwrap();
    db.migrate().await.unwrap();
    let domain = db
        .add_domain(
            &Hostname::parse("sho.rt").unwrap(),
            &DomainOwner::Platform,
            None,
        )
        .await
        .unwrap();
    let app = Application::build(&Settings::new(fresh.url.clone()))
        .await
        .unwrap();
    let base = format!("http://{}", app.addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();

    // create-link throughput: many keys so the 100/hour limit never binds.
    let keys_needed = creates.div_ceil(100);
    let mut keys = Vec::with_capacity(keys_needed);
    for i in 0..keys_needed {
        let acc = db
            .create_account(&format!("bench{i}@example.com"), true)
            .await
            .unwrap();
        keys.push(
            db.generate_api_key(&acc.id)
                .await
                .unwrap()
                .expose()
                .to_owned(),
        );
    }
    let concurrency = 32;
    let started = Instant::now();
    let statuses: Vec<u16> = futures::stream::iter(0..creates)
        .map(|i| {
            let client = client.clone();
            let url = format!("{base}/api/v1/external/links/create-link");
            let key = keys[i % keys.len()].clone();
            async move {
                client
                    .post(url)
                    .header("Authorization", format!("Token {key}"))
                    .json(&serde_json::json!({"long_url": format!("https://example.org/{i}")}))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let ok = statuses.iter().filter(|s| **s == 201).count();
    assert_eq!(ok, creates, "all creations succeed");
    rows.push(Row {
        engine: engine.into(),
        what: format!(
            "create-link, {creates} requests, {concurrency} in flight, {keys_needed} keys"
        ),
        value: format!("{:.0} creations/s", creates as f64 / elapsed.as_secs_f64()),
    });

    // list latency on an account with `links` links.
    let acc = db.create_account("big@example.com", true).await.unwrap();
    let key = db
        .generate_api_key(&acc.id)
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
    let _ = stop.send(());
    let _ = server.await;
    db.close().await;
    drop_db(&fresh).await;
}

fn main() {
    let links = env_usize("BENCH_LINKS", 1_000_000);
    let creates = env_usize("BENCH_CREATES", 10_000);
    let engines = std::env::var("BENCH_ENGINES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for engine in engines.split(',') {
        rt.block_on(bench_engine(engine.trim(), links, creates, &mut rows));
    }
    println!("| engine | measurement | result |\n|---|---|---|");
    for r in rows {
        println!("| {} | {} | {} |", r.engine, r.what, r.value);
    }
}
