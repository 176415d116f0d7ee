//! A password as the dashboard accepts one, and the random tokens it hands out (invitations, sessions).

use super::ValidationError;
use sha2::{Digest, Sha256};
use std::fmt;

/// Shortest password accepted (the rule; length beats composition rules, NIST SP 800-63B).
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest: argon2 hashes any length, but an unbounded input is an unbounded CPU bill.
pub const MAX_PASSWORD_CHARS: usize = 256;

/// A new password that meets the rules. Never printed: `Debug` is redacted.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    /// Checks a new password (and its confirmation, typed twice in the form).
    pub fn new(raw: &str, confirmation: &str) -> Result<Self, ValidationError> {
        let chars = raw.chars().count();
        if chars < MIN_PASSWORD_CHARS {
            return Err(ValidationError::new(format!(
                "The password must have at least {MIN_PASSWORD_CHARS} characters."
            )));
        }
        if chars > MAX_PASSWORD_CHARS {
            return Err(ValidationError::new(format!(
                "The password must have at most {MAX_PASSWORD_CHARS} characters."
            )));
        }
        if raw != confirmation {
            return Err(ValidationError::new("The two passwords differ."));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The characters, for hashing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// A random bearer token (an invitation in a URL, a session id in a cookie): 32 random bytes as lowercase hex.
/// The store keeps only [`SecretToken::hash`]; the token itself exists in the response that hands it out.
#[derive(Clone)]
pub struct SecretToken(String);

impl SecretToken {
    /// 256 fresh random bits.
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        Self(super::api_key::hex(&bytes))
    }

    /// A token as presented by a client: 64 lowercase hex characters, or None (then nothing is looked up).
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.len() == 64 && raw.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(raw.to_owned()))
    }

    /// The token, to hand out (in a URL or a cookie).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// SHA-256 as lowercase hex: what the database stores and looks up. The token has 256 random bits, so a
    /// fast hash suffices, and the index lookup on it leaks nothing usable about the token.
    pub fn hash(&self) -> String {
        super::api_key::hex(&Sha256::digest(self.0.as_bytes()))
    }

    /// A value derived from the token for another purpose (the dashboard's CSRF token is derived from the
    /// session's), which does not reveal the token.
    pub fn derive(&self, purpose: &str) -> String {
        let mut h = Sha256::new();
        h.update(purpose.as_bytes());
        h.update([0]);
        h.update(self.0.as_bytes());
        super::api_key::hex(&h.finalize())
    }
}

impl fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_rules() {
        assert!(Password::new("short", "short").is_err());
        assert!(Password::new("0123456789", "0123456789").is_ok());
        assert!(Password::new("0123456789", "0123456780").is_err());
        let long = "x".repeat(MAX_PASSWORD_CHARS + 1);
        assert!(Password::new(&long, &long).is_err());
        // Characters, not bytes: ten accented letters are ten characters.
        let accented = "é".repeat(10);
        assert!(Password::new(&accented, &accented).is_ok());
        assert_eq!(
            format!("{:?}", Password::new("0123456789", "0123456789").unwrap()),
            "Password(<redacted>)"
        );
    }

    #[test]
    fn tokens() {
        let t = SecretToken::generate();
        assert_eq!(t.expose().len(), 64);
        assert!(SecretToken::parse(t.expose()).is_some());
        assert_ne!(SecretToken::generate().expose(), t.expose());
        assert_ne!(t.hash(), t.expose());
        assert_ne!(t.derive("csrf"), t.derive("other"));
        for bad in ["", "abc", &"G".repeat(64), &"A".repeat(64), &"a".repeat(65)] {
            assert!(SecretToken::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(format!("{t:?}"), "SecretToken(<redacted>)");
    }
}
