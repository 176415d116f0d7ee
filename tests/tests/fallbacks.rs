//! Where the edge worker sends visitors who do not go to the destination, in workerd:
//!
//! - the edge never redirects to a blocked host, from any path: a group's `access.fallback_url` on the blocklist
//!   falls through to the domain's fallback, a blocked domain fallback to the platform default
//!   (`DEFAULT_FALLBACK_URL`), and with that blocked too the visitor gets a `404`;
//! - a link whose group KV does not have, when the origin fails to give it (not a `404`): the last group record the
//!   origin gave, else the domain's fallback, never a redirect past the group's rules.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::{DEFAULT_FALLBACK, Options, Worker, domain, dynamic_path, group, link, token};
use serde_json::{Value, json};
use shared_crypto::{GroupKey, Payload};

const HOST: &str = "go.example.com";
const RULED: &str = "6a1c7d2f-8e4a-4d66-8b66-3e2d2a6f9b21";
/// The group's fallback for blocked visitors, under a parent domain the blocklist will hold.
const GROUP_FALLBACK: &str = "https://promo.partner.example/blocked";
/// The domain's fallback, on a host the blocklist will hold.
const DOMAIN_FALLBACK: &str = "https://landing.example/not-found";
const RU: [(&str, &str); 1] = [("CF-IPCountry", "RU")];
const DE: [(&str, &str); 1] = [("CF-IPCountry", "DE")];
/// The isolate cache's TTL in the origin test, so that the origin's answers expire within it.
const TTL: Duration = Duration::from_secs(1);

fn key() -> GroupKey {
    GroupKey::from_bytes([0x35; 32])
}

fn s(v: &str) -> String {
    v.to_owned()
}

fn rules() -> Value {
    json!({"access": {"block_countries": ["RU"], "fallback_url": GROUP_FALLBACK}})
}

fn blocklist(domains: &[&str]) -> (String, Value) {
    (s("blocklist"), json!({"v": 1, "domains": domains}))
}

#[tokio::test]
async fn blocked_fallbacks_fall_through_to_the_platform_default() {
    let w = Worker::start();
    w.sync(
        vec![
            (
                format!("domain:{HOST}"),
                domain(true, Some(DOMAIN_FALLBACK)),
            ),
            (format!("group:{RULED}"), group(&key(), rules())),
            (
                format!("link:{HOST}:ruled"),
                link("https://dest.example/ruled", RULED, true),
            ),
            (
                format!("link:{HOST}:paused"),
                link("https://dest.example/paused", RULED, false),
            ),
        ],
        vec![],
    )
    .await;
    let dynamic = dynamic_path(
        RULED,
        &token(&key(), &Payload::new("https://dest.example/dynamic")),
    );
    // Nothing blocked: the group's fallback for a blocked visitor, the domain's for the rest.
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(GROUP_FALLBACK);
    w.visit(HOST, "/paused", &DE)
        .await
        .assert_redirect(DOMAIN_FALLBACK);

    // The group's fallback is blocked (through its parent domain): the domain's fallback.
    w.sync(vec![blocklist(&["partner.example"])], vec![]).await;
    for path in ["/ruled", dynamic.as_str()] {
        w.visit(HOST, path, &RU)
            .await
            .assert_redirect(DOMAIN_FALLBACK);
    }

    // The domain's fallback too: the platform default, from every path that falls back; visitors the rules let
    // through still reach the destination.
    w.sync(
        vec![blocklist(&["partner.example", "landing.example"])],
        vec![],
    )
    .await;
    for _ in 0..3 {
        for path in ["/ruled", dynamic.as_str()] {
            w.visit(HOST, path, &RU)
                .await
                .assert_redirect(DEFAULT_FALLBACK);
        }
        for path in ["/paused", "/unknown", "/"] {
            w.visit(HOST, path, &DE)
                .await
                .assert_redirect(DEFAULT_FALLBACK);
        }
    }
    w.visit(HOST, "/ruled", &DE)
        .await
        .assert_destination("https://dest.example/ruled");

    // The default as well: no usable fallback, a 404, never a blocked host.
    w.sync(
        vec![blocklist(&[
            "partner.example",
            "landing.example",
            "default.example",
        ])],
        vec![],
    )
    .await;
    for path in ["/ruled", "/paused"] {
        let v = w.visit(HOST, path, &RU).await;
        assert_eq!((v.status, v.header("location")), (404, None), "{path}");
    }

    // A fallback answer is never kept past a change of the blocklist: unblocked, the group's fallback at once.
    w.sync(vec![blocklist(&[])], vec![]).await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(GROUP_FALLBACK);
    w.visit(HOST, "/paused", &RU)
        .await
        .assert_redirect(DOMAIN_FALLBACK);
}

/// A stand-in for the origin's link lookup: every request gets the answer set last (status and body). Returns its
/// URL and the setter.
async fn fake_origin() -> (String, Arc<Mutex<(u16, String)>>) {
    let answer = Arc::new(Mutex::new((404, String::new())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the fake origin");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let current = answer.clone();
    let app = axum::Router::new().fallback(move || {
        let (status, body) = current.lock().expect("answer").clone();
        async move {
            (
                axum::http::StatusCode::from_u16(status).expect("status"),
                [("content-type", "application/json")],
                body,
            )
        }
    });
    tokio::spawn(axum::serve(listener, app).into_future());
    (url, answer)
}

#[tokio::test]
async fn an_origin_failure_never_skips_a_links_group() {
    let (origin, answer) = fake_origin().await;
    let w = Worker::start_with(Options {
        env: vec![
            (s("ORIGIN_URL"), origin),
            (s("ORIGIN_SECRET"), s("a-secret-for-the-fake-origin")),
            (s("ISOLATE_CACHE_TTL_SECONDS"), TTL.as_secs().to_string()),
        ],
        ..Options::default()
    });
    // KV has the links but not their group (not published yet at this location): the worker asks the origin.
    w.sync(
        vec![
            (
                format!("domain:{HOST}"),
                domain(true, Some(DOMAIN_FALLBACK)),
            ),
            (
                format!("link:{HOST}:ruled"),
                link("https://dest.example/ruled", RULED, true),
            ),
            (
                format!("link:{HOST}:never"),
                link("https://dest.example/never", RULED, true),
            ),
        ],
        vec![],
    )
    .await;
    let set = |status: u16, body: String| *answer.lock().expect("answer") = (status, body);
    let past_the_ttl = || tokio::time::sleep(TTL + Duration::from_millis(300));

    // The origin fails before this isolate ever got the group from it: the domain's fallback for every visitor,
    // not a redirect past rules the group may have.
    set(503, s("{}"));
    for visitor in [RU, DE] {
        w.visit(HOST, "/never", &visitor)
            .await
            .assert_redirect(DOMAIN_FALLBACK);
    }
    w.wait_for_log("origin_lookup_failed", Duration::from_secs(10), |_| true)
        .await;

    // The origin answers with the group: its rules apply.
    let mut resolved = link("https://dest.example/ruled", RULED, true);
    resolved["group"] = group(&key(), rules());
    set(200, resolved.to_string());
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(GROUP_FALLBACK);

    // It fails: the last group it gave, however old.
    set(503, s("{}"));
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(GROUP_FALLBACK);
    w.visit(HOST, "/ruled", &DE)
        .await
        .assert_destination("https://dest.example/ruled");
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(GROUP_FALLBACK);

    // A 404 is an answer: the link redirects without rules, as before, and the last copy is forgotten.
    set(404, s("{}"));
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_destination("https://dest.example/ruled");
    set(503, s("{}"));
    past_the_ttl().await;
    w.visit(HOST, "/ruled", &RU)
        .await
        .assert_redirect(DOMAIN_FALLBACK);
}
