//! Link passwords (issue 25): hashed once at the origin with PBKDF2-HMAC-SHA256, the hash published in the link's
//! KV record, verified by the worker with WebCrypto (`crypto.subtle.deriveBits`), which the Workers runtime runs
//! natively. Not argon2 (the dashboard's passwords): the worker cannot run a memory-hard hash within its CPU
//! budget, and whoever can read KV must still not recover a password quickly, so the hash is slow and salted.

use crate::domain::{LinkPassword, LinkPasswordHash};
use crate::error::StoreError;
use crate::pool::Db;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use link_rules::{PASSWORD_HASH_SCHEME, PasswordHash};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// PBKDF2 iterations of new hashes: what one verification in the worker may cost (≤ 10 ms CPU per attempt) decides
/// it. Measured in workerd (`scripts/bench-password-verify.mjs`, BENCHMARKS.md "Link passwords"): about 135 µs of
/// CPU per 1,000 iterations through WebCrypto, so 50,000 take about 7 ms, leaving room for the rest of the request
/// and slower cores. Hashes keep their own count, so changing this leaves existing passwords working.
pub const LINK_PASSWORD_ITERATIONS: u32 = 50_000;
// The worker refuses a hash that asks for more than link-rules' bound (against planted records).
const _: () = assert!(LINK_PASSWORD_ITERATIONS <= link_rules::MAX_ITERATIONS);
// And within the 10 ms budget at the measured ~136 µs per 1,000 iterations (about 73,000): a raise past this
// needs a new measurement first.
const _: () = assert!(LINK_PASSWORD_ITERATIONS <= 70_000);
/// Salt length in bytes (random per hash).
const SALT_LEN: usize = 16;
/// Derived key length in bytes (SHA-256's output).
const HASH_LEN: usize = 32;

impl Db {
    /// The hash of a link's password, computed off the async runtime under the process's bound on link-password
    /// hashing (a [`crate::HashLimit`] of its own, so the accounts' sign-ins never wait behind it):
    /// [`StoreError::Busy`] when no turn comes in time.
    pub async fn hash_link_password(
        &self,
        password: &LinkPassword,
    ) -> Result<LinkPasswordHash, StoreError> {
        let password = password.clone();
        let salt: [u8; SALT_LEN] = rand::random();
        self.link_hashing
            .run(move || hash_with(password.expose(), &salt, LINK_PASSWORD_ITERATIONS))
            .await
            .map(LinkPasswordHash::new)
    }
}

/// `pbkdf2-sha256$<iterations>$<salt>$<hash>`, base64 with padding.
fn hash_with(password: &str, salt: &[u8], iterations: u32) -> String {
    let hash: [u8; HASH_LEN] =
        pbkdf2::pbkdf2_hmac_array::<Sha256, HASH_LEN>(password.as_bytes(), salt, iterations);
    format!(
        "{PASSWORD_HASH_SCHEME}${iterations}${}${}",
        STANDARD.encode(salt),
        STANDARD.encode(hash)
    )
}

/// Whether `password` matches `stored` (the worker's check, written here for the origin's tests and any future
/// origin-side check); a malformed hash matches nothing.
pub fn verify_link_password(password: &str, stored: &str) -> bool {
    let Some(parts) = PasswordHash::parse(stored) else {
        return false;
    };
    let (Ok(salt), Ok(want)) = (
        STANDARD.decode(parts.salt_b64),
        STANDARD.decode(parts.hash_b64),
    ) else {
        return false;
    };
    let got: [u8; HASH_LEN] =
        pbkdf2::pbkdf2_hmac_array::<Sha256, HASH_LEN>(password.as_bytes(), &salt, parts.iterations);
    got.as_slice().ct_eq(want.as_slice()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_a_fresh_salt() {
        // Few iterations: the format and the check, not the cost.
        let a = hash_with("open sesame", &[1; SALT_LEN], 1_000);
        assert!(
            a.starts_with("pbkdf2-sha256$1000$AQEBAQEBAQEBAQEBAQEBAQ==$"),
            "{a}"
        );
        assert!(verify_link_password("open sesame", &a));
        assert!(!verify_link_password("open sesamE", &a));
        assert!(!verify_link_password(
            "open sesame",
            "pbkdf2-sha256$1000$!!$!!"
        ));
        assert_ne!(a, hash_with("open sesame", &[2; SALT_LEN], 1_000));
    }

    #[test]
    fn a_known_vector() {
        // RFC 7914 section 11's PBKDF2-HMAC-SHA256 vector: P = "passwd", S = "salt", c = 1.
        let stored = hash_with("passwd", b"salt", 1);
        let hash = stored.rsplit('$').next().unwrap();
        let bytes = STANDARD.decode(hash).unwrap();
        assert_eq!(bytes[..8], [0x55, 0xac, 0x04, 0x6e, 0x56, 0xe3, 0x08, 0x9f]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_store_hashes_with_the_constant() {
        let dir = std::env::temp_dir().join(format!(
            "shortlink-link-password-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("db.sqlite").display()), 1)
            .await
            .unwrap();
        let password = LinkPassword::parse("hunter22").unwrap();
        let hash = db.hash_link_password(&password).await.unwrap();
        let parts = PasswordHash::parse(hash.as_str()).unwrap();
        assert_eq!(parts.iterations, LINK_PASSWORD_ITERATIONS);
        assert_eq!(STANDARD.decode(parts.salt_b64).unwrap().len(), SALT_LEN);
        assert!(verify_link_password("hunter22", hash.as_str()));
        assert!(!verify_link_password("hunter2", hash.as_str()));
        assert_ne!(
            db.hash_link_password(&password).await.unwrap().as_str(),
            hash.as_str(),
            "a fresh salt"
        );
        db.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
