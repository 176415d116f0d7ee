//! The origin's word in a link's KV record that none of its destinations is blocked (`LinkRecord::vouched`): a
//! plain link carries it, a block takes it back from exactly the links with a destination on the blocked domain
//! or below it (their keys go in the outbox in the block's transaction, and their records lose the word), every
//! destination of a smart link counts, the internal KV-miss lookup carries it too, and the publisher writes it.
//! Both engines; the window the block's second scan closes is PostgreSQL's (its own test).

use crate::common::{Account, Engine, TestApp, TestDb, json};
use crate::outbox::drain;
use crate::publisher::{app_publishing_to_kv_api, wait_until};
use kv_model::LinkRecord;
use serde_json::{Value, json};
use shortlink_store::domain::Hostname;
use sqlx::Connection;
use std::time::{Duration, Instant};

const SECRET: &str = "internal-test-secret-0123456789abcdef";

/// The keys waiting in the outbox, sorted, but the day salts the origin enqueues at a moment of its own.
async fn pending_keys(app: &TestApp) -> Vec<String> {
    let mut keys = crate::outbox::pending_keys(app).await;
    keys.sort();
    keys
}

/// The record the publisher would write for link `code` of `sho.rt` now: its JSON and its value.
async fn record(app: &TestApp, code: &str) -> (String, LinkRecord) {
    let raw = app
        .db
        .kv_record(&format!("link:sho.rt:{code}"))
        .await
        .unwrap()
        .expect("a link record");
    let parsed = serde_json::from_str(&raw).unwrap();
    (raw, parsed)
}

/// Asserts the word on link `code`'s record: `"vouched":true` when given, no `vouched` key at all when not.
async fn assert_vouched(app: &TestApp, code: &str, want: bool) {
    let (raw, rec) = record(app, code).await;
    assert_eq!(rec.vouched, want, "{code}: {raw}");
    let value: Value = serde_json::from_str(&raw).unwrap();
    match want {
        true => assert_eq!(value["vouched"], json!(true), "{code}: {raw}"),
        false => assert!(value.get("vouched").is_none(), "{code}: {raw}"),
    }
}

async fn block(app: &TestApp, domain: &str) {
    app.db
        .block_domain(&Hostname::parse(domain).unwrap())
        .await
        .unwrap();
}

/// Creates link `code` on `sho.rt` with `fields` (`long_url` defaults to a harmless one).
async fn create(app: &TestApp, acc: &Account, code: &str, fields: Value) {
    let mut body = json!({"long_url": "https://ok.example/", "short_code": code});
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (s, created) = app.create_json(&acc.key, body).await;
    assert_eq!(s, 201, "{code}: {created}");
}

fn link_keys(codes: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = codes.iter().map(|c| format!("link:sho.rt:{c}")).collect();
    keys.push("blocklist".to_owned());
    keys.sort();
    keys
}

async fn setup(engine: Engine) -> (TestApp, Account) {
    let app = TestApp::spawn(engine).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    (app, acc)
}

async fn a_plain_link_is_vouched_for(engine: Engine) {
    let (app, acc) = setup(engine).await;
    create(&app, &acc, "plain", json!({"long_url": "https://a.com/x"})).await;
    let (raw, _) = record(&app, "plain").await;
    assert!(raw.contains(r#""vouched":true"#), "{raw}");
    assert_vouched(&app, "plain", true).await;
    // The word absent is the key absent: records without it keep their bytes.
    let unvouched = LinkRecord::new("https://a.com/x", acc.default_group_id.clone(), true);
    let text = serde_json::to_string(&unvouched).unwrap();
    assert!(!text.contains("vouched"), "{text}");
    let vouched = LinkRecord {
        vouched: true,
        ..unvouched.clone()
    };
    assert!(
        serde_json::to_string(&vouched)
            .unwrap()
            .contains(r#""vouched":true"#)
    );
    app.stop().await;
}

async fn a_block_takes_the_word_from_links_to_it_only(engine: Engine) {
    let (app, acc) = setup(engine).await;
    let links = [
        ("exact", "https://bad.example/x"),
        // Written in capitals with a trailing dot: the host is read as the edge reads it.
        ("sub", "https://Shop.EVIL.example./p"),
        ("deep", "https://a.b.evil.example:8443/x"),
        ("evil", "https://evil.example/"),
        // The blocked domain's name elsewhere than in the host: the scan's filter finds it, the host does not.
        ("notevil", "https://notevil.example/"),
        ("query", "https://ok.example/?u=evil.example"),
        ("path", "https://ok.example/evil.example/x#evil.example"),
        ("userinfo", "https://evil.example@ok.example/"),
        ("other", "https://other.example/"),
    ];
    for (code, url) in links {
        create(&app, &acc, code, json!({ "long_url": url })).await;
        assert_vouched(&app, code, true).await;
    }
    drain(&app).await;

    // A domain that is only a suffix of one's name, and an unrelated one: only the blocklist is republished.
    for domain in ["vil.example", "unrelated.example"] {
        block(&app, domain).await;
        assert_eq!(pending_keys(&app).await, ["blocklist"], "{domain}");
        drain(&app).await;
    }
    for (code, _) in links {
        assert_vouched(&app, code, true).await;
    }

    block(&app, "bad.example").await;
    assert_eq!(pending_keys(&app).await, link_keys(&["exact"]));
    drain(&app).await;
    assert_vouched(&app, "exact", false).await;

    // A parent domain of the host takes the word from its subdomains' links, once each.
    block(&app, "evil.example").await;
    assert_eq!(
        pending_keys(&app).await,
        link_keys(&["deep", "evil", "sub"])
    );
    for code in ["sub", "deep", "evil"] {
        assert_vouched(&app, code, false).await;
    }
    for code in ["notevil", "query", "path", "userinfo", "other"] {
        assert_vouched(&app, code, true).await;
    }
    drain(&app).await;

    // Blocking it again scans again (idempotent): the same links, the list unchanged.
    block(&app, "evil.example").await;
    assert_eq!(
        pending_keys(&app).await,
        link_keys(&["deep", "evil", "sub"])
    );
    app.stop().await;
}

async fn every_destination_of_a_link_counts(engine: Engine) {
    let (app, acc) = setup(engine).await;
    let links = [
        (
            "rule",
            json!({"rules": [{"if": {"country": ["DE"]}, "to": "https://ok.example/de"},
                             {"if": {"device": "mobile"}, "to": "https://Rule.example/m"}]}),
            "rule.example",
        ),
        (
            "ios",
            json!({"ios_url": "https://apps.ios.example/app"}),
            "ios.example",
        ),
        (
            "android",
            json!({"android_url": "https://android.example/app"}),
            "android.example",
        ),
        (
            "expired",
            json!({"expired_url": "https://expired.example/over"}),
            "expired.example",
        ),
        (
            "card",
            json!({"og_title": "A card", "og_image": "https://img.example/card.png"}),
            "img.example",
        ),
    ];
    for (code, fields, _) in &links {
        create(&app, &acc, code, fields.clone()).await;
        assert_vouched(&app, code, true).await;
    }
    drain(&app).await;
    for (i, (code, _, domain)) in links.iter().enumerate() {
        block(&app, domain).await;
        assert_eq!(pending_keys(&app).await, link_keys(&[*code]), "{domain}");
        drain(&app).await;
        assert_vouched(&app, code, false).await;
        for (later, _, _) in &links[i + 1..] {
            assert_vouched(&app, later, true).await;
        }
    }
    app.stop().await;
}

async fn the_kv_miss_lookup_carries_the_word(engine: Engine) {
    let app = TestApp::with_settings(TestDb::new(engine).await, |s| {
        s.internal_secret = Some(SECRET.into())
    })
    .await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    create(
        &app,
        &acc,
        "abc",
        json!({"long_url": "https://evil.example/x"}),
    )
    .await;
    let lookup = || async {
        json(
            app.client
                .get(app.url("/internal/v1/links/sho.rt/abc"))
                .bearer_auth(SECRET)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let (s, body) = lookup().await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["vouched"], json!(true), "{body}");
    block(&app, "evil.example").await;
    let (s, body) = lookup().await;
    assert_eq!(s, 200, "{body}");
    assert!(body.get("vouched").is_none(), "{body}");
    assert_eq!(body["long_url"], "https://evil.example/x");
    app.stop().await;
}

async fn the_publisher_writes_the_word_and_takes_it_back(engine: Engine) {
    let (app, rec) = app_publishing_to_kv_api(engine, 0).await;
    app.platform_domain("sho.rt").await;
    let acc = app.account(true).await;
    create(
        &app,
        &acc,
        "abc",
        json!({"long_url": "https://evil.example/x"}),
    )
    .await;
    let last_put = || {
        rec.lock()
            .unwrap()
            .puts
            .iter()
            .rev()
            .find(|(k, _)| k == "link:sho.rt:abc")
            .map(|(_, v)| v.clone())
    };
    wait_until("the link in KV, vouched for", || {
        last_put().is_some_and(|v| v.contains(r#""vouched":true"#))
    })
    .await;
    block(&app, "evil.example").await;
    wait_until("the link in KV again, without the word", || {
        last_put().is_some_and(|v| !v.contains("vouched"))
    })
    .await;
    let published: LinkRecord = serde_json::from_str(&last_put().unwrap()).unwrap();
    assert!(!published.vouched);
    app.stop().await;
}

both_engines!(
    a_plain_link_is_vouched_for,
    a_block_takes_the_word_from_links_to_it_only,
    every_destination_of_a_link_counts,
    the_kv_miss_lookup_carries_the_word,
    the_publisher_writes_the_word_and_takes_it_back,
);

/// The block's second scan, after its commit (PostgreSQL: link writes commit while a block's transaction runs). A
/// link write that read the blocklist before the block committed commits, with a destination on the blocked
/// domain, after the block's scan but before its commit: the scan inside the transaction cannot see it, the one
/// after the commit does. The test holds a lock on the outbox, which the block's transaction takes after its scan,
/// to make "after the scan, before the commit" last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_committed_during_the_block_is_found_after_it() {
    let (app, acc) = setup(Engine::Postgres).await;
    create(
        &app,
        &acc,
        "late",
        json!({"long_url": "https://ok.example/"}),
    )
    .await;
    drain(&app).await;

    let mut holder = sqlx::PgConnection::connect(&app.test_db.url).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("LOCK TABLE outbox IN EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await
        .unwrap();
    let db = app.db.clone();
    let blocking = tokio::spawn(async move {
        db.block_domain(&Hostname::parse("evil.example").unwrap())
            .await
    });
    // The block has scanned and waits for the outbox: the transaction holding blocked_domains waits on it (the
    // origin's own tasks may wait on it too).
    let mut watcher = sqlx::PgConnection::connect(&app.test_db.url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_locks w JOIN pg_locks b ON b.pid = w.pid \
             WHERE NOT w.granted AND w.relation = 'outbox'::regclass \
             AND b.granted AND b.relation = 'blocked_domains'::regclass",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the block never waited for the outbox"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The racing edit (its blocklist check passed before the block committed).
    sqlx::query(
        "UPDATE links SET long_url = 'https://www.evil.example/' WHERE short_code = 'late'",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    blocking.await.unwrap().unwrap();
    assert_eq!(pending_keys(&app).await, link_keys(&["late"]));
    assert_vouched(&app, "late", false).await;
    app.stop().await;
}
