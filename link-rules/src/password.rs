//! The stored form of a link's password hash, as the origin writes it and the worker will read it:
//! `pbkdf2-sha256$<iterations>$<salt, base64>$<hash, base64>` (standard base64 with padding). PBKDF2-HMAC-SHA256
//! because the Workers runtime verifies it natively (WebCrypto `deriveBits`) within its CPU budget.

/// The scheme name that starts every hash.
pub const PASSWORD_HASH_SCHEME: &str = "pbkdf2-sha256";

/// The most iterations a stored hash may ask for: workerd's WebCrypto refuses PBKDF2 above 100,000 iterations, so
/// a hash past it could never be verified at the edge (the origin writes fewer; see its constant).
pub const MAX_ITERATIONS: u32 = 100_000;

/// Standard base64 with padding: its alphabet, `=` only at the end.
fn is_base64(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    s.len() - body.len() <= 2
        && s.len() % 4 == 0
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

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
        // Bounded, so a corrupt or planted record cannot make the worker derive for minutes: digits only, no
        // leading zero, at most MAX_ITERATIONS; a salt of 16 to 64 bytes and a 32-byte hash (SHA-256's length), in
        // padded base64.
        let iterations = parts
            .next()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0'))?
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_ITERATIONS).contains(n))?;
        let salt_b64 = parts
            .next()
            .filter(|s| (24..=88).contains(&s.len()) && is_base64(s))?;
        let hash_b64 = parts.next().filter(|s| s.len() == 44 && is_base64(s))?;
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
    use alloc::format;
    use alloc::string::String;

    #[test]
    fn parts() {
        let salt = "AAECAwQFBgcICQoLDA0ODw=="; // 16 bytes
        let hash = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="; // 32 bytes
        assert_eq!(
            PasswordHash::parse(&format!("pbkdf2-sha256$100000${salt}${hash}")),
            Some(PasswordHash {
                iterations: 100_000,
                salt_b64: salt,
                hash_b64: hash,
            })
        );
        for bad in [
            String::new(),
            format!("pbkdf2-sha1$1${salt}${hash}"),
            format!("pbkdf2-sha256$0${salt}${hash}"),
            format!("pbkdf2-sha256$x${salt}${hash}"),
            format!("pbkdf2-sha256$+100${salt}${hash}"),
            format!("pbkdf2-sha256$0100${salt}${hash}"),
            format!("pbkdf2-sha256$100001${salt}${hash}"),
            format!("pbkdf2-sha256$4294967295${salt}${hash}"),
            format!("pbkdf2-sha256$1$${hash}"),
            format!("pbkdf2-sha256$1$c2FsdA==${hash}"),
            format!("pbkdf2-sha256$1${salt}$"),
            format!("pbkdf2-sha256$1${salt}$aGFzaA=="),
            format!("pbkdf2-sha256$1${salt}${}", hash.replace('A', "*")),
            format!("pbkdf2-sha256$1${salt}${hash}$c"),
        ] {
            assert_eq!(PasswordHash::parse(&bad), None, "{bad}");
        }
        assert!(PasswordHash::parse(&format!("pbkdf2-sha256$100000${salt}${hash}")).is_some());
    }
}
