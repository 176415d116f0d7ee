//! The dynamic-link payload: the JSON plaintext inside a token (spec section 2).

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::blocklist::Blocklist;
use crate::destination::{DestinationError, resolve_dynamic};
use crate::error::{PayloadError, TokenError};

/// The plaintext of a dynamic-link token.
///
/// Serialized as compact JSON with `None` fields omitted; unknown fields are ignored when reading, and `null`
/// reads as `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Where the link redirects. `http://` is upgraded to `https://`; see [`Payload::resolve_destination`].
    pub destination_url: String,
    /// Query parameters appended to `destination_url` at redirect time, without a leading `?` or `&`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_param: Option<String>,
    /// Absolute expiry, UNIX seconds (UTC). The link is expired when `now >= expires_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl Payload {
    /// A payload with only a destination.
    pub fn new(destination_url: impl Into<String>) -> Self {
        Payload {
            destination_url: destination_url.into(),
            back_param: None,
            expires_at: None,
        }
    }

    /// Compact JSON, UTF-8 (spec 4.7 step 1).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing strings and integers into a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a payload from decrypted plaintext.
    pub fn from_json(plaintext: &[u8]) -> Result<Self, PayloadError> {
        serde_json::from_slice(plaintext).map_err(|e| PayloadError::from_json(&e))
    }

    /// Whether the payload has expired at `now` (UNIX seconds): `now >= expires_at`.
    pub fn is_expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|expires_at| now >= expires_at)
    }

    /// Applies the destination rules and returns the final redirect URL: `http://` upgraded, `back_param`
    /// appended, then the final URL checked (https, at most 2048 characters, valid host, not blocked).
    pub fn resolve_destination<B: Blocklist + ?Sized>(
        &self,
        blocklist: &B,
    ) -> Result<String, DestinationError> {
        resolve_dynamic(&self.destination_url, self.back_param.as_deref(), blocklist)
    }

    /// Applies the destination rules, then the expiry, and returns the final redirect URL.
    pub fn redirect_url<B: Blocklist + ?Sized>(
        &self,
        now: i64,
        blocklist: &B,
    ) -> Result<String, TokenError> {
        let url = self.resolve_destination(blocklist)?;
        match self.expires_at {
            Some(expires_at) if now >= expires_at => Err(TokenError::Expired { expires_at, now }),
            _ => Ok(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_json_omits_none() {
        let p = Payload::new("https://d.org/x");
        assert_eq!(p.to_json(), br#"{"destination_url":"https://d.org/x"}"#);
        let p = Payload {
            destination_url: "https://d.org/x".into(),
            back_param: Some("a=1".into()),
            expires_at: Some(1_800_000_000),
        };
        assert_eq!(
            String::from_utf8(p.to_json()).unwrap(),
            r#"{"destination_url":"https://d.org/x","back_param":"a=1","expires_at":1800000000}"#
        );
    }

    #[test]
    fn reading() {
        let p = Payload::from_json(
            br#"{"destination_url":"https://d.org/","extra":[1],"back_param":null}"#,
        )
        .unwrap();
        assert_eq!(p, Payload::new("https://d.org/"));
        for bad in [
            &b"hello"[..],
            b"",
            b"[]",
            br#"{"back_param":"a=1"}"#,
            br#"{"destination_url":5}"#,
            br#"{"destination_url":"https://d.org/","expires_at":1.5}"#,
            br#"{"destination_url":"https://d.org/","expires_at":"1800000000"}"#,
            b"{\"destination_url\":\"https://d.org/\xff\"}",
        ] {
            assert!(
                Payload::from_json(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn expiry_boundary() {
        let mut p = Payload::new("https://d.org/");
        p.expires_at = Some(100);
        let none: &[&str] = &[];
        assert!(p.redirect_url(99, none).is_ok());
        assert_eq!(
            p.redirect_url(100, none),
            Err(TokenError::Expired {
                expires_at: 100,
                now: 100
            })
        );
        assert_eq!(p.redirect_url(101, none).unwrap_err().reason(), "expired");
        assert!(!p.is_expired(99));
        assert!(p.is_expired(100));
        assert!(!Payload::new("https://d.org/").is_expired(i64::MAX));
    }
}
