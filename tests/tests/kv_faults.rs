//! The edge worker in workerd when KV reads fail (tests/support/serve-worker.mjs with `KV_FAULTS=1` hands the worker
//! a KV binding whose reads of chosen keys fail): a failed read of the blocklist or of a group never lets a visitor
//! past a check. The last good copy is used, however old; without one, dynamic links (and persistent links whose
//! group could not be read) fall back. A failed read is logged at most once a minute per isolate.

use std::time::{Duration, Instant};

use e2e::{Options, Worker, domain, dynamic_path, group, link, token};
use serde_json::json;
use shared_crypto::{GroupKey, Payload};

const HOST: &str = "go.example.com";
const HOST_FALLBACK: &str = "https://www.example.com/not-found";
const PLAIN: &str = "5f0b6c1e-7f39-4c55-9a55-2d1c1f5e8a10";
const RULED: &str = "6a1c7d2f-8e4a-4d66-8b66-3e2d2a6f9b21";
const UNSEEN: &str = "7b2d8e3a-9f5b-4e77-9c77-4f3e3b7a0c32";
const NO_RECORD: &str = "8c3e9f4b-a06c-4f88-8d88-5a4f4c8b1d43";
const BLOCKED_FALLBACK: &str = "https://blocked.example/";
/// The isolate cache's TTL in these tests, so that records expire within a test.
const TTL: Duration = Duration::from_secs(1);

fn key() -> GroupKey {
    GroupKey::from_bytes([0x24; 32])
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// A worker whose KV reads can be made to fail, with a 1-second isolate cache.
fn start() -> Worker {
    Worker::start_with(Options {
        env: vec![
            (s("KV_FAULTS"), s("1")),
            (s("ISOLATE_CACHE_TTL_SECONDS"), TTL.as_secs().to_string()),
        ],
        ..Options::default()
    })
}

/// Long enough for every record cached before to have expired from the isolate cache (and with it any answer the
/// entry module keeps): what is served next was read now, or is a last good copy.
async fn past_the_ttl() {
    tokio::time::sleep(TTL + Duration::from_millis(300)).await;
}

/// The `kv_read_failed` lines so far: one a minute per isolate at most, whatever the number of failed reads.
/// workerd writes the worker's lines as they come, and the test reads what has arrived: a line written a moment
/// ago may still be on its way (CI met this on a busy machine), so the first is waited for, up to 5 s.
async fn assert_logged_once_a_minute(w: &Worker, since: Instant, failed_reads: u64) {
    let failed_lines = || -> Vec<serde_json::Value> {
        w.log_events()
            .into_iter()
            .filter(|v| v["event"] == "kv_read_failed")
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while failed_lines().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lines = failed_lines();
    assert!(failed_reads >= 5, "{failed_reads} failed reads");
    let minutes = since.elapsed().as_secs() / 60 + 1;
    assert!(
        !lines.is_empty() && lines.len() as u64 <= minutes,
        "{} kv_read_failed lines for {failed_reads} failed reads in {minutes} minute(s): {lines:?}",
        lines.len()
    );
    assert_eq!(lines[0]["suppressed"], 0, "{:?}", lines[0]);
    assert!(
        lines[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("injected")),
        "{:?}",
        lines[0]
    );
}

/// A worker with a domain, a group without rules, a blocklist (`evil.example`) and persistent links to a fine and a
/// blocked destination; and a dynamic link to each.
async fn with_blocklist() -> (Worker, String, String) {
    let w = start();
    w.sync(
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (format!("group:{PLAIN}"), group(&key(), json!({}))),
            (s("blocklist"), json!({"v": 1, "domains": ["evil.example"]})),
            (
                format!("link:{HOST}:plain"),
                link("https://dest.example/plain", PLAIN, true),
            ),
            (
                format!("link:{HOST}:evil"),
                link("https://www.evil.example/landing", PLAIN, true),
            ),
        ],
        vec![],
    )
    .await;
    let evil = dynamic_path(
        PLAIN,
        &token(&key(), &Payload::new("https://www.evil.example/")),
    );
    let fine = dynamic_path(
        PLAIN,
        &token(&key(), &Payload::new("https://dest.example/fine")),
    );
    (w, evil, fine)
}

#[tokio::test]
async fn without_any_blocklist_read_dynamic_links_fall_back() {
    let (w, evil, fine) = with_blocklist().await;
    // The blocklist has never been read in this isolate, and its reads fail: a dynamic link's destination is the
    // client's, checked by nobody else, so every dynamic link falls back (the blocked one must, the others may).
    assert_eq!(w.fail_kv_reads(&["blocklist"]).await, 0);
    let since = Instant::now();
    w.visit(HOST, &evil, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, &fine, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    // A persistent link's destination was checked by the origin: it keeps redirecting.
    w.visit(HOST, "/plain", &[])
        .await
        .assert_destination("https://dest.example/plain");
    for _ in 0..3 {
        w.visit(HOST, &evil, &[])
            .await
            .assert_redirect(HOST_FALLBACK);
    }
    let failed = w.failed_kv_reads().await;
    assert!(failed >= 6, "each visit read KV and failed: {failed}");
    assert_logged_once_a_minute(&w, since, failed).await;

    // KV answers again: the list read is the last good one from now on.
    w.fail_kv_reads(&[]).await;
    w.visit(HOST, &fine, &[])
        .await
        .assert_destination("https://dest.example/fine");
    w.visit(HOST, &evil, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
}

/// A read that fails on a new isolate's first visit sends it to the full path, which reads the key again (and logs
/// the failure), never to a second round of the first-visit path (which would read it a third time): here the
/// group's, in the first round, so the dynamic link falls back.
#[tokio::test]
async fn a_first_visits_failed_read_goes_to_the_full_path() {
    let (w, _, fine) = with_blocklist().await;
    let group_key = format!("group:{PLAIN}");
    assert_eq!(w.fail_kv_reads(&[&group_key]).await, 0);
    w.visit(HOST, &fine, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    let reads = w.kv_reads().await;
    assert_eq!(reads.get(&group_key), Some(&2), "{reads:?}");
    assert_eq!(w.failed_kv_reads().await, 2);
}

/// The group a new isolate's first visit to a dynamic link read (on the first-visit path, which keeps it as the
/// last good copy only after the response: edge-worker/src/shell/settle.rs) serves when its reads fail later, as
/// one the full path read does.
#[tokio::test]
async fn a_group_a_first_visit_read_is_the_last_good_record() {
    let (w, _, fine) = with_blocklist().await;
    w.visit(HOST, &fine, &[])
        .await
        .assert_destination("https://dest.example/fine");
    let before = w.fail_kv_reads(&[&format!("group:{PLAIN}")]).await;
    past_the_ttl().await;
    w.visit(HOST, &fine, &[])
        .await
        .assert_destination("https://dest.example/fine");
    let failed = w.failed_kv_reads().await;
    assert!(
        failed > before,
        "the group was read again, and failed: {before} → {failed}"
    );
}

#[tokio::test]
async fn a_failed_blocklist_read_keeps_the_last_good_list() {
    let (w, evil, fine) = with_blocklist().await;
    // A good read first.
    w.visit(HOST, &fine, &[])
        .await
        .assert_destination("https://dest.example/fine");
    w.visit(HOST, &evil, &[])
        .await
        .assert_redirect(HOST_FALLBACK);

    // Its reads fail, after the isolate cache has forgotten the list: the last good list, not an empty one.
    let before = w.fail_kv_reads(&["blocklist"]).await;
    let since = Instant::now();
    past_the_ttl().await;
    w.visit(HOST, &evil, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, "/evil", &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, &fine, &[])
        .await
        .assert_destination("https://dest.example/fine");
    w.visit(HOST, "/plain", &[])
        .await
        .assert_destination("https://dest.example/plain");
    past_the_ttl().await;
    w.visit(HOST, &evil, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    let failed = w.failed_kv_reads().await;
    assert!(
        failed >= before + 5,
        "each visit read KV and failed: {before} → {failed}"
    );
    assert_logged_once_a_minute(&w, since, failed).await;

    // A blocklist KV does not have is empty: a successful read that finds nothing is not a failure, and stays the
    // last good list when reads fail later.
    w.fail_kv_reads(&[]).await;
    w.sync(vec![], vec![s("blocklist")]).await;
    w.visit(HOST, &evil, &[])
        .await
        .assert_destination("https://www.evil.example/");
    w.fail_kv_reads(&["blocklist"]).await;
    past_the_ttl().await;
    w.visit(HOST, &evil, &[])
        .await
        .assert_destination("https://www.evil.example/");
}

/// A worker with a domain, two groups with the same access rules (RU → [`BLOCKED_FALLBACK`]) and a persistent link
/// in each, and a link whose group KV does not have; and a dynamic link in each group.
async fn with_groups() -> (Worker, String, String) {
    let w = start();
    // Blocked countries go to the group's own fallback: a redirect there shows the rules were applied.
    let rules = || json!({"access": {"block_countries": ["RU"], "fallback_url": BLOCKED_FALLBACK}});
    w.sync(
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (format!("group:{RULED}"), group(&key(), rules())),
            (format!("group:{UNSEEN}"), group(&key(), rules())),
            (s("blocklist"), json!({"v": 1, "domains": ["evil.example"]})),
            (
                format!("link:{HOST}:ruled"),
                link("https://dest.example/ruled", RULED, true),
            ),
            (
                format!("link:{HOST}:unseen"),
                link("https://dest.example/unseen", UNSEEN, true),
            ),
            (
                format!("link:{HOST}:groupless"),
                link("https://dest.example/groupless", NO_RECORD, true),
            ),
        ],
        vec![],
    )
    .await;
    let ruled_dynamic = dynamic_path(
        RULED,
        &token(&key(), &Payload::new("https://dest.example/dynamic")),
    );
    let unseen_dynamic = dynamic_path(
        UNSEEN,
        &token(&key(), &Payload::new("https://dest.example/dynamic")),
    );
    (w, ruled_dynamic, unseen_dynamic)
}

const RU: [(&str, &str); 1] = [("CF-IPCountry", "RU")];
const DE: [(&str, &str); 1] = [("CF-IPCountry", "DE")];

#[tokio::test]
async fn a_failed_group_read_keeps_the_last_good_record() {
    let (w, ruled_dynamic, _) = with_groups().await;
    let ruled_key = format!("group:{RULED}");
    // A good read first: the rules apply.
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(BLOCKED_FALLBACK);
    w.visit(HOST, "/ruled", &DE)
        .await
        .assert_destination("https://dest.example/ruled");

    // From now on the group's reads fail, and the isolate cache has forgotten the record: the last good record's
    // rules still apply, to persistent and dynamic links.
    let before = w.fail_kv_reads(&[&ruled_key]).await;
    let since = Instant::now();
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(BLOCKED_FALLBACK);
    w.visit(HOST, "/ruled", &DE)
        .await
        .assert_destination("https://dest.example/ruled");
    w.visit(HOST, &ruled_dynamic, &RU)
        .await
        .assert_redirect(BLOCKED_FALLBACK);
    w.visit(HOST, &ruled_dynamic, &DE)
        .await
        .assert_destination("https://dest.example/dynamic");
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(BLOCKED_FALLBACK);
    let failed = w.failed_kv_reads().await;
    assert!(
        failed >= before + 5,
        "each visit read KV and failed: {before} → {failed}"
    );
    assert_logged_once_a_minute(&w, since, failed).await;

    // A group deleted through the sync route is gone: no failed read brings its record back.
    w.fail_kv_reads(&[]).await;
    w.sync(vec![], vec![ruled_key.clone()]).await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_destination("https://dest.example/ruled");
    w.fail_kv_reads(&[&ruled_key]).await;
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(HOST_FALLBACK);
}

#[tokio::test]
async fn a_failed_group_read_without_a_record_falls_back() {
    let (w, _, unseen_dynamic) = with_groups().await;
    // A group never read in this isolate, whose reads fail: the domain's fallback rather than a redirect past rules
    // it may have, for every visitor.
    let before = w.fail_kv_reads(&[&format!("group:{UNSEEN}")]).await;
    let since = Instant::now();
    w.visit(HOST, "/unseen", &DE)
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, "/unseen", &RU)
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, &unseen_dynamic, &DE)
        .await
        .assert_redirect(HOST_FALLBACK);
    for _ in 0..3 {
        w.visit(HOST, "/unseen", &DE)
            .await
            .assert_redirect(HOST_FALLBACK);
    }
    let failed = w.failed_kv_reads().await;
    assert!(
        failed >= before + 6,
        "each visit read KV and failed: {before} → {failed}"
    );
    assert_logged_once_a_minute(&w, since, failed).await;
    // A group KV does not have (a successful read) is no rules, as ever.
    w.visit(HOST, "/groupless", &RU)
        .await
        .assert_destination("https://dest.example/groupless");

    // KV answers again: the group's own record.
    w.fail_kv_reads(&[]).await;
    w.visit(HOST, "/unseen", &RU)
        .await
        .assert_redirect(BLOCKED_FALLBACK);
    w.visit(HOST, "/unseen", &DE)
        .await
        .assert_destination("https://dest.example/unseen");
}
