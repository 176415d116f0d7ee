//! Short codes: the `<short_code>` of a link's KV key and of its public URL.
//!
//! The rule lives here, beside the key format, so that the origin (which accepts client-chosen codes and draws
//! random ones) and the fuzz targets share one definition that builds without the origin's server stack.

use alloc::string::String;
use core::fmt;

/// Shortest client-chosen short code (spec 4.1).
pub const SHORT_CODE_MIN_LEN: usize = 3;
/// Longest client-chosen short code (spec 4.1).
pub const SHORT_CODE_MAX_LEN: usize = 50;
/// Length of generated codes: 36^7 ≈ 7.8e10 codes, so collisions stay rare per domain.
pub const GENERATED_LEN: usize = 7;
/// Generated codes use lowercase letters and digits only, so they read unambiguously in any case.
pub const GENERATED_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A short code: 3 to 50 of `[A-Za-z0-9_-]`, held lowercase as it is stored and looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShortCode(String);

/// Why a client-chosen short code was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShortCodeError {
    /// Fewer than [`SHORT_CODE_MIN_LEN`] or more than [`SHORT_CODE_MAX_LEN`] characters.
    Length,
    /// A character other than an ASCII letter, digit, `_` or `-`.
    Characters,
}

impl fmt::Display for ShortCodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length => write!(
                f,
                "short_code must be {SHORT_CODE_MIN_LEN} to {SHORT_CODE_MAX_LEN} characters long"
            ),
            Self::Characters => f.write_str("short_code may contain only letters, digits, _ and -"),
        }
    }
}

impl core::error::Error for ShortCodeError {}

impl ShortCode {
    /// Validates a client-chosen code and lowercases it. Length is counted in characters, so a too-short code
    /// with a non-ASCII letter is reported as too short, the way the client counts it.
    pub fn parse(raw: &str) -> Result<Self, ShortCodeError> {
        let len = raw.chars().count();
        if !(SHORT_CODE_MIN_LEN..=SHORT_CODE_MAX_LEN).contains(&len) {
            return Err(ShortCodeError::Length);
        }
        if !raw.bytes().all(is_short_code_byte) {
            return Err(ShortCodeError::Characters);
        }
        Ok(Self(raw.to_ascii_lowercase()))
    }

    /// A code of [`GENERATED_LEN`] characters from [`GENERATED_ALPHABET`]. `random_below(n)` must return a
    /// uniformly random index below `n`; the caller brings the randomness so this crate stays dependency-free
    /// (and the origin's uniqueness check, a unique index, stays the database's job). Out-of-range indexes are
    /// reduced modulo `n` rather than trusted.
    pub fn generate(mut random_below: impl FnMut(usize) -> usize) -> Self {
        let n = GENERATED_ALPHABET.len();
        Self(
            (0..GENERATED_LEN)
                .map(|_| char::from(GENERATED_ALPHABET[random_below(n) % n]))
                .collect(),
        )
    }

    /// The stored (lowercase) form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShortCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The bytes a short code may contain (spec 4.1).
pub fn is_short_code_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn accepts_bounds_and_lowercases() {
        assert_eq!(ShortCode::parse("AbC").unwrap().as_str(), "abc");
        assert!(ShortCode::parse(&"a".repeat(50)).is_ok());
        assert!(ShortCode::parse("a_b-C9").is_ok());
    }

    #[test]
    fn rejects_length_and_characters() {
        for (bad, why) in [
            ("", ShortCodeError::Length),
            ("ab", ShortCodeError::Length),
            (&"a".repeat(51), ShortCodeError::Length),
            ("abc!", ShortCodeError::Characters),
            ("a b c", ShortCodeError::Characters),
            ("ábc", ShortCodeError::Characters),
            ("áb", ShortCodeError::Length),
            ("abc/", ShortCodeError::Characters),
            ("abc.d", ShortCodeError::Characters),
        ] {
            assert_eq!(ShortCode::parse(bad), Err(why), "{bad:?}");
        }
        assert_eq!(
            ShortCodeError::Length.to_string(),
            "short_code must be 3 to 50 characters long"
        );
    }

    #[test]
    fn generated_codes_are_valid_and_follow_the_randomness() {
        let mut i = 0;
        let code = ShortCode::generate(|n| {
            i += 1;
            (i * 5) % n
        });
        assert_eq!(code.as_str(), "fkpuz49");
        assert_eq!(ShortCode::parse(code.as_str()), Ok(code));
        // An index out of range is reduced, never a panic.
        assert_eq!(
            ShortCode::generate(|_| usize::MAX).as_str().len(),
            GENERATED_LEN
        );
    }
}
