//! The stored form of a link's password hash, as the origin writes it and the worker will read it:
//! `pbkdf2-sha256$<iterations>$<salt, base64>$<hash, base64>` (standard base64 with padding). PBKDF2-HMAC-SHA256
//! because the Workers runtime verifies it natively (WebCrypto `deriveBits`) within its CPU budget.

/// The scheme name that starts every hash.
pub const PASSWORD_HASH_SCHEME: &str = "pbkdf2-sha256";

/// The parts of a stored hash, still encoded: the worker decodes the base64 and derives with WebCrypto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordHash<'a> {
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// The salt, base64.
    pub salt_b64: &'a str,
    /// The derived key, base64.
    pub hash_b64: &'a str,
}

impl<'a> PasswordHash<'a> {
    /// The parts of `stored`; `None` when it is not of this scheme or malformed (the worker then refuses every
    /// password: a link it cannot check stays closed).
    pub fn parse(stored: &'a str) -> Option<Self> {
        let mut parts = stored.split('$');
        if parts.next()? != PASSWORD_HASH_SCHEME {
            return None;
        }
        let iterations = parts.next()?.parse().ok().filter(|n| *n > 0)?;
        let salt_b64 = parts.next().filter(|s| !s.is_empty())?;
        let hash_b64 = parts.next().filter(|s| !s.is_empty())?;
        if parts.next().is_some() {
            return None;
        }
        Some(PasswordHash {
            iterations,
            salt_b64,
            hash_b64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts() {
        assert_eq!(
            PasswordHash::parse("pbkdf2-sha256$100000$c2FsdA==$aGFzaA=="),
            Some(PasswordHash {
                iterations: 100_000,
                salt_b64: "c2FsdA==",
                hash_b64: "aGFzaA==",
            })
        );
        for bad in [
            "",
            "pbkdf2-sha1$1$a$b",
            "pbkdf2-sha256$0$a$b",
            "pbkdf2-sha256$x$a$b",
            "pbkdf2-sha256$1$$b",
            "pbkdf2-sha256$1$a$",
            "pbkdf2-sha256$1$a$b$c",
        ] {
            assert_eq!(PasswordHash::parse(bad), None, "{bad}");
        }
    }
}
