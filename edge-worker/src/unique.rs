//! Unique visitors at the edge (issue 26): what a counted click's visitor hash is made of, and the isolate's copy
//! of the day's salt. The hashing itself (WebCrypto's SHA-256) and the KV read are the shell's (wasm32 only).
//!
//! The hash is SHA-256 over the day's salt, the link, the visitor's address and User-Agent (each after a 0 byte,
//! which none of them holds, so no two different inputs run together into one), cut to 128 bits. The salt is
//! random, changes every UTC day and is deleted after it ([`kv_model::visitor`]): a hash can be told apart from
//! another only within its day and link, and nobody can go back from it to the address once the salt is gone.

use kv_model::visitor::{SALT_HEX, VISITOR_HASH_HEX};

/// How long a day with no salt in KV is not asked for again (a new origin before its first publication; a
/// deployment without one): a click meanwhile carries no visitor hash and adds no unique visitor.
pub const SALT_MISS_RETRY_MS: u64 = 60_000;

const DAY_MS: u64 = 86_400_000;

/// The UTC day (since 1970-01-01) of `now_ms`, the salt's key.
pub fn day_of(now_ms: u64) -> i64 {
    i64::try_from(now_ms / DAY_MS).unwrap_or(i64::MAX)
}

/// What is hashed: the salt, then the link, the address and the User-Agent, each after a 0 byte.
pub fn hash_input(salt: &[u8], link: &str, address: &str, user_agent: &str) -> Vec<u8> {
    let mut input =
        Vec::with_capacity(salt.len() + link.len() + address.len() + user_agent.len() + 3);
    input.extend_from_slice(salt);
    for part in [link, address, user_agent] {
        input.push(0);
        input.extend_from_slice(part.as_bytes());
    }
    input
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The event's visitor hash: the digest's first [`VISITOR_HASH_HEX`] / 2 bytes in lowercase hex (`None` for a
/// digest too short, which SHA-256's never is).
pub fn visitor_hex(digest: &[u8]) -> Option<String> {
    let bytes = digest.get(..VISITOR_HASH_HEX / 2)?;
    let mut out = String::with_capacity(VISITOR_HASH_HEX);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    Some(out)
}

/// The salt a KV record carries, or `None` when the record is not one (another version, bad hex, wrong length).
/// Read by hand rather than through serde: the record is two fields the origin writes compactly (in either order,
/// as the sync route re-serialises it), and a serde path of its own would cost the wasm more than this.
pub fn salt_bytes(record: &str) -> Option<Vec<u8>> {
    const FIELD: &str = "\"salt\":\"";
    let record = record.trim();
    let version = record.matches("\"v\":1,").count() + record.matches("\"v\":1}").count();
    if !record.starts_with('{') || !record.ends_with('}') || version != 1 {
        return None;
    }
    let start = record.find(FIELD)? + FIELD.len();
    let hex = record.get(start..start + SALT_HEX)?.as_bytes();
    if record.as_bytes().get(start + SALT_HEX) != Some(&b'"') {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    hex.chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// The isolate's salt: one day's, found or missing, and when it was read.
#[derive(Debug, Default)]
pub struct SaltCache {
    entry: Option<(i64, Option<Vec<u8>>, u64)>,
}

/// What the cache knows of a day's salt.
#[derive(Debug, PartialEq, Eq)]
pub enum SaltLookup {
    /// The salt (kept for the whole day: it never changes).
    Salt(Vec<u8>),
    /// KV had none less than [`SALT_MISS_RETRY_MS`] ago.
    Missing,
    /// Read KV.
    Unknown,
}

impl SaltCache {
    /// What is known of `day`'s salt at `now_ms`.
    pub fn lookup(&self, day: i64, now_ms: u64) -> SaltLookup {
        match &self.entry {
            Some((d, Some(salt), _)) if *d == day => SaltLookup::Salt(salt.clone()),
            Some((d, None, at)) if *d == day && now_ms.saturating_sub(*at) < SALT_MISS_RETRY_MS => {
                SaltLookup::Missing
            }
            _ => SaltLookup::Unknown,
        }
    }

    /// Keeps what KV said of `day`'s salt (a salt, or none) at `now_ms`, in place of any other day's.
    pub fn store(&mut self, day: i64, salt: Option<Vec<u8>>, now_ms: u64) {
        self.entry = Some((day, salt, now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_changes_the_input_and_parts_cannot_run_together() {
        let base = hash_input(b"salt", "link:h:c", "192.0.2.1", "UA");
        assert_eq!(base, b"salt\x00link:h:c\x00192.0.2.1\x00UA".to_vec());
        for other in [
            hash_input(b"Salt", "link:h:c", "192.0.2.1", "UA"),
            hash_input(b"salt", "link:h:d", "192.0.2.1", "UA"),
            hash_input(b"salt", "link:h:c", "192.0.2.2", "UA"),
            hash_input(b"salt", "link:h:c", "192.0.2.1", "UB"),
            hash_input(b"salt", "link:h:c", "192.0.2.1U", "A"),
        ] {
            assert_ne!(other, base);
        }
    }

    #[test]
    fn hashes_are_128_bits_of_lowercase_hex() {
        let digest: Vec<u8> = (0..32).map(|i| i * 7).collect();
        let hex = visitor_hex(&digest).unwrap();
        assert_eq!(hex, "00070e151c232a31383f464d545b6269");
        assert!(kv_model::is_visitor_hash(&hex));
        assert_eq!(visitor_hex(&[1, 2]), None);
    }

    #[test]
    fn salts_are_read_from_their_record() {
        let hex = "0f".repeat(32);
        let record = format!(r#"{{"v":1,"salt":"{hex}"}}"#);
        assert_eq!(salt_bytes(&record), Some(vec![15; 32]));
        // As the origin writes it, and as the sync route passes it on (keys sorted).
        let written = serde_json::to_string(&kv_model::SaltRecord::new(hex.clone())).unwrap();
        assert_eq!(salt_bytes(&written), Some(vec![15; 32]));
        let resorted: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert_eq!(salt_bytes(&resorted.to_string()), Some(vec![15; 32]));
        for bad in [
            format!(r#"{{"v":2,"salt":"{hex}"}}"#),
            r#"{"v":1,"salt":"0f"}"#.to_owned(),
            format!(r#"{{"v":1,"salt":"{}"}}"#, "0g".repeat(32)),
            format!(r#"{{"v":1,"salt":"{}"}}"#, "0F".repeat(32)),
            "not json".to_owned(),
            format!(r#"{{"v":1,"salt":"{hex}0"}}"#),
            format!(r#"{{"v":10,"salt":"{hex}"}}"#),
        ] {
            assert_eq!(salt_bytes(&bad), None, "{bad}");
        }
    }

    #[test]
    fn the_cache_keeps_a_days_salt_and_asks_again_after_a_miss() {
        let mut cache = SaltCache::default();
        assert_eq!(cache.lookup(10, 0), SaltLookup::Unknown);
        cache.store(10, None, 1_000);
        assert_eq!(
            cache.lookup(10, 1_000 + SALT_MISS_RETRY_MS - 1),
            SaltLookup::Missing
        );
        assert_eq!(
            cache.lookup(10, 1_000 + SALT_MISS_RETRY_MS),
            SaltLookup::Unknown
        );
        cache.store(10, Some(vec![1]), 2_000);
        assert_eq!(cache.lookup(10, u64::MAX), SaltLookup::Salt(vec![1]));
        assert_eq!(cache.lookup(11, 2_000), SaltLookup::Unknown, "a new day");
        assert_eq!(day_of(DAY_MS * 3 - 1), 2);
        assert_eq!(day_of(DAY_MS * 3), 3);
    }
}
