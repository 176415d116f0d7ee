//! What a first visit leaves for after its response (wasm32 only). A new isolate compiles each wasm function on its
//! first call, so whatever its first visit runs before answering delays that answer (BENCHMARKS.md, issue 28).
//! Writing a bounded map (the token memo, the groups' last good copies) or the isolate cache (the records the visit
//! read: [`records::hold_read`]) is such code, and nothing in that visit's answer needs it: the first-visit path
//! queues those writes, and they run at the start of the isolate's next `fetch`, before anything it does
//! ([`before_fetch`]); at every look of a request that found one of the visit's reads under way and waits for it
//! (the cache's writes end the reads' marks); before the full path of a first visit the fast path does not answer;
//! and after the reads the entry module makes after a response (`edge-worker/js/entry.js`, [`first_settle`]). A
//! request already past those points when the writes are queued does not see them until then; if it needs one of
//! the records, it reads it itself once the read's mark counts as lost (the loads' join timeout), and the held
//! copy is then not cached over its newer one. An isolate that never gets another request never needed them.
//!
//! Not a timer after the response (`setTimeout` inside `waitUntil`): the requests that wait for the reads run the
//! writes themselves, and the timer would be armed before the response, by JS the first visit then runs
//! (BENCHMARKS.md, issue 28).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use shared_crypto::Payload;
use wasm_bindgen::prelude::wasm_bindgen;

use super::records;
use crate::decision::Group;
use crate::room;

thread_local! {
    /// Whether anything is queued: what the isolate's every `fetch` looks at.
    static QUEUED: Cell<bool> = const { Cell::new(false) };
    /// Tokens WebCrypto opened for the first-visit path, with the group record whose opening each is
    /// ([`Group::opened_payload`]): for the memo.
    static OPENED: RefCell<Vec<(Rc<Group>, String, Payload)>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `payload`, `group`'s opening of `token`, in the token memo after the response. The memo binds an entry to
/// the group record that opened it, so keeping it later is as right as keeping it now.
pub(super) fn keep_opened(group: Rc<Group>, token: String, payload: Payload) {
    OPENED.with(|o| room::push(&mut o.borrow_mut(), (group, token, payload), 2));
    queued();
}

/// Something was queued ([`keep_opened`], or a record read by [`records`]).
pub(super) fn queued() {
    QUEUED.with(|q| q.set(true));
}

/// Runs what is queued, if anything: at the start of every `fetch`, before the request is looked at, and before
/// each look of a request waiting for a load ([`records`]).
pub(super) fn before_fetch() {
    if QUEUED.with(Cell::get) {
        first_settle();
    }
}

/// Runs what first visits left for after their responses: their tokens into the memo, the records they read into
/// the isolate cache and the groups among them into the last good copies ([`records::settle`]). Calling it with
/// nothing queued does nothing.
#[wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export: reached by the entry module, not by Rust paths
#[inline(never)] // out of every `fetch`'s compiled body: a new isolate's first visit runs none of it
pub fn first_settle() {
    let opened = OPENED.with(|o| std::mem::take(&mut *o.borrow_mut()));
    for (group, token, payload) in opened {
        group.keep_opened(&token, payload);
    }
    records::settle();
    // Cleared last: the held reads queue their groups as they are cached, and this run keeps those too.
    QUEUED.with(|q| q.set(false));
}
