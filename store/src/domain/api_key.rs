//! API keys: a recognisable prefix and 238 random bits, shown once, stored and compared as SHA-256 hashes.

use rand::Rng;
use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;

/// Every key starts with this, so leaked keys are easy to recognise (and to scan for).
pub(crate) const PREFIX: &str = "slk_";
/// Random characters after the prefix: 40 base62 characters ≈ 238 bits.
const RANDOM_LEN: usize = 40;
const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Why an `Authorization` header does not carry a well-formed key (all of them end in 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    /// The scheme is not `Token` (for instance `Bearer`).
    #[error("the Authorization scheme must be Token")]
    WrongScheme,
    /// The key does not have our prefix, length or alphabet.
    #[error("malformed API key")]
    Malformed,
}

/// A plaintext API key. Exists only between generation and the one response that shows it,
/// and between reading a request header and hashing it. `Debug` never prints it.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// A new random key.
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let mut key = String::with_capacity(PREFIX.len() + RANDOM_LEN);
        key.push_str(PREFIX);
        key.extend((0..RANDOM_LEN).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char));
        Self(key)
    }

    /// Parses an `Authorization` header value: `Token <key>`.
    pub fn from_authorization(header: &str) -> Result<Self, KeyFormatError> {
        let (scheme, rest) = header.split_once(' ').ok_or(KeyFormatError::WrongScheme)?;
        // Auth schemes are case-insensitive (RFC 9110 §11.1); the spec's point is Token, not Bearer.
        if !scheme.eq_ignore_ascii_case("Token") {
            return Err(KeyFormatError::WrongScheme);
        }
        Self::parse(rest.trim())
    }

    /// Checks the shape of a key without touching the database.
    pub fn parse(raw: &str) -> Result<Self, KeyFormatError> {
        let random = raw.strip_prefix(PREFIX).ok_or(KeyFormatError::Malformed)?;
        if random.len() != RANDOM_LEN || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(KeyFormatError::Malformed);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The plaintext, for the single response that shows a new key.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The stored form.
    pub fn hash(&self) -> ApiKeyHash {
        ApiKeyHash(hex(&Sha256::digest(self.0.as_bytes())))
    }

    /// The display form: prefix and last four characters, the rest masked.
    pub fn masked(&self) -> String {
        let tail = &self.0[self.0.len() - 4..];
        format!("{PREFIX}{}{tail}", "*".repeat(RANDOM_LEN - 4))
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// SHA-256 of a key, lowercase hex. A key has 238 random bits, so a fast hash is enough:
/// there is nothing to brute-force, unlike a password.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeyHash(String);

impl ApiKeyHash {
    /// Wraps a hash read back from the database.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

    /// The hex string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Constant-time equality, so a comparison leaks nothing through timing.
    pub fn matches(&self, other: &ApiKeyHash) -> bool {
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

impl fmt::Debug for ApiKeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKeyHash(<redacted>)")
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_differ() {
        let a = ApiKey::generate();
        let b = ApiKey::generate();
        assert!(a.expose().starts_with(PREFIX));
        assert_eq!(a.expose().len(), PREFIX.len() + RANDOM_LEN);
        assert!(ApiKey::parse(a.expose()).is_ok());
        assert_ne!(a.expose(), b.expose());
        assert!(!a.hash().matches(&b.hash()));
        assert!(a.hash().matches(&ApiKey::parse(a.expose()).unwrap().hash()));
    }

    #[test]
    fn authorization_header_forms() {
        let key = ApiKey::generate();
        let k = key.expose();
        assert!(ApiKey::from_authorization(&format!("Token {k}")).is_ok());
        assert!(ApiKey::from_authorization(&format!("token {k}")).is_ok());
        assert_eq!(
            ApiKey::from_authorization(&format!("Bearer {k}")).unwrap_err(),
            KeyFormatError::WrongScheme
        );
        assert_eq!(
            ApiKey::from_authorization(k).unwrap_err(),
            KeyFormatError::WrongScheme
        );
        assert_eq!(
            ApiKey::from_authorization("Token slk_short").unwrap_err(),
            KeyFormatError::Malformed
        );
        assert_eq!(
            ApiKey::from_authorization(&format!("Token {}!", &k[..k.len() - 1])).unwrap_err(),
            KeyFormatError::Malformed
        );
    }

    #[test]
    fn debug_and_mask_hide_the_secret() {
        let key = ApiKey::generate();
        assert!(!format!("{key:?}").contains(&key.expose()[4..]));
        assert!(!format!("{:?}", key.hash()).contains(key.hash().as_str()));
        let masked = key.masked();
        assert_eq!(masked.len(), key.expose().len());
        assert!(masked.ends_with(&key.expose()[key.expose().len() - 4..]));
        assert!(!masked.contains(&key.expose()[4..20]));
    }
}
