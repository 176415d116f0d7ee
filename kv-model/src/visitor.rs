//! Unique visitors (issue 26): the day's salt the origin publishes, and the visitor hash a click event carries.
//!
//! A visitor is counted once per link per UTC day without anything that identifies them outliving the day: the
//! origin makes a random salt for each UTC day and publishes it at [`salt_key`]; the worker hashes the visitor's
//! address, User-Agent and the link with that day's salt and sends only the hash ([`crate::ClickEvent::visitor`]).
//! The origin deletes a day's salt, from its database and from KV, at 02:00 UTC the next day, and with it every
//! hash of that day: once the salt is gone, nobody (the origin's operators included) can tell whose a hash was.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use crate::V1;

/// Hex characters of a visitor hash: 128 bits of SHA-256, plenty to tell a link's visitors of one day apart.
pub const VISITOR_HASH_HEX: usize = 32;

/// Hex characters of a day's salt (32 random bytes).
pub const SALT_HEX: usize = 64;

/// Microseconds past midnight UTC at which a day's salt is deleted, the next day: late click reports of the day
/// (a queue's retries, an isolate that could not reach the origin) still count their visitors until then.
pub const SALT_GRACE_MICROS: i64 = 2 * 3_600 * 1_000_000;

/// `salt:<day>`: the salt of UTC day `day` (days since 1970-01-01, as the worker gets them from its clock without
/// a calendar).
pub fn salt_key(day: i64) -> String {
    let mut key = String::from("salt:");
    // A small day number's digits, without the formatting machinery (see `key` in lib.rs).
    let mut digits = [0u8; 20];
    let (mut n, mut i) = (day.unsigned_abs(), digits.len());
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if day < 0 {
        key.push('-');
    }
    key.push_str(core::str::from_utf8(&digits[i..]).unwrap_or_default());
    key
}

/// A day's salt, at [`salt_key`]`(day)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaltRecord {
    /// Format version.
    pub v: V1,
    /// [`SALT_HEX`] lowercase hex characters.
    pub salt: String,
}

impl SaltRecord {
    /// A version-1 salt record.
    pub fn new(salt: String) -> Self {
        SaltRecord { v: V1, salt }
    }
}

/// Whether `s` is a visitor hash as events carry it: [`VISITOR_HASH_HEX`] lowercase hex characters.
pub fn is_visitor_hash(s: &str) -> bool {
    s.len() == VISITOR_HASH_HEX && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_day() {
        assert_eq!(salt_key(0), "salt:0");
        assert_eq!(salt_key(20_785), "salt:20785");
        assert_eq!(salt_key(-3), "salt:-3");
    }

    #[test]
    fn record_round_trips() {
        let r = SaltRecord::new("ab".repeat(32));
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            alloc::format!(r#"{{"v":1,"salt":"{}"}}"#, "ab".repeat(32))
        );
        assert_eq!(serde_json::from_str::<SaltRecord>(&text).unwrap(), r);
        assert!(serde_json::from_str::<SaltRecord>(r#"{"v":2,"salt":"00"}"#).is_err());
    }

    #[test]
    fn visitor_hashes() {
        assert!(is_visitor_hash("0123456789abcdef0123456789abcdef"));
        assert!(!is_visitor_hash("0123456789ABCDEF0123456789abcdef"));
        assert!(!is_visitor_hash("0123456789abcdef"));
        assert!(!is_visitor_hash("0123456789abcdef0123456789abcdeg"));
    }
}
