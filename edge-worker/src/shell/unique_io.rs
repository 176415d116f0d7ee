//! Unique visitors, the I/O (wasm32 only): the day's salt from KV (kept in the isolate for the day) and the
//! visitor hash through WebCrypto's SHA-256. What is hashed, and the cache's rules, are [`crate::unique`]'s
//! (host-tested). Runs after the response (`wait_until`), so a visitor never waits for it.

use std::cell::RefCell;

use crate::unique::{self, SaltCache, SaltLookup};

use super::kv::Kv;
use super::webcrypto::{bytes, call};

thread_local! {
    static SALT: RefCell<SaltCache> = RefCell::new(SaltCache::default());
}

/// How long the location's KV cache may keep a salt (it never changes; a new day has a new key).
const SALT_CACHE_TTL: u64 = 3_600;

/// `day`'s salt: the isolate's copy, else KV's (`None` when KV has none, could not be read, or holds no salt).
async fn salt(kv: Option<&Kv>, day: i64, now_ms: u64) -> Option<Vec<u8>> {
    match SALT.with(|s| s.borrow().lookup(day, now_ms)) {
        SaltLookup::Salt(salt) => return Some(salt),
        SaltLookup::Missing => return None,
        SaltLookup::Unknown => {}
    }
    let text = kv?.text(&kv_model::salt_key(day), SALT_CACHE_TTL).await;
    // A failed read is not remembered as a miss: the next click asks again.
    let salt = text.ok()?.as_deref().and_then(unique::salt_bytes);
    SALT.with(|s| s.borrow_mut().store(day, salt.clone(), now_ms));
    salt
}

/// The visitor hash of a click at `now_ms` on `link` by `address` with `user_agent`, or `None` when the day's
/// salt or WebCrypto is not to be had.
pub(super) async fn visitor_hash(
    kv: Option<Kv>,
    now_ms: u64,
    link: &str,
    address: &str,
    user_agent: &str,
) -> Option<String> {
    let salt = salt(kv.as_ref(), unique::day_of(now_ms), now_ms).await?;
    let input = unique::hash_input(&salt, link, address, user_agent);
    let digest = call("digest", &["SHA-256".into(), bytes(&input)]).await?;
    unique::visitor_hex(&js_sys::Uint8Array::new(&digest).to_vec())
}
