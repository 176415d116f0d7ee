//! Signing secrets (`whsec_…`) and the `v1` (HMAC-SHA256) signature of Standard Webhooks.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore as _;
use sha2::Sha256;
use std::fmt;

/// The prefix that marks a symmetric Standard Webhooks secret.
const PREFIX: &str = "whsec_";
/// Random bytes in a generated secret.
const GENERATED_LEN: usize = 32;
/// Key sizes the specification allows (192 to 512 bits).
const MIN_LEN: usize = 24;
const MAX_LEN: usize = 64;

/// Why a string is not a signing secret. The messages name no part of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// It does not start with `whsec_`.
    #[error("webhook secret must start with whsec_")]
    MissingPrefix,
    /// What follows the prefix is not standard, padded base64.
    #[error("webhook secret is not valid base64")]
    Base64,
    /// The decoded key is shorter than 24 or longer than 64 bytes.
    #[error("webhook secret must decode to between 24 and 64 bytes")]
    Length,
}

/// A signing secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks format).
///
/// Once a value exists it is valid: the key it signs with is its decoded bytes. `Debug` shows no part of it; the
/// text is only reachable through [`WebhookSecret::expose`], for storing it and for showing it to its owner once.
#[derive(Clone)]
pub struct WebhookSecret {
    text: String,
    key: Vec<u8>,
}

impl WebhookSecret {
    /// A fresh secret from the operating system's CSPRNG (through `rand`'s thread generator).
    pub fn generate() -> Self {
        let mut key = vec![0u8; GENERATED_LEN];
        rand::rng().fill_bytes(&mut key);
        let text = format!("{PREFIX}{}", STANDARD.encode(&key));
        Self { text, key }
    }

    /// Reads a secret as stored or as given by an operator: `whsec_` and standard, padded base64 of 24 to 64 bytes.
    pub fn parse(s: &str) -> Result<Self, SecretError> {
        let encoded = s.strip_prefix(PREFIX).ok_or(SecretError::MissingPrefix)?;
        let key = STANDARD.decode(encoded).map_err(|_| SecretError::Base64)?;
        if !(MIN_LEN..=MAX_LEN).contains(&key.len()) {
            return Err(SecretError::Length);
        }
        Ok(Self {
            text: s.to_owned(),
            key,
        })
    }

    /// The secret's text (`whsec_…`), for storing it and for the one response that shows it.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(whsec_[redacted])")
    }
}

/// `v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}" under the secret's decoded bytes>`: the value of the
/// `webhook-signature` header.
///
/// `msg_id` must contain no `.` (the specification's advice: ids are ours, never the client's), so that the signed
/// content cannot be split two ways.
pub fn sign(secret: &WebhookSecret, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
    // HMAC takes keys of any length; the error branch cannot happen.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret.key) else {
        unreachable!("HMAC accepts keys of every length")
    };
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes(range(32))`, as in the vectors below.
    const VECTOR_SECRET: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    #[test]
    fn signature_matches_vectors_made_by_the_python_standardwebhooks_package() {
        // Computed with standardwebhooks 1.1.0 (PyPI): Webhook(secret).sign(msg_id, datetime(ts, utc), body).
        let secret = WebhookSecret::parse(VECTOR_SECRET).unwrap();
        let body = r#"{"type":"link.created","timestamp":"2025-01-02T03:04:05Z","data":{"id":"lnk_1","url":"https://example.com/é"}}"#;
        assert_eq!(
            sign(
                &secret,
                "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
                1_674_087_231,
                body.as_bytes()
            ),
            "v1,fXEoNSNOtaLRVXFUgfilIkbSYJBWDEQIg21KaLrfvHM="
        );
        assert_eq!(
            sign(&secret, "evt_01", 0, b""),
            "v1,3i0aAzsrE7mNkuA29ypv2cW12ddIqYaNZJYj9H8GQ/g="
        );
    }

    #[test]
    fn signature_depends_on_every_part() {
        let secret = WebhookSecret::parse(VECTOR_SECRET).unwrap();
        let base = sign(&secret, "msg_1", 1_700_000_000, b"{}");
        assert_ne!(base, sign(&secret, "msg_2", 1_700_000_000, b"{}"));
        assert_ne!(base, sign(&secret, "msg_1", 1_700_000_001, b"{}"));
        assert_ne!(base, sign(&secret, "msg_1", 1_700_000_000, b"{ }"));
        assert_ne!(
            base,
            sign(&WebhookSecret::generate(), "msg_1", 1_700_000_000, b"{}")
        );
    }

    #[test]
    fn generated_secrets_are_fresh_and_parse_back() {
        let a = WebhookSecret::generate();
        let b = WebhookSecret::generate();
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("whsec_"));
        // 32 bytes are 44 base64 characters with padding.
        assert_eq!(a.expose().len(), "whsec_".len() + 44);
        let back = WebhookSecret::parse(a.expose()).unwrap();
        assert_eq!(back.expose(), a.expose());
        assert_eq!(back.key, a.key);
        assert_eq!(a.key.len(), 32);
    }

    #[test]
    fn parse_refusals() {
        assert_eq!(
            WebhookSecret::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap_err(),
            SecretError::MissingPrefix
        );
        assert_eq!(
            WebhookSecret::parse("whsec_not base64!").unwrap_err(),
            SecretError::Base64
        );
        assert_eq!(
            WebhookSecret::parse("whsec_").unwrap_err(),
            SecretError::Length
        );
        // 16 bytes: too short for the specification.
        assert_eq!(
            WebhookSecret::parse("whsec_AAECAwQFBgcICQoLDA0ODw==").unwrap_err(),
            SecretError::Length
        );
        // 65 bytes: too long.
        let long = format!("whsec_{}", STANDARD.encode([7u8; 65]));
        assert_eq!(
            WebhookSecret::parse(&long).unwrap_err(),
            SecretError::Length
        );
        // 24 and 64 bytes are the bounds, both allowed.
        for n in [24, 64] {
            let s = format!("whsec_{}", STANDARD.encode(vec![1u8; n]));
            assert!(WebhookSecret::parse(&s).is_ok(), "{n} bytes");
        }
    }

    #[test]
    fn debug_redacts() {
        let secret = WebhookSecret::parse(VECTOR_SECRET).unwrap();
        let shown = format!("{secret:?}");
        assert!(!shown.contains("AAECAwQF"), "{shown}");
        assert!(shown.contains("redacted"));
    }
}
