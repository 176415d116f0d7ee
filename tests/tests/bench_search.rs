//! Measurements of search, filters, export and import at scale (not a test: `#[ignore]`, run by
//! `scripts/bench-search.sh`), issue 24's "Speed": the real origin as a process (a release build unless the script
//! is told otherwise) on SQLite and PostgreSQL, one account of 1,000,000 links seeded with one SQL statement each
//! (the API's creation limit cannot make that many):
//!
//! - every link's destination is `https://example.com/page/N`; one in 1,000 (N divisible by 1,000) also holds the
//!   word `needle` (`…/needle/N`): `q=needle` matches 0.1 %;
//! - one in 100 carries the tag `hot` (1 %);
//! - clicks of all time spread over 0 … 9,999 (`N * 7919 mod 10,000`).
//!
//! Then, interleaved over 30 rounds: `q=needle` (first page with its `total`), `tag=hot`, `sort=clicks`, each
//! request timed as the client sees it; the export of all 1,000,000 links (rows/s); an import of 100,000 rows into
//! another account (rows/s from queued to done) while create-link is timed in the first, about 10 a second (its
//! p50 / p99; at most 100, its hourly limit).
//!
//! `SEARCH_BENCH_ENGINES=sqlite` (or `postgres`) runs one engine only; `SEARCH_BENCH_LINKS` changes the size.

use e2e::origin::{Account, Database, Engine, HOST, Origin, OriginOptions};
use std::time::{Duration, Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The seed: `n` links, the `needle` destinations, the `hot` tag and the click totals.
fn seed(db: &Database, account: &Account, n: u64) {
    let domain = db.query(&format!("SELECT id FROM domains WHERE host = '{HOST}'"));
    let (acc, group, domain) = (&account.id, &account.default_group_id, domain.trim());
    let tag_id = "00000000-0000-4000-9000-000000000001";
    let sql = match db.engine() {
        Engine::Sqlite => format!(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}), \
                  n(i, url) AS (SELECT i, CASE WHEN i % 1000 = 0 THEN printf('https://example.com/needle/%d', i) \
                                              ELSE printf('https://example.com/page/%d', i) END FROM s) \
             INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at, search_text) \
             SELECT printf('00000000-0000-4000-8000-%012d', i), '{acc}', '{group}', '{domain}', printf('b%07d', i), \
                    url, 1700000000000000 + i, printf('b%07d', i) || char(10) || url || char(10) \
             FROM n; \
             UPDATE link_click_totals SET clicks = (CAST(substr(link_id, 25) AS INTEGER) * 7919) % 10000 \
             WHERE account_id = '{acc}'; \
             UPDATE accounts SET link_count = link_count + {n} WHERE id = '{acc}'; \
             INSERT INTO tags (id, account_id, name, name_key, created_at) VALUES ('{tag_id}', '{acc}', 'hot', 'hot', 0); \
             INSERT INTO link_tags (link_id, tag_id) SELECT id, '{tag_id}' FROM links \
             WHERE account_id = '{acc}' AND CAST(substr(short_code, 2) AS INTEGER) % 100 = 0; \
             ANALYZE;"
        ),
        Engine::Postgres => format!(
            "INSERT INTO links (id, account_id, group_id, domain_id, short_code, long_url, created_at, search_text) \
             SELECT '00000000-0000-4000-8000-' || lpad(i::text, 12, '0'), '{acc}', '{group}', '{domain}', \
                    'b' || lpad(i::text, 7, '0'), u, 1700000000000000 + i, \
                    'b' || lpad(i::text, 7, '0') || E'\\n' || u || E'\\n' \
             FROM (SELECT i, CASE WHEN i % 1000 = 0 THEN 'https://example.com/needle/' || i \
                                  ELSE 'https://example.com/page/' || i END AS u \
                   FROM generate_series(1, {n}) AS i) s; \
             UPDATE link_click_totals SET clicks = (substr(link_id, 25)::bigint * 7919) % 10000 \
             WHERE account_id = '{acc}'; \
             UPDATE accounts SET link_count = link_count + {n} WHERE id = '{acc}'; \
             INSERT INTO tags (id, account_id, name, name_key, created_at) VALUES ('{tag_id}', '{acc}', 'hot', 'hot', 0); \
             INSERT INTO link_tags (link_id, tag_id) SELECT id, '{tag_id}' FROM links \
             WHERE account_id = '{acc}' AND substr(short_code, 2)::int % 100 = 0; \
             ANALYZE;"
        ),
    };
    db.query(&sql);
}

async fn timed_get(client: &reqwest::Client, url: &str, key: &str) -> (f64, serde_json::Value) {
    let started = Instant::now();
    let resp = client
        .get(url)
        .header("Authorization", format!("Token {key}"))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200, "{url}");
    let body: serde_json::Value = resp.json().await.expect("JSON");
    (started.elapsed().as_secs_f64() * 1000.0, body)
}

async fn engine_run(engine: Engine, links: u64) -> Vec<(String, String)> {
    let db = Database::on(engine);
    let account = db.account("bench@example.com");
    let seeded = Instant::now();
    seed(&db, &account, links);
    eprintln!(
        "{engine:?}: seeded {links} links in {:.0} s",
        seeded.elapsed().as_secs_f64()
    );
    let origin = Origin::start(
        &db,
        OriginOptions {
            args: vec![
                "--write-limit-per-minute".into(),
                "1000000".into(),
                // The 100,000 rows in one day: over the default budget of 50,000.
                "--import-limit-per-day".into(),
                "1000000".into(),
            ],
            ..OriginOptions::default()
        },
    )
    .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("client");
    let base = format!("{}/api/v1/external/links", origin.url);
    let queries = [
        ("q=needle (0.1 %), first page with total", "q=needle"),
        ("tag=hot (1 %)", "tag=hot"),
        ("sort=clicks", "sort=clicks"),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    // Warm-up, then 30 interleaved rounds.
    for (_, q) in &queries {
        let (_, body) = timed_get(&client, &format!("{base}?{q}"), &account.api_key).await;
        eprintln!("{engine:?}: {q}: total {}", body["total"]);
    }
    for _ in 0..30 {
        for (i, (_, q)) in queries.iter().enumerate() {
            times[i].push(
                timed_get(&client, &format!("{base}?{q}"), &account.api_key)
                    .await
                    .0,
            );
        }
    }
    let mut rows = Vec::new();
    for (i, (label, _)) in queries.iter().enumerate() {
        let mut t = times[i].clone();
        t.sort_by(f64::total_cmp);
        rows.push((
            format!("{label}: p50 / p99 (30)"),
            format!(
                "{:.1} / {:.1} ms",
                percentile(&t, 50.0),
                percentile(&t, 99.0)
            ),
        ));
    }
    // Export of everything.
    let started = Instant::now();
    let mut resp = client
        .get(format!("{base}/export"))
        .header("Authorization", format!("Token {}", account.api_key))
        .send()
        .await
        .expect("export");
    let mut lines = 0u64;
    while let Some(chunk) = resp.chunk().await.expect("export body") {
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let took = started.elapsed().as_secs_f64();
    assert_eq!(lines, links + 1);
    rows.push((
        format!("export of {links} links (CSV)"),
        format!("{:.1} s, {:.0} rows/s", took, links as f64 / took),
    ));
    // Import of 100,000 rows into a second account while create-link is timed in the first.
    let importer = db.account("importer@example.com");
    let import_rows = 100_000u64;
    let mut file = String::from("long_url,title,tags\n");
    for i in 0..import_rows {
        file.push_str(&format!(
            "https://import.example/{i},Imported {i},bulk|x{}\n",
            i % 10
        ));
    }
    let started = Instant::now();
    let queued: serde_json::Value = client
        .post(format!("{base}/import"))
        .header("Authorization", format!("Token {}", importer.api_key))
        .header("Content-Type", "text/csv")
        .body(file)
        .send()
        .await
        .expect("import")
        .json()
        .await
        .expect("JSON");
    let id = queued["id"].as_str().expect("an import id").to_owned();
    let mut creates = Vec::new();
    let mut n = 0;
    let done = loop {
        // 10 creations a second, at most 100 (create-link's hourly limit per key).
        if n < 100 {
            let started = Instant::now();
            let resp = client
                .post(format!("{base}/create-link"))
                .header("Authorization", format!("Token {}", account.api_key))
                .json(&serde_json::json!({"long_url": format!("https://during.example/{n}")}))
                .send()
                .await
                .expect("create");
            assert_eq!(resp.status(), 201);
            creates.push(started.elapsed().as_secs_f64() * 1000.0);
            n += 1;
        }
        let (_, status) =
            timed_get(&client, &format!("{base}/imports/{id}"), &importer.api_key).await;
        if status["status"] == "done" || status["status"] == "failed" {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = started.elapsed().as_secs_f64();
    assert_eq!(
        done["created"], import_rows,
        "created {} failed {}",
        done["created"], done["failed"]
    );
    creates.sort_by(f64::total_cmp);
    rows.push((
        format!("import of {import_rows} rows"),
        format!("{:.1} s, {:.0} rows/s", took, import_rows as f64 / took),
    ));
    rows.push((
        format!(
            "create-link during the import: p50 / p99 ({})",
            creates.len()
        ),
        format!(
            "{:.1} / {:.1} ms",
            percentile(&creates, 50.0),
            percentile(&creates, 99.0)
        ),
    ));
    rows.push(("load average after".into(), loadavg()));
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: scripts/bench-search.sh"]
async fn bench_search() {
    let links: u64 = std::env::var("SEARCH_BENCH_LINKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let engines: Vec<Engine> = match std::env::var("SEARCH_BENCH_ENGINES").as_deref() {
        Ok("sqlite") => vec![Engine::Sqlite],
        Ok("postgres") => vec![Engine::Postgres],
        _ => vec![Engine::Sqlite, Engine::Postgres],
    };
    eprintln!("load average at the start: {}", loadavg());
    let mut columns = Vec::new();
    for engine in &engines {
        let rows = engine_run(*engine, links).await;
        // Each engine's figures as soon as they are in (a later failure keeps them).
        for (label, value) in &rows {
            eprintln!("{engine:?}: {label}: {value}");
        }
        columns.push((format!("{engine:?}"), rows));
    }
    println!();
    println!(
        "| measurement | {} |",
        columns
            .iter()
            .map(|(e, _)| e.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(columns.len()));
    for (i, (label, _)) in columns[0].1.iter().enumerate() {
        let cells: Vec<&str> = columns.iter().map(|(_, rows)| rows[i].1.as_str()).collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
}
