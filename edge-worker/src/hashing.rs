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

/// What the isolate's maps hash with: SipHash-1-3 under the isolate's keys, drawn at its first hash ([`keys`]).
/// Holding no keys itself, it makes a map in a `const` (`HashMap::with_hasher`): a map that is never hashed into
/// (the isolate cache and the loads on a new isolate's first visit, until its answer: BENCHMARKS.md, issue 28)
/// never draws them, nor compiles the drawing, SipHash or a lazily made map's initialisation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Keyed;

impl BuildHasher for Keyed {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        let (k0, k1) = keys();
        SipHasher13::new_with_keys(k0, k1)
    }
}

/// The isolate's keys, drawn at its first hash.
static KEYS: OnceLock<(u64, u64)> = OnceLock::new();

/// The isolate's keys: every map of the isolate hashes under the same random keys.
fn keys() -> (u64, u64) {
    *KEYS.get_or_init(|| (random_u64(), random_u64()))
}

/// The hasher for a new map.
pub const fn keyed() -> Keyed {
    Keyed
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
    use std::hash::{Hash, Hasher};

    use super::*;

    #[test]
    fn every_map_of_an_isolate_hashes_alike_under_random_keys() {
        let (a, b) = (keyed(), keyed());
        assert_eq!(
            a.hash_one("link:a.example:x"),
            b.hash_one("link:a.example:x")
        );
        let under = |k0: u64, k1: u64| {
            let mut h = SipHasher13::new_with_keys(k0, k1);
            "link:a.example:x".hash(&mut h);
            h.finish()
        };
        let (k0, k1) = keys();
        assert_eq!(a.hash_one("link:a.example:x"), under(k0, k1));
        // Another isolate (here: keys drawn again) orders keys otherwise. A chance of 2^-64 to fail.
        assert_ne!(
            a.hash_one("link:a.example:x"),
            under(random_u64(), random_u64())
        );
        // And the keys are not std's fixed wasm32 ones nor zero: SipHash-1-3 under (0, 0) differs.
        assert_ne!(a.hash_one("link:a.example:x"), under(0, 0));
    }
}
