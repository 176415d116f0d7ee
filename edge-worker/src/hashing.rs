//! The hasher of the isolate's maps ([`crate::cache`], [`crate::loads`], [`crate::bounded`]): SipHash-1-3, as std's
//! `RandomState`, with keys drawn once per isolate from the runtime's CSPRNG.
//!
//! The maps' keys come from visitors (a link's host and code, a dynamic link's token, a destination), so a hasher
//! whose keys an attacker knows lets them choose keys that collide, and every lookup in that map then walks them
//! all. std's `RandomState` on `wasm32-unknown-unknown` has no randomness to draw from: its keys are the same in every
//! isolate of a build, which anyone with the build can read. Keyed from `crypto.getRandomValues`, the collisions are
//! not known in advance, which is what SipHash is for. (foldhash, seeded the same way, was measured too: its long-key
//! path and seed derivation made a new isolate's first request compile about 1.3 KB more; BENCHMARKS.md, issue 28.)

use std::hash::BuildHasher;
use std::sync::OnceLock;

use siphasher::sip::SipHasher13;

/// What the isolate's maps hash with: SipHash-1-3 under the isolate's keys.
#[derive(Debug, Clone, Copy)]
pub struct Keyed {
    k0: u64,
    k1: u64,
}

impl BuildHasher for Keyed {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// The isolate's keys, drawn when its first map is made.
static KEYS: OnceLock<Keyed> = OnceLock::new();

/// The hasher for a new map: every map of the isolate hashes under the same random keys.
pub fn keyed() -> Keyed {
    *KEYS.get_or_init(|| Keyed {
        k0: random_u64(),
        k1: random_u64(),
    })
}

/// 64 random bits from the runtime's CSPRNG (`crypto.getRandomValues`).
#[cfg(target_arch = "wasm32")]
fn random_u64() -> u64 {
    crate::shell::random_u64()
}

/// 64 random bits on the host (tests): std's `RandomState` is randomly keyed there.
#[cfg(not(target_arch = "wasm32"))]
fn random_u64() -> u64 {
    std::hash::RandomState::new().hash_one(0u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_map_of_an_isolate_hashes_alike_under_random_keys() {
        let (a, b) = (keyed(), keyed());
        assert_eq!(
            a.hash_one("link:a.example:x"),
            b.hash_one("link:a.example:x")
        );
        // Another isolate (here: keys drawn again) orders keys otherwise. A chance of 2^-64 to fail.
        let other = Keyed {
            k0: random_u64(),
            k1: random_u64(),
        };
        assert_ne!(
            a.hash_one("link:a.example:x"),
            other.hash_one("link:a.example:x")
        );
        // And the keys are not std's fixed wasm32 ones nor zero: SipHash-1-3 under (0, 0) differs.
        assert_ne!(
            a.hash_one("link:a.example:x"),
            Keyed { k0: 0, k1: 0 }.hash_one("link:a.example:x")
        );
    }
}
