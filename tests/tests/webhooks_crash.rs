//! Webhooks across a crash (issue 27, "the origin killed mid-delivery then restarted"), and two origin processes on
//! one PostgreSQL database: the real `origin-api serve` processes (`--webhooks-allow-private`), a receiver on
//! loopback in this test.
//!
//! **Crash** (SQLite and PostgreSQL): links are created, updated and some deleted through the API while the
//! receiver answers slowly; after a few answers it stops answering (holds every request), and the origin is
//! SIGKILLed while requests are held. A new origin process on the same database must then deliver every event the
//! API committed at least once — the held ones again once their lease (the 10 s attempt timeout + 50 s) has run
//! out, under the same `webhook-id` —, and each link's events must first arrive in commit order. Every request's
//! Standard Webhooks signature is checked here with HMAC-SHA256 (independently of the `webhook-sender` crate), and
//! the endpoint's delivery log (the API) must show a success for each event.
//!
//! **Two processes** (PostgreSQL): two origins at once on one database, the receiver slow enough that both send
//! at the same time: no attempt is sent twice at once (no two requests with one `webhook-id` overlap; in fact each
//! event arrives exactly once), the requests the receiver got are exactly the attempts the log recorded, and the
//! order per link holds across both processes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use e2e::origin::{Account, Api, Database, Engine, Origin, OriginOptions};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::watch;

/// The events the endpoint subscribes to.
const EVENTS: [&str; 3] = ["link.created", "link.updated", "link.deleted"];

// --- the receiver ----------------------------------------------------------------------------------------------

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: Bytes,
    json: Value,
    /// When it arrived.
    at: Instant,
    /// When the receiver answered it (`None`: not yet).
    answered: Option<Instant>,
    /// It came while the receiver was holding requests.
    held: bool,
}

impl Got {
    fn kind(&self) -> &str {
        self.json["type"].as_str().unwrap_or_default()
    }

    fn link_id(&self) -> &str {
        self.json["data"]["id"].as_str().unwrap_or_default()
    }

    fn long_url(&self) -> &str {
        self.json["data"]["long_url"].as_str().unwrap_or_default()
    }
}

#[derive(Default)]
struct Shared {
    got: Mutex<Vec<Got>>,
    /// Requests being answered right now, and the most at once.
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Set once the receiver started holding: it holds once only (not again after [`Receiver::release`]).
    held_once: AtomicBool,
}

/// A small HTTP server on loopback: records every request, answers `200` after `delay`, and once `hold_after`
/// requests were answered holds every further request until [`Receiver::release`].
struct Receiver {
    url: String,
    shared: Arc<Shared>,
    /// True while requests are held.
    holding: watch::Sender<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

type ReceiverState = (Arc<Shared>, watch::Sender<bool>, Duration, Option<usize>);

async fn receive(
    State((shared, holding, delay, hold_after)): State<ReceiverState>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let now = shared.in_flight.fetch_add(1, SeqCst) + 1;
    shared.max_in_flight.fetch_max(now, SeqCst);
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (index, held) = {
        let mut got = shared.got.lock().expect("receiver lock");
        let answered = got.iter().filter(|g| g.answered.is_some()).count();
        if hold_after.is_some_and(|n| answered >= n) && !shared.held_once.swap(true, SeqCst) {
            holding.send_replace(true);
        }
        let held = *holding.borrow();
        got.push(Got {
            id: header("webhook-id"),
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            json: serde_json::from_slice(&body).unwrap_or(Value::Null),
            body,
            at: Instant::now(),
            answered: None,
            held,
        });
        (got.len() - 1, held)
    };
    if held {
        let _ = holding.subscribe().wait_for(|h| !*h).await;
    }
    tokio::time::sleep(delay).await;
    shared.got.lock().expect("receiver lock")[index].answered = Some(Instant::now());
    shared.in_flight.fetch_sub(1, SeqCst);
    StatusCode::OK
}

impl Receiver {
    async fn start(delay: Duration, hold_after: Option<usize>) -> Receiver {
        let shared: Arc<Shared> = Arc::default();
        let (holding, _) = watch::channel(false);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let app = axum::Router::new().fallback(receive).with_state((
            shared.clone(),
            holding.clone(),
            delay,
            hold_after,
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .expect("receiver");
        });
        Receiver {
            url: format!("http://{addr}/hook"),
            shared,
            holding,
            stop: Some(stop),
        }
    }

    fn got(&self) -> Vec<Got> {
        self.shared.got.lock().expect("receiver lock").clone()
    }

    /// Answers the held requests and holds no more.
    fn release(&self) {
        self.holding.send_replace(false);
    }

    /// The requests being held now.
    fn held(&self) -> Vec<Got> {
        self.got()
            .into_iter()
            .filter(|g| g.held && g.answered.is_none())
            .collect()
    }

    /// Waits until `done` holds of what was received (at most `deadline`), and returns it.
    async fn wait(
        &self,
        deadline: Duration,
        what: &str,
        done: impl Fn(&[Got]) -> bool,
    ) -> Vec<Got> {
        let until = Instant::now() + deadline;
        loop {
            let got = self.got();
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < until,
                "receiver: {what} did not happen within {deadline:?}; got {} requests",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Checks a request's Standard Webhooks signature under `secret` (`whsec_<base64 key>`): one of the
/// space-separated `v1,<base64>` values is the HMAC-SHA256 of `{id}.{timestamp}.{body}`, and the timestamp is
/// within five minutes of now.
fn verify(secret: &str, g: &Got) {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("secret base64");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC key");
    mac.update(g.id.as_bytes());
    mac.update(b".");
    mac.update(g.timestamp.as_bytes());
    mac.update(b".");
    mac.update(&g.body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    assert!(
        g.signature
            .split(' ')
            .any(|s| s.strip_prefix("v1,") == Some(expected.as_str())),
        "bad signature on {}: {} (expected v1,{expected})",
        g.id,
        g.signature
    );
    let ts: i64 = g
        .timestamp
        .parse()
        .expect("webhook-timestamp is Unix seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    assert!((now - ts).abs() <= 300, "timestamp {ts} is not now ({now})");
    assert!(
        g.id.starts_with("msg_"),
        "webhook-id {} is not a message id",
        g.id
    );
}

// --- what the API committed ------------------------------------------------------------------------------------

/// One committed event, as the test knows it from the API's answers: its type, its link, and the link's
/// `long_url` in its `data` (each change sets a distinct one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Expected {
    kind: &'static str,
    link: String,
    long_url: String,
}

fn matches(e: &Expected, g: &Got) -> bool {
    g.kind() == e.kind && g.link_id() == e.link && g.long_url() == e.long_url
}

fn options() -> OriginOptions {
    OriginOptions {
        args: vec!["--webhooks-allow-private".into()],
        ..OriginOptions::default()
    }
}

/// Registers the receiver for [`EVENTS`]; returns (endpoint id, secret).
async fn subscribe(api: &Api, url: &str) -> (String, String) {
    let hook = api
        .call(
            Method::POST,
            "webhooks",
            Some(&json!({"url": url, "events": EVENTS, "description": "e2e"})),
            201,
        )
        .await;
    let id = hook["id"].as_str().expect("endpoint id").to_owned();
    let secret = hook["secret"].as_str().expect("secret").to_owned();
    (id, secret)
}

/// Creates `links` links and updates each `updates` times, interleaved (round 0 creates, each later round
/// updates every link), then deletes the first `deletes`; `apis` are used in turn. Returns each link's events in
/// commit order.
async fn commit_events(
    apis: &[Api],
    tag: &str,
    links: usize,
    updates: usize,
    deletes: usize,
) -> Vec<Vec<Expected>> {
    let mut ids: Vec<String> = Vec::with_capacity(links);
    let mut per_link: Vec<Vec<Expected>> = vec![Vec::new(); links];
    let mut call = 0usize;
    let mut next_api = || {
        call += 1;
        apis[call % apis.len()].clone()
    };
    for round in 0..=updates {
        for (i, events) in per_link.iter_mut().enumerate() {
            let long_url = format!("https://example.com/{tag}/{i}/v{round}");
            let link = if round == 0 {
                let link = next_api().create_link(json!({"long_url": long_url})).await;
                ids.push(link["id"].as_str().expect("link id").to_owned());
                link
            } else {
                next_api()
                    .patch_link(&ids[i], json!({"long_url": long_url}))
                    .await
            };
            // create-link answers without the URL; PATCH with the link as it now is.
            assert!(
                link["id"] == ids[i].as_str()
                    && (round == 0 || link["long_url"] == long_url.as_str())
            );
            events.push(Expected {
                kind: if round == 0 {
                    "link.created"
                } else {
                    "link.updated"
                },
                link: ids[i].clone(),
                long_url,
            });
        }
    }
    for (i, events) in per_link.iter_mut().enumerate().take(deletes) {
        next_api().delete_link(&ids[i]).await;
        let last = events.last().expect("an event").long_url.clone();
        events.push(Expected {
            kind: "link.deleted",
            link: ids[i].clone(),
            long_url: last,
        });
    }
    per_link
}

/// The endpoint's whole delivery log (all pages), newest first, and its `total`.
async fn attempts(api: &Api, endpoint: &str) -> (Vec<Value>, i64) {
    let mut all = Vec::new();
    let mut total = 0;
    loop {
        let page = api
            .call(
                Method::GET,
                &format!(
                    "webhooks/{endpoint}/deliveries?limit=100&offset={}",
                    all.len()
                ),
                None,
                200,
            )
            .await;
        total = page["total"].as_i64().unwrap_or(total);
        let results = page["results"].as_array().cloned().unwrap_or_default();
        if results.is_empty() {
            return (all, total);
        }
        all.extend(results);
    }
}

/// What every run checks: each request is signed; each committed event was received at least once; each
/// webhook-id carries one event only (the same bytes every time), and each event arrived under one webhook-id
/// only; nothing else arrived; per link, first arrivals follow commit order. Returns the webhook-id of each event.
fn check_deliveries(
    secret: &str,
    got: &[Got],
    committed: &[Vec<Expected>],
) -> HashMap<Expected, String> {
    for g in got {
        verify(secret, g);
    }
    let mut by_id: HashMap<&str, &Got> = HashMap::new();
    for g in got {
        let first = by_id.entry(&g.id).or_insert(g);
        assert_eq!(
            first.body, g.body,
            "two deliveries of {} differ: a webhook-id names one event",
            g.id
        );
    }
    let mut id_of: HashMap<Expected, String> = HashMap::new();
    for e in committed.iter().flatten() {
        let ids: HashSet<&str> = got
            .iter()
            .filter(|g| matches(e, g))
            .map(|g| g.id.as_str())
            .collect();
        assert_eq!(
            ids.len(),
            1,
            "{e:?} must arrive under exactly one webhook-id, got {ids:?}"
        );
        id_of.insert(
            e.clone(),
            ids.into_iter().next().unwrap_or_default().to_owned(),
        );
    }
    let expected_ids: HashSet<&str> = id_of.values().map(String::as_str).collect();
    for g in got {
        assert!(
            expected_ids.contains(g.id.as_str()),
            "an event nobody committed arrived: {} {}",
            g.id,
            g.json
        );
    }
    // First arrival of each event, per link, in commit order.
    for events in committed {
        let first_at = |e: &Expected| {
            got.iter()
                .filter(|g| g.id == id_of[e])
                .map(|g| g.at)
                .min()
                .expect("received")
        };
        let mut arrived: Vec<&Expected> = events.iter().collect();
        arrived.sort_by_key(|e| first_at(e));
        assert_eq!(
            arrived,
            events.iter().collect::<Vec<_>>(),
            "link {}: events first arrived out of commit order",
            events[0].link
        );
    }
    id_of
}

// --- the crash -------------------------------------------------------------------------------------------------

const LINKS: usize = 6;
const UPDATES: usize = 3;
const DELETES: usize = 2;
/// Requests the receiver answers before it holds every further one.
const ANSWERED_BEFORE_HOLD: usize = 5;

async fn killed_mid_delivery_then_restarted(engine: Engine) {
    let started = Instant::now();
    let db = Database::on(engine);
    let account: Account = db.account("crash@example.com");
    let mut first = Origin::start(&db, options()).await;
    let receiver = Receiver::start(Duration::from_millis(100), Some(ANSWERED_BEFORE_HOLD)).await;
    let api = first.api(&account);
    let (endpoint, secret) = subscribe(&api, &receiver.url).await;
    let committed = commit_events(&[api], "crash", LINKS, UPDATES, DELETES).await;
    let total_events: usize = committed.iter().map(Vec::len).sum();

    // Requests held at the receiver: the origin has sent them and waits for the answer (its timeout is 10 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let held = receiver.held().len();
        // PER_ENDPOINT (4) at once at most; at least one, and not for long (before the origin's own timeout).
        if held >= 4 || (held >= 1 && Instant::now() >= deadline) {
            break;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(3),
            "no delivery in flight to kill: {} requests, none held",
            receiver.got().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();
    let killed_at = Instant::now();
    let before = receiver.got();
    let in_flight: HashSet<String> = before
        .iter()
        .filter(|g| g.answered.is_none())
        .map(|g| g.id.clone())
        .collect();
    let answered: HashSet<String> = before
        .iter()
        .filter(|g| g.answered.is_some())
        .map(|g| g.id.clone())
        .collect();
    assert!(
        !in_flight.is_empty(),
        "a delivery is in flight when the origin dies"
    );
    assert!(
        answered.len() >= ANSWERED_BEFORE_HOLD.min(total_events),
        "some deliveries were done before the crash: {:?}",
        before
            .iter()
            .map(|g| (&g.id, g.kind(), g.answered.is_some()))
            .collect::<Vec<_>>()
    );
    let seen: HashSet<&str> = before.iter().map(|g| g.id.as_str()).collect();
    assert!(
        seen.len() < total_events,
        "some events were still waiting when the origin died"
    );
    eprintln!(
        "{engine:?}: {total_events} events committed; at the kill: {} answered, {} in flight, {} not sent yet",
        answered.len(),
        in_flight.len(),
        total_events - seen.len()
    );

    // The held requests are answered now, to a dead process: they must be sent again.
    receiver.release();
    let second = Origin::start(&db, options()).await;
    let restarted_at = Instant::now();
    let all_in = |got: &[Got]| {
        committed
            .iter()
            .flatten()
            .all(|e| got.iter().any(|g| matches(e, g) && g.answered.is_some()))
            && in_flight
                .iter()
                .all(|id| got.iter().any(|g| &g.id == id && g.at > restarted_at))
    };
    // The lease of the deliveries in flight (10 s + 50 s) runs out about a minute after they were claimed.
    let got = receiver
        .wait(
            Duration::from_secs(120),
            "every committed event, the ones in flight again",
            all_in,
        )
        .await;
    let delivered_in = restarted_at.elapsed();
    let id_of = check_deliveries(&secret, &got, &committed);
    assert_eq!(id_of.len(), total_events);
    // The ones in flight came again, under their webhook-id, after the restart (the only repeats there are).
    for id in &in_flight {
        let again = got
            .iter()
            .filter(|g| &g.id == id && g.at > killed_at)
            .count();
        assert!(
            again >= 1,
            "{id} was in flight at the crash and never sent again"
        );
    }
    // Everything answered well before the crash had its attempt recorded: never sent again.
    let done_before: HashSet<&str> = before
        .iter()
        .filter(|g| {
            g.answered
                .is_some_and(|at| at + Duration::from_secs(1) < killed_at)
        })
        .map(|g| g.id.as_str())
        .collect();
    for g in &got {
        if done_before.contains(g.id.as_str()) {
            assert!(
                g.at < killed_at,
                "{} was answered before the crash, yet sent again",
                g.id
            );
        }
    }

    // The log (the API) shows a success for every event: the restarted origin recorded what it sent.
    let api = second.api(&account);
    let wanted: HashSet<&str> = id_of.values().map(String::as_str).collect();
    let log_deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (log, _) = attempts(&api, &endpoint).await;
        let succeeded: HashSet<&str> = log
            .iter()
            .filter(|a| a["status_code"] == 200)
            .filter_map(|a| a["event_id"].as_str())
            .collect();
        for a in &log {
            assert!(
                wanted.contains(a["event_id"].as_str().unwrap_or_default()),
                "the log has an attempt of an unknown event: {a}"
            );
        }
        if wanted.iter().all(|id| succeeded.contains(id)) {
            // Every attempt in the log was received (the attempts lost with the process are not in it).
            assert!(
                log.len() <= got.len(),
                "{} attempts logged, {} received",
                log.len(),
                got.len()
            );
            break;
        }
        assert!(
            Instant::now() < log_deadline,
            "the log lacks a success for some event"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "{engine:?}: {} requests for {total_events} events; all delivered {:.1} s after the restart; test took {:.1} s",
        got.len(),
        delivered_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_origin_killed_mid_delivery_then_restarted() {
    killed_mid_delivery_then_restarted(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_origin_killed_mid_delivery_then_restarted() {
    killed_mid_delivery_then_restarted(Engine::Postgres).await;
}

// --- two processes on one PostgreSQL database ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_origin_processes_never_send_one_attempt_twice() {
    let db = Database::postgres();
    let account = db.account("two@example.com");
    let a = Origin::start(&db, options()).await;
    let b = Origin::start(&db, options()).await;
    // Slow answers: a backlog both processes work on, and a wide window in which both could take one row.
    let receiver = Receiver::start(Duration::from_millis(150), None).await;
    let (endpoint, secret) = subscribe(&a.api(&account), &receiver.url).await;
    let apis = [a.api(&account), b.api(&account)];
    let committed = commit_events(&apis, "two", 30, 2, 5).await;
    let total_events: usize = committed.iter().map(Vec::len).sum();
    let got = receiver
        .wait(
            Duration::from_secs(60),
            "every committed event, answered",
            |got| {
                got.iter().filter(|g| g.answered.is_some()).count() >= total_events
                    && got.iter().all(|g| g.answered.is_some())
            },
        )
        .await;
    check_deliveries(&secret, &got, &committed);
    // No attempt twice at once: two requests with one webhook-id never overlap (here: each arrives once).
    let mut by_id: HashMap<&str, Vec<(Instant, Instant)>> = HashMap::new();
    for g in &got {
        by_id
            .entry(&g.id)
            .or_default()
            .push((g.at, g.answered.expect("answered")));
    }
    for (id, mut spans) in by_id.clone() {
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{id} was being sent twice at once");
        }
    }
    assert_eq!(by_id.len(), total_events);
    assert!(
        by_id.values().all(|s| s.len() == 1),
        "an event was sent twice though every attempt succeeded"
    );
    // One process sends at most PER_ENDPOINT (4) to one endpoint at once: more means both were sending.
    let max = receiver.shared.max_in_flight.load(SeqCst);
    assert!(max > 4, "only one origin sent ({max} at once)");
    // The requests received are exactly the attempts the two processes recorded.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (log, total) = attempts(&a.api(&account), &endpoint).await;
        if total as usize >= got.len() {
            assert_eq!(total as usize, got.len(), "attempts logged vs received");
            assert_eq!(log.len(), got.len());
            assert!(log.iter().all(|a| a["status_code"] == 200));
            let logged: HashSet<&str> = log.iter().filter_map(|a| a["event_id"].as_str()).collect();
            assert_eq!(logged, by_id.keys().copied().collect::<HashSet<_>>());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{total} attempts logged, {} received",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(receiver.got().len(), got.len(), "nothing arrived later");
    eprintln!(
        "two processes: {total_events} events, {} requests, at most {max} at once",
        got.len()
    );
}
