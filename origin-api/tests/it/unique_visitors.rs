//! Unique visitors of issue 26 on both engines: the origin's part. A visitor hash (which the worker makes from the
//! day's salt, the link, the address and the User-Agent: tested in the worker and end to end in workerd) counts
//! once per link per UTC day, in `unique_visitors` and `by_day[].unique_visitors` of the link, group and account
//! statistics (a group's and an account's are the sum of their links'), JSON and CSV, and as the raw export's
//! `unique`; the day salts rotate at 02:00 UTC, out of the database and, through the outbox, out of KV.

use crate::click_dimensions::{CHROME_ANDROID, DAY_MS, app, click, link, report};
use crate::click_export::ndjson;
use crate::common::{Account, Engine, TestApp};
use crate::publisher::{Shared, app_publishing_to_kv_api, wait_until};
use kv_model::{SaltRecord, salt_key};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_store::domain::{Day, Micros};

const V1: &str = "00000000000000000000000000000001";
const V2: &str = "00000000000000000000000000000002";

fn iso(day: i64) -> String {
    Day(day).to_iso_date()
}

async fn stats(app: &TestApp, key: &str, path: &str, from: i64, to: i64) -> Value {
    let (s, body) = app
        .send(
            Method::GET,
            key,
            &format!("/api/v1/external/{path}?from={}&to={}", iso(from), iso(to)),
            None,
        )
        .await;
    assert_eq!(s, 200, "{path}: {body}");
    body
}

/// A click at noon of `day` on `code` (None: a dynamic link of `group`) by visitor `v` (None: no hash).
fn visit(code: Option<&str>, group: &str, day: i64, v: Option<&str>) -> Value {
    click(
        code,
        group,
        day * DAY_MS + DAY_MS / 2,
        CHROME_ANDROID,
        json!({ "visitor": v }),
    )
}

async fn a_visitor_counts_once_per_link_and_day(engine: Engine) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let g = acc.default_group_id.clone();
    let a = link(&app, &acc, "aaa").await;
    let b = link(&app, &acc, "bbb").await;
    // Today and tomorrow: the days whose hashes are kept whatever the hour the test runs at.
    let today = Day::today().0;
    let tomorrow = today + 1;
    // One report: V1 twice on A (one unique), V2 on A, V1 on B (a unique of B's), a click without a hash, and a
    // hash that is not one (ignored).
    let (s, body) = report(
        &app,
        vec![
            visit(Some("aaa"), &g, today, Some(V1)),
            visit(Some("aaa"), &g, today, Some(V1)),
            visit(Some("aaa"), &g, today, Some(V2)),
            visit(Some("bbb"), &g, today, Some(V1)),
            visit(Some("aaa"), &g, today, None),
            visit(
                Some("aaa"),
                &g,
                today,
                Some(&V1.to_uppercase().replace('0', "A")),
            ),
        ],
    )
    .await;
    assert_eq!((s, body), (200, json!({"stored": 6})));
    // Another report: V1 again on A today (not new), V1 on A tomorrow (new again), a dynamic link's visitor
    // twice, and a day whose hashes are gone (three days ago: its clicks count, its visitors cannot).
    let (s, _) = report(
        &app,
        vec![
            visit(Some("aaa"), &g, today, Some(V1)),
            visit(Some("aaa"), &g, tomorrow, Some(V1)),
            visit(None, &g, today, Some(V2)),
            visit(None, &g, today, Some(V2)),
            visit(Some("aaa"), &g, today - 3, Some(V2)),
        ],
    )
    .await;
    assert_eq!(s, 200);

    let link_a = stats(
        &app,
        &acc.key,
        &format!("links/{a}/stats"),
        today - 3,
        tomorrow,
    )
    .await;
    assert_eq!(link_a["total"], 8);
    assert_eq!(link_a["unique_visitors"], 3, "{link_a}");
    assert_eq!(
        link_a["by_day"],
        json!([
            {"date": iso(today - 3), "clicks": 1, "unique_visitors": 0, "bots": 0},
            {"date": iso(today), "clicks": 6, "unique_visitors": 2, "bots": 0},
            {"date": iso(tomorrow), "clicks": 1, "unique_visitors": 1, "bots": 0},
        ])
    );
    let link_b = stats(&app, &acc.key, &format!("links/{b}/stats"), today, today).await;
    assert_eq!(
        (&link_b["total"], &link_b["unique_visitors"]),
        (&json!(1), &json!(1))
    );
    // The group's and the account's: the sum of their links' (and the dynamic link's one visitor).
    for path in [format!("groups/{g}/stats"), "stats".to_owned()] {
        let body = stats(&app, &acc.key, &path, today, tomorrow).await;
        assert_eq!(body["total"], 10, "{path}: {body}");
        assert_eq!(body["unique_visitors"], 5, "{path}: {body}");
        assert_eq!(body["by_day"][0]["unique_visitors"], 4, "{path}: {body}");
    }
    let csv = app
        .get(
            &acc.key,
            &format!(
                "/api/v1/external/links/{a}/stats?from={}&to={}&format=csv",
                iso(today - 3),
                iso(tomorrow)
            ),
        )
        .await
        .text()
        .await
        .unwrap();
    for row in [
        "\r\ntotal,,8\r\nunique_visitors,,3\r\nbots,,0\r\n".to_owned(),
        format!(
            "\r\nunique_day,{},2\r\nunique_day,{},1\r\n",
            iso(today),
            iso(tomorrow)
        ),
    ] {
        assert!(csv.contains(&row), "{row:?} in {csv}");
    }

    // The raw export says which click was its visitor's first that day: true, false, or null when unknown.
    let (s, _, lines) = ndjson(
        &app,
        &acc.key,
        &format!(
            "/api/v1/external/links/{a}/clicks?from={}&to={}",
            iso(today - 3),
            iso(tomorrow)
        ),
    )
    .await;
    assert_eq!(s, 200);
    let uniques: Vec<&Value> = lines.iter().map(|l| &l["unique"]).collect();
    assert_eq!(
        uniques,
        [
            &json!(null),
            &json!(true),
            &json!(false),
            &json!(true),
            &json!(null),
            &json!(null),
            &json!(false),
            &json!(true),
        ][..],
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|l| l.get("visitor").is_none()),
        "the hash is never exported"
    );

    // Deleting link B takes its visitor out of the group's and the account's figures.
    let (s, _) = app
        .send(
            Method::DELETE,
            &acc.key,
            &format!("/api/v1/external/links/{b}"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let body = stats(&app, &acc.key, "stats", today, tomorrow).await;
    assert_eq!(
        (&body["total"], &body["unique_visitors"]),
        (&json!(9), &json!(4))
    );
    app.stop().await;
}

/// An origin with an account whose default group (its id returned) holds the link `aaa` (its id returned).
async fn one_link(engine: Engine) -> (TestApp, Account, String, String) {
    let app = app(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    let g = acc.default_group_id.clone();
    let a = link(&app, &acc, "aaa").await;
    (app, acc, g, a)
}

/// Two reports of the same visitors at once: each visitor is new in exactly one of them.
async fn concurrent_reports_count_a_visitor_once(engine: Engine) {
    let (app, acc, g, a) = one_link(engine).await;
    let today = Day::today().0;
    let visitors: Vec<String> = (0..200).map(|i| format!("{i:032x}")).collect();
    let events = |rev: bool| {
        let mut list: Vec<Value> = visitors
            .iter()
            .map(|v| visit(Some("aaa"), &g, today, Some(v)))
            .collect();
        if rev {
            list.reverse();
        }
        list
    };
    let (one, two) = tokio::join!(report(&app, events(false)), report(&app, events(true)));
    assert_eq!((one.0, two.0), (200, 200));
    let body = stats(&app, &acc.key, &format!("links/{a}/stats"), today, today).await;
    assert_eq!(
        (&body["total"], &body["unique_visitors"]),
        (&json!(400), &json!(200))
    );
    app.stop().await;
}

/// Hashes kept before migration 0023 (in `day_visitors`, owner and hash as text) are moved into the 64-bit keys when
/// the origin migrates: a visitor of the upgrade's day counts once across it, and the old table is gone.
async fn visitors_kept_before_the_upgrade_still_count_once(engine: Engine) {
    let (app, acc, g, a) = one_link(engine).await;
    let today = Day::today().0;
    const V3: &str = "00000000000000000000000000000003";
    // The table as migration 0021 made it, holding what the version before stored today: V1 and V2 on the link,
    // V2 on the group's dynamic links, and V1 yesterday.
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    sqlx::query(
        "CREATE TABLE day_visitors (day BIGINT NOT NULL, owner TEXT NOT NULL, visitor TEXT NOT NULL, \
         PRIMARY KEY (day, owner, visitor))",
    )
    .execute(&pool)
    .await
    .unwrap();
    for (day, owner, visitor) in [
        (today, a.as_str(), V1),
        (today, a.as_str(), V2),
        (today, g.as_str(), V2),
        (today - 1, a.as_str(), V1),
    ] {
        sqlx::query("INSERT INTO day_visitors (day, owner, visitor) VALUES ($1, $2, $3)")
            .bind(day)
            .bind(owner)
            .bind(visitor)
            .execute(&pool)
            .await
            .unwrap();
    }
    app.db.migrate().await.unwrap();
    let (kept,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM day_visitor_keys")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(kept >= 4, "{kept}");
    assert!(
        sqlx::query("SELECT 1 FROM day_visitors")
            .fetch_optional(&pool)
            .await
            .is_err(),
        "the old table is dropped"
    );
    pool.close().await;
    // Migrating again finds nothing to move.
    app.db.migrate().await.unwrap();

    // V1 and V2 were seen today (on the link, and V2 on the dynamic links): not new; V3 is.
    let (s, _) = report(
        &app,
        vec![
            visit(Some("aaa"), &g, today, Some(V1)),
            visit(Some("aaa"), &g, today, Some(V2)),
            visit(None, &g, today, Some(V2)),
            visit(Some("aaa"), &g, today, Some(V3)),
        ],
    )
    .await;
    assert_eq!(s, 200);
    let body = stats(&app, &acc.key, &format!("links/{a}/stats"), today, today).await;
    assert_eq!(
        (&body["total"], &body["unique_visitors"]),
        (&json!(3), &json!(1)),
        "{body}"
    );
    let body = stats(&app, &acc.key, &format!("groups/{g}/stats"), today, today).await;
    assert_eq!(
        (&body["total"], &body["unique_visitors"]),
        (&json!(4), &json!(1)),
        "{body}"
    );
    app.stop().await;
}

/// The KV value the sink was last given for `key`, `None` once deleted after that.
fn kv_value(rec: &Shared, key: &str) -> Option<String> {
    let r = rec.lock().unwrap();
    let put = r.puts.iter().rposition(|(k, _)| k == key);
    let deleted = r.deletes.iter().any(|k| k == key);
    match put {
        Some(i) if !deleted => Some(r.puts[i].1.clone()),
        _ => None,
    }
}

/// A test clock crosses midnight and 02:00 UTC: tomorrow's salt is made the day before, yesterday's (and its
/// visitors' hashes) goes at 02:00, from the database and from KV through the publisher.
async fn salts_rotate_at_two_in_the_morning(engine: Engine) {
    let (app, rec) = app_publishing_to_kv_api(engine, 0).await;
    // The origin makes today's and tomorrow's salts at start and publishes them.
    let today = Day::today().0;
    wait_until("today's and tomorrow's salts in KV", || {
        kv_value(&rec, &salt_key(today)).is_some() && kv_value(&rec, &salt_key(today + 1)).is_some()
    })
    .await;
    let salt = |v: Option<String>| {
        serde_json::from_str::<SaltRecord>(&v.unwrap())
            .unwrap()
            .salt
    };
    let (s1, s2) = (
        salt(kv_value(&rec, &salt_key(today))),
        salt(kv_value(&rec, &salt_key(today + 1))),
    );
    assert!(
        s1.len() == 64 && s1.bytes().all(|b| b.is_ascii_hexdigit()),
        "{s1}"
    );
    assert_ne!(s1, s2, "each day has its own salt");

    // The test clock: a day far ahead (the origin's own rounds, on the real clock, never reach it).
    let d = Day::parse("date", "2100-01-10").unwrap().0;
    let at = |day: i64, hours: i64| Micros(day * DAY_MS * 1_000 + hours * 3_600_000_000);
    let pool = sqlx::AnyPool::connect(&app.test_db.url).await.unwrap();
    let salts = || async {
        let days: Vec<(i64,)> =
            sqlx::query_as("SELECT day FROM visitor_salts WHERE day >= $1 ORDER BY day")
                .bind(d - 1)
                .fetch_all(&pool)
                .await
                .unwrap();
        days.into_iter().map(|(d,)| d).collect::<Vec<_>>()
    };
    let hashes = |day: i64| {
        let pool = pool.clone();
        async move {
            let (n,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM day_visitor_keys WHERE day = $1")
                    .bind(day)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            n
        }
    };

    // 23:00 on day d: d's and d+1's salts.
    let round = app.db.rotate_visitor_salts(at(d, 23)).await.unwrap();
    assert_eq!(round.created, [d, d + 1]);
    assert_eq!(salts().await, [d, d + 1]);
    for day in [d, d + 1] {
        sqlx::query("INSERT INTO day_visitor_keys (day, visitor) VALUES ($1, $2)")
            .bind(day)
            .bind(1_i64)
            .execute(&pool)
            .await
            .unwrap();
    }
    wait_until("day d's salt in KV", || {
        kv_value(&rec, &salt_key(d)).is_some()
    })
    .await;

    // Midnight: d+2's salt is made ahead; d's is still there (late reports of d count until 02:00).
    let round = app.db.rotate_visitor_salts(at(d + 1, 0)).await.unwrap();
    assert_eq!((round.created, round.deleted), (vec![d + 2], vec![]));
    let round = app
        .db
        .rotate_visitor_salts(Micros(at(d + 1, 2).0 - 1))
        .await
        .unwrap();
    assert_eq!(round, Default::default());
    assert_eq!((hashes(d).await, salts().await.len()), (1, 3));

    // 02:00: d's salt and hashes are gone from the database, and the publisher deletes its KV key.
    let round = app.db.rotate_visitor_salts(at(d + 1, 2)).await.unwrap();
    assert_eq!((round.deleted, round.hashes_deleted), (vec![d], 1));
    assert_eq!(salts().await, [d + 1, d + 2]);
    assert_eq!((hashes(d).await, hashes(d + 1).await), (0, 1));
    wait_until("day d's salt deleted from KV", || {
        rec.lock().unwrap().deletes.contains(&salt_key(d))
    })
    .await;
    assert!(kv_value(&rec, &salt_key(d + 1)).is_some());
    app.stop().await;
}

both_engines!(
    a_visitor_counts_once_per_link_and_day,
    concurrent_reports_count_a_visitor_once,
    salts_rotate_at_two_in_the_morning,
    visitors_kept_before_the_upgrade_still_count_once,
);
