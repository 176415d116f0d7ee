//! Property tests: no input makes the public functions panic, and sealing round-trips.
//!
//! Runs proptest's default 256 cases per property; set `PROPTEST_CASES=100000` for a longer run.

use proptest::prelude::*;
use shared_crypto::{
    DomainBlocklist, GroupKey, Payload, TokenCipher, append_back_param, extract_host,
    parse_destination, upgrade_http,
};

const NOW: i64 = 1_800_000_000;

fn cipher() -> TokenCipher {
    TokenCipher::new(&GroupKey::from_bytes([0x5a; 32]))
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// URL-ish strings, more likely than uniform noise to reach the deeper branches.
fn url_like() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            "https://",
            "http://",
            "HTTPS://",
            "ftp://",
            "javascript:",
            "",
            "https:",
            "https:///"
        ],
        "[a-zA-Z0-9@:._\\-\\[\\]%]{0,30}",
        "[/?#&=a-z0-9\\\\é]{0,40}",
    )
        .prop_map(|(scheme, host, rest)| format!("{scheme}{host}{rest}"))
}

proptest! {
    #[test]
    fn open_never_panics_on_strings(token in ".{0,200}") {
        let c = cipher();
        let _ = c.open(&token);
        let _ = c.evaluate(&token, NOW, &["blocked.example.net"]);
    }

    #[test]
    fn open_never_panics_on_versioned_bytes(mut bytes in proptest::collection::vec(any::<u8>(), 0..200), v1 in any::<bool>()) {
        if v1 && !bytes.is_empty() {
            bytes[0] = 0x01;
        }
        let err = cipher().evaluate(&base64url(&bytes), NOW, &["blocked.example.net"]).unwrap_err();
        prop_assert_eq!(err.reason(), "signature");
    }

    #[test]
    fn evaluate_never_panics_on_any_plaintext(plaintext in proptest::collection::vec(any::<u8>(), 0..300)) {
        let c = cipher();
        let token = c.seal_plaintext(&plaintext, [7; 12]);
        prop_assert_eq!(c.open_plaintext(&token).unwrap(), plaintext);
        if let Err(e) = c.evaluate(&token, NOW, &["blocked.example.net"]) {
            prop_assert_ne!(e.reason(), "signature");
        }
    }

    #[test]
    fn evaluate_never_panics_on_any_payload(
        destination in prop_oneof![url_like(), ".{0,80}"],
        back_param in proptest::option::of(".{0,40}"),
        expires_at in proptest::option::of(any::<i64>()),
        now in any::<i64>(),
    ) {
        let c = cipher();
        let payload = Payload { destination_url: destination, back_param, expires_at };
        let blocklist: DomainBlocklist = ["blocked.example.net"].into_iter().collect();
        let _ = c.evaluate(&c.seal(&payload, [1; 12]), now, &blocklist);
    }

    #[test]
    fn url_helpers_never_panic(url in prop_oneof![url_like(), ".{0,80}"], back in ".{0,20}") {
        let _ = extract_host(&url);
        let _ = upgrade_http(&url);
        let appended = append_back_param(&url, &back);
        prop_assert!(appended.starts_with(url.split('#').next().unwrap_or_default()));
        if let Ok(d) = parse_destination(&url) {
            prop_assert!(d.as_str().chars().count() <= shared_crypto::MAX_URL_LEN);
            prop_assert!(!d.host().is_empty());
        }
    }

    #[test]
    fn seal_open_round_trip(
        destination in ".{0,100}",
        back_param in proptest::option::of(".{0,40}"),
        expires_at in proptest::option::of(any::<i64>()),
        iv in any::<[u8; 12]>(),
        key in any::<[u8; 32]>(),
    ) {
        let c = TokenCipher::new(&GroupKey::from_bytes(key));
        let payload = Payload { destination_url: destination, back_param, expires_at };
        let token = c.seal(&payload, iv);
        prop_assert_eq!(c.open(&token).unwrap(), payload);
    }

    #[test]
    fn valid_destinations_evaluate_to_themselves(
        host in "[a-z][a-z0-9-]{0,20}(\\.[a-z][a-z0-9-]{0,20}){0,3}",
        path in "(/[a-zA-Z0-9._~-]{0,20}){0,4}",
        back in proptest::option::of("[a-z]{1,5}=[a-z0-9]{0,5}"),
        iv in any::<[u8; 12]>(),
    ) {
        let c = cipher();
        let dest = format!("https://{host}{path}");
        let payload = Payload { destination_url: dest.clone(), back_param: back.clone(), expires_at: Some(NOW + 1) };
        let url = c.evaluate(&c.seal(&payload, iv), NOW, &["blocked.example.net"]).unwrap();
        let expected = match back {
            Some(b) => format!("{dest}?{b}"),
            None => dest,
        };
        prop_assert_eq!(url, expected);
    }

    #[test]
    fn key_parsing_never_panics(s in ".{0,60}") {
        if let Ok(key) = GroupKey::from_base64url(&s) {
            let again = GroupKey::from_base64url(&key.to_base64url()).unwrap();
            prop_assert_eq!(again.as_bytes(), key.as_bytes());
        }
    }
}

proptest! {
    /// A `DomainBlocklist` holds what a set of the normalized, non-empty domains would, in order, however the list
    /// came (any order, repetitions, case, trailing dots, blank entries), and blocks what a plain scan of the same
    /// list blocks.
    #[test]
    fn a_domain_blocklist_is_its_domains_as_a_set(
        domains in prop::collection::vec("[ab.]{0,4}[A-B]?\\.?", 0..12),
        hosts in prop::collection::vec("[ab.]{0,6}", 0..8),
    ) {
        use shared_crypto::Blocklist as _;
        let list: DomainBlocklist = domains.iter().collect();
        let set: std::collections::BTreeSet<String> = domains
            .iter()
            .map(|d| shared_crypto::normalize_host(d.trim()))
            .filter(|d| !d.is_empty())
            .collect();
        prop_assert_eq!(list.iter().collect::<Vec<_>>(), set.iter().map(String::as_str).collect::<Vec<_>>());
        for host in &hosts {
            prop_assert_eq!(list.is_blocked(host), domains.is_blocked(host), "{}", host);
        }
    }
}
