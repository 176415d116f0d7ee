//! The Shortlink dynamic-link protocol (spec sections 2, 4.5–4.7, 8 and 9).
//!
//! A dynamic link carries its destination encrypted in a token:
//! `base64url(0x01 || iv[12] || AES-256-GCM(payload JSON) || tag[16])`, no padding, empty AAD.
//! This crate builds and opens such tokens and applies the destination rules (https only, `http://` upgraded,
//! at most [`MAX_URL_LEN`] characters after `back_param` is appended, host not on the blocked domain list)
//! and the expiry rule. It is used by the edge worker (wasm32), the origin and the CLI, so it is `no_std` +
//! `alloc`, does no I/O and reads no clock: `now` and the blocklist are parameters.
//!
//! Features:
//! - `rand` (off by default): random IVs ([`TokenCipher::seal_random`]) and key generation
//!   ([`GroupKey::generate`]) through `getrandom`. The origin and the CLI enable it; the worker does not need it.
//!
//! ```
//! use shared_crypto::{GroupKey, Payload, TokenCipher};
//!
//! let key = GroupKey::from_bytes([7; 32]);
//! let cipher = TokenCipher::new(&key);
//! let mut payload = Payload::new("http://example.org/landing");
//! payload.back_param = Some("utm_source=mail".into());
//! let token = cipher.seal(&payload, [0; 12]);
//!
//! let blocked: &[&str] = &["blocked.example.net"];
//! let url = cipher.evaluate(&token, 1_800_000_000, blocked).unwrap();
//! assert_eq!(url, "https://example.org/landing?utm_source=mail");
//! ```
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod ascii;
pub mod base64url;
mod blocklist;
mod destination;
mod error;
mod host;
mod key;
mod payload;
mod token;

pub use blocklist::{Blocklist, DomainBlocklist};
pub use destination::{
    Destination, DestinationError, MAX_URL_LEN, append_back_param, extract_host, parse_destination,
    upgrade_http,
};
pub use error::{PayloadError, SignatureError, TokenError};
pub use host::normalize_host;
#[cfg(feature = "rand")]
pub use key::RandomError;
pub use key::{GroupKey, KEY_LEN, KeyError};
pub use payload::Payload;
pub use token::{Evaluation, IV_LEN, Sealed, TAG_LEN, TOKEN_VERSION, TokenCipher};

/// Opens `token` with `cipher` and returns the final redirect URL, or why the token is rejected.
///
/// Same as [`TokenCipher::evaluate`]; see there for the order of the checks.
pub fn evaluate<B: Blocklist + ?Sized>(
    cipher: &TokenCipher,
    token: &str,
    now: i64,
    blocklist: &B,
) -> Result<alloc::string::String, TokenError> {
    cipher.evaluate(token, now, blocklist)
}
