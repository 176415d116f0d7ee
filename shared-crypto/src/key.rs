//! The group key: the 32-byte AES-256 secret of a group, exchanged as base64url.

use alloc::string::String;
use core::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Length of a group key in bytes (AES-256).
pub const KEY_LEN: usize = 32;

/// A group's 32-byte secret key. Its `Debug` output is redacted.
#[derive(Clone)]
pub struct GroupKey([u8; KEY_LEN]);

/// A group key string that does not decode to 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not base64url.
    #[error("group key is not base64url")]
    Base64,
    /// Decoded to the wrong number of bytes.
    #[error("group key decodes to {len} bytes; expected 32 bytes")]
    Length {
        /// Decoded length in bytes.
        len: usize,
    },
}

impl GroupKey {
    /// Wraps raw key bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        GroupKey(bytes)
    }

    /// Decodes a base64url key as shown on the dashboard.
    ///
    /// Lenient where it is harmless, because keys are pasted by hand: surrounding whitespace and trailing `=`
    /// padding are ignored. The standard (`+` `/`) alphabet is not accepted.
    pub fn from_base64url(s: &str) -> Result<Self, KeyError> {
        // The strict decoder first: a key of the alphabet alone (every key the origin publishes) has nothing to
        // trim. The trims (Unicode whitespace, a `char` pattern) run only for a key it refuses, as a pasted one may
        // be: code the edge worker would otherwise compile on a new isolate's first visit to a dynamic link
        // (BENCHMARKS.md, issue 28). The decoder is the one judge of the alphabet.
        let bytes = crate::base64url::decode(s)
            .or_else(|| crate::base64url::decode(trimmed(s)))
            .ok_or(KeyError::Base64)?;
        let bytes: [u8; KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::Length { len: bytes.len() })?;
        Ok(GroupKey(bytes))
    }

    /// The key as unpadded base64url (43 characters).
    pub fn to_base64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// The raw key bytes.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// A fresh random key from the operating system's RNG.
    #[cfg(feature = "rand")]
    pub fn generate() -> Result<Self, RandomError> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes).map_err(|_| RandomError)?;
        Ok(GroupKey(bytes))
    }
}

impl fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GroupKey(<redacted>)")
    }
}

/// The operating system's random number generator failed.
#[cfg(feature = "rand")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the system random number generator failed")]
pub struct RandomError;

/// A pasted key without its surrounding whitespace and trailing `=` padding ([`GroupKey::from_base64url`]).
#[cold]
#[inline(never)]
fn trimmed(s: &str) -> &str {
    s.trim().trim_end_matches('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trip() {
        let key = GroupKey::from_bytes([0xfb; 32]);
        let s = key.to_base64url();
        assert_eq!(s.len(), 43);
        assert!(!s.contains(['+', '/', '=']));
        assert_eq!(
            GroupKey::from_base64url(&s).unwrap().as_bytes(),
            key.as_bytes()
        );
    }

    #[test]
    fn accepts_padding_and_whitespace() {
        let s = GroupKey::from_bytes([1; 32]).to_base64url();
        // Unicode whitespace too (a non-breaking space, an ideographic space), as `str::trim` takes it.
        for padded in [
            format!(" {s}=\n"),
            format!("\u{a0}{s}=="),
            format!("{s}\u{3000}"),
        ] {
            assert_eq!(
                GroupKey::from_base64url(&padded).unwrap().as_bytes(),
                &[1; 32],
                "{padded:?}"
            );
        }
    }

    #[test]
    fn rejects_bad_keys() {
        assert_eq!(
            GroupKey::from_base64url("").unwrap_err(),
            KeyError::Length { len: 0 }
        );
        assert_eq!(
            GroupKey::from_base64url("AAAA").unwrap_err(),
            KeyError::Length { len: 3 }
        );
        assert_eq!(
            GroupKey::from_base64url("not base64!").unwrap_err(),
            KeyError::Base64
        );
        // Standard alphabet is not base64url.
        let std_alphabet = "+".repeat(43);
        assert_eq!(
            GroupKey::from_base64url(&std_alphabet).unwrap_err(),
            KeyError::Base64
        );
    }

    #[test]
    fn debug_is_redacted() {
        let key = GroupKey::from_bytes([0x41; 32]);
        let dbg = format!("{key:?}");
        assert_eq!(dbg, "GroupKey(<redacted>)");
    }

    #[cfg(feature = "rand")]
    #[test]
    fn generated_keys_differ() {
        let a = GroupKey::generate().unwrap();
        let b = GroupKey::generate().unwrap();
        assert_ne!(a.as_bytes(), b.as_bytes());
    }
}
