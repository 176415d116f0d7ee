//! Who in an isolate is loading which KV key, and what a request does while another request loads the key it
//! needs. Plain Rust with the clock as a parameter, so the rules are tested on the host; the shell keeps one
//! [`Loads`] per isolate and drives a [`Wait`] with timers of the waiting request's own.
//!
//! The rule the hung-request bug taught us: a waiting request never awaits another request's I/O. workerd cancels a
//! request that has nothing pending in its own context ("the Worker's code had hung"), and a request woken from
//! another request's context can look like that in between. So a [`Wait`] holds no future, waker or handle of the
//! load it waits for: only that load's number. Its every step is "pause on your own timer", "take the cached
//! entry" or "load it yourself".

use std::collections::HashMap;

use crate::hashing::{self, Keyed};

use crate::origin;

/// How long a request waits for another request's load of a key before it loads the key itself: longer than a
/// load normally takes (a KV read, then at most an origin lookup of [`origin::LOOKUP_TIMEOUT_MS`]). A load older
/// than this is taken for lost (its request cancelled) and is neither joined nor kept marked.
pub const JOIN_TIMEOUT_MS: u64 = origin::LOOKUP_TIMEOUT_MS + 500;

/// The first pause of a waiting request before it looks at the cache.
pub const JOIN_FIRST_PAUSE_MS: u64 = 2;

/// The longest pause between two looks; pauses double up to it.
pub const JOIN_MAX_PAUSE_MS: u64 = 50;

/// How many loads under way are kept in a vector, searched key by key, before the rest go to a hashed map: a new
/// isolate's first visit starts a few (its first-visit reads) and then hashes nothing before its answer, which
/// would otherwise compile SipHash and the map's insertion (BENCHMARKS.md, issue 28); past these, a crowd of loads
/// (distinct links at once) costs a constant per lookup, not a walk over all of them.
const FEW: usize = 16;

/// The loads under way in one isolate, and the sync epoch.
#[derive(Debug)]
pub struct Loads {
    /// By KV key: the load's number and when it started (ms); the first [`FEW`] here, each key once in either.
    few: Vec<(String, u64, u64)>,
    /// The rest.
    many: HashMap<String, (u64, u64), Keyed>,
    /// The number of the last load started.
    last_number: u64,
    /// Bumped by every sync-route write: a load that read KV before the write must not cache what it read.
    epoch: u64,
}

/// A load a request has started: the key, its number, and the epoch it started in.
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    key: String,
    number: u64,
    epoch: u64,
}

impl Ticket {
    /// The key being loaded.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The load's number ([`Loads::under_way`] gives it while the load is the key's current one).
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl Default for Loads {
    fn default() -> Self {
        Self::new()
    }
}

impl Loads {
    /// An isolate with no load under way: a `const`, so that its thread-local needs no lazy initialisation.
    pub const fn new() -> Self {
        Loads {
            few: Vec::new(),
            many: HashMap::with_hasher(hashing::keyed()),
            last_number: 0,
            epoch: 0,
        }
    }

    /// The load of `key` recorded under way, however old: its number and when it started.
    fn get(&self, key: &str) -> Option<(u64, u64)> {
        match self.few.iter().find(|(k, ..)| k == key) {
            Some((_, number, since)) => Some((*number, *since)),
            None if self.many.is_empty() => None,
            None => self.get_many(key),
        }
    }

    /// [`get`](Self::get) in the map. Each of the map's uses is out of line: a new isolate's first visit, with a
    /// few loads, compiles none of them.
    #[inline(never)]
    fn get_many(&self, key: &str) -> Option<(u64, u64)> {
        self.many.get(key).copied()
    }

    /// Records the load `number` of `key`, started at `since`, in place of any other.
    fn set(&mut self, key: &str, number: u64, since: u64) {
        if let Some(load) = self.few.iter_mut().find(|(k, ..)| k == key) {
            (load.1, load.2) = (number, since);
        } else if self.many.is_empty() && self.few.len() < FEW {
            // Room for all the few at once: their growth is code a new isolate's first visit would compile.
            crate::room::push(&mut self.few, (key.to_owned(), number, since), FEW);
        } else {
            self.set_many(key, number, since);
        }
    }

    /// [`set`](Self::set) of a key not in the vector: replaced in the map, else put in the vector if it has room or
    /// a lost load's place (its request cancelled before it ended it), else in the map.
    #[inline(never)]
    fn set_many(&mut self, key: &str, number: u64, since: u64) {
        if let Some(load) = self.many.get_mut(key) {
            *load = (number, since);
        } else if self.few.len() < FEW {
            self.few.push((key.to_owned(), number, since));
        } else if let Some(lost) = self
            .few
            .iter_mut()
            .find(|(_, _, started)| since >= started.saturating_add(JOIN_TIMEOUT_MS))
        {
            *lost = (key.to_owned(), number, since);
        } else {
            self.many.insert(key.to_owned(), (number, since));
        }
    }

    /// Forgets the load of `key`.
    fn remove(&mut self, key: &str) {
        match self.few.iter().position(|(k, ..)| k == key) {
            Some(i) => {
                self.few.swap_remove(i);
            }
            None if self.many.is_empty() => {}
            None => self.remove_many(key),
        }
    }

    /// [`remove`](Self::remove) from the map.
    #[inline(never)]
    fn remove_many(&mut self, key: &str) {
        self.many.remove(key);
    }

    /// The number of the load of `key` under way, if one started less than [`JOIN_TIMEOUT_MS`] before `now_ms`. Out
    /// of line: a new isolate's first visit calls it from several places, and each inlined copy is wasm it compiles.
    #[inline(never)]
    pub fn under_way(&self, key: &str, now_ms: u64) -> Option<u64> {
        self.get(key)
            .filter(|(_, since)| now_ms < since.saturating_add(JOIN_TIMEOUT_MS))
            .map(|(number, _)| number)
    }

    /// Marks a new load of `key` as under way (replacing a lost or older one) and returns its ticket.
    pub fn start(&mut self, key: &str, now_ms: u64) -> Ticket {
        self.last_number += 1;
        let number = self.last_number;
        self.set(key, number, now_ms);
        Ticket {
            key: key.to_owned(),
            number,
            epoch: self.epoch,
        }
    }

    /// Whether `ticket`'s load is still the current one of its key, however old: not replaced by a newer load (one
    /// started after it counted as lost), not ended, not forgotten by a sync.
    pub fn is_current(&self, ticket: &Ticket) -> bool {
        self.get(&ticket.key)
            .is_some_and(|(number, _)| number == ticket.number)
    }

    /// Whether what the load read may go into the cache: no sync-route write happened since it started.
    pub fn may_cache(&self, ticket: &Ticket) -> bool {
        self.epoch == ticket.epoch
    }

    /// The load ended (with or without an entry, or because its request was cancelled). Its mark goes only if it
    /// is still the current load of the key: a newer load (after a sync, or replacing a lost one) stays marked.
    #[inline(never)] // a new isolate's first visit ends its loads' marks after its answer: not compiled before
    pub fn finish(&mut self, ticket: &Ticket) {
        if self.is_current(ticket) {
            self.remove(&ticket.key);
        }
    }

    /// The sync route wrote or deleted `keys`: loads under way of them are forgotten (their requests load again
    /// rather than wait for a stale answer), and no load started before now caches what it read.
    pub fn synced<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) {
        self.epoch += 1;
        for key in keys {
            self.remove(key);
        }
    }
}

/// What a waiting request does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStep {
    /// Sleep this many milliseconds on the request's own timer, then look again.
    Pause(u64),
    /// The entry is in the cache: take it.
    Take,
    /// The load waited for ended without an entry, was replaced, or is lost: load the key yourself.
    LoadYourself,
}

/// A request waiting for another request's load number `number` to put its entry into the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    number: u64,
    pause_ms: u64,
}

impl Wait {
    /// Starts waiting for load `number`; the first step is a pause of [`JOIN_FIRST_PAUSE_MS`].
    pub fn new(number: u64) -> (Self, WaitStep) {
        let wait = Wait {
            number,
            pause_ms: JOIN_FIRST_PAUSE_MS,
        };
        (wait, WaitStep::Pause(JOIN_FIRST_PAUSE_MS))
    }

    /// After a pause: `cached` says whether the cache now holds the entry, `under_way` which load of the key is
    /// under way now ([`Loads::under_way`], so a lost load reads as none once [`JOIN_TIMEOUT_MS`] has passed).
    pub fn after_pause(&mut self, cached: bool, under_way: Option<u64>) -> WaitStep {
        if cached {
            return WaitStep::Take;
        }
        if under_way != Some(self.number) {
            return WaitStep::LoadYourself;
        }
        self.pause_ms = (self.pause_ms * 2).min(JOIN_MAX_PAUSE_MS);
        WaitStep::Pause(self.pause_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lost load (its request cancelled before it ended it) gives up its place in the vector to a new key, so
    /// that lost marks never push every later load into the map; and a ticket is current only while its load is
    /// the key's marked one.
    #[test]
    fn a_lost_loads_place_goes_to_the_next_key() {
        let mut loads = Loads::new();
        let lost: Vec<Ticket> = (0..FEW)
            .map(|i| loads.start(&format!("link:h:{i}"), 1_000))
            .collect();
        assert!(lost.iter().all(|t| loads.is_current(t)));
        // Before the join timeout the vector is full: the next key goes to the map.
        let early = loads.start("link:h:early", 1_000 + JOIN_TIMEOUT_MS - 1);
        assert_eq!((loads.few.len(), loads.many.len()), (FEW, 1));
        let late = loads.start("link:h:late", 1_000 + JOIN_TIMEOUT_MS);
        assert_eq!((loads.few.len(), loads.many.len()), (FEW, 1));
        assert_eq!(
            loads.under_way("link:h:late", 1_000 + JOIN_TIMEOUT_MS),
            Some(late.number())
        );
        assert!(!loads.is_current(&lost[0]), "its place was taken");
        assert!(loads.is_current(&early) && loads.is_current(&late));
        // A replaced load is no longer current; the newer one is.
        let newer = loads.start("link:h:late", 5_000);
        assert!(!loads.is_current(&late) && loads.is_current(&newer));
        loads.finish(&newer);
        assert!(!loads.is_current(&newer));
    }

    /// The first [`FEW`] loads in the vector and the rest in the map behave alike: each key is under way once,
    /// with its newest number, until finished or synced.
    #[test]
    fn loads_past_the_few_are_kept_alike() {
        let mut loads = Loads::new();
        let keys: Vec<String> = (0..3 * FEW).map(|i| format!("link:h:{i}")).collect();
        let tickets: Vec<Ticket> = keys.iter().map(|k| loads.start(k, 1_000)).collect();
        assert_eq!((loads.few.len(), loads.many.len()), (FEW, 2 * FEW));
        for (key, ticket) in keys.iter().zip(&tickets) {
            assert_eq!(loads.under_way(key, 1_000), Some(ticket.number()));
        }
        // A newer load of a key in either part replaces the older one there, not beside it.
        let (early, late) = (&keys[1], &keys[2 * FEW]);
        let newer_early = loads.start(early, 2_000);
        let newer_late = loads.start(late, 2_000);
        assert_eq!((loads.few.len(), loads.many.len()), (FEW, 2 * FEW));
        loads.finish(&tickets[1]);
        loads.finish(&tickets[2 * FEW]);
        assert_eq!(loads.under_way(early, 2_000), Some(newer_early.number()));
        assert_eq!(loads.under_way(late, 2_000), Some(newer_late.number()));
        loads.finish(&newer_early);
        loads.finish(&newer_late);
        assert_eq!(loads.under_way(early, 2_000), None);
        assert_eq!(loads.under_way(late, 2_000), None);
        // A freed place in the vector takes the next new key; the map's keys stay where they are.
        let fresh = loads.start("link:h:new", 2_000);
        assert_eq!(loads.under_way("link:h:new", 2_000), Some(fresh.number()));
        assert_eq!(loads.few.len(), FEW);
        loads.synced(keys.iter().map(String::as_str));
        for key in &keys {
            assert_eq!(loads.under_way(key, 2_000), None);
        }
        assert_eq!(loads.under_way("link:h:new", 2_000), Some(fresh.number()));
        assert_eq!((loads.few.len(), loads.many.len()), (1, 0));
    }

    #[test]
    fn loads_are_numbered_and_joined_while_fresh() {
        let mut loads = Loads::new();
        let a = loads.start("k", 1_000);
        let b = loads.start("other", 1_000);
        assert_eq!((a.number, b.number), (1, 2));
        assert_eq!(a.key(), "k");
        assert_eq!(loads.under_way("k", 1_000), Some(1));
        assert_eq!(loads.under_way("k", 1_000 + JOIN_TIMEOUT_MS - 1), Some(1));
        assert_eq!(
            loads.under_way("k", 1_000 + JOIN_TIMEOUT_MS),
            None,
            "a load older than the timeout is taken for lost"
        );
        assert_eq!(loads.under_way("absent", 1_000), None);
    }

    #[test]
    fn finishing_clears_only_the_current_load() {
        let mut loads = Loads::new();
        let old = loads.start("k", 0);
        let new = loads.start("k", JOIN_TIMEOUT_MS); // replaces a lost load
        loads.finish(&old);
        assert_eq!(
            loads.under_way("k", JOIN_TIMEOUT_MS),
            Some(new.number),
            "the newer load stays marked"
        );
        loads.finish(&new);
        assert_eq!(loads.under_way("k", JOIN_TIMEOUT_MS), None);
    }

    #[test]
    fn a_sync_during_a_load_keeps_its_result_out_of_the_cache() {
        let mut loads = Loads::new();
        let before = loads.start("link:h:a", 0);
        let unrelated = loads.start("link:h:b", 0);
        assert!(loads.may_cache(&before));
        loads.synced(["link:h:a"]);
        assert!(!loads.may_cache(&before), "it read KV before the write");
        assert!(
            !loads.may_cache(&unrelated),
            "any key: the epoch is per isolate"
        );
        assert_eq!(
            loads.under_way("link:h:a", 1),
            None,
            "synced keys are unmarked"
        );
        assert_eq!(loads.under_way("link:h:b", 1), Some(unrelated.number));
        let after = loads.start("link:h:a", 1);
        assert!(loads.may_cache(&after));
    }

    #[test]
    fn a_tickets_number_is_the_one_under_way_until_replaced() {
        let mut loads = Loads::new();
        let read = loads.start("blocklist", 0);
        assert_eq!(loads.under_way("blocklist", 1), Some(read.number()));
        let newer = loads.start("blocklist", 2);
        assert_ne!(loads.under_way("blocklist", 3), Some(read.number()));
        assert_eq!(loads.under_way("blocklist", 3), Some(newer.number()));
        assert_eq!(
            loads.under_way("blocklist", 2 + JOIN_TIMEOUT_MS),
            None,
            "lost after the join timeout"
        );
    }

    #[test]
    fn pauses_double_up_to_the_cap() {
        let (mut wait, first) = Wait::new(7);
        let mut pauses = vec![first];
        for _ in 0..7 {
            pauses.push(wait.after_pause(false, Some(7)));
        }
        let ms: Vec<u64> = pauses
            .iter()
            .map(|s| match s {
                WaitStep::Pause(ms) => *ms,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ms, [2, 4, 8, 16, 32, 50, 50, 50]);
    }

    #[test]
    fn the_waiter_takes_the_entry_when_it_appears() {
        let (mut wait, _) = Wait::new(3);
        assert_eq!(wait.after_pause(false, Some(3)), WaitStep::Pause(4));
        assert_eq!(wait.after_pause(true, Some(3)), WaitStep::Take);
        // Even when the load is already unmarked: the cache is what counts.
        let (mut wait, _) = Wait::new(3);
        assert_eq!(wait.after_pause(true, None), WaitStep::Take);
    }

    /// The hung-request rule: the loading request's I/O never completes (its request was cancelled mid-load and
    /// its mark was never cleared). The waiter only ever pauses on its own timer, and by the join deadline it
    /// decides to load the key itself.
    #[test]
    fn a_lost_loader_never_holds_the_waiter() {
        let mut loads = Loads::new();
        let lost = loads.start("k", 10_000);
        let (mut wait, WaitStep::Pause(mut pause)) = Wait::new(lost.number) else {
            panic!("the first step is a pause")
        };
        let mut now = 10_000;
        let mut steps = 0;
        let decision = loop {
            now += pause;
            steps += 1;
            match wait.after_pause(false, loads.under_way("k", now)) {
                WaitStep::Pause(ms) => pause = ms,
                other => break other,
            }
        };
        assert_eq!(decision, WaitStep::LoadYourself);
        assert!(now >= 10_000 + JOIN_TIMEOUT_MS);
        assert!(
            now < 10_000 + JOIN_TIMEOUT_MS + JOIN_MAX_PAUSE_MS,
            "not much later"
        );
        assert!(steps < 60, "{steps} looks");
    }

    #[test]
    fn a_replaced_or_failed_load_sends_the_waiter_to_load_itself() {
        let mut loads = Loads::new();
        let first = loads.start("k", 0);
        let (mut wait, _) = Wait::new(first.number);
        // The load ended without an entry (KV could not be read): nothing under way, nothing cached.
        loads.finish(&first);
        assert_eq!(
            wait.after_pause(false, loads.under_way("k", 2)),
            WaitStep::LoadYourself
        );
        // Another request started a newer load: this waiter's load is not the one under way.
        let (mut wait, _) = Wait::new(first.number);
        let _second = loads.start("k", 3);
        assert_eq!(
            wait.after_pause(false, loads.under_way("k", 4)),
            WaitStep::LoadYourself
        );
    }
}
