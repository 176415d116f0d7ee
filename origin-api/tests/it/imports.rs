//! Link imports (issue 24), on both engines: an export imported into another account gives the same links (codes,
//! destinations, titles, tags, groups, states); Bitly's and Shlink's CSV files; each row's problems by line, codes
//! made up where taken; the daily budget, exact; the file's refusals (415, 413, 400), isolation (404), and a job
//! left by a dead runner taken over and finished without a row created twice.

use crate::common::{Account, Engine, TestApp, TestDb, assert_error};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::Actor;
use std::time::{Duration, Instant};

const LINKS: &str = "/api/v1/external/links";
const IMPORT: &str = "/api/v1/external/links/import";

async fn post_csv(
    app: &TestApp,
    key: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(IMPORT))
        .header("Authorization", format!("Token {key}"))
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Queues `csv` and waits until the import ends; returns its final status.
async fn import(app: &TestApp, acc: &Account, csv: &str) -> Value {
    let (s, b) = post_csv(app, &acc.key, "text/csv; charset=utf-8", csv.to_owned()).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(b["status"], "queued");
    wait_done(app, acc, b["id"].as_str().unwrap()).await
}

async fn wait_done(app: &TestApp, acc: &Account, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, b) = app
            .send(
                Method::GET,
                &acc.key,
                &format!("{LINKS}/imports/{id}"),
                None,
            )
            .await;
        assert_eq!(s, 200, "{b}");
        if b["status"] == "done" || b["status"] == "failed" {
            return b;
        }
        assert!(Instant::now() < deadline, "the import did not end: {b}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn export(app: &TestApp, acc: &Account) -> Vec<std::collections::HashMap<String, String>> {
    crate::export::csv_rows(app, acc, "sort=short_code").await
}

/// Export → delete → import into another account: the same links, tags, titles, groups (by name) and states.
async fn round_trip(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let (a, b) = (app.account(true).await, app.account(true).await);
    let spring = app.group(&a, "Spring").await;
    for body in [
        json!({"long_url": "https://example.com/one", "short_code": "rt-one", "title": "=One, \"quoted\"",
               "tags": ["promo", "Mail"], "group_id": spring, "expires_at": "2031-01-01T00:00:00Z",
               "forward_query": false}),
        json!({"long_url": "https://example.com/two?x=1", "short_code": "rt-two"}),
        json!({"long_url": "https://example.com/three", "short_code": "rt-three", "tags": ["promo"]}),
    ] {
        let (s, l) = app.create_json(&a.key, body).await;
        assert_eq!(s, 201, "{l}");
        if l["short_code"] == "rt-three" {
            let (s, _) = app
                .send(
                    Method::PATCH,
                    &a.key,
                    &format!("{LINKS}/{}", l["id"].as_str().unwrap()),
                    Some(json!({"is_active": false})),
                )
                .await;
            assert_eq!(s, 200);
        }
    }
    let before = export(&app, &a).await;
    let file = app
        .get(&a.key, &format!("{LINKS}/export"))
        .await
        .text()
        .await
        .unwrap();
    // The codes must be free for the new account to keep them.
    for row in &before {
        let (s, _) = app
            .send(
                Method::DELETE,
                &a.key,
                &format!("{LINKS}/{}", row["id"]),
                None,
            )
            .await;
        assert_eq!(s, 204);
    }
    let done = import(&app, &b, &file).await;
    assert_eq!(
        (
            &done["status"],
            &done["total"],
            &done["processed"],
            &done["created"],
            &done["failed"]
        ),
        (&json!("done"), &json!(3), &json!(3), &json!(3), &json!(0)),
        "{done}"
    );
    assert_eq!(done["errors"], json!([]));
    let after = export(&app, &b).await;
    let same = |r: &std::collections::HashMap<String, String>| {
        [
            "short_code",
            "domain",
            "long_url",
            "title",
            "tags",
            "group_name",
            "is_active",
            "expires_at",
            "forward_query",
        ]
        .map(|k| r[k].clone())
    };
    assert_eq!(
        after.iter().map(same).collect::<Vec<_>>(),
        before.iter().map(same).collect::<Vec<_>>()
    );
    assert!(
        after.iter().all(|r| r["group_id"] != spring),
        "B's own group of that name"
    );
    // Imported again into B, whose links now hold the codes: made up and reported, all created.
    let again = import(&app, &b, &file).await;
    assert_eq!(
        (&again["created"], &again["failed"]),
        (&json!(3), &json!(0)),
        "{again}"
    );
    let codes: Vec<&str> = again["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["error_code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["short_code_exists"; 3], "{again}");
    assert_eq!(
        again["errors"][0]["row"], 2,
        "the first row below the header is row 2"
    );
    // Every imported link reached the outbox, as a created one does.
    let (_, listed) = app
        .send(Method::GET, &b.key, &format!("{LINKS}?limit=100"), None)
        .await;
    assert_eq!(listed["total"], 6);
    // Imported links have their click totals (migration 0018's trigger): sort=clicks, read from the totals' index,
    // lists every one of them.
    let (_, by_clicks) = app
        .send(
            Method::GET,
            &b.key,
            &format!("{LINKS}?limit=100&sort=clicks"),
            None,
        )
        .await;
    assert_eq!(
        by_clicks["results"].as_array().map(Vec::len),
        Some(6),
        "{by_clicks}"
    );
    app.stop().await;
}

/// Bitly's and Shlink's files as they come, and each row's problems by line.
async fn foreign_formats_and_row_problems(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let bitly = "long_url,link,title,tags,created_at,clicks\r\n\
                 https://example.com/b1,https://bit.ly/Bit1,First,\"alpha, beta\",2020-01-01,4\r\n\
                 https://example.com/b2,https://bit.ly/x,Too short a code,,2020-01-01,0\r\n";
    let done = import(&app, &acc, bitly).await;
    assert_eq!(
        (&done["created"], &done["failed"]),
        (&json!(2), &json!(0)),
        "{done}"
    );
    assert_eq!(done["errors"][0]["row"], 3);
    assert_eq!(done["errors"][0]["error_code"], "invalid_short_code");
    let rows = export(&app, &acc).await;
    let bit1 = rows
        .iter()
        .find(|r| r["short_code"] == "bit1")
        .expect("Bitly's code kept, lowercase");
    assert_eq!(
        (bit1["title"].as_str(), bit1["tags"].as_str()),
        ("First", "alpha|beta")
    );

    let shlink = "Short Code,Short URL,Long URL,Title,Tags,Date created,Visits count\n\
                  shl-1,https://s.test/shl-1,https://example.com/s1,Shlink one,news,2021-02-03,9\n";
    let done = import(&app, &acc, shlink).await;
    assert_eq!(done["created"], 1, "{done}");
    assert!(
        export(&app, &acc)
            .await
            .iter()
            .any(|r| r["short_code"] == "shl-1" && r["tags"] == "news")
    );

    let group_named = "long_url,group,domain,expires_at,is_active\n\
                       https://example.com/g1,Newsletter,,,false\n\
                       http://example.com/insecure,,,,\n\
                       https://example.com/d,,unknown.example,,\n\
                       https://example.com/e,,,2001-01-01T00:00:00Z,\n\
                       ,,,,\n\
                       https://example.com/g2,Newsletter,SHO.RT,,\n";
    let done = import(&app, &acc, group_named).await;
    assert_eq!(
        (&done["created"], &done["failed"]),
        (&json!(2), &json!(4)),
        "{done}"
    );
    let lines: Vec<i64> = done["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["row"].as_i64().unwrap())
        .collect();
    assert_eq!(lines, [3, 4, 5, 6]);
    assert!(
        done["errors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["error_code"] == "validation_error"),
        "{done}"
    );
    let rows = export(&app, &acc).await;
    let g: Vec<_> = rows
        .iter()
        .filter(|r| r["group_name"] == "Newsletter")
        .collect();
    assert_eq!(g.len(), 2, "one group made for both rows");
    assert_eq!(g[0]["group_id"], g[1]["group_id"]);
    assert!(g.iter().any(|r| r["is_active"] == "false"));
    app.stop().await;
}

/// The file's refusals, the budget of the day (exact), the open-jobs bound and isolation.
async fn refusals_budget_and_isolation(engine: Engine) {
    let app =
        TestApp::with_settings(TestDb::new(engine).await, |s| s.import_limit_per_day = 5).await;
    app.platform_domain("sho.rt").await;
    let (acc, other) = (app.account(true).await, app.account(true).await);
    let (s, b) = post_csv(
        &app,
        &acc.key,
        "application/json",
        "long_url\nhttps://a.example/\n",
    )
    .await;
    assert_error(s, &b, 415, "unsupported_media_type");
    let (s, b) = post_csv(&app, &acc.key, "text/csv", vec![b'x'; 20 * 1024 * 1024 + 1]).await;
    assert_error(s, &b, 413, "payload_too_large");
    for bad in ["", "url,title\nx,y\n", "long_url\n", "title,long_url\n"] {
        let (s, b) = post_csv(&app, &acc.key, "text/csv", bad.to_owned()).await;
        assert_error(s, &b, 400, "validation_error");
    }
    let (s, b) = post_csv(&app, &acc.key, "text/csv", vec![0xff, 0xfe, b'\n']).await;
    assert_error(s, &b, 400, "validation_error");
    let resp = app
        .client
        .post(app.url(IMPORT))
        .header("Content-Type", "text/csv")
        .body("long_url\n")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // Two imports of 4 rows with a budget of 5: 5 created in all, 3 refused with import_limit.
    let file = |p: &str| {
        format!(
            "long_url\n{}",
            (0..4)
                .map(|i| format!("https://example.com/{p}{i}\n"))
                .collect::<String>()
        )
    };
    let first = import(&app, &acc, &file("a")).await;
    let second = import(&app, &acc, &file("b")).await;
    assert_eq!(first["created"], 4, "{first}");
    assert_eq!(
        (&second["created"], &second["failed"]),
        (&json!(1), &json!(3)),
        "{second}"
    );
    assert!(
        second["errors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["error_code"] == "import_limit")
    );
    // Spent: the next file is refused at once, as create-link's limit is, with its headers.
    let resp = app
        .client
        .post(app.url(IMPORT))
        .header("Authorization", format!("Token {}", acc.key))
        .header("Content-Type", "text/csv")
        .body(file("c"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!(resp.headers()["x-ratelimit-limit"], "5");
    // Another account has its own budget, and cannot read this account's imports.
    let theirs = import(&app, &other, &file("d")).await;
    assert_eq!(theirs["created"], 4);
    let (s, b) = app
        .send(
            Method::GET,
            &other.key,
            &format!("{LINKS}/imports/{}", first["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_error(s, &b, 404, "not_found");
    for id in ["nope", "00000000-0000-0000-0000-000000000000"] {
        let (s, b) = app
            .send(
                Method::GET,
                &acc.key,
                &format!("{LINKS}/imports/{id}"),
                None,
            )
            .await;
        assert_error(s, &b, 404, "not_found");
    }
    app.stop().await;
}

/// A job whose runner died mid-way (its lease run out, some chunks committed) is taken by another runner, which
/// starts at the committed rows: every row created once.
async fn a_dead_runners_job_is_finished_once(engine: Engine) {
    // The server runs no import of its own here: the test plays both runners.
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| s.import_runner = false).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let db = &app.db;
    let rows = 4_000;
    let file = format!(
        "long_url,short_code\n{}",
        (0..rows)
            .map(|i| format!("https://example.com/{i},dead-{i}\n"))
            .collect::<String>()
    );
    let queued = db
        .queue_import(&acc.id, &Actor::ApiKey, file, 50_000)
        .await
        .unwrap();
    // The first runner commits some chunks, then "dies": its future is dropped mid-way (mid-chunk, likely: that
    // transaction is rolled back).
    let progressed = async {
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if db
                .import_status(&acc.id, &queued.id)
                .await
                .unwrap()
                .processed
                > 0
            {
                return;
            }
        }
    };
    tokio::select! {
        r = db.run_next_import("first", 50_000) => panic!("the first runner finished before it was stopped: {r:?}"),
        () = progressed => {}
    }
    let mid = db.import_status(&acc.id, &queued.id).await.unwrap();
    assert_eq!(mid.status, "running", "{mid:?}");
    // Another runner waits for the lease to run out (15 s), then finishes.
    let deadline = Instant::now() + Duration::from_secs(40);
    while !db.run_next_import("second", 50_000).await.unwrap() {
        assert!(Instant::now() < deadline, "the job was never taken over");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let done = db.import_status(&acc.id, &queued.id).await.unwrap();
    assert_eq!(
        (
            done.status.as_str(),
            done.processed,
            done.created,
            done.failed
        ),
        ("done", rows, rows, 0),
        "{done:?}"
    );
    assert!(
        done.errors.is_empty(),
        "no code was taken by an earlier try: {:?}",
        done.errors
    );
    let (_, listed) = app
        .send(
            Method::GET,
            &acc.key,
            &format!("{LINKS}?limit=1&long_url=https%3A%2F%2Fexample.com%2F&match=startswith"),
            None,
        )
        .await;
    assert_eq!(listed["total"], rows, "each row created once");
    assert!(
        mid.processed < rows,
        "the first runner was stopped mid-way: {mid:?}"
    );
    app.stop().await;
}

/// Codes asked for twice (in one chunk of rows and across chunks) and the cap on reported problems: the first
/// asker keeps the code, every later one gets a made-up code and a `short_code_exists` problem; past 1,000 problems
/// rows still fail and count, unreported.
async fn repeated_codes_and_the_problem_cap(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let mut file = String::from("long_url,short_code,tags\n");
    file.push_str("https://example.com/a,twice,x|Y\n");
    file.push_str("https://example.com/b,TWICE,y\n");
    for i in 0..1_100 {
        file.push_str(&format!("http://insecure.example/{i},,\n"));
    }
    // Row 1,104, in a later chunk than row 2.
    file.push_str("https://example.com/c,twice,\n");
    let done = import(&app, &acc, &file).await;
    assert_eq!(
        (&done["total"], &done["created"], &done["failed"]),
        (&json!(1_103), &json!(3), &json!(1_100)),
    );
    let errors = done["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1_000, "the first 1,000 problems are kept");
    assert_eq!(
        (&errors[0]["row"], &errors[0]["error_code"]),
        (&json!(3), &json!("short_code_exists"))
    );
    assert_eq!(errors[1]["row"], 4);
    assert_eq!(errors[999]["row"], 1_002);
    let rows = export(&app, &acc).await;
    let code_of = |url: &str| {
        rows.iter()
            .find(|r| r["long_url"] == url)
            .map(|r| (r["short_code"].clone(), r["tags"].clone()))
            .unwrap()
    };
    assert_eq!(
        code_of("https://example.com/a"),
        ("twice".into(), "x|Y".into())
    );
    let (b, b_tags) = code_of("https://example.com/b");
    let (c, _) = code_of("https://example.com/c");
    assert!(b != "twice" && c != "twice" && b != c, "{b} {c}");
    assert_eq!(
        b_tags, "Y",
        "the tag keeps the first spelling the file used"
    );
    app.stop().await;
}

both_engines!(
    repeated_codes_and_the_problem_cap,
    round_trip,
    foreign_formats_and_row_problems,
    refusals_budget_and_isolation,
    a_dead_runners_job_is_finished_once,
);
