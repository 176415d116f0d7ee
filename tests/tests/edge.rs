//! The edge worker in workerd, over real HTTP: persistent and dynamic links, fallbacks, group rules,
//! monetization, headers, the sync route and hostile input.

use e2e::{
    BROWSER_UA, DEFAULT_FALLBACK, Options, SYNC_SECRET, Worker, domain, dynamic_path, eventually,
    group, link, token,
};
use kv_model::LinkRecord;
use reqwest::Method;
use serde_json::json;
use shared_crypto::{GroupKey, Payload, TokenCipher};

const HOST: &str = "go.example.com";
const HOST_FALLBACK: &str = "https://www.example.com/not-found";
const GROUP: &str = "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10";
const TWITTERBOT: &str = "Twitterbot/1.0";

fn key() -> GroupKey {
    GroupKey::from_bytes([0x42; 32])
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// The time since the UNIX epoch.
fn now() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
}

/// A worker with `go.example.com` enabled (own fallback), one plain group and a blocklist.
async fn seeded() -> Worker {
    seed(Worker::start()).await
}

/// [`seeded`]'s records in `w`.
async fn seed(w: Worker) -> Worker {
    w.sync(
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (format!("group:{GROUP}"), group(&key(), json!({}))),
            (s("blocklist"), json!({"v": 1, "domains": ["evil.example"]})),
        ],
        vec![],
    )
    .await;
    w
}

/// KV value of an active link in [`GROUP`] to `long_url`, with `edit` applied to the record.
fn link_with(long_url: &str, edit: impl FnOnce(&mut LinkRecord)) -> serde_json::Value {
    let mut record = LinkRecord::new(long_url, GROUP, true);
    edit(&mut record);
    serde_json::to_value(record).expect("serialize")
}

#[tokio::test]
async fn persistent_links_and_fallbacks() {
    let w = seeded().await;
    let now_ms = i64::try_from(now().as_millis()).expect("milliseconds fit");
    w.sync(
        vec![
            (
                format!("link:{HOST}:promo"),
                link("https://dest.example/landing?x=1", GROUP, true),
            ),
            (
                format!("link:{HOST}:paused"),
                link("https://dest.example/paused", GROUP, false),
            ),
            (
                format!("link:{HOST}:future"),
                json!({"v": 2, "long_url": "https://dest.example/v2",
                                                   "group_id": GROUP, "is_active": true}),
            ),
            (
                format!("link:{HOST}:broken"),
                json!({"v": 1, "long_url": 42}),
            ),
            (
                s("link:bare.example.com:promo"),
                link("https://dest.example/bare", GROUP, true),
            ),
            (s("domain:bare.example.com"), domain(true, None)),
            (
                format!("link:{HOST}:expired"),
                link_with("https://dest.example/expired", |l| {
                    l.expires_at = Some(now_ms - 1);
                }),
            ),
            (
                format!("link:{HOST}:expiring"),
                link_with("https://dest.example/expiring", |l| {
                    l.expires_at = Some(now_ms + 3_600_000);
                }),
            ),
            (
                format!("link:{HOST}:verbatim"),
                link_with("https://dest.example/verbatim?x=1", |l| {
                    l.forward_query = false;
                }),
            ),
            (
                format!("link:{HOST}:evil"),
                link("https://www.evil.example/landing", GROUP, true),
            ),
            (
                s("link:off.example.com:old"),
                link("https://dest.example/old", GROUP, true),
            ),
            (
                s("domain:off.example.com"),
                domain(false, Some("https://off.example/fallback")),
            ),
        ],
        vec![],
    )
    .await;

    // An active link: 302 (never 301) to its destination, private, with a referrer policy, indexable.
    let v = w.visit(HOST, "/promo", &[]).await;
    v.assert_destination("https://dest.example/landing?x=1");
    assert_eq!(v.header("x-robots-tag"), None);
    assert!(v.body.is_empty());

    // Short codes and hosts are matched case-insensitively; the query is not part of the code, and is forwarded
    // unless the link says not to (the destination's own parameters win a clash).
    for (host, path, want) in [
        (
            "GO.Example.COM",
            "/PROMO?utm=1&x=2",
            "https://dest.example/landing?x=1&utm=1",
        ),
        (HOST, "/verbatim?utm=1", "https://dest.example/verbatim?x=1"),
        (
            HOST,
            "/expiring?utm=1",
            "https://dest.example/expiring?utm=1",
        ),
        (
            "go.example.com:8787",
            "/promo",
            "https://dest.example/landing?x=1",
        ),
    ] {
        w.visit(host, path, &[]).await.assert_redirect(want);
    }

    // HEAD answers the same as GET.
    let head = w.send(Method::HEAD, HOST, "/promo", &[]).await;
    head.assert_redirect("https://dest.example/landing?x=1");

    // Paused, expired, blocklisted (the seeded blocklist has `evil.example`), unknown, `/`, non-link paths, an
    // unknown record version and an unparsable record: the domain's fallback, marked noindex.
    for path in [
        "/paused",
        "/expired",
        "/evil",
        "/nope",
        "/",
        "/favicon.ico",
        "/a/b",
        "/future",
        "/broken",
    ] {
        let v = w.visit(HOST, path, &[]).await;
        v.assert_redirect(HOST_FALLBACK);
        assert_eq!(
            v.header("x-robots-tag"),
            Some("noindex, nofollow"),
            "{path}"
        );
        assert_eq!(
            v.header("cache-control"),
            Some("private, no-store, max-age=0"),
            "{path}"
        );
    }
    w.send(Method::HEAD, HOST, "/paused", &[])
        .await
        .assert_redirect(HOST_FALLBACK);

    // A domain without its own fallback, and an unknown host: the configured default.
    for (host, path, want) in [
        ("bare.example.com", "/promo", "https://dest.example/bare"),
        ("bare.example.com", "/nope", DEFAULT_FALLBACK),
        ("unknown.example.net", "/promo", DEFAULT_FALLBACK),
        ("unknown.example.net", "/", DEFAULT_FALLBACK),
    ] {
        w.visit(host, path, &[]).await.assert_redirect(want);
    }

    // A disabled domain keeps serving its existing persistent links.
    for (host, path, want) in [
        ("off.example.com", "/old", "https://dest.example/old"),
        ("off.example.com", "/nope", "https://off.example/fallback"),
    ] {
        w.visit(host, path, &[]).await.assert_redirect(want);
    }

    // Other methods are not links.
    let post = w.send(Method::POST, HOST, "/promo", &[]).await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
}

/// A new isolate's first visit to a dynamic link opens its token with WebCrypto, in the entry module
/// (edge-worker/src/shell/fast.rs, `hand_on`): what it opens is the token's own payload, checked as spec 4.5
/// says after it; a token WebCrypto does not open (tampered) falls back as any such token does, and a malformed one
/// is never handed to it. Every later token is the wasm's to open. Each case on a new isolate (a worker of its own).
#[tokio::test]
async fn a_first_visits_token_is_opened_by_webcrypto() {
    let counting = || {
        seed(Worker::start_with(Options {
            env: vec![(s("KV_FAULTS"), s("1"))],
            ..Options::default()
        }))
    };
    let mut first = Payload::new("http://dest.example/first?x=1");
    first.back_param = Some(s("utm_source=e2e"));
    first.expires_at = Some(now().as_secs() as i64 + 3600);
    let first = token(&key(), &first);
    let later = token(&key(), &Payload::new("https://dest.example/later"));
    let mut tampered = first.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    // Plaintexts that are not a payload's text: not UTF-8, or led by a byte order mark.
    let cipher = TokenCipher::new(&key());
    let not_utf8 = cipher.seal_plaintext(
        b"{\"destination_url\":\"https://dest.example/\xff\"}",
        [7; 12],
    );
    let bom = cipher.seal_plaintext(
        "\u{feff}{\"destination_url\":\"https://dest.example/bom\"}".as_bytes(),
        [8; 12],
    );
    let (w1, w2, w3, w4, w5) =
        tokio::join!(counting(), counting(), counting(), counting(), counting());

    // Opened by WebCrypto: the destination with http upgraded and back_param appended; then the wasm opens the
    // next token itself, and the first one is answered from what WebCrypto opened.
    w1.visit(HOST, &dynamic_path(GROUP, &first), &[])
        .await
        .assert_destination("https://dest.example/first?x=1&utm_source=e2e");
    assert_eq!(w1.webcrypto_decrypts().await, (1, 1));
    w1.visit(HOST, &dynamic_path(GROUP, &later), &[])
        .await
        .assert_destination("https://dest.example/later");
    w1.visit(HOST, &dynamic_path(GROUP, &first), &[])
        .await
        .assert_destination("https://dest.example/first?x=1&utm_source=e2e");
    assert_eq!(w1.webcrypto_decrypts().await, (1, 1));

    // Tampered: WebCrypto refuses it, the visitor gets the domain's fallback, and the next token still opens.
    let v = w2.visit(HOST, &dynamic_path(GROUP, &tampered), &[]).await;
    assert_eq!(v.status, 302);
    assert_eq!(v.header("location"), Some(HOST_FALLBACK));
    assert_eq!(w2.webcrypto_decrypts().await, (1, 0));
    w2.visit(HOST, &dynamic_path(GROUP, &first), &[])
        .await
        .assert_destination("https://dest.example/first?x=1&utm_source=e2e");
    assert_eq!(w2.webcrypto_decrypts().await, (1, 0));

    // Malformed: refused before any decryption.
    let v = w3
        .visit(HOST, &dynamic_path(GROUP, "not-a-token"), &[])
        .await;
    assert_eq!(v.header("location"), Some(HOST_FALLBACK));
    assert_eq!(w3.webcrypto_decrypts().await, (0, 0));

    // Opened by WebCrypto, but not a payload's text: not UTF-8 (the strict decoder hands nothing on, and the wasm
    // opens the token itself) or led by a byte order mark (handed on with it, and the payload's reading refuses it).
    // The fallback either way, on the first visit as on the next (which WebCrypto is not asked for).
    for (w, sealed) in [(&w4, &not_utf8), (&w5, &bom)] {
        for _ in 0..2 {
            let v = w.visit(HOST, &dynamic_path(GROUP, sealed), &[]).await;
            assert_eq!(v.status, 302);
            assert_eq!(v.header("location"), Some(HOST_FALLBACK));
        }
        assert_eq!(w.webcrypto_decrypts().await, (1, 1));
    }
}

#[tokio::test]
async fn dynamic_links_follow_spec_4_5() {
    let w = seeded().await;
    w.sync(
        vec![
            (
                s("domain:off.example.com"),
                domain(false, Some("https://off.example/fallback")),
            ),
            (s("domain:bare.example.com"), domain(true, None)),
        ],
        vec![],
    )
    .await;
    let now = now().as_secs() as i64;

    // Valid: http upgraded, back_param appended with the right separator, before the fragment.
    let mut p = Payload::new("http://dest.example/landing?x=1#top");
    p.back_param = Some(s("utm_source=mail&utm_medium=e2e"));
    p.expires_at = Some(now + 3600);
    let path = dynamic_path(GROUP, &token(&key(), &p));
    let v = w.visit(HOST, &path, &[]).await;
    v.assert_destination("https://dest.example/landing?x=1&utm_source=mail&utm_medium=e2e#top");
    w.send(Method::HEAD, HOST, &path, &[])
        .await
        .assert_redirect("https://dest.example/landing?x=1&utm_source=mail&utm_medium=e2e#top");
    // Group ids are matched case-insensitively.
    w.visit(
        HOST,
        &dynamic_path(
            &GROUP.to_uppercase(),
            &token(&key(), &Payload::new("https://dest.example/u")),
        ),
        &[],
    )
    .await
    .assert_redirect("https://dest.example/u");
    // Any enabled domain serves dynamic links.
    let plain = token(&key(), &Payload::new("https://dest.example/plain"));
    w.visit("bare.example.com", &dynamic_path(GROUP, &plain), &[])
        .await
        .assert_redirect("https://dest.example/plain");

    // Every failure: a silent 302 to the domain's fallback.
    let mut expired = Payload::new("https://dest.example/expired");
    expired.expires_at = Some(now - 1);
    let mut too_long = Payload::new(format!("https://dest.example/{}", "a".repeat(2030)));
    too_long.back_param = Some(s("utm_source=make_it_longer_than_2048"));
    let valid = token(&key(), &Payload::new("https://dest.example/ok"));
    let mut tampered = valid.clone().into_bytes();
    let last = tampered.len() - 5;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let other_key = GroupKey::from_bytes([0x43; 32]);
    let failures = [
        ("expired", dynamic_path(GROUP, &token(&key(), &expired))),
        (
            "blocked domain",
            dynamic_path(
                GROUP,
                &token(&key(), &Payload::new("https://evil.example/x")),
            ),
        ),
        (
            "blocked subdomain",
            dynamic_path(
                GROUP,
                &token(&key(), &Payload::new("https://a.b.evil.example/")),
            ),
        ),
        (
            "not https",
            dynamic_path(GROUP, &token(&key(), &Payload::new("ftp://dest.example/"))),
        ),
        (
            "too long with back_param",
            dynamic_path(GROUP, &token(&key(), &too_long)),
        ),
        ("tampered", dynamic_path(GROUP, &tampered)),
        (
            "wrong key",
            dynamic_path(
                GROUP,
                &token(&other_key, &Payload::new("https://dest.example/")),
            ),
        ),
        (
            "unknown group",
            dynamic_path("11111111-2222-3333-4444-555555555555", &valid),
        ),
        ("garbage", dynamic_path(GROUP, "not-a-token")),
        ("padded", format!("/e/{GROUP}?signature={valid}%3D%3D")),
        ("no signature", format!("/e/{GROUP}")),
        ("empty signature", format!("/e/{GROUP}?signature=")),
        ("bad group id", format!("/e/not-a-uuid!?signature={valid}")),
    ];
    for (what, path) in &failures {
        let v = w.visit(HOST, path, &[]).await;
        assert_eq!(v.header("location"), Some(HOST_FALLBACK), "{what}");
        assert_eq!(v.status, 302, "{what}");
        assert_eq!(
            v.header("x-robots-tag"),
            Some("noindex, nofollow"),
            "{what}"
        );
    }
    // Tokens are not served on disabled or unknown domains.
    w.visit("off.example.com", &dynamic_path(GROUP, &valid), &[])
        .await
        .assert_redirect("https://off.example/fallback");
    w.visit("unknown.example.net", &dynamic_path(GROUP, &valid), &[])
        .await
        .assert_redirect(DEFAULT_FALLBACK);

    // Deleting the group stops its tokens at once on this isolate (the sync route evicts the cached record).
    w.visit(HOST, &dynamic_path(GROUP, &valid), &[])
        .await
        .assert_redirect("https://dest.example/ok");
    w.sync(vec![], vec![format!("group:{GROUP}")]).await;
    w.visit(HOST, &dynamic_path(GROUP, &valid), &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    // Recreated with a new key: old tokens stay dead, new ones work.
    let new_key = GroupKey::from_bytes([0x44; 32]);
    w.put(format!("group:{GROUP}"), group(&new_key, json!({})))
        .await;
    w.visit(HOST, &dynamic_path(GROUP, &valid), &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    let fresh = token(&new_key, &Payload::new("https://dest.example/new"));
    w.visit(HOST, &dynamic_path(GROUP, &fresh), &[])
        .await
        .assert_redirect("https://dest.example/new");
}

#[tokio::test]
async fn access_rules() {
    let w = seeded().await;
    let strict = "aaaaaaaa-0000-4000-8000-000000000001";
    let allow = "aaaaaaaa-0000-4000-8000-000000000002";
    w.sync(
        vec![
            (
                format!("group:{strict}"),
                group(
                    &key(),
                    json!({"access": {"block_countries": ["RU"], "block_bots": true,
                                                "fallback_url": "https://example.com/blocked"},
                                     "analytics": {"enabled": true}}),
                ),
            ),
            (
                format!("group:{allow}"),
                group(&key(), json!({"access": {"allow_countries": ["US", "DE"]}})),
            ),
            (
                format!("link:{HOST}:strict"),
                link("https://dest.example/persistent", strict, true),
            ),
        ],
        vec![],
    )
    .await;
    let t = token(&key(), &Payload::new("https://dest.example/ok"));
    let strict_path = dynamic_path(strict, &t);
    let allow_path = dynamic_path(allow, &t);
    let blocked = "https://example.com/blocked";

    // Countries from CF-IPCountry (local runs have no request.cf.country).
    w.visit(HOST, &strict_path, &[("CF-IPCountry", "US")])
        .await
        .assert_redirect("https://dest.example/ok");
    w.visit(HOST, &strict_path, &[])
        .await
        .assert_redirect("https://dest.example/ok");
    let v = w.visit(HOST, &strict_path, &[("CF-IPCountry", "RU")]).await;
    v.assert_redirect(blocked);
    assert_eq!(v.header("x-robots-tag"), Some("noindex, nofollow"));
    // request.cf.country wins over the header (workerd takes `cf` from the MF-CF-Blob header).
    for (header, cf, want) in [
        ("RU", r#"{"country":"DE"}"#, "https://dest.example/ok"),
        ("DE", r#"{"country":"RU"}"#, blocked),
    ] {
        let headers = [("CF-IPCountry", header), ("MF-CF-Blob", cf)];
        w.visit(HOST, &strict_path, &headers)
            .await
            .assert_redirect(want);
    }

    // Bots: User-Agent patterns (link previews, crawlers, HTTP libraries, headless browsers, none at all) and
    // the Cloudflare bot score.
    for ua in [
        TWITTERBOT,
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "curl/8.5.0",
        "python-requests/2.32.3",
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0",
        "",
    ] {
        w.visit(HOST, &strict_path, &[("User-Agent", ua)])
            .await
            .assert_redirect(blocked);
    }
    let low_score = r#"{"country":"US","botManagement":{"score":5,"verifiedBot":false}}"#;
    let high_score = r#"{"country":"US","botManagement":{"score":95,"verifiedBot":false}}"#;
    let verified = r#"{"country":"US","botManagement":{"score":90,"verifiedBot":true}}"#;
    w.visit(HOST, &strict_path, &[("MF-CF-Blob", low_score)])
        .await
        .assert_redirect(blocked);
    w.visit(HOST, &strict_path, &[("MF-CF-Blob", verified)])
        .await
        .assert_redirect(blocked);
    w.visit(HOST, &strict_path, &[("MF-CF-Blob", high_score)])
        .await
        .assert_redirect("https://dest.example/ok");

    // The rules apply to the group's persistent links too.
    w.visit(HOST, "/strict", &[("CF-IPCountry", "RU")])
        .await
        .assert_redirect(blocked);
    w.visit(HOST, "/strict", &[("CF-IPCountry", "FR")])
        .await
        .assert_redirect("https://dest.example/persistent");

    // Allow list without an access fallback: others (and unknown countries) go to the domain's fallback; bots
    // are not blocked by this group.
    w.visit(HOST, &allow_path, &[("CF-IPCountry", "DE")])
        .await
        .assert_redirect("https://dest.example/ok");
    w.visit(HOST, &allow_path, &[("CF-IPCountry", "FR")])
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(HOST, &allow_path, &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    w.visit(
        HOST,
        &allow_path,
        &[("CF-IPCountry", "us"), ("User-Agent", TWITTERBOT)],
    )
    .await
    .assert_redirect("https://dest.example/ok");
    // An invalid token never reaches the access rules: the domain fallback, not the access fallback.
    w.visit(
        HOST,
        &dynamic_path(strict, "bad"),
        &[("CF-IPCountry", "RU")],
    )
    .await
    .assert_redirect(HOST_FALLBACK);
}

#[tokio::test]
async fn monetization_interstitial() {
    let w = seeded().await;
    let paid = "bbbbbbbb-0000-4000-8000-000000000001";
    w.sync(
        vec![
            (
                format!("group:{paid}"),
                group(
                    &key(),
                    json!({"monetization": {"interstitial_seconds": 4},
                                     "access": {"block_countries": ["RU"]}}),
                ),
            ),
            (
                format!("link:{HOST}:paid"),
                link("https://dest.example/p?a=1&b=2", paid, true),
            ),
        ],
        vec![],
    )
    .await;
    let mut p = Payload::new("https://dest.example/x?q=\"quoted\"&lt=<script>alert(1)</script>");
    p.back_param = Some(s("ref='e2e'"));
    let path = dynamic_path(paid, &token(&key(), &p));

    let v = w.visit(HOST, &path, &[]).await;
    assert_eq!(v.status, 200, "{}", v.body);
    assert!(
        v.header("content-type")
            .is_some_and(|c| c.starts_with("text/html"))
    );
    assert_eq!(v.header("x-robots-tag"), Some("noindex, nofollow"));
    assert_eq!(
        v.header("cache-control"),
        Some("private, no-store, max-age=0")
    );
    assert_eq!(
        v.header("referrer-policy"),
        Some("strict-origin-when-cross-origin")
    );
    let csp = v.header("content-security-policy").expect("CSP");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    // The destination, HTML-escaped, is in the continue link and the no-JavaScript refresh, never raw.
    let href = "https://dest.example/x?q=&quot;quoted&quot;&amp;lt=&lt;script&gt;alert(1)&lt;/script&gt;\
                &amp;ref=&#39;e2e&#39;";
    assert!(
        v.body.contains(&format!("<a id=\"go\" href=\"{href}\"")),
        "{}",
        v.body
    );
    assert!(
        v.body.contains(&format!("content=\"4;url={href}\"")),
        "{}",
        v.body
    );
    assert!(v.body.contains("<span id=\"s\">4</span>"));
    assert!(!v.body.contains("<script>alert"));
    assert_eq!(v.body.matches("<script>").count(), 1);

    // HEAD: same page status and headers, no body.
    let head = w.send(Method::HEAD, HOST, &path, &[]).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    // Bots never see the interstitial: straight to the destination.
    let bot = w.visit(HOST, &path, &[("User-Agent", TWITTERBOT)]).await;
    assert_eq!(bot.status, 302);
    assert_eq!(
        bot.header("location"),
        Some("https://dest.example/x?q=\"quoted\"&lt=<script>alert(1)</script>&ref='e2e'")
    );
    // Access rules come before monetization.
    w.visit(HOST, &path, &[("CF-IPCountry", "RU")])
        .await
        .assert_redirect(HOST_FALLBACK);
    // Persistent links of the group get the page too.
    let v = w.visit(HOST, "/paid", &[("User-Agent", BROWSER_UA)]).await;
    assert_eq!(v.status, 200);
    assert!(
        v.body
            .contains("href=\"https://dest.example/p?a=1&amp;b=2\"")
    );
}

/// Visits `path` three times (the first may load the records, the second takes the fast path, the third can be the
/// entry module's kept answer) and checks each redirect.
async fn visit_thrice(w: &Worker, host: &str, path: &str, location: &str) {
    for _ in 0..3 {
        w.visit(host, path, &[]).await.assert_redirect(location);
    }
}

/// The entry module keeps the fast path's redirects (edge-worker/js/entry.js): they must change the moment a
/// record does, end when the link or token expires, and never answer another URL, host or method.
#[tokio::test]
async fn kept_answers_follow_records_expiry_and_the_request() {
    let w = seeded().await;
    let now_ms = i64::try_from(now().as_millis()).expect("milliseconds fit");
    let soon_ms = now_ms + 2_000;
    w.sync(
        vec![
            (
                format!("link:{HOST}:kept"),
                link("https://dest.example/1", GROUP, true),
            ),
            (
                format!("link:{HOST}:soon"),
                link_with("https://dest.example/soon", |l| {
                    l.expires_at = Some(soon_ms)
                }),
            ),
            (
                s("domain:other.example.com"),
                domain(true, Some("https://other.example/fallback")),
            ),
            (
                s("link:other.example.com:kept"),
                link("https://dest.example/other", GROUP, true),
            ),
        ],
        vec![],
    )
    .await;
    visit_thrice(&w, HOST, "/kept", "https://dest.example/1").await;
    // Another host, query or method is another request.
    visit_thrice(
        &w,
        "other.example.com",
        "/kept",
        "https://dest.example/other",
    )
    .await;
    visit_thrice(&w, HOST, "/kept?a=1", "https://dest.example/1?a=1").await;
    visit_thrice(&w, HOST, "/kept?a=2", "https://dest.example/1?a=2").await;
    w.send(Method::HEAD, HOST, "/kept", &[])
        .await
        .assert_redirect("https://dest.example/1");
    let post = w.send(Method::POST, HOST, "/kept", &[]).await;
    assert_eq!(post.status, 405);

    // A record written through the sync route: the next request sees it.
    w.put(
        format!("link:{HOST}:kept"),
        link("https://dest.example/2", GROUP, true),
    )
    .await;
    visit_thrice(&w, HOST, "/kept", "https://dest.example/2").await;
    w.put(
        format!("link:{HOST}:kept"),
        link("https://dest.example/2", GROUP, false),
    )
    .await;
    visit_thrice(&w, HOST, "/kept", HOST_FALLBACK).await;
    w.put(
        format!("link:{HOST}:kept"),
        link("https://dest.example/3", GROUP, true),
    )
    .await;
    visit_thrice(&w, HOST, "/kept", "https://dest.example/3").await;
    // The blocklist and the group are records too.
    w.put(s("blocklist"), json!({"v": 1, "domains": ["dest.example"]}))
        .await;
    visit_thrice(&w, HOST, "/kept", HOST_FALLBACK).await;
    w.put(s("blocklist"), json!({"v": 1, "domains": []})).await;
    visit_thrice(&w, HOST, "/kept", "https://dest.example/3").await;
    let campaign = dynamic_path(
        GROUP,
        &token(&key(), &Payload::new("https://dest.example/campaign")),
    );
    visit_thrice(&w, HOST, &campaign, "https://dest.example/campaign").await;
    w.sync(vec![], vec![format!("group:{GROUP}")]).await;
    visit_thrice(&w, HOST, &campaign, HOST_FALLBACK).await;
    w.put(format!("group:{GROUP}"), group(&key(), json!({})))
        .await;
    visit_thrice(&w, HOST, &campaign, "https://dest.example/campaign").await;

    // Expiry ends a kept answer on time, for a link and for a dynamic link's token.
    let now_s = now().as_secs() as i64;
    let mut p = Payload::new("https://dest.example/token");
    p.expires_at = Some(now_s + 3);
    let token_path = dynamic_path(GROUP, &token(&key(), &p));
    visit_thrice(&w, HOST, "/soon", "https://dest.example/soon").await;
    visit_thrice(&w, HOST, &token_path, "https://dest.example/token").await;
    let wait_ms = soon_ms - i64::try_from(now().as_millis()).expect("milliseconds fit") + 100;
    tokio::time::sleep(std::time::Duration::from_millis(
        u64::try_from(wait_ms.max(0)).unwrap_or(0),
    ))
    .await;
    visit_thrice(&w, HOST, "/soon", HOST_FALLBACK).await;
    let wait_ms =
        (now_s + 3) * 1000 - i64::try_from(now().as_millis()).expect("milliseconds fit") + 100;
    tokio::time::sleep(std::time::Duration::from_millis(
        u64::try_from(wait_ms.max(0)).unwrap_or(0),
    ))
    .await;
    visit_thrice(&w, HOST, &token_path, HOST_FALLBACK).await;
}

#[tokio::test]
async fn sync_route_authenticates_validates_and_evicts() {
    let w = seeded().await;
    let body = json!({"put": [{"key": format!("link:{HOST}:x"), "value": link("https://dest.example/1", GROUP, true)}]})
        .to_string();
    for bearer in [None, Some("wrong"), Some("")] {
        let (status, reply) = w.sync_as(bearer, body.clone()).await;
        assert_eq!(status, 401, "{bearer:?}");
        assert_eq!(reply, json!({"ok": false, "error": "unauthorized"}));
    }
    let (status, reply) = w.sync_as(Some(SYNC_SECRET), body).await;
    assert_eq!(
        (status, reply),
        (200, json!({"ok": true, "put": 1, "deleted": 0}))
    );

    // The link is now cached by this isolate; an update through sync is visible at once.
    w.visit(HOST, "/x", &[])
        .await
        .assert_redirect("https://dest.example/1");
    for (active, want) in [(true, "https://dest.example/2"), (false, HOST_FALLBACK)] {
        w.put(
            format!("link:{HOST}:x"),
            link("https://dest.example/2", GROUP, active),
        )
        .await;
        w.visit(HOST, "/x", &[]).await.assert_redirect(want);
    }
    let (status, reply) = w
        .sync_as(
            Some(SYNC_SECRET),
            json!({"delete": [format!("link:{HOST}:x"), "link:none:y"]}).to_string(),
        )
        .await;
    assert_eq!(
        (status, reply),
        (200, json!({"ok": true, "put": 0, "deleted": 2}))
    );
    w.visit(HOST, "/x", &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    // A domain's fallback changes at once too.
    w.put(
        format!("domain:{HOST}"),
        domain(true, Some("https://www.example.com/new")),
    )
    .await;
    w.visit(HOST, "/x", &[])
        .await
        .assert_redirect("https://www.example.com/new");

    // Bad batches: 400 with a reason, nothing written.
    let too_many =
        json!({"delete": (0..1001).map(|i| format!("link:{HOST}:c{i}")).collect::<Vec<_>>()});
    let big = format!(
        r#"{{"put":[{{"key":"link:{HOST}:big","value":{{"pad":"{}"}}}}]}}"#,
        "a".repeat(1 << 20)
    );
    for (body, error) in [
        (s("not json"), "invalid_json"),
        (s("[]"), "invalid_json"),
        (
            json!({"put": [{"key": "other:key", "value": {}}]}).to_string(),
            "invalid_key",
        ),
        (
            json!({"put": [{"key": format!("link:{HOST}:s"), "value": "{}"}]}).to_string(),
            "value_not_an_object",
        ),
        (too_many.to_string(), "too_many_operations"),
    ] {
        let (status, reply) = w.sync_as(Some(SYNC_SECRET), body).await;
        assert_eq!(status, 400, "{error}: {reply}");
        assert_eq!(reply["ok"], false);
        assert!(
            reply["error"]
                .as_str()
                .is_some_and(|e| e.starts_with(error)),
            "{error}: {reply}"
        );
    }
    // Over 1 MiB: refused from the Content-Length before the body is read. The worker answers 400 and workerd
    // may close the connection while the client is still sending, which the client sees as a reset instead.
    match w.try_sync_as(Some(SYNC_SECRET), big).await {
        Ok((status, reply)) => {
            assert_eq!(status, 400, "{reply}");
            assert_eq!(reply["error"], "body_too_large");
        }
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }
    // Nothing was written.
    w.visit(HOST, "/big", &[])
        .await
        .assert_redirect("https://www.example.com/new");

    // GET on the sync path is just a non-link path.
    w.visit(HOST, "/__shortlink/sync", &[])
        .await
        .assert_redirect("https://www.example.com/new");

    // Without a configured secret, the route does not exist.
    let closed = Worker::start_with(Options {
        sync_secret: None,
        ..Options::default()
    });
    let (status, _) = closed.sync_as(Some(SYNC_SECRET), s("{}")).await;
    assert_eq!(status, 404);
    let (status, _) = closed.sync_as(Some(""), s("{}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn hostile_input_never_causes_a_5xx() {
    let w = seeded().await;
    let long_sig = "A".repeat(20_000);
    let paths = [
        s("/%00"),
        s("/%ff%fe"),
        s("/..%2f..%2fetc%2fpasswd"),
        format!("/{}", "a".repeat(5000)),
        s("/e/"),
        s("/e//"),
        format!("/e/{GROUP}?signature=%"),
        format!("/e/{GROUP}?signature=%ZZ%00%ff"),
        format!("/e/{GROUP}?signature={long_sig}"),
        format!("/e/{GROUP}?signature=AQ&signature=AQ"),
        format!("/e/{GROUP}?signature=AQ%3D%3D%3D"),
        format!("/e/{}?signature=AQ", "f".repeat(100)),
        s("/?signature=x"),
        s("/abc?%%%"),
        s("/ünïcödé"),
        s("/e/%20?signature=x"),
    ];
    // Not "bad host", "ÿ.example" or "a:b:c": local workerd/Miniflare cannot build a request URL from such a Host
    // and answers 500 before any worker code runs (the JavaScript floor worker gets the same 500); Cloudflare's
    // edge refuses these requests before they reach a worker.
    let hosts = [
        HOST,
        "",
        "[::1]:1",
        "localhost",
        "a_b.example",
        "1.2.3.4:80",
        &"x".repeat(300),
    ];
    for path in &paths {
        for host in hosts {
            let req = w
                .request(Method::GET, host, path)
                .header("User-Agent", BROWSER_UA);
            let Ok(resp) = req.send().await else {
                // reqwest refuses some of these Host values before sending; nothing reached the worker.
                continue;
            };
            let status = resp.status().as_u16();
            if status == 400 {
                // workerd's HTTP parser refuses a malformed Host before any worker code runs.
                assert!(host.is_empty(), "{host:?} {path}: 400");
                continue;
            }
            assert!(status == 302 || status == 404, "{host:?} {path}: {status}");
            if status == 302 {
                let loc = resp
                    .headers()
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .unwrap_or_default();
                assert!(
                    loc == HOST_FALLBACK || loc == DEFAULT_FALLBACK,
                    "{host:?} {path}: {loc}"
                );
            }
        }
    }
    // Odd headers: junk countries, cf blobs of the wrong shape, huge User-Agents.
    let t = token(&key(), &Payload::new("https://dest.example/ok"));
    let path = dynamic_path(GROUP, &t);
    let huge_ua = "Mozilla/5.0 ".repeat(1000);
    for headers in [
        vec![("CF-IPCountry", "ZZZZ")],
        vec![("CF-IPCountry", "")],
        vec![("MF-CF-Blob", r#"{"country":42,"botManagement":"yes"}"#)],
        vec![(
            "MF-CF-Blob",
            r#"{"botManagement":{"score":"low","verifiedBot":"no"}}"#,
        )],
        vec![("User-Agent", huge_ua.as_str())],
    ] {
        let v = w.visit(HOST, &path, &headers).await;
        assert_eq!(v.status, 302, "{headers:?}");
        assert!(v.status < 500);
    }
    // Methods and bodies on visitor paths.
    for method in [Method::PUT, Method::DELETE, Method::OPTIONS, Method::PATCH] {
        let v = w.send(method.clone(), HOST, "/promo", &[]).await;
        assert_eq!(v.status, 405, "{method}");
    }
}

#[tokio::test]
async fn floor_worker_serves() {
    // The benchmark's baseline runs through the same harness; make sure it answers what the benchmark assumes.
    let floor = Worker::start_with(Options {
        floor: true,
        ..Options::default()
    });
    floor
        .visit(HOST, "/anything", &[])
        .await
        .assert_redirect("https://example.com/");
}

/// A new isolate decides a link's first visit from the copy of its group's settings the link's record carries
/// (one round of KV reads: the link and the blocklist), then reads the group's own record after the response:
/// from then on the group's record applies, and a copy never stands in for a group the isolate holds.
#[tokio::test]
async fn a_first_visit_uses_the_links_copy_of_its_groups_settings_then_the_group() {
    let w = seeded().await;
    // The copy is older than the group's record: it still has an interstitial the group has since dropped.
    let old_settings = serde_json::from_value(json!({"monetization": {"interstitial_seconds": 3}}))
        .expect("settings");
    w.sync(
        vec![
            (
                format!("link:{HOST}:copied"),
                link_with("https://dest.example/copied", |l| {
                    l.group_settings = Some(old_settings);
                }),
            ),
            (
                format!("link:{HOST}:also"),
                link_with("https://dest.example/also", |l| {
                    l.group_settings = Some(
                        serde_json::from_value(json!({"monetization": {}})).expect("settings"),
                    );
                }),
            ),
        ],
        vec![],
    )
    .await;

    // The isolate does not hold the group: the copy decides (the interstitial, a 200 page).
    let first = w
        .visit(HOST, "/copied", &[("User-Agent", BROWSER_UA)])
        .await;
    assert_eq!(first.status, 200, "{:?}", first.headers);
    assert!(first.body.contains("https://dest.example/copied"));

    // The group's own record, read after that response, applies from then on: no interstitial.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let v = w
            .visit(HOST, "/copied", &[("User-Agent", BROWSER_UA)])
            .await;
        if v.status == 302 {
            v.assert_destination("https://dest.example/copied");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the group's record never replaced the copy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Another link whose copy has rules, on an isolate that holds the group: the group's record, not the copy.
    w.visit(HOST, "/also", &[("User-Agent", BROWSER_UA)])
        .await
        .assert_destination("https://dest.example/also");
}

/// The first-visit path (edge-worker/src/shell/first.rs): an isolate that holds nothing of a link reads the link
/// before any async Rust runs (the blocklist after it, this link's record lacking the origin's word: see
/// `a_vouched_link_is_decided_before_the_blocklist_is_read`), and answers from the link's copy of its group's
/// settings; the group's own record is read after that response and decides from the next visit on. Here the group
/// has added an interstitial since the link was published: the first visit redirects (the copy), the next ones show
/// the interstitial (the group). Every record is read once: what the first visit read is cached, not read again by
/// the full path. A dynamic link's first visit reads its group and the blocklist the same way, and (here, where
/// neither names the host) its domain in a second round.
#[tokio::test]
async fn a_first_visit_reads_each_record_once() {
    let w = Worker::start_with(Options {
        env: vec![(s("KV_FAULTS"), s("1"))],
        ..Options::default()
    });
    let other_group = "1c8d7b2f-8e4a-4d66-8b66-3e2d2a6f9b21";
    w.sync(
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (
                format!("group:{GROUP}"),
                group(&key(), json!({"monetization": {"interstitial_seconds": 3}})),
            ),
            (format!("group:{other_group}"), group(&key(), json!({}))),
            (s("blocklist"), json!({"v": 1, "domains": ["evil.example"]})),
            (
                format!("link:{HOST}:fresh"),
                link_with("https://dest.example/fresh", |l| {
                    l.group_settings = Some(Default::default());
                }),
            ),
        ],
        vec![],
    )
    .await;
    let browser = [("User-Agent", BROWSER_UA)];
    w.visit(HOST, "/fresh", &browser)
        .await
        .assert_destination("https://dest.example/fresh");
    // The group's own record, read after that response, decides from then on: the interstitial.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let v = w.visit(HOST, "/fresh", &browser).await;
        if v.status == 200 {
            assert!(v.body.contains("https://dest.example/fresh"));
            break;
        }
        v.assert_destination("https://dest.example/fresh");
        assert!(
            std::time::Instant::now() < deadline,
            "the group's record never replaced the copy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let reads = w
        .assert_read_once(&[
            format!("link:{HOST}:fresh"),
            s("blocklist"),
            format!("group:{GROUP}"),
        ])
        .await;
    assert_eq!(reads.get(&format!("domain:{HOST}")), None, "{reads:?}");

    // A dynamic link in a group the isolate has not read: the group, then the domain (the blocklist already held).
    let path = dynamic_path(
        other_group,
        &token(&key(), &Payload::new("https://dest.example/dynamic")),
    );
    w.visit_destination(HOST, &path, 2, "https://dest.example/dynamic")
        .await;
    w.assert_read_once(&[
        format!("domain:{HOST}"),
        format!("group:{other_group}"),
        s("blocklist"),
    ])
    .await;
}

/// The hosts the group's and the blocklist's records name as enabled domains (edge-worker/src/named_hosts.rs; the
/// origin publishes them, propagation.rs checks it end to end): a new isolate's first visit to a dynamic link on a
/// named host reads the group and the blocklist only, never the domain's record; a host neither names (another
/// account's custom domain) is served after a read of its record (on a new isolate, in a second round of the
/// first-visit path), and a disabled one falls back, to its own fallback URL. A domain record the isolate holds is
/// the word on its host, whatever the names say (here, one read for a persistent link's fallback, saying the domain
/// is disabled while the blocklist still names it, as while a change propagates).
#[tokio::test]
async fn a_host_the_records_name_is_served_without_its_domain_record() {
    const CUSTOM: &str = "links.acme.example";
    const OTHER: &str = "other.example.com";
    const OFF: &str = "off.example.com";
    let records = |host_enabled: bool| {
        let mut named_group = group(&key(), json!({}));
        named_group["enabled_hosts"] = json!([CUSTOM]);
        vec![
            (
                format!("domain:{HOST}"),
                domain(host_enabled, Some(HOST_FALLBACK)),
            ),
            (format!("domain:{CUSTOM}"), domain(true, None)),
            (format!("domain:{OTHER}"), domain(true, None)),
            (
                format!("domain:{OFF}"),
                domain(false, Some("https://off.example/fallback")),
            ),
            (format!("group:{GROUP}"), named_group),
            (
                s("blocklist"),
                json!({"v": 1, "domains": ["evil.example"], "enabled_hosts": [HOST]}),
            ),
        ]
    };
    let path = |dest: &str| dynamic_path(GROUP, &token(&key(), &Payload::new(dest)));
    // A new isolate on the records, the domain of `HOST` enabled or not.
    let start = async |host_enabled: bool| {
        let w = Worker::start_with(Options {
            env: vec![(s("KV_FAULTS"), s("1"))],
            ..Options::default()
        });
        w.sync(records(host_enabled), vec![]).await;
        w
    };
    // A dynamic link to `dest` on `host`, visited twice: its first visit, and one decided from what that read.
    let served = async |w: &Worker, host: &str, dest: &str| {
        w.visit_destination(host, &path(dest), 2, dest).await;
    };

    // Named by the group (its account's custom domain), then by the blocklist (a platform domain).
    let w = start(true).await;
    served(&w, CUSTOM, "https://dest.example/custom").await;
    let reads = w
        .assert_read_once(&[format!("group:{GROUP}"), s("blocklist")])
        .await;
    assert_eq!(reads.get(&format!("domain:{CUSTOM}")), None, "{reads:?}");
    // Decided on the first-visit path, whose token WebCrypto opens.
    assert_eq!(w.webcrypto_decrypts().await, (1, 1));
    served(&w, HOST, "https://dest.example/platform").await;
    let reads = w.kv_reads().await;
    assert_eq!(reads.get(&format!("domain:{HOST}")), None, "{reads:?}");
    // Named by neither: its own record, read once, serves it or not.
    served(&w, OTHER, "https://dest.example/other").await;
    w.visit(OFF, &path("https://dest.example/off"), &[])
        .await
        .assert_redirect("https://off.example/fallback");
    // A fallback on a named host is its record's URL: read then.
    w.visit(HOST, &path("https://evil.example/x"), &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    let reads = w
        .assert_read_once(&[
            format!("domain:{OTHER}"),
            format!("domain:{OFF}"),
            format!("domain:{HOST}"),
            format!("group:{GROUP}"),
            s("blocklist"),
        ])
        .await;
    assert_eq!(reads.get(&format!("domain:{CUSTOM}")), None, "{reads:?}");

    // A new isolate's first visit on a host neither names: served, each record read once.
    let w = start(true).await;
    served(&w, OTHER, "https://dest.example/first").await;
    w.assert_read_once(&[
        format!("domain:{OTHER}"),
        format!("group:{GROUP}"),
        s("blocklist"),
    ])
    .await;
    // Its record in a second round of the first-visit path, not by the full path.
    assert_eq!(w.webcrypto_decrypts().await, (1, 1));

    // The domain's record, held, says disabled: the names do not override it.
    let w = start(false).await;
    w.visit(HOST, "/no-such-link", &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    for _ in 0..2 {
        w.visit(HOST, &path("https://dest.example/held"), &[])
            .await
            .assert_redirect(HOST_FALLBACK);
    }
}

/// A deployment that never blocked a domain has no blocklist record (the origin writes it at the first block, or at
/// the first platform domain, which it names): a new isolate's first visit to a dynamic link finds that absence with
/// the group (then reads the domain, which no record names), holds it as it holds a record KV had (an empty list),
/// redirects, and caches it after the response: each key is read once.
#[tokio::test]
async fn a_first_visit_without_a_blocklist_record_reads_each_record_once() {
    let w = Worker::start_with(Options {
        env: vec![(s("KV_FAULTS"), s("1"))],
        ..Options::default()
    });
    w.sync(
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (format!("group:{GROUP}"), group(&key(), json!({}))),
        ],
        vec![],
    )
    .await;
    let path = dynamic_path(
        GROUP,
        &token(&key(), &Payload::new("https://dest.example/unblocked")),
    );
    w.visit_destination(HOST, &path, 3, "https://dest.example/unblocked")
        .await;
    w.assert_read_once(&[
        format!("domain:{HOST}"),
        format!("group:{GROUP}"),
        s("blocklist"),
    ])
    .await;
}

/// What a new isolate's first visit reads is held for its answer and cached after it (edge-worker/README.md,
/// "Without async Rust"), which also ends the reads' marks: a request that comes while those reads are under way
/// waits for them, caches them itself once they are held, and is answered from them, rather than reading the keys
/// again. Here the group's read takes 400 ms, and a second visit comes 150 ms into it; if nothing cached the held
/// reads, the second would wait out the loads' timeout (2.5 s) and read every key again.
#[tokio::test]
async fn a_visit_during_a_first_visits_reads_waits_for_them() {
    let w = seed(Worker::start_with(Options {
        env: vec![(s("KV_FAULTS"), s("1"))],
        ..Options::default()
    }))
    .await;
    w.slow_kv_reads(&[(&format!("group:{GROUP}"), 400)]).await;
    let first = dynamic_path(
        GROUP,
        &token(&key(), &Payload::new("https://dest.example/first")),
    );
    let second = dynamic_path(
        GROUP,
        &token(&key(), &Payload::new("https://dest.example/second")),
    );
    let started = std::time::Instant::now();
    let (a, b) = tokio::join!(w.visit(HOST, &first, &[]), async {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        w.visit(HOST, &second, &[]).await
    });
    a.assert_destination("https://dest.example/first");
    b.assert_destination("https://dest.example/second");
    w.assert_read_once(&[
        format!("domain:{HOST}"),
        format!("group:{GROUP}"),
        s("blocklist"),
    ])
    .await;
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2_000),
        "the second visit waited for the loads' timeout: {:?}",
        started.elapsed()
    );
}

/// The origin's word on the blocklist (`vouched`, edge-worker/README.md): a new isolate decides a vouched link's
/// first visit without the blocklist, which it reads after that response, and from then on every visit checks it.
/// Shown with a word gone stale (the destination blocked since: the origin publishes such a record again without
/// the word, which propagation.rs's `blocking_a_domain_reaches_a_new_isolates_first_visit` checks): the first visit
/// redirects, the next ones fall back. The same records without the word, on another new isolate: the first visit
/// reads the blocklist before it is decided, and falls back. Either way each record is read once.
#[tokio::test]
async fn a_vouched_link_is_decided_before_the_blocklist_is_read() {
    let records = |vouched: bool| {
        let edit = |l: &mut LinkRecord| {
            l.group_settings = Some(Default::default());
            l.vouched = vouched;
        };
        vec![
            (format!("domain:{HOST}"), domain(true, Some(HOST_FALLBACK))),
            (format!("group:{GROUP}"), group(&key(), json!({}))),
            (s("blocklist"), json!({"v": 1, "domains": ["evil.example"]})),
            (
                format!("link:{HOST}:stale"),
                link_with("https://evil.example/stale", edit),
            ),
            (
                format!("link:{HOST}:plain"),
                link_with("https://dest.example/plain", edit),
            ),
        ]
    };
    let browser = [("User-Agent", BROWSER_UA)];
    for vouched in [true, false] {
        let w = Worker::start_with(Options {
            env: vec![(s("KV_FAULTS"), s("1"))],
            ..Options::default()
        });
        w.sync(records(vouched), vec![]).await;
        let first = w.visit(HOST, "/stale", &browser).await;
        if vouched {
            first.assert_destination("https://evil.example/stale");
            eventually(
                std::time::Duration::from_secs(5),
                "the blocklist, read after the first response, applies",
                || async {
                    let v = w.visit(HOST, "/stale", &browser).await;
                    v.status == 302 && v.header("location") == Some(HOST_FALLBACK)
                },
            )
            .await;
        } else {
            first.assert_redirect(HOST_FALLBACK);
        }
        w.visit(HOST, "/plain", &browser)
            .await
            .assert_destination("https://dest.example/plain");
        let reads = w.kv_reads().await;
        for key in [
            format!("link:{HOST}:stale"),
            format!("link:{HOST}:plain"),
            s("blocklist"),
            format!("group:{GROUP}"),
        ] {
            assert_eq!(
                reads.get(&key),
                Some(&1),
                "vouched {vouched}: {key} read once: {reads:?}"
            );
        }
    }
}

/// Smart links (issue 25) at the edge: each rule condition alone and combined, rule order, the redirect's status,
/// an expired link's `expired_url`, and the blocklist on whatever a rule chose. Kept answers never carry one
/// visitor's destination to another: the same URL alternates between visitors, several times each.
#[tokio::test]
async fn smart_links_route_each_visitor() {
    use link_rules::{Conditions, Device, Os, Rule};
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 \
                          (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.6778.81 Mobile Safari/537.36";
    const MAC: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                       Version/18.1 Safari/605.1.15";
    let rule = |when: Conditions, to: &str| Rule {
        when,
        to: to.to_owned(),
    };
    let now_ms = i64::try_from(now().as_millis()).expect("milliseconds fit");
    let w = seeded().await;
    w.sync(
        vec![
            (
                format!("link:{HOST}:apps"),
                link_with("https://dest.example/app", |l| {
                    l.rules = vec![
                        rule(
                            Conditions {
                                os: vec![Os::Ios],
                                ..Conditions::default()
                            },
                            "https://apps.apple.com/app/id1",
                        ),
                        rule(
                            Conditions {
                                os: vec![Os::Android],
                                ..Conditions::default()
                            },
                            "https://play.google.com/store/apps/details?id=x",
                        ),
                    ];
                    l.forward_query = false;
                }),
            ),
            (
                format!("link:{HOST}:mixed"),
                link_with("https://dest.example/", |l| {
                    l.rules = vec![
                        // Combined: both must hold.
                        rule(
                            Conditions {
                                country: vec![s("DE")],
                                device: vec![Device::Mobile],
                                ..Conditions::default()
                            },
                            "https://de-mobile.example/",
                        ),
                        rule(
                            Conditions {
                                language: vec![s("de")],
                                ..Conditions::default()
                            },
                            "https://de.example/",
                        ),
                        rule(
                            Conditions {
                                query: vec![(s("utm_source"), s("news"))],
                                ..Conditions::default()
                            },
                            "https://news.example/",
                        ),
                        rule(
                            Conditions {
                                country: vec![s("FR")],
                                ..Conditions::default()
                            },
                            "https://evil.example/fr",
                        ),
                        // A window around now, then one that has closed.
                        rule(
                            Conditions {
                                country: vec![s("JP")],
                                before: Some(now_ms - 60_000),
                                ..Conditions::default()
                            },
                            "https://too-late.example/",
                        ),
                        rule(
                            Conditions {
                                country: vec![s("JP")],
                                after: Some(now_ms - 3_600_000),
                                before: Some(now_ms + 3_600_000),
                                ..Conditions::default()
                            },
                            "https://sale.example/",
                        ),
                    ];
                }),
            ),
            // Each condition alone, each rule sending somewhere of its own.
            (
                format!("link:{HOST}:alone"),
                link_with("https://dest.example/never", |l| {
                    l.rules = vec![
                        rule(
                            Conditions {
                                os: vec![Os::Windows],
                                ..Conditions::default()
                            },
                            "https://windows.example/",
                        ),
                        rule(
                            Conditions {
                                os: vec![Os::Macos],
                                ..Conditions::default()
                            },
                            "https://mac.example/",
                        ),
                        rule(
                            Conditions {
                                device: vec![Device::Tablet],
                                ..Conditions::default()
                            },
                            "https://tablet.example/",
                        ),
                        rule(
                            Conditions {
                                query: vec![(s("ref"), s("*"))],
                                ..Conditions::default()
                            },
                            "https://ref.example/",
                        ),
                        rule(
                            Conditions {
                                country: vec![s("CA")],
                                ..Conditions::default()
                            },
                            "https://ca.example/",
                        ),
                        // Not yet open, then one open until an hour from now: every other visitor.
                        rule(
                            Conditions {
                                after: Some(now_ms + 3_600_000),
                                ..Conditions::default()
                            },
                            "https://not-yet.example/",
                        ),
                        rule(
                            Conditions {
                                before: Some(now_ms + 3_600_000),
                                ..Conditions::default()
                            },
                            "https://early.example/",
                        ),
                    ];
                }),
            ),
            (
                format!("link:{HOST}:moved"),
                link_with("https://dest.example/new-home", |l| {
                    l.redirect_status = Some(308);
                }),
            ),
            // One destination under each status: the isolate keeps one redirect per status and location.
            (
                format!("link:{HOST}:s301"),
                link_with("https://dest.example/new-home", |l| {
                    l.redirect_status = Some(301);
                }),
            ),
            (
                format!("link:{HOST}:s307"),
                link_with("https://dest.example/new-home", |l| {
                    l.redirect_status = Some(307);
                }),
            ),
            (
                format!("link:{HOST}:s302"),
                link("https://dest.example/new-home", GROUP, true),
            ),
            (
                format!("link:{HOST}:gone"),
                link_with("https://dest.example/", |l| {
                    l.expires_at = Some(now_ms - 1_000);
                    l.expired_url = Some(s("https://sold-out.example/"));
                    l.redirect_status = Some(301);
                }),
            ),
            (
                format!("link:{HOST}:card"),
                link_with("https://dest.example/article", |l| {
                    l.preview = Some(kv_model::Preview {
                        title: Some(s("Spring \"sale\" <b>now</b>")),
                        description: Some(s("Half off & more")),
                        image: Some(s("https://img.example/card.png")),
                    });
                }),
            ),
            (
                format!("link:{HOST}:gone-blocked"),
                link_with("https://dest.example/", |l| {
                    l.expires_at = Some(0);
                    l.expired_url = Some(s("https://evil.example/x"));
                }),
            ),
        ],
        vec![],
    )
    .await;

    // Operating systems from real User-Agents; the same URL alternates between visitors (kept answers).
    for _ in 0..3 {
        for (ua, want) in [
            (IPHONE, "https://apps.apple.com/app/id1"),
            (PIXEL, "https://play.google.com/store/apps/details?id=x"),
            (BROWSER_UA, "https://dest.example/app"),
            (MAC, "https://dest.example/app"),
        ] {
            w.visit(HOST, "/apps?x=1", &[("User-Agent", ua)])
                .await
                .assert_redirect(want);
        }
    }
    // Each condition alone: the real Windows and Mac User-Agents by their system, an iPad by its device, any value
    // of a query parameter, a country, and a time window (`after` not yet, `before` still).
    const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                        Version/17.5 Mobile/15E148 Safari/604.1";
    for (headers, path, want) in [
        (
            vec![("User-Agent", BROWSER_UA)],
            "/alone",
            "https://windows.example/",
        ),
        (vec![("User-Agent", MAC)], "/alone", "https://mac.example/"),
        (
            vec![("User-Agent", IPAD)],
            "/alone",
            "https://tablet.example/",
        ),
        (
            vec![("User-Agent", PIXEL)],
            "/alone?ref=anything",
            "https://ref.example/?ref=anything",
        ),
        (
            vec![("User-Agent", PIXEL), ("CF-IPCountry", "CA")],
            "/alone",
            "https://ca.example/",
        ),
        (
            vec![("User-Agent", PIXEL)],
            "/alone",
            "https://early.example/",
        ),
    ] {
        w.visit(HOST, path, &headers).await.assert_redirect(want);
    }
    // Country and device together, then language (first preference), query, rule order and time windows.
    for (headers, path, want) in [
        (
            vec![("CF-IPCountry", "DE"), ("User-Agent", IPHONE)],
            "/mixed",
            "https://de-mobile.example/",
        ),
        (
            vec![
                ("CF-IPCountry", "DE"),
                ("Accept-Language", "de-DE,de;q=0.9"),
            ],
            "/mixed",
            "https://de.example/",
        ),
        (
            vec![
                ("CF-IPCountry", "DE"),
                ("Accept-Language", "en-US,de;q=0.9"),
            ],
            "/mixed",
            "https://dest.example/",
        ),
        (
            vec![("Accept-Language", "de-CH"), ("User-Agent", IPHONE)],
            "/mixed?utm_source=news",
            "https://de.example/?utm_source=news",
        ),
        (
            vec![],
            "/mixed?utm_source=news",
            "https://news.example/?utm_source=news",
        ),
        (
            vec![],
            "/mixed?utm_source=mail",
            "https://dest.example/?utm_source=mail",
        ),
        (
            vec![("CF-IPCountry", "JP")],
            "/mixed",
            "https://sale.example/",
        ),
        // A rule's destination on the blocklist: the domain's fallback, not the next rule.
        (vec![("CF-IPCountry", "FR")], "/mixed", HOST_FALLBACK),
    ] {
        w.visit(HOST, path, &headers).await.assert_redirect(want);
    }
    // The link's redirect status, again and again, each link's own though all share one destination.
    for _ in 0..3 {
        for (path, status) in [
            ("/moved", 308),
            ("/s301", 301),
            ("/s307", 307),
            ("/s302", 302),
        ] {
            let v = w.visit(HOST, path, &[]).await;
            assert_eq!(
                (v.status, v.header("location")),
                (status, Some("https://dest.example/new-home")),
                "{path}"
            );
        }
    }
    // A window that opens in a moment: before, the rule does not hold, however often asked (the answer is kept);
    // from the instant it opens, it does.
    let opens_ms = i64::try_from(now().as_millis()).expect("milliseconds fit") + 2_000;
    w.sync(
        vec![(
            format!("link:{HOST}:opening"),
            link_with("https://dest.example/not-yet", |l| {
                l.rules = vec![rule(
                    Conditions {
                        after: Some(opens_ms),
                        ..Conditions::default()
                    },
                    "https://dest.example/open",
                )];
            }),
        )],
        vec![],
    )
    .await;
    w.visit(HOST, "/opening", &[])
        .await
        .assert_redirect("https://dest.example/not-yet");
    w.visit(HOST, "/opening", &[])
        .await
        .assert_redirect("https://dest.example/not-yet");
    let opens = std::time::Duration::from_millis(u64::try_from(opens_ms).expect("positive"));
    tokio::time::sleep(opens.saturating_sub(now()) + std::time::Duration::from_millis(50)).await;
    w.visit(HOST, "/opening", &[])
        .await
        .assert_redirect("https://dest.example/open");
    // Expired: the expired_url, as a temporary redirect whatever the link's status; blocked: the fallback.
    let v = w.visit(HOST, "/gone?x=1", &[]).await;
    assert_eq!(
        (v.status, v.header("location")),
        (302, Some("https://sold-out.example/"))
    );
    w.visit(HOST, "/gone-blocked", &[])
        .await
        .assert_redirect(HOST_FALLBACK);
    // Preview cards: crawlers get the card (escaped, a strict CSP, a refresh to the destination), browsers the
    // redirect, again and again.
    for _ in 0..2 {
        for ua in [
            TWITTERBOT,
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        ] {
            let v = w.visit(HOST, "/card?ref=chat", &[("User-Agent", ua)]).await;
            assert_eq!(v.status, 200, "{ua}: {}", v.body);
            assert!(
                v.header("content-security-policy")
                    .is_some_and(|c| c.starts_with("default-src 'none'"))
            );
            for part in [
                "<meta property=\"og:title\" content=\"Spring &quot;sale&quot; &lt;b&gt;now&lt;/b&gt;\">",
                "<meta property=\"og:description\" content=\"Half off &amp; more\">",
                "<meta property=\"og:image\" content=\"https://img.example/card.png\">",
                "<meta name=\"twitter:card\" content=\"summary_large_image\">",
                "<meta http-equiv=\"refresh\" content=\"0;url=https://dest.example/article?ref=chat\">",
            ] {
                assert!(v.body.contains(part), "{ua}: {part} in {}", v.body);
            }
        }
        w.visit(HOST, "/card?ref=chat", &[])
            .await
            .assert_redirect("https://dest.example/article?ref=chat");
    }
}
