//! Why a token is rejected.

use alloc::string::String;

use crate::destination::DestinationError;

/// Why a dynamic-link token was rejected.
///
/// Every variant ends at the domain's fallback at the edge; the distinction is for logs, the validation endpoint
/// and the CLI. [`TokenError::reason`] gives the stable one-word name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is not a well-formed version-1 token sealed with this key.
    #[error("invalid signature: {0}")]
    Signature(#[from] SignatureError),
    /// The token decrypted, but the plaintext is not a valid payload.
    #[error("invalid payload: {0}")]
    Payload(#[from] PayloadError),
    /// `expires_at` is present and `now >= expires_at`.
    #[error("link expired at {expires_at} (now {now})")]
    Expired {
        /// The payload's `expires_at`.
        expires_at: i64,
        /// The time the token was evaluated at.
        now: i64,
    },
    /// The destination URL fails the destination rules.
    #[error("destination rejected: {0}")]
    Destination(#[from] DestinationError),
}

impl TokenError {
    /// The stable name of the failure class: `"signature"`, `"payload"`, `"expired"` or `"destination"`.
    ///
    /// These strings are printed by the CLI, used in logs and match the test vectors' `reason` field.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Signature(_) => "signature",
            TokenError::Payload(_) => "payload",
            TokenError::Expired { .. } => "expired",
            TokenError::Destination(_) => "destination",
        }
    }
}

/// Why a token's outer layer (encoding, version, authenticated encryption) was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not unpadded URL-safe base64 (this includes `=` padding, which the spec excludes).
    #[error("token is not unpadded base64url")]
    Base64,
    /// Too short to hold the version byte, IV and tag.
    #[error("token is {len} bytes, shorter than the minimum")]
    Length {
        /// Decoded length in bytes.
        len: usize,
    },
    /// A version byte other than 0x01.
    #[error("unsupported token version {0:#04x}")]
    Version(u8),
    /// AES-GCM authentication failed: wrong key or tampered token.
    #[error("decryption failed (wrong key or tampered token)")]
    Decrypt,
}

/// The decrypted plaintext is not a valid payload: not UTF-8 JSON, not an object, or `destination_url`
/// missing or not a string, or a field of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PayloadError {
    message: String,
}

impl PayloadError {
    pub(crate) fn from_json(err: &serde_json::Error) -> Self {
        use alloc::string::ToString;
        PayloadError {
            message: err.to_string(),
        }
    }

    /// The JSON parser's description of the problem.
    pub fn message(&self) -> &str {
        &self.message
    }
}
