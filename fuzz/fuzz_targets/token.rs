//! Any string as a dynamic-link token: opening and evaluating never panic, and a payload that
//! opens survives sealing again under a fresh IV.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared_crypto::{GroupKey, TokenCipher};

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let cipher = TokenCipher::new(&GroupKey::from_bytes([7; 32]));
    let no_blocklist: &[&str] = &[];
    let _ = cipher.evaluate(token, 1_800_000_000, no_blocklist);
    if let Ok(payload) = cipher.open(token) {
        let again = cipher.seal(&payload, [9; 12]);
        assert_eq!(cipher.open(&again).ok(), Some(payload));
    }
    // A token sealed over the raw bytes opens to exactly those bytes.
    let sealed = cipher.seal_plaintext(data, [3; 12]);
    assert_eq!(cipher.open_plaintext(&sealed).ok().as_deref(), Some(data));
});
