//! The token format (spec 4.7): `base64url(0x01 || iv[12] || ciphertext || tag[16])`, AES-256-GCM, empty AAD.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce, Tag};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::base64url;
use crate::blocklist::Blocklist;
use crate::error::{SignatureError, TokenError};
use crate::key::GroupKey;
use crate::payload::Payload;

/// The only accepted token version byte.
pub const TOKEN_VERSION: u8 = 0x01;
/// IV (nonce) length in bytes.
pub const IV_LEN: usize = 12;
/// GCM authentication tag length in bytes.
pub const TAG_LEN: usize = 16;

const HEADER_LEN: usize = 1 + IV_LEN;

/// A successfully evaluated token: the decrypted payload and the final redirect URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The decrypted payload, as the client wrote it.
    pub payload: Payload,
    /// The final redirect URL (`http` upgraded, `back_param` appended).
    pub redirect_to: String,
}

/// A token decoded and checked (unpadded base64url, long enough, the version byte), not yet decrypted: what
/// AES-GCM opens. Apart from [`TokenCipher`] so that a caller opening it with another implementation of AES-GCM
/// (the edge worker's first visit uses WebCrypto's) gets the same checks, in the same order, with the same errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The decoded token: the version byte, the IV, the ciphertext, the tag.
    raw: Vec<u8>,
}

impl Sealed {
    /// Decodes and checks a token. `=` padding is rejected ([`SignatureError::Base64`]): spec 4.7 forbids it.
    pub fn parse(token: &str) -> Result<Sealed, SignatureError> {
        let raw = base64url::decode(token).ok_or(SignatureError::Base64)?;
        if raw.len() < HEADER_LEN + TAG_LEN {
            return Err(SignatureError::Length { len: raw.len() });
        }
        if raw[0] != TOKEN_VERSION {
            return Err(SignatureError::Version(raw[0]));
        }
        Ok(Sealed { raw })
    }

    /// The IV (12 bytes).
    pub fn iv(&self) -> &[u8] {
        &self.raw[1..HEADER_LEN]
    }

    /// The ciphertext followed by its tag (16 bytes), as WebCrypto's AES-GCM `decrypt` takes them.
    pub fn ciphertext_and_tag(&self) -> &[u8] {
        &self.raw[HEADER_LEN..]
    }
}

/// Seals and opens tokens under one group key. Build it once per group and reuse it; its `Debug` is redacted.
#[derive(Clone)]
pub struct TokenCipher {
    aead: Aes256Gcm,
}

impl TokenCipher {
    /// A cipher for the group's key.
    pub fn new(key: &GroupKey) -> Self {
        let key = Key::<Aes256Gcm>::from(*key.as_bytes());
        TokenCipher {
            aead: Aes256Gcm::new(&key),
        }
    }

    /// Encrypts `payload` as a token with the given IV.
    ///
    /// The IV must never repeat under one key (GCM loses confidentiality and integrity if it does); pass 12 random
    /// bytes, or use [`TokenCipher::seal_random`].
    pub fn seal(&self, payload: &Payload, iv: [u8; IV_LEN]) -> String {
        self.seal_plaintext(&payload.to_json(), iv)
    }

    /// Encrypts `payload` as a token with a fresh random IV.
    #[cfg(feature = "rand")]
    pub fn seal_random(&self, payload: &Payload) -> Result<String, crate::key::RandomError> {
        let mut iv = [0u8; IV_LEN];
        getrandom::fill(&mut iv).map_err(|_| crate::key::RandomError)?;
        Ok(self.seal(payload, iv))
    }

    /// Encrypts arbitrary plaintext as a version-1 token. Lower level than [`TokenCipher::seal`]; useful to build
    /// test tokens whose plaintext is not a valid payload.
    ///
    /// # Panics
    ///
    /// Only if `plaintext` exceeds AES-GCM's limit of about 64 GiB.
    pub fn seal_plaintext(&self, plaintext: &[u8], iv: [u8; IV_LEN]) -> String {
        let mut raw = Vec::with_capacity(HEADER_LEN + plaintext.len() + TAG_LEN);
        raw.push(TOKEN_VERSION);
        raw.extend_from_slice(&iv);
        raw.extend_from_slice(plaintext);
        let tag = self
            .aead
            .encrypt_in_place_detached(&Nonce::from(iv), b"", &mut raw[HEADER_LEN..])
            .expect("AES-GCM encryption fails only for plaintexts over 64 GiB");
        raw.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Decodes, checks the version and decrypts a token, returning the raw plaintext.
    ///
    /// The token must be unpadded base64url: `=` padding is rejected ([`SignatureError::Base64`]) because
    /// spec 4.7 forbids it, and a token that reaches us padded was not built to spec.
    pub fn open_plaintext(&self, token: &str) -> Result<Vec<u8>, SignatureError> {
        self.open_sealed(Sealed::parse(token)?)
    }

    /// Decrypts a token already decoded and checked, returning the raw plaintext.
    pub fn open_sealed(&self, sealed: Sealed) -> Result<Vec<u8>, SignatureError> {
        let mut raw = sealed.raw;
        let tag_start = raw.len() - TAG_LEN;
        let (head, tag) = raw.split_at_mut(tag_start);
        let (header, ciphertext) = head.split_at_mut(HEADER_LEN);
        let mut iv = [0u8; IV_LEN];
        iv.copy_from_slice(&header[1..]);
        let tag = Tag::clone_from_slice(tag);
        self.aead
            .decrypt_in_place_detached(&Nonce::from(iv), b"", ciphertext, &tag)
            .map_err(|_| SignatureError::Decrypt)?;
        raw.truncate(tag_start);
        raw.drain(..HEADER_LEN);
        Ok(raw)
    }

    /// Decrypts a token and parses its payload. Does not check the destination or the expiry.
    pub fn open(&self, token: &str) -> Result<Payload, TokenError> {
        let plaintext = self.open_plaintext(token)?;
        Ok(Payload::from_json(&plaintext)?)
    }

    /// Evaluates a token as the redirect does (spec 4.5): decrypt, parse the payload, apply the destination rules
    /// (`http` upgraded, `back_param` appended, https, ≤ 2048 characters, not blocked), then the expiry
    /// (`now >= expires_at` is expired). Returns the final redirect URL.
    pub fn evaluate<B: Blocklist + ?Sized>(
        &self,
        token: &str,
        now: i64,
        blocklist: &B,
    ) -> Result<String, TokenError> {
        self.open(token)?.redirect_url(now, blocklist)
    }

    /// Like [`TokenCipher::evaluate`], also returning the decrypted payload.
    pub fn evaluate_with_payload<B: Blocklist + ?Sized>(
        &self,
        token: &str,
        now: i64,
        blocklist: &B,
    ) -> Result<Evaluation, TokenError> {
        let payload = self.open(token)?;
        let redirect_to = payload.redirect_url(now, blocklist)?;
        Ok(Evaluation {
            payload,
            redirect_to,
        })
    }
}

impl fmt::Debug for TokenCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenCipher(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::DestinationError;

    const NOW: i64 = 1_800_000_000;
    const BLOCKED: &[&str] = &["blocked.example.net"];

    fn cipher() -> TokenCipher {
        TokenCipher::new(&GroupKey::from_bytes([0x42; 32]))
    }

    fn payload() -> Payload {
        Payload {
            destination_url: "https://dest.example.org/path".into(),
            back_param: Some("utm=1".into()),
            expires_at: Some(NOW + 60),
        }
    }

    fn raw(token: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(token).unwrap()
    }

    fn encode(raw: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(raw)
    }

    #[test]
    fn round_trip() {
        let c = cipher();
        let token = c.seal(&payload(), [9; 12]);
        assert!(!token.contains(['=', '+', '/']));
        assert_eq!(raw(&token)[0], TOKEN_VERSION);
        assert_eq!(&raw(&token)[1..13], &[9; 12]);
        assert_eq!(c.open(&token).unwrap(), payload());
        let eval = c.evaluate_with_payload(&token, NOW, BLOCKED).unwrap();
        assert_eq!(eval.redirect_to, "https://dest.example.org/path?utm=1");
        assert_eq!(eval.payload, payload());
    }

    #[test]
    fn sealed_parts() {
        let c = cipher();
        let token = c.seal(&payload(), [9; 12]);
        let sealed = Sealed::parse(&token).unwrap();
        let raw = raw(&token);
        assert_eq!(sealed.iv(), &[9; 12]);
        assert_eq!(sealed.ciphertext_and_tag(), &raw[13..]);
        assert_eq!(
            sealed.ciphertext_and_tag().len(),
            payload().to_json().len() + TAG_LEN
        );
        assert_eq!(c.open_sealed(sealed.clone()).unwrap(), payload().to_json());
        // The checks, and their errors, are open_plaintext's.
        for bad in [
            format!("{token}="),
            token[..20].to_owned(),
            encode(&[&[2u8][..], &raw[1..]].concat()),
        ] {
            assert_eq!(Sealed::parse(&bad).err(), c.open_plaintext(&bad).err());
            assert!(Sealed::parse(&bad).is_err());
        }
    }

    #[test]
    fn fresh_iv_gives_different_tokens() {
        let c = cipher();
        let a = c.seal(&payload(), [1; 12]);
        let b = c.seal(&payload(), [2; 12]);
        assert_ne!(a, b);
        assert_eq!(c.open(&a).unwrap(), c.open(&b).unwrap());
    }

    #[cfg(feature = "rand")]
    #[test]
    fn random_iv() {
        let c = cipher();
        let a = c.seal_random(&payload()).unwrap();
        let b = c.seal_random(&payload()).unwrap();
        assert_ne!(a, b);
        assert_eq!(c.open(&a).unwrap(), payload());
    }

    #[test]
    fn wrong_key() {
        let token = cipher().seal(&payload(), [1; 12]);
        let other = TokenCipher::new(&GroupKey::from_bytes([0x43; 32]));
        assert_eq!(
            other.open(&token),
            Err(TokenError::Signature(SignatureError::Decrypt))
        );
    }

    #[test]
    fn tampered_byte_in_each_region() {
        let c = cipher();
        let token = c.seal(&payload(), [1; 12]);
        let len = raw(&token).len();
        // version, iv (first and last), ciphertext, tag (first and last)
        for i in [0, 1, 12, 13, len / 2, len - TAG_LEN, len - 1] {
            let mut bytes = raw(&token);
            bytes[i] ^= 0x01;
            let err = c.open(&encode(&bytes)).unwrap_err();
            let expected = if i == 0 {
                SignatureError::Version(0)
            } else {
                SignatureError::Decrypt
            };
            assert_eq!(err, TokenError::Signature(expected), "byte {i}");
            assert_eq!(err.reason(), "signature");
        }
    }

    #[test]
    fn short_and_empty_input() {
        let c = cipher();
        assert_eq!(
            c.open(""),
            Err(TokenError::Signature(SignatureError::Length { len: 0 }))
        );
        let token = c.seal(&payload(), [1; 12]);
        let bytes = raw(&token);
        for cut in [1, 13, 28] {
            assert_eq!(
                c.open(&encode(&bytes[..cut])),
                Err(TokenError::Signature(SignatureError::Length { len: cut }))
            );
        }
        // Long enough, but the tag no longer matches.
        assert_eq!(
            c.open(&encode(&bytes[..29])),
            Err(TokenError::Signature(SignatureError::Decrypt))
        );
        assert_eq!(
            c.open(&encode(&bytes[..bytes.len() - 1]))
                .unwrap_err()
                .reason(),
            "signature"
        );
        // Empty plaintext is a valid seal but not a payload.
        let empty = c.seal_plaintext(b"", [1; 12]);
        assert_eq!(c.open_plaintext(&empty).unwrap(), b"");
        assert_eq!(c.open(&empty).unwrap_err().reason(), "payload");
    }

    #[test]
    fn other_versions_rejected() {
        let c = cipher();
        let mut bytes = raw(&c.seal(&payload(), [1; 12]));
        for v in [0x00, 0x02, 0xff] {
            bytes[0] = v;
            assert_eq!(
                c.open(&encode(&bytes)),
                Err(TokenError::Signature(SignatureError::Version(v)))
            );
        }
    }

    #[test]
    fn encoding_is_strict() {
        let c = cipher();
        // 51-byte JSON: raw is 80 bytes, so the unpadded token has a partial final group that padding would fill.
        let token = c.seal(&Payload::new("https://dest.example.org/path"), [1; 12]);
        assert!(c.open(&token).is_ok());
        assert_ne!(token.len() % 4, 0);
        let padded = format!("{token}{}", "=".repeat((4 - token.len() % 4) % 4));
        assert_eq!(
            c.open(&padded),
            Err(TokenError::Signature(SignatureError::Base64))
        );
        let standard = token.replace('-', "+").replace('_', "/");
        if standard != token {
            assert_eq!(
                c.open(&standard),
                Err(TokenError::Signature(SignatureError::Base64))
            );
        }
        for junk in ["%%%***", " ", "AQ==", "A"] {
            assert_eq!(c.open(junk).unwrap_err().reason(), "signature", "{junk}");
        }
    }

    #[test]
    fn evaluation_reasons() {
        let c = cipher();
        let eval = |p: &Payload| c.evaluate(&c.seal(p, [3; 12]), NOW, BLOCKED);

        let mut p = payload();
        p.expires_at = Some(NOW);
        assert_eq!(
            eval(&p),
            Err(TokenError::Expired {
                expires_at: NOW,
                now: NOW
            })
        );
        p.expires_at = Some(NOW + 1);
        assert!(eval(&p).is_ok());

        let p = Payload::new("https://a.blocked.example.net/");
        assert_eq!(
            eval(&p),
            Err(TokenError::Destination(DestinationError::Blocked))
        );
        let p = Payload::new("javascript:alert(1)");
        assert_eq!(eval(&p).unwrap_err().reason(), "destination");

        let not_json = c.seal_plaintext(b"hello", [3; 12]);
        assert_eq!(
            c.evaluate(&not_json, NOW, BLOCKED).unwrap_err().reason(),
            "payload"
        );
        let not_utf8 = c.seal_plaintext(b"{\"destination_url\":\"https://d.org/\xc3\"}", [3; 12]);
        assert_eq!(
            c.evaluate(&not_utf8, NOW, BLOCKED).unwrap_err().reason(),
            "payload"
        );
    }

    #[test]
    fn debug_is_redacted() {
        assert_eq!(format!("{:?}", cipher()), "TokenCipher(<redacted>)");
    }
}
