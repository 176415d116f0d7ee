//! A map bounded in bytes, for what an isolate keeps from what visitors bring (opened tokens, redirect inits, the
//! last good copies of records). An isolate has 128 MB for everything; a bound in entries alone does not hold when
//! entries can be kilobytes each (a dynamic link's token is as long as its request allows), so each entry is
//! charged an estimate of its size and the oldest entries leave once the total passes the budget.
//!
//! Oldest means first inserted (replacing an entry's value keeps its place): the maps hold what is cheap to get
//! again (a decryption, a few header calls), so recency tracking on every hit would cost the hot path more than
//! the rare re-creation of an evicted entry.
//!
//! Values are type-erased (`Box<dyn Any>`, read back with their type): the map's code exists once in the wasm
//! rather than once per kind of value, which the upload's size (cold start) cares about; a read costs one type
//! check. Entries leave only by eviction (or [`BoundedMap::clear`]): a caller that must forget a key stores a
//! value saying so (the last good groups store `None`), so the insertion queue always holds exactly the map's keys.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use crate::hashing::{self, Keyed};

/// The entries a map has room for before its table first grows; 16 entries cost about 1 KB per map.
const FIRST_SLOTS: usize = 16;

/// What each entry costs besides its key and its value's estimate: the map's slot, the queue's, the `Rc`'s
/// counts, allocator headers. An estimate, on the high side.
pub const ENTRY_OVERHEAD_BYTES: usize = 96;

#[derive(Debug)]
struct Slot {
    value: Box<dyn Any>,
    /// The entry's charge: key, value estimate and [`ENTRY_OVERHEAD_BYTES`].
    bytes: usize,
}

/// A map from string keys to values (of any `'static` type, read back as that type), holding at most `budget`
/// estimated bytes; past that the oldest entries go.
#[derive(Debug)]
pub struct BoundedMap {
    entries: HashMap<Rc<str>, Slot, Keyed>,
    /// The keys of `entries`, oldest first.
    order: VecDeque<Rc<str>>,
    bytes: usize,
    budget: usize,
}

impl BoundedMap {
    /// An empty map that holds at most `budget` bytes (estimated), made with room for its first entries: a new
    /// isolate keeps its first groups' records and tokens' openings in such maps (after its first answer), and
    /// growing an empty table is code (hashbrown's `reserve_rehash`, about 1 KB of wasm per table type) that the
    /// request which first writes one would compile for that alone.
    pub fn new(budget: usize) -> Self {
        BoundedMap {
            entries: HashMap::with_capacity_and_hasher(FIRST_SLOTS, hashing::keyed()),
            order: VecDeque::with_capacity(FIRST_SLOTS),
            bytes: 0,
            budget,
        }
    }

    /// The value for `key`, if it is a `T`.
    pub fn get<T: 'static>(&self, key: &str) -> Option<&T> {
        self.entries.get(key)?.value.downcast_ref()
    }

    /// Stores `value` for `key`, charged `value_bytes` (plus the key and [`ENTRY_OVERHEAD_BYTES`]), then evicts the
    /// oldest entries until the map is within its budget. An entry larger than the whole budget is not stored
    /// (keeping it would mean evicting everything else for it), and an older value for the key stays. Returns
    /// whether it was stored.
    pub fn insert<T: 'static>(&mut self, key: &str, value: T, value_bytes: usize) -> bool {
        self.insert_any(key, Box::new(value), value_bytes)
    }

    fn insert_any(&mut self, key: &str, value: Box<dyn Any>, value_bytes: usize) -> bool {
        let bytes = key
            .len()
            .saturating_add(value_bytes)
            .saturating_add(ENTRY_OVERHEAD_BYTES);
        if bytes > self.budget {
            return false;
        }
        if let Some(slot) = self.entries.get_mut(key) {
            self.bytes = self.bytes - slot.bytes + bytes;
            *slot = Slot { value, bytes };
        } else {
            let key: Rc<str> = Rc::from(key);
            self.order.push_back(key.clone());
            self.entries.insert(key, Slot { value, bytes });
            self.bytes += bytes;
        }
        if self.bytes > self.budget {
            self.evict();
        }
        true
    }

    /// The oldest entries go, until the map is within its budget (the entry just stored fits alone, so it stays).
    /// Out of line: a map fills up long after a new isolate's first visit, which compiles `insert_any` whole.
    #[inline(never)]
    fn evict(&mut self) {
        while self.bytes > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(slot) = self.entries.remove(&oldest) {
                self.bytes -= slot.bytes;
            }
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.bytes = 0;
    }

    /// The estimated bytes held, at most the budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The values that are `T`s, in no particular order (for tests and counts).
    pub fn values<T: 'static>(&self) -> impl Iterator<Item = &T> {
        self.entries
            .values()
            .filter_map(|slot| slot.value.downcast_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: usize = 1024;

    #[test]
    fn filled_past_its_budget_it_keeps_the_newest() {
        let mut map = BoundedMap::new(100 * KB);
        let charge = |key: &str| key.len() + KB + ENTRY_OVERHEAD_BYTES;
        for i in 0..1_000usize {
            assert!(map.insert(&format!("k{i}"), i, KB));
            assert!(map.bytes() <= map.budget(), "after {i}: {}", map.bytes());
        }
        let kept = map.len();
        assert!(kept > 80 && kept < 100, "{kept} entries of about 1 KB");
        // The newest are kept, the oldest went first.
        for i in 1_000 - kept..1_000 {
            assert_eq!(map.get::<usize>(&format!("k{i}")), Some(&i));
        }
        assert_eq!(map.get::<usize>("k0"), None);
        assert_eq!(map.get::<usize>(&format!("k{}", 999 - kept)), None);
        assert_eq!(map.values::<usize>().count(), kept);
        let total: usize = (1_000 - kept..1_000)
            .map(|i| charge(&format!("k{i}")))
            .sum();
        assert_eq!(map.bytes(), total, "the accounting is exact");
    }

    #[test]
    fn replacing_keeps_the_accounting_and_the_place() {
        let mut map = BoundedMap::new(10 * KB);
        map.insert("a", 1, 100);
        map.insert("b", 2, 100);
        let two = map.bytes();
        map.insert("a", 3, 1_000);
        assert_eq!(map.bytes(), two + 900);
        assert_eq!(map.get::<i32>("a"), Some(&3));
        assert_eq!(map.get::<u8>("a"), None, "read back as its own type only");
        map.insert("a", None::<i32>, 0);
        assert_eq!(map.get::<Option<i32>>("a"), Some(&None));
        // "a" keeps its place (the oldest), so it goes first.
        for i in 0..25 {
            map.insert(&format!("fill{i}"), 0, 400);
            assert!(map.bytes() <= 10 * KB);
        }
        assert_eq!(map.get::<Option<i32>>("a"), None, "the oldest went");
        assert_eq!(map.get::<i32>("b"), None);
        assert_eq!(map.len(), map.order.len(), "the queue holds the map's keys");
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.bytes(), 0);
    }

    #[test]
    fn an_entry_larger_than_the_budget_is_not_kept() {
        let mut map = BoundedMap::new(KB);
        assert!(map.insert("small", 1, 10));
        assert!(!map.insert("huge", 2, 2 * KB));
        assert_eq!(map.get::<i32>("huge"), None);
        assert_eq!(map.get::<i32>("small"), Some(&1), "nothing evicted for it");
        assert!(!map.insert("small", 3, 2 * KB));
        assert_eq!(map.get::<i32>("small"), Some(&1), "its older value stays");
        assert_eq!(map.len(), 1);
    }
}
