//! Any string as a short code: accepted exactly when it is 3 to 50 of `[A-Za-z0-9_-]`, and then
//! stored as its lowercase form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use kv_model::ShortCode;

fuzz_target!(|raw: &str| {
    let valid = (3..=50).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ShortCode::parse(raw) {
        Ok(code) => {
            assert!(valid, "accepted {raw:?}");
            assert_eq!(code.as_str(), raw.to_ascii_lowercase());
            assert_eq!(ShortCode::parse(code.as_str()).ok(), Some(code));
        }
        Err(_) => assert!(!valid, "refused {raw:?}"),
    }
});
