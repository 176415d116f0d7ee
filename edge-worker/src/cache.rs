//! The per-isolate cache: KV records kept in memory for a short TTL, so a hot link costs no KV read.
//!
//! A Workers isolate serves many requests, one at a time per event-loop turn, so the shell keeps one
//! [`TtlCache`] in a `thread_local!`. Absence is cached too (a `None` value): unknown codes are as hot as known
//! ones when someone scans. The clock is a parameter, so expiry is tested here with plain numbers.
//!
//! Refresh-ahead: in the last fifth of an entry's life, one lookup (and then one a second at most) is told to
//! reload it in the background while every lookup keeps getting the fresh value. A hot key is therefore reloaded
//! before it expires, and never makes every request in flight at the moment of expiry read KV at once; the value
//! served is never older than the TTL.

use std::collections::HashMap;

use crate::hashing::{self, Keyed};

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<V> {
    /// A fresh value.
    Hit(V),
    /// A fresh value close to expiry: this caller should reload the key without waiting for it.
    Refresh(V),
    /// Absent or expired: the caller must load it.
    Miss,
}

/// How long after offering a refresh the cache offers it again, in case the first reload failed or was lost.
pub const REFRESH_RETRY_MS: u64 = 1_000;

#[derive(Debug)]
struct Entry<V> {
    expires: u64,
    /// From when a lookup is offered [`Lookup::Refresh`].
    refresh_at: u64,
    value: V,
}

/// A map from KV key to value with one time-to-live for all entries and a size bound.
#[derive(Debug)]
pub struct TtlCache<V> {
    entries: HashMap<String, Entry<V>, Keyed>,
    ttl_ms: u64,
    capacity: usize,
}

impl<V: Clone> TtlCache<V> {
    /// An empty cache whose entries live `ttl_ms` milliseconds; it holds at most `capacity` entries. A `const`
    /// with no table yet: a new isolate's first visit inserts nothing before its answer (the shell's records holds
    /// what it read and caches it after), and looking up an empty map hashes nothing, so that visit compiles
    /// neither the cache's making nor hashing; the table is made, and grows, after the response.
    pub const fn new(ttl_ms: u64, capacity: usize) -> Self {
        TtlCache {
            entries: HashMap::with_hasher(hashing::keyed()),
            ttl_ms,
            capacity: if capacity == 0 { 1 } else { capacity },
        }
    }

    /// The entry of `key`, fresh or not. A new isolate's first visit looks up its records in an empty cache (it
    /// holds what it read until after its answer): that lookup is the check of emptiness, and the table's probe
    /// is out of line, compiled by the first lookup in a cache that holds something.
    fn entry(&self, key: &str) -> Option<&Entry<V>> {
        if self.entries.is_empty() {
            None
        } else {
            self.probe(key)
        }
    }

    /// [`entry`](Self::entry) in a cache that holds something.
    #[inline(never)]
    fn probe(&self, key: &str) -> Option<&Entry<V>> {
        self.entries.get(key)
    }

    /// Changes the TTL for entries inserted from now on.
    pub fn set_ttl_ms(&mut self, ttl_ms: u64) {
        self.ttl_ms = ttl_ms;
    }

    /// The value for `key` if it was inserted less than the TTL ago.
    pub fn get(&self, key: &str, now_ms: u64) -> Option<V> {
        match self.entry(key) {
            Some(entry) if now_ms < entry.expires => Some(entry.value.clone()),
            _ => None,
        }
    }

    /// The value for `key` while it is a plain hit (before its reload is due), with the instant it stops being
    /// one, without taking the reload offer [`lookup`](Self::lookup) hands out: for the fast path, which leaves
    /// anything near expiry to the full path, whose `lookup` must then still be told to reload. That instant is
    /// never past the entry's expiry (`refresh_at <= expires` always holds), so neither the value nor an answer
    /// kept until then outlives the TTL.
    pub fn peek_fresh(&self, key: &str, now_ms: u64) -> Option<(V, u64)> {
        match self.entry(key) {
            Some(entry) if now_ms < entry.refresh_at => {
                Some((entry.value.clone(), entry.refresh_at))
            }
            _ => None,
        }
    }

    /// Like [`get`](Self::get), but hands out the reload of a value near expiry: to one caller, then to another
    /// only after [`REFRESH_RETRY_MS`] if the value was not replaced meanwhile.
    pub fn lookup(&mut self, key: &str, now_ms: u64) -> Lookup<V> {
        match self.entries.get_mut(key) {
            Some(entry) if now_ms < entry.expires => {
                if now_ms < entry.refresh_at {
                    Lookup::Hit(entry.value.clone())
                } else {
                    // Never past `expires`: `peek_fresh` (the fast path, and the instant a kept answer lasts) trusts
                    // `refresh_at` alone, so an offer made in the last second must not stretch the entry's life.
                    entry.refresh_at = now_ms.saturating_add(REFRESH_RETRY_MS).min(entry.expires);
                    Lookup::Refresh(entry.value.clone())
                }
            }
            _ => Lookup::Miss,
        }
    }

    /// The instant an entry inserted at `now_ms` stops being a plain hit ([`peek_fresh`](Self::peek_fresh)).
    pub fn refresh_at(&self, now_ms: u64) -> u64 {
        let expires = now_ms.saturating_add(self.ttl_ms);
        expires - self.ttl_ms / 5
    }

    /// Stores `value` for `key`. With a TTL of zero nothing is stored.
    pub fn insert(&mut self, key: String, value: V, now_ms: u64) {
        self.insert_read_at(key, value, now_ms, now_ms);
    }

    /// [`insert`](Self::insert) of a value read at `read_at`, whence its TTL runs, stored at `now_ms` (a new
    /// isolate's first visit caches what it read after its answer).
    pub fn insert_read_at(&mut self, key: String, value: V, read_at: u64, now_ms: u64) {
        if self.ttl_ms == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.make_room(now_ms);
        }
        let expires = read_at.saturating_add(self.ttl_ms);
        let refresh_at = self.refresh_at(read_at);
        self.entries.insert(
            key,
            Entry {
                expires,
                refresh_at,
                value,
            },
        );
    }

    /// Drops the expired entries, or all of them when none has expired. Out of line: a full cache is rare, and
    /// [`TtlCache::insert`] runs on a new isolate's first request, which compiles what it calls, whole.
    #[inline(never)]
    fn make_room(&mut self, now_ms: u64) {
        self.entries.retain(|_, entry| now_ms < entry.expires);
        if self.entries.len() >= self.capacity {
            // Everything is fresh: a scan over many keys. Start over rather than track recency on every hit.
            self.entries.clear();
        }
    }

    /// Whether entries are kept at all (a TTL of zero keeps none).
    pub fn is_enabled(&self) -> bool {
        self.ttl_ms > 0
    }

    /// Forgets `key` (the sync route calls this for every key it writes or deletes).
    pub fn remove(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Number of entries, fresh or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value stored late (a new isolate's first visit caches what it read after its answer) lives the TTL from
    /// its read, not from its storing.
    #[test]
    fn a_value_stored_late_lives_from_its_read() {
        let mut c = TtlCache::new(1_000, 10);
        c.insert_read_at("k".into(), 1, 5_000, 5_900);
        assert_eq!(c.get("k", 5_999), Some(1));
        assert_eq!(c.get("k", 6_000), None);
        assert_eq!(c.peek_fresh("k", 5_799), Some((1, 5_800)));
        assert_eq!(c.peek_fresh("k", 5_800), None);
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), Some(1), 1_000);
        assert_eq!(cache.get("k", 1_000), Some(Some(1)));
        assert_eq!(cache.get("k", 10_999), Some(Some(1)));
        assert_eq!(cache.get("k", 11_000), None);
        cache.insert("gone".into(), None::<i32>, 1_000);
        assert_eq!(cache.get("gone", 2_000), Some(None), "absence is cached");
    }

    #[test]
    fn refresh_is_offered_once_near_expiry() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        assert_eq!(cache.lookup("k", 0), Lookup::Hit(1));
        assert_eq!(cache.lookup("k", 7_999), Lookup::Hit(1));
        // The last fifth: one caller reloads, the others keep hitting.
        assert_eq!(cache.lookup("k", 8_000), Lookup::Refresh(1));
        assert_eq!(cache.lookup("k", 8_001), Lookup::Hit(1));
        assert_eq!(cache.lookup("k", 8_999), Lookup::Hit(1));
        // The reload did not arrive within a second: offered again.
        assert_eq!(cache.lookup("k", 9_000), Lookup::Refresh(1));
        assert_eq!(cache.lookup("k", 9_999), Lookup::Hit(1));
        // Never older than the TTL.
        assert_eq!(cache.lookup("k", 10_000), Lookup::Miss);
        assert_eq!(cache.lookup("absent", 0), Lookup::Miss);
    }

    #[test]
    fn a_peek_leaves_the_reload_offer_to_lookup() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        // A plain hit until the reload is due, and when that is.
        assert_eq!(cache.peek_fresh("k", 7_999), Some((1, 8_000)));
        // Near expiry the peek declines, and does not take the offer: the next lookup still gets it.
        assert_eq!(cache.peek_fresh("k", 8_000), None);
        assert_eq!(cache.peek_fresh("k", 8_500), None);
        assert_eq!(cache.lookup("k", 8_500), Lookup::Refresh(1));
        // Offered: a hit again until the offer is renewed.
        assert_eq!(cache.peek_fresh("k", 8_600), Some((1, 9_500)));
        assert_eq!(cache.peek_fresh("absent", 0), None);
    }

    /// A reload offered in the last second of an entry's life, whose reload then fails (nothing is inserted): the
    /// renewed offer must not carry the entry past its expiry, for `peek_fresh` (the fast path) nor `lookup`.
    #[test]
    fn a_failed_reload_never_stretches_the_ttl() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        assert_eq!(cache.lookup("k", 9_500), Lookup::Refresh(1));
        assert_eq!(cache.peek_fresh("k", 10_200), None, "past the TTL");
        assert_eq!(cache.lookup("k", 10_200), Lookup::Miss);
        assert_eq!(cache.get("k", 10_200), None);
        // Served fresh by the fast path at most until the expiry, and the instant it gives is not later.
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        assert_eq!(cache.lookup("k", 9_500), Lookup::Refresh(1));
        assert_eq!(cache.peek_fresh("k", 9_600), Some((1, 10_000)));
        assert_eq!(cache.peek_fresh("k", 10_000), None);
        // The same at every instant of the last fifth: whatever the offers, nothing is served at or past expiry.
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        for now in (8_000..10_000).step_by(7) {
            let _ = cache.lookup("k", now);
            if let Some((_, until)) = cache.peek_fresh("k", now) {
                assert!(until <= 10_000, "at {now}: fresh until {until}");
            }
        }
        assert_eq!(cache.peek_fresh("k", 10_000), None);
    }

    #[test]
    fn a_reload_starts_a_new_life() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        assert_eq!(cache.lookup("k", 8_000), Lookup::Refresh(1));
        cache.insert("k".into(), 2, 8_050);
        assert_eq!(cache.lookup("k", 12_000), Lookup::Hit(2));
        assert_eq!(cache.lookup("k", 16_050), Lookup::Refresh(2));
        assert_eq!(cache.lookup("k", 18_050), Lookup::Miss);
    }

    #[test]
    fn remove_and_zero_ttl() {
        let mut cache = TtlCache::new(10_000, 10);
        cache.insert("k".into(), 1, 0);
        cache.remove("k");
        assert_eq!(cache.get("k", 1), None);
        cache.set_ttl_ms(0);
        cache.insert("k".into(), 1, 0);
        assert!(cache.is_empty());
    }

    #[test]
    fn bounded() {
        let mut cache = TtlCache::new(100, 3);
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            cache.insert(key.into(), i, 0);
        }
        // "a" to "c" expire at 100; at 150 inserting "d" drops them.
        cache.insert("d".into(), 3, 150);
        assert_eq!(cache.len(), 1);
        cache.insert("e".into(), 4, 150);
        cache.insert("f".into(), 5, 150);
        assert_eq!(cache.len(), 3);
        // All fresh and full: cleared, then "g" stored.
        cache.insert("g".into(), 6, 160);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get("g", 160), Some(6));
        // Overwriting an existing key never evicts.
        cache.insert("g".into(), 7, 160);
        assert_eq!(cache.get("g", 160), Some(7));
    }
}
