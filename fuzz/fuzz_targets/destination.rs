//! Any string as a destination: the rules never panic, and an accepted destination keeps the
//! URL as given, with a non-empty, normalized host that the URL itself names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared_crypto::{extract_host, normalize_host, parse_destination, upgrade_http};

fuzz_target!(|url: &str| {
    let upgraded = upgrade_http(url);
    if let Ok(d) = parse_destination(&upgraded) {
        assert_eq!(d.as_str(), upgraded.as_ref());
        assert!(!d.host().is_empty());
        assert!(d.as_str().chars().count() <= shared_crypto::MAX_URL_LEN);
        assert!(!d.as_str().chars().any(char::is_control));
        let host = extract_host(d.as_str()).expect("an accepted URL has a host");
        assert_eq!(normalize_host(host), d.host());
        assert_eq!(
            normalize_host(d.host()),
            d.host(),
            "normalization is idempotent"
        );
    }
});
