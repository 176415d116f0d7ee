//! The isolate's records (wasm32 only): KV records and the origin's answers, kept in the isolate cache, loaded
//! once per key per isolate. The coordination of loads is [`crate::loads`]'s (host-tested); this file holds the
//! isolate's state and does the I/O: KV reads, the origin lookup on a KV miss, and the write-back to KV. A KV read
//! or write that fails is logged ([`crate::log`], reads at most once a minute) and absorbed: a group or the
//! blocklist is then taken from the isolate's last good copy (`LAST_GOOD_*`), however old, and without one the
//! decision falls back where skipping the record would skip a check ([`crate::decision::FallbackReason::Unavailable`]);
//! any other record falls back.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use kv_model::{BLOCKLIST_KEY, DomainRecord, GroupRecord, LinkRecord};
use serde::de::DeserializeOwned;
use worker::{Context, Delay, Env};

use super::kv::{self, Kv};

use super::emit;
use super::origin_io::link_from_origin;
use crate::bounded::BoundedMap;
use crate::cache::{self, TtlCache};
use crate::config;
use crate::decision::Group;
use crate::json_record;
use crate::loads::{Loads, Ticket, Wait, WaitStep};
use crate::log::{self, KvWrite, Throttle, Via};
use crate::named_hosts::BlocklistEntry;
use crate::origin::{self, Lookup, Origin};
use crate::plain_records;
use crate::room;

/// A cached KV record, parsed once per isolate. `None` inside means "absent or unusable" and is cached too.
#[derive(Clone)]
enum Cached {
    Link(Option<Rc<LinkRecord>>),
    Group(Option<Rc<Group>>),
    Domain(Option<Rc<DomainRecord>>),
    Blocklist(Rc<BlocklistEntry>),
    /// The origin failed to answer for a link's group: for the TTL, the last good copy or the fallback, without
    /// asking again (a failing origin costs one slow visitor, not all).
    OriginFailed,
}

/// What one load of a KV key produced.
struct Loaded {
    /// The entry now in the isolate cache; `None` when KV could not be read (nothing is cached then, and the
    /// callers fall back).
    entry: Option<Cached>,
    /// A link KV did not have but the origin did: the request that started the load writes it back to KV.
    write_back: Option<Rc<LinkRecord>>,
    /// Another entry the load learned, cached with it (the link's group in the origin's answer).
    also: Option<(String, Cached)>,
}

impl Loaded {
    fn entry(entry: Cached) -> Self {
        Loaded {
            entry: Some(entry),
            write_back: None,
            also: None,
        }
    }

    /// KV could not be read: nothing to cache, the callers fall back.
    fn failed() -> Self {
        Loaded {
            entry: None,
            write_back: None,
            also: None,
        }
    }
}

/// The isolate-cache key (never a KV key) of a group as the origin gave it, for a link whose group is missing
/// from KV: kept apart from `group:<id>` so KV's own answer, absence included, stays what it is.
fn origin_group_key(group_id: &str) -> String {
    let mut key = String::from("origin-");
    key.push_str(&kv_model::group_key(group_id));
    key
}

/// The isolate's form of a group record from the origin (`None`: unusable key, treated as missing).
fn origin_group(record: Option<GroupRecord>) -> Cached {
    Cached::Group(record.and_then(Group::from_record).map(Rc::new))
}

thread_local! {
    /// One cache per isolate; wasm32 Workers are single-threaded, so the `RefCell` is never contended and no
    /// borrow is held across an `.await`.
    static CACHE: RefCell<TtlCache<Cached>> = const {
        RefCell::new(TtlCache::new(
            config::ISOLATE_CACHE_TTL_SECONDS * 1000,
            config::ISOLATE_CACHE_CAPACITY,
        ))
    };
    /// Loads under way, by KV key. A request that needs a key another request of the isolate is loading waits
    /// for that load to fill the cache instead of starting its own: an expired hot key, or a new link hit by a
    /// crowd before KV has it, costs one KV read (and one origin lookup) per isolate rather than one per request.
    static LOADS: RefCell<Loads> = const { RefCell::new(Loads::new()) };
    /// The last good copies of the records whose absence would skip a check, for when a read of them fails: the
    /// isolate cache forgets an entry at its TTL (and may be cleared whole), these do not. Stale is better than
    /// none: a group's rules that may be minutes old rather than no rules (or no redirect), a blocklist that may
    /// lack the newest domain rather than none. A successful read replaces them, including one that finds the
    /// record absent (which empties the blocklist and forgets the group: the operator removed it), and so does
    /// the sync route's delete.
    ///
    /// The blocklist of the last successful read; `None` until the isolate's first.
    static LAST_GOOD_BLOCKLIST: RefCell<Option<Rc<BlocklistEntry>>> = const { RefCell::new(None) };
    /// By KV key (`group:<id>`), what KV last had, and by [`origin_group_key`] what the origin last gave for a link
    /// whose group KV lacks: `Some(Rc<Group>)`, or `None` for a group found absent or deleted (no earlier copy may
    /// serve then); within [`config::LAST_GOOD_GROUPS_BUDGET_BYTES`], the oldest going
    /// first (a group evicted here falls back on a failed read, as one never read does).
    static LAST_GOOD_GROUPS: RefCell<BoundedMap> =
        RefCell::new(BoundedMap::new(config::LAST_GOOD_GROUPS_BUDGET_BYTES));
    /// `kv_read_failed` lines: at most one a minute per isolate (a failing KV fails every request).
    static KV_READ_LOG: RefCell<Throttle> = const { RefCell::new(Throttle::new()) };
}

/// A load that read `key` from KV (or the origin) succeeded with `entry`: it is the last good copy now. A group is
/// kept under its key, KV's (`group:<id>`) or the origin's ([`origin_group_key`]), so neither stands for the other.
fn remember(key: &str, entry: &Cached) {
    match entry {
        Cached::Blocklist(list) if key == BLOCKLIST_KEY => {
            LAST_GOOD_BLOCKLIST.with(|b| *b.borrow_mut() = Some(list.clone()));
        }
        Cached::Group(group) => forget_or_keep_group(key, group.clone()),
        _ => {}
    }
}

thread_local! {
    /// Groups the first-visit path read ([`store_read`], or [`cache_held`] for those [`hold_read`] held), to
    /// become the last good copies after the response ([`settle`]).
    static TO_REMEMBER: RefCell<Vec<(String, Option<Rc<Group>>)>> = const { RefCell::new(Vec::new()) };
}

/// [`remember`], for a read of the first-visit path: a group is kept as the last good copy after the response
/// ([`settle`]), as the bounded map's insertion is code a new isolate's first visit to a dynamic link would
/// otherwise compile before its answer (BENCHMARKS.md, issue 28). The blocklist's copy is one assignment: at once
/// (for a held read, when it is cached).
fn remember_after(key: &str, entry: &Cached) {
    match entry {
        Cached::Group(group) => remember_group_after(key, group.clone()),
        _ => remember(key, entry),
    }
}

/// [`remember_after`]'s queue, out of line: a first visit to a persistent link reads no group, and does not compile
/// this.
#[inline(never)]
fn remember_group_after(key: &str, group: Option<Rc<Group>>) {
    TO_REMEMBER.with(|r| r.borrow_mut().push((key.to_owned(), group)));
    super::settle::queued();
}

/// Caches the records the first-visit path holds ([`hold_read`]), then makes the groups it read since the last call
/// the last good copies ([`remember_after`]), each
/// only while the isolate cache still holds that very read, however old: otherwise something replaced it since (a
/// newer load, kept as the last good copy when it came, or the sync route, which forgot the group if it deleted
/// it), and the read is no longer the last good copy. Run after the response ([`super::settle`]).
pub(super) fn settle() {
    // First the held reads, whose groups join the queue below as they are cached.
    cache_held();
    let reads = TO_REMEMBER.with(|r| std::mem::take(&mut *r.borrow_mut()));
    for (key, group) in reads {
        // An expiry of 0: the entry as held, fresh or not.
        let held = CACHE.with(|c| match c.borrow().get(&key, 0) {
            Some(Cached::Group(held)) => match (&held, &group) {
                (Some(held), Some(group)) => Rc::ptr_eq(held, group),
                (None, None) => true,
                _ => false,
            },
            _ => false,
        });
        if held {
            forget_or_keep_group(&key, group);
        }
    }
}

/// The last good copy of the group at `key`: found, else unavailable (never read, or gone).
fn last_good_group(key: &str) -> GroupRead {
    LAST_GOOD_GROUPS
        .with(|g| g.borrow().get::<Option<Rc<Group>>>(key).cloned())
        .flatten()
        .map_or(GroupRead::Unavailable, GroupRead::Found)
}

/// Makes `group` the last good copy of the group at `key` (`None`: there is none, the group is gone).
fn forget_or_keep_group(key: &str, group: Option<Rc<Group>>) {
    let bytes = group.as_deref().map_or(0, Group::approx_bytes);
    LAST_GOOD_GROUPS.with(|g| {
        let mut groups = g.borrow_mut();
        // "None" needs a marker only to override an earlier copy: a key never kept reads the same (unavailable).
        // Writing one for every absent group would let requests for made-up group ids (`/e/<random uuid>`) push
        // every real group's copy out of the budget.
        if group.is_none()
            && !groups
                .get::<Option<Rc<Group>>>(key)
                .is_some_and(Option::is_some)
        {
            return;
        }
        // A record too large to keep must not leave an older copy behind it either.
        if !groups.insert(key, group, bytes) {
            groups.insert(key, None::<Rc<Group>>, 0);
        }
    });
}

/// Sets the isolate cache's TTL (from the isolate's configuration, on its first request).
pub(super) fn set_cache_ttl_ms(ttl_ms: u64) {
    CACHE.with(|cache| cache.borrow_mut().set_ttl_ms(ttl_ms));
}

/// The sync route wrote or deleted `keys` (`deleted` among them): they leave the cache (with the origin's copy of a
/// group), loads of them under way are forgotten, and no load that read KV before the write caches what it read.
/// A deleted group or blocklist leaves the last good copies too: the operator removed it, no failed read should
/// bring it back. A written one stays until the next successful read replaces it (stale is better than none).
pub(super) fn synced(keys: &[&str], deleted: &[&str]) {
    for key in deleted {
        if *key == BLOCKLIST_KEY {
            LAST_GOOD_BLOCKLIST.with(|b| *b.borrow_mut() = Some(Rc::default()));
        } else if let Some(group_id) = key.strip_prefix("group:") {
            forget_or_keep_group(key, None);
            forget_or_keep_group(&origin_group_key(group_id), None);
        }
    }
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        for key in keys {
            cache.remove(key);
            if let Some(group_id) = key.strip_prefix("group:") {
                cache.remove(&origin_group_key(group_id));
            }
        }
    });
    changed();
    LOADS.with(|l| l.borrow_mut().synced(keys.iter().copied()));
}

fn now_ms() -> u64 {
    // js_sys's static Date.now(): one call out of wasm, no Date object.
    js_sys::Date::now() as u64
}

/// Marks a load as under way until dropped (also when the loading request is cancelled mid-load).
struct Mark(Ticket);

impl Mark {
    fn new(key: &str) -> Self {
        Mark(LOADS.with(|l| l.borrow_mut().start(key, now_ms())))
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        LOADS.with(|l| l.borrow_mut().finish(&self.0));
    }
}

/// Runs `load` as the load of `key` that other requests wait for (under `mark` when a first-visit read handed the
/// key's mark over: [`take_handover`]; else a new one), and caches its entry (unless the sync route
/// wrote meanwhile), which also becomes the last good copy of a group or the blocklist.
async fn load(key: &str, mark: Option<Mark>, load: impl Future<Output = Loaded>) -> Loaded {
    let mark = mark.unwrap_or_else(|| Mark::new(key));
    let loaded = load.await;
    if let Some(entry) = &loaded.entry
        && LOADS.with(|l| l.borrow().may_cache(&mark.0))
    {
        // Even with the isolate cache off (a TTL of 0): a failed read needs it all the same.
        remember(key, entry);
        let now_ms = now_ms();
        CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            cache.insert(key.to_owned(), entry.clone(), now_ms);
            if let Some((key, entry)) = &loaded.also {
                remember(key, entry);
                cache.insert(key.clone(), entry.clone(), now_ms);
            }
        });
        changed();
    }
    loaded
}

/// Waits for another request's load `number` of `key` to put its entry into the cache, on timers of this
/// request's own ([`crate::loads`] says why). `None`: load it yourself.
async fn wait_for_load(key: &str, number: u64) -> Option<Cached> {
    let (mut wait, mut step) = Wait::new(number);
    while let WaitStep::Pause(ms) = step {
        Delay::from(Duration::from_millis(ms)).await;
        // A first visit's reads are held until something could look for them ([`hold_read`]): this look.
        super::settle::before_fetch();
        let now_ms = now_ms();
        let entry = CACHE.with(|c| c.borrow().get(key, now_ms));
        let under_way = LOADS.with(|l| l.borrow().under_way(key, now_ms));
        step = wait.after_pause(entry.is_some(), under_way);
        if step == WaitStep::Take {
            return entry;
        }
    }
    None
}

/// KV's text for `key` (`Some(None)`: absent); `None` when KV could not be read (logged).
async fn kv_get(kv: Option<Kv>, key: &str) -> Option<Option<String>> {
    let Some(kv) = kv else {
        emit(log::kv_binding_missing(config::KV_BINDING, Via::Visit));
        return None;
    };
    match kv.text(key, config::KV_CACHE_TTL_SECONDS).await {
        Ok(text) => Some(text),
        Err(e) => {
            if let Some(suppressed) = KV_READ_LOG.with(|t| t.borrow_mut().admit(now_ms())) {
                emit(log::kv_read_failed(key, &e, suppressed));
            }
            None
        }
    }
}

/// Writes a link the origin supplied back to KV, provisionally: it expires unless the publisher's own write
/// replaces it (origin.rs explains why). A failure is logged and otherwise harmless: the link was served, and the
/// next KV miss asks the origin again.
async fn write_back(kv: Option<Kv>, key: String, record: Rc<LinkRecord>) {
    // The binding's absence was logged by the read that missed; a record always serializes.
    let (Some(kv), Ok(text)) = (kv, serde_json::to_string(&*record)) else {
        return;
    };
    let put = kv
        .put(&key, &text, Some(origin::FALLBACK_RECORD_TTL_SECONDS))
        .await;
    if let Err(e) = put {
        emit(log::kv_write_failed(&key, KvWrite::Put, Via::Visit, &e));
    }
}

/// The isolate's form of KV's text for `link:<host>:<code>` (absent or unusable: `None`).
fn wrap_link(text: Option<String>) -> Cached {
    Cached::Link(parse(text, plain_records::plain_link).map(Rc::new))
}

/// The isolate's form of KV's text for `domain:<host>`.
fn wrap_domain(text: Option<String>) -> Cached {
    Cached::Domain(parse(text, plain_records::plain_domain).map(Rc::new))
}

/// The isolate's form of KV's text for the blocklist: empty when KV has none. The record's lists become the entry
/// in place (`From<BlocklistRecord>`), not copied into second ones.
fn wrap_blocklist(text: Option<String>) -> Cached {
    Cached::Blocklist(Rc::new(
        parse(text, plain_records::plain_blocklist)
            .map(BlocklistEntry::from)
            .unwrap_or_default(),
    ))
}

/// The isolate's form of KV's text for `group:<id>`.
fn wrap_group(text: Option<String>) -> Cached {
    Cached::Group(
        parse(text, plain_records::plain_group)
            .and_then(Group::from_record)
            .map(Rc::new),
    )
}

/// A JSON record, or `None` when absent, unparsable or of another version (the contract: treat as missing): read by
/// `plain`, the scanner of the shape the origin publishes it in, without serde (`crate::plain_records` says why),
/// else by serde_json.
fn parse<T: DeserializeOwned>(text: Option<String>, plain: fn(&str) -> Option<T>) -> Option<T> {
    let text = text?;
    plain(&text).or_else(|| by_serde(&text))
}

/// [`parse`]'s way for a record the scanner did not read, out of line: inlined, each record type's serde visitor
/// and serde_json's error handling would be part of the function that wraps it (`wrap_domain` and the others), and
/// a new isolate's first request would compile them with it, though the origin's records never take this way
/// (BENCHMARKS.md, issue 28).
#[cold]
#[inline(never)]
fn by_serde<T: DeserializeOwned>(text: &str) -> Option<T> {
    json_record::parse(text).ok()
}

/// What the isolate cache holds for `key` right now, without I/O, and until when (UNIX ms) it stays so: only a
/// plain hit, not an entry near expiry (whose reload the full path's lookup must still be offered) nor a miss.
/// For the synchronous fast path ([`super::fast`]).
fn fresh(key: &str, now_ms: u64) -> Option<(Cached, u64)> {
    CACHE
        .with(|c| c.borrow().peek_fresh(key, now_ms))
        .or_else(|| held(key, now_ms))
}

/// The link at `key` (`link:<host>:<code>`) the isolate cache holds fresh (`Some(None)`: its absence is cached),
/// and until when. By its KV key, which the fast path builds once: for this lookup and, on a miss, for the reads it
/// wants (a key built twice is code a new isolate's first visit compiles twice; BENCHMARKS.md, issue 28).
pub(super) fn fresh_link(key: &str, now_ms: u64) -> Option<(Option<Rc<LinkRecord>>, u64)> {
    match fresh(key, now_ms)? {
        (Cached::Link(link), until) => Some((link, until)),
        _ => None,
    }
}

/// The group at `key` (`group:<id>`) that KV had, fresh in the isolate cache (a cached absence is `None` here: the
/// slow path asks the origin), and until when. By its KV key, as [`fresh_link`].
pub(super) fn fresh_group(key: &str, now_ms: u64) -> Option<(Rc<Group>, u64)> {
    match fresh(key, now_ms)? {
        (Cached::Group(group), until) => Some((group?, until)),
        _ => None,
    }
}

/// The domain record at `key` (`domain:<host>`), fresh in the isolate cache (`Some(None)`: its absence is cached),
/// and until when. By its KV key, as [`fresh_link`].
pub(super) fn fresh_domain(key: &str, now_ms: u64) -> Option<(Option<Rc<DomainRecord>>, u64)> {
    match fresh(key, now_ms)? {
        (Cached::Domain(domain), until) => Some((domain, until)),
        _ => None,
    }
}

/// The blocklist, fresh in the isolate cache, and until when.
pub(super) fn fresh_blocklist(now_ms: u64) -> Option<(Rc<BlocklistEntry>, u64)> {
    match fresh(BLOCKLIST_KEY, now_ms)? {
        (Cached::Blocklist(list), until) => Some((list, until)),
        _ => None,
    }
}

/// Whether the isolate holds nothing of `key` that a request could use or wait for: caching is on, the cache has no
/// live entry for it and no load of it is under way. The first-visit path ([`super::first`]) reads such a key
/// itself, and only such a key: an entry near expiry or a load under way is the full path's to handle. Inlined:
/// the look into the cache and the loads is [`nothing_of`], out of line, and what is left (is caching on?) is less
/// than a function of its own costs a new isolate's first visit to compile.
#[inline(always)]
pub(super) fn untouched(key: &str, now_ms: u64) -> bool {
    CACHE.with(|c| c.borrow().is_enabled()) && nothing_of(key, now_ms)
}

/// Whether the isolate has never had the blocklist: nothing cached, no load under way, no last good copy (with the
/// isolate cache off, only until its first read). A link the origin vouched for is then decided without it
/// ([`LinkRecord::vouched`]), by the fast path ([`super::fast`]) and the full path alike.
pub(super) fn blocklist_never_read(now_ms: u64) -> bool {
    nothing_of(BLOCKLIST_KEY, now_ms) && LAST_GOOD_BLOCKLIST.with(|b| b.borrow().is_none())
}

/// Whether the cache has no live entry for `key` and no load of it is under way: [`untouched`]'s test and
/// [`blocklist_never_read`]'s, in one function out of line, which a first visit to a persistent link compiles once
/// for both.
#[inline(never)]
fn nothing_of(key: &str, now_ms: u64) -> bool {
    CACHE.with(|c| c.borrow().get(key, now_ms).is_none())
        && LOADS.with(|l| l.borrow().under_way(key, now_ms).is_none())
}

thread_local! {
    /// The reads the entry module is making for the first-visit path, each marked as a load under way
    /// ([`start_reads`]) until its text comes back ([`store_read`]).
    static READS: RefCell<Vec<Ticket>> = const { RefCell::new(Vec::new()) };
}

/// Marks the entry module's reads of `keys` (a first-visit plan's) as loads under way, as the full path marks its
/// own: another request that needs a key meanwhile waits for it ([`wait_for_load`]) rather than read it too. The
/// lost reads of earlier plans go first, once for the plan.
pub(super) fn start_reads(keys: &[String]) {
    let now_ms = now_ms();
    LOADS.with(|l| {
        let mut loads = l.borrow_mut();
        READS.with(|r| {
            let mut reads = r.borrow_mut();
            if !reads.is_empty() {
                drop_lost_reads(&mut reads, &mut loads, now_ms);
            }
            for key in keys {
                room::push(&mut reads, loads.start(key, now_ms), 4);
            }
        });
    });
}

/// Drops the reads whose text never came back (their requests cancelled) once their loads count as lost, or when
/// another load of their key replaced them, and their marks with them: a lost mark left behind would hold a place
/// among the loads for good. Out of line: a new isolate's first plan has no earlier read to look at (and a plan's
/// several keys look once, before their own marks).
#[inline(never)]
fn drop_lost_reads(reads: &mut Vec<Ticket>, loads: &mut Loads, now_ms: u64) {
    reads.retain(|t| {
        let live = loads.under_way(t.key(), now_ms) == Some(t.number());
        if !live {
            loads.finish(t);
        }
        live
    });
}

/// The entry module's read of `key` ended: `text` is KV's text (`Some(None)`: KV has no such key), `None` when the
/// read failed (nothing cached: the full path reads it again, and logs the failure). It is cached as the full
/// path's [`load`] would cache it: not when the sync route wrote since the read started, and a link KV lacks only
/// when `absent_link_final` (no origin to ask: the full path would cache the same absence; with an origin, the full
/// path asks it, under the read's mark: [`take_handover`]). A key with no read under way, or of another kind, is
/// ignored.
///
/// Out of line: a first visit's reads that found their record are held instead ([`hold_read`]), and this is
/// compiled only for what they leave (a link KV lacks, a failed read).
#[inline(never)]
pub(super) fn store_read(key: &str, text: Option<Option<String>>, absent_link_final: bool) {
    let Some(ticket) = take_read(key) else {
        return;
    };
    let may_cache = LOADS.with(|l| l.borrow().may_cache(&ticket));
    let mark = Mark(ticket);
    match text
        .filter(|_| may_cache)
        .and_then(|text| read_entry(key, text, absent_link_final))
    {
        Some(entry) => cache_read(key, entry, mark, now_ms()),
        // A link not cached (KV lacks it and there is an origin to ask, or the read failed) is loaded next by the
        // full path of the same request, under the same mark: the requests waiting for it keep waiting, for that
        // load (one origin lookup per isolate, as ever), rather than each load it themselves.
        None if key.starts_with("link:") => HANDOVER.with(|h| *h.borrow_mut() = Some(mark)),
        None => {}
    }
}

/// The first-visit path's read of `key`, taken off the reads under way ([`start_reads`]); `None` when there is no
/// such read (another kind of key, or one already stored).
fn take_read(key: &str) -> Option<Ticket> {
    READS.with(|r| {
        let mut reads = r.borrow_mut();
        let i = reads.iter().position(|t| t.key() == key)?;
        Some(reads.swap_remove(i))
    })
}

/// Caches `entry`, what the read under `mark` found at `key` at `read_at` (UNIX ms, whence its TTL runs), as the
/// full path's [`load`] would (the sync route has not written the key since the read started: the caller checked),
/// and ends the read's mark, which the requests waiting for it then find in the cache.
fn cache_read(key: &str, entry: Cached, mark: Mark, read_at: u64) {
    remember_after(key, &entry);
    CACHE.with(|c| {
        c.borrow_mut()
            .insert_read_at(key.to_owned(), entry, read_at, now_ms())
    });
    drop(mark);
    changed();
}

/// A record the first-visit path read, parsed and held for that visit's answer ([`hold_read`]), not yet cached.
struct Held {
    ticket: Ticket,
    /// `None`: not a key of a record ([`read_entry`]); only its mark is ended.
    entry: Option<Cached>,
    /// When it was read (UNIX ms): its time in the cache runs from then, however late it is cached.
    read_at: u64,
    /// The instant the record stops being a plain hit, as for an entry cached when it was read.
    refresh_at: u64,
}

thread_local! {
    /// The records [`hold_read`] holds until [`settle`] caches them, in the order read.
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// The entry module's read of `key` for the first-visit path found `text` (`None`: KV has no such key; never for
/// a link, whose absence may send the full path to the origin under the read's mark: [`store_read`]). Parsed now,
/// and held for that visit's answer ([`fresh`] finds it); cached after the response ([`settle`]), with the read's
/// mark ended then, so that a new isolate's first visit compiles neither the cache's insertion (hashing it,
/// probing, a full cache's room) nor the loads' bookkeeping before its answer (BENCHMARKS.md, issue 28). Requests
/// that found the read under way cache it themselves at their next look ([`wait_for_load`]).
pub(super) fn hold_read(key: &str, text: Option<String>) {
    let Some(ticket) = take_read(key) else {
        return;
    };
    let entry = read_entry(key, text, false);
    let read_at = now_ms();
    let refresh_at = CACHE.with(|c| c.borrow().refresh_at(read_at));
    HELD.with(|h| {
        room::push(
            &mut h.borrow_mut(),
            Held {
                ticket,
                entry,
                read_at,
                refresh_at,
            },
            4,
        )
    });
    super::settle::queued();
}

/// A record [`hold_read`] holds for `key`, while it is a plain hit and no sync-route write came since its read
/// (a first visit's later pass, after WebCrypto's await, then leaves it to the full path, as it would a cached
/// record the sync route replaced), and until when.
fn held(key: &str, now_ms: u64) -> Option<(Cached, u64)> {
    HELD.with(|h| {
        let held = h.borrow();
        let found = held.iter().find(|h| h.ticket.key() == key)?;
        let entry = found.entry.as_ref().filter(|_| now_ms < found.refresh_at)?;
        if !LOADS.with(|l| l.borrow().may_cache(&found.ticket)) {
            return None;
        }
        Some((entry.clone(), found.refresh_at))
    })
}

/// Caches the records [`hold_read`] holds, each as [`store_read`] would have when it came (not when the sync route
/// wrote its key since its read started; its TTL running from the read, so one cached late may already be
/// expired, and is then only the last good copy it also becomes), and ends their marks. A read whose load is no
/// longer the key's current one (it counted as lost, and another request loaded the key since) is not cached: the
/// newer load's copy stays. Out of line: run after the response.
#[inline(never)]
fn cache_held() {
    let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    for Held {
        ticket,
        entry,
        read_at,
        ..
    } in held
    {
        let may_cache = LOADS.with(|l| {
            let loads = l.borrow();
            loads.may_cache(&ticket) && loads.is_current(&ticket)
        });
        let key = ticket.key().to_owned();
        let mark = Mark(ticket);
        if let Some(entry) = entry.filter(|_| may_cache) {
            cache_read(&key, entry, mark, read_at);
        }
    }
}

/// The isolate's entry for KV's `text` at `key`, as a load caches it; `None` for a link KV lacks unless
/// `absent_link_final`, and for a key of another kind.
fn read_entry(key: &str, text: Option<String>, absent_link_final: bool) -> Option<Cached> {
    Some(if key.starts_with("link:") {
        if text.is_none() && !absent_link_final {
            return None;
        }
        wrap_link(text)
    } else if key.starts_with("group:") {
        wrap_group(text)
    } else if key.starts_with("domain:") {
        wrap_domain(text)
    } else if key == BLOCKLIST_KEY {
        wrap_blocklist(text)
    } else {
        return None;
    })
}

thread_local! {
    /// The mark of a link's load that a first-visit read could not cache, handed to the next load of the key
    /// ([`take_handover`]): its own request's full path, which follows at once.
    static HANDOVER: RefCell<Option<Mark>> = const { RefCell::new(None) };
}

/// The mark [`store_read`] handed over, if it is `key`'s. Whichever request loads the key next loads it under that
/// mark (in practice the request of the read, whose full path follows at once); the others keep waiting for it.
/// Not generic, unlike [`Records::entry`], which calls it: one copy in the wasm.
fn take_handover(key: &str) -> Option<Mark> {
    HANDOVER.with(|h| h.borrow_mut().take_if(|mark| mark.0.key() == key))
}

thread_local! {
    /// Called after every change to the isolate cache (a record loaded, replaced, or written or deleted through
    /// the sync route): the entry module forgets the answers it keeps (`edge-worker/js/entry.js`).
    static ON_CHANGE: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

/// Sets the function [`changed`] calls (see `ON_CHANGE`).
pub(super) fn set_on_change(listener: js_sys::Function) {
    ON_CHANGE.with(|l| *l.borrow_mut() = Some(listener));
}

/// Tells the entry module that the records changed. It only clears a map; should it throw, nothing here depends
/// on it.
fn changed() {
    ON_CHANGE.with(|l| {
        if let Some(listener) = l.borrow().as_ref() {
            let _ = listener.call0(&wasm_bindgen::JsValue::UNDEFINED);
        }
    });
}

/// The records one request reads. The KV binding is looked up only when a record is not in the cache.
pub(super) struct Records<'a> {
    env: &'a Env,
    /// For work that must not delay the response (KV write-back, reloads near expiry).
    ctx: &'a Context,
    origin: Option<Rc<Origin>>,
    now_ms: u64,
    kv: std::cell::OnceCell<Option<Kv>>,
}

impl<'a> Records<'a> {
    /// The records of a request that arrived at `now_ms`.
    pub(super) fn new(
        env: &'a Env,
        ctx: &'a Context,
        origin: Option<Rc<Origin>>,
        now_ms: u64,
    ) -> Self {
        Records {
            env,
            ctx,
            origin,
            now_ms,
            kv: std::cell::OnceCell::new(),
        }
    }

    /// The KV binding, for work after the response (visitor hashes).
    pub(super) fn kv_binding(&self) -> Option<Kv> {
        self.kv().cloned()
    }

    fn kv(&self) -> Option<&Kv> {
        self.kv
            .get_or_init(|| kv::binding(self.env, config::KV_BINDING))
            .as_ref()
    }

    /// The entry for `key`: from the isolate cache, else from another request's load of it under way, else from
    /// a load of this request's own (`start`). An entry near expiry is served as it is and reloaded after the
    /// response, so a hot key never makes a request wait. `None` when KV could not be read.
    async fn entry<F>(&self, key: &str, start: impl FnOnce() -> F) -> Option<Cached>
    where
        F: Future<Output = Loaded> + 'static,
    {
        let (lookup, caching) = CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            (cache.lookup(key, self.now_ms), cache.is_enabled())
        });
        let under_way = || LOADS.with(|l| l.borrow().under_way(key, self.now_ms));
        match lookup {
            cache::Lookup::Hit(entry) => Some(entry),
            cache::Lookup::Refresh(entry) => {
                if under_way().is_none() {
                    let (kv, key, reload) = (self.kv().cloned(), key.to_owned(), start());
                    self.ctx.wait_until(async move {
                        if let Some(record) = load(&key, None, reload).await.write_back {
                            write_back(kv, key, record).await;
                        }
                    });
                }
                Some(entry)
            }
            cache::Lookup::Miss => {
                // A first-visit read's mark for the key: a load to make under it, not one to wait for.
                let handed = take_handover(key);
                // Without a cache there is nothing to wait for: the other load's entry would not be kept.
                if handed.is_none()
                    && caching
                    && let Some(number) = under_way()
                    && let Some(entry) = wait_for_load(key, number).await
                {
                    return Some(entry);
                }
                let loaded = load(key, handed, start()).await;
                if let Some(record) = loaded.write_back {
                    self.ctx
                        .wait_until(write_back(self.kv().cloned(), key.to_owned(), record));
                }
                loaded.entry
            }
        }
    }

    /// A load of `key` from KV alone; `wrap` parses the text into the entry to cache.
    fn kv_load(
        &self,
        key: &str,
        wrap: fn(Option<String>) -> Cached,
    ) -> impl Future<Output = Loaded> + 'static {
        let (kv, key) = (self.kv().cloned(), key.to_owned());
        async move {
            match kv_get(kv, &key).await {
                Some(text) => Loaded::entry(wrap(text)),
                None => Loaded::failed(),
            }
        }
    }

    /// A link, through the isolate cache and KV, and on a KV miss (a key KV does not have, not a value it cannot
    /// parse) through the origin when one is configured: a link created seconds ago redirects before the
    /// publisher's write has reached this location, and is written back to KV.
    pub(super) async fn link(&self, host: &str, code: &str) -> Option<Rc<LinkRecord>> {
        let key = kv_model::link_key(host, code);
        let start = || {
            let kv = self.kv().cloned();
            let origin = self.origin.clone();
            let (key, host, code) = (key.clone(), host.to_owned(), code.to_owned());
            async move {
                let Some(text) = kv_get(kv, &key).await else {
                    return Loaded::failed();
                };
                match (text, origin) {
                    (Some(text), _) => Loaded::entry(wrap_link(Some(text))),
                    // An origin 404 or failure is cached as absence like a KV miss: an unknown code costs the
                    // origin one lookup per isolate per TTL, not one per request, and a failing origin one slow
                    // visitor, not all.
                    (None, Some(origin)) => match link_from_origin(&origin, &host, &code).await {
                        Lookup::Found(resolved) => {
                            let record = Rc::new(resolved.link());
                            // The group may be as new as the link: keep the origin's copy for the rules.
                            let also = resolved.group.map(|g| {
                                (origin_group_key(&record.group_id), origin_group(Some(g)))
                            });
                            Loaded {
                                entry: Some(Cached::Link(Some(record.clone()))),
                                write_back: Some(record),
                                also,
                            }
                        }
                        _ => Loaded::entry(Cached::Link(None)),
                    },
                    (None, None) => Loaded::entry(Cached::Link(None)),
                }
            }
        };
        match self.entry(&key, start).await {
            Some(Cached::Link(link)) => link,
            _ => None,
        }
    }

    /// The group of an active persistent link when KV has no usable `group:<id>` (a group created with the link,
    /// seconds ago, not yet published or not yet visible at this location): the origin's copy, from the same
    /// lookup as a link KV lacks, so the group's rules apply from the first visit. Absent without an origin, or
    /// when the origin has no group for the link (a `404`). When the origin fails (timeout, 5xx, no connection),
    /// the last copy it gave, however old, else unavailable (the visitor gets the fallback), as for a failed KV
    /// read. Either answer is cached for the TTL: one lookup per isolate per TTL.
    pub(super) async fn group_from_origin(
        &self,
        host: &str,
        code: &str,
        group_id: &str,
    ) -> GroupRead {
        let Some(origin) = self.origin.clone() else {
            return GroupRead::Absent;
        };
        let key = origin_group_key(group_id);
        let start = || {
            let (host, code) = (host.to_owned(), code.to_owned());
            async move {
                match origin::link_group(link_from_origin(&origin, &host, &code).await) {
                    Ok(group) => Loaded::entry(origin_group(group)),
                    Err(_) => Loaded::entry(Cached::OriginFailed),
                }
            }
        };
        match self.entry(&key, start).await {
            Some(Cached::Group(Some(group))) => GroupRead::Found(group),
            Some(Cached::Group(None)) => GroupRead::Absent,
            _ => last_good_group(&key),
        }
    }

    /// Whether the isolate cache holds KV's answer for `group:<id>` (a record or its absence, fresh or due for a
    /// reload): [`Records::group`] then answers without I/O.
    pub(super) fn group_cached(&self, group_id: &str) -> bool {
        let key = kv_model::group_key(group_id);
        CACHE.with(|c| c.borrow().get(&key, self.now_ms).is_some())
    }

    /// Loads `group:<id>` after the response (`wait_until`), unless a load of it is under way: for a link whose
    /// first visit was decided from the copy of its group's settings it carries, so that the next visits have
    /// the group's own record (newer than the copy when the group changed since the link was published).
    pub(super) fn load_group_after_response(&self, group_id: &str) {
        self.load_after_response(kv_model::group_key(group_id), wrap_group);
    }

    /// Loads the blocklist after the response, unless a load of it is under way: for a vouched link's first
    /// visit, decided without it, so that the next visits check it.
    pub(super) fn load_blocklist_after_response(&self) {
        self.load_after_response(BLOCKLIST_KEY.to_owned(), wrap_blocklist);
    }

    /// Loads `key` in `wait_until`, as a load that other requests wait for, unless one is under way already.
    fn load_after_response(&self, key: String, wrap: fn(Option<String>) -> Cached) {
        if LOADS.with(|l| l.borrow().under_way(&key, self.now_ms).is_some()) {
            return;
        }
        let reload = self.kv_load(&key, wrap);
        self.ctx.wait_until(async move {
            load(&key, None, reload).await;
        });
    }

    /// KV's group record: as read (or cached), else, when the read failed, the last good copy.
    pub(super) async fn group(&self, group_id: &str) -> GroupRead {
        let key = kv_model::group_key(group_id);
        match self.entry(&key, || self.kv_load(&key, wrap_group)).await {
            Some(Cached::Group(Some(group))) => GroupRead::Found(group),
            Some(_) => GroupRead::Absent,
            None => last_good_group(&key),
        }
    }

    pub(super) async fn domain(&self, host: &str) -> Option<Rc<DomainRecord>> {
        let key = kv_model::domain_key(host);
        match self.entry(&key, || self.kv_load(&key, wrap_domain)).await {
            Some(Cached::Domain(domain)) => domain,
            _ => None,
        }
    }

    /// The blocked domains (empty when KV has no blocklist); when KV cannot be read, the last list read, however
    /// old; `None` when it cannot be read and never could be in this isolate (never an empty list for a failure:
    /// that would unblock every domain).
    pub(super) async fn blocklist(&self) -> Option<Rc<BlocklistEntry>> {
        match self
            .entry(BLOCKLIST_KEY, || {
                self.kv_load(BLOCKLIST_KEY, wrap_blocklist)
            })
            .await
        {
            Some(Cached::Blocklist(list)) => Some(list),
            _ => LAST_GOOD_BLOCKLIST.with(|b| b.borrow().clone()),
        }
    }
}

/// A group record as a request could get it.
pub(super) enum GroupRead {
    /// KV's record (or the origin's copy), fresh or the last good one.
    Found(Rc<Group>),
    /// KV has no usable record (a successful read).
    Absent,
    /// The read failed and the isolate has no earlier copy.
    Unavailable,
}
