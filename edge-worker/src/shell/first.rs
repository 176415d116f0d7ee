//! The first visit on a new isolate (wasm32 only), without async Rust. When a visitor request misses the fast path
//! ([`super::fast`]) because the isolate holds none of the KV records its route reads, [`super::fetch`] returns a
//! plan of those reads instead of a `Promise`: `[binding, cacheTtl, ...keys]`, each read marked as a load under way
//! (other requests wait for it rather than read the key too, as for the full path's loads). The entry module
//! (`edge-worker/js/entry.js`, `firstVisit`) reads the keys in one `Promise.all`, hands the texts to
//! [`first_store`], which parses them and holds them for this visit ([`records::hold_read`]; cached after the
//! response, [`super::settle`]), and calls [`first_fetch`]: the fast path again, which now holds the records and
//! answers most first visits with no future. What it cannot answer (a password, analytics, a fallback, a link KV
//! lacks) goes on to the full path, with the records cached first.
//!
//! Why: on a new isolate V8 compiles each wasm function on its first call. The full path runs through
//! `future_to_promise`, several async state machines and the loads' bookkeeping, all compiled on that first
//! request; this path compiles only the synchronous code the fast path runs anyway (BENCHMARKS.md, "Cold start").

use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::wasm_bindgen;
use worker::Env;

use super::fast::Pass;
use super::records;
use crate::config;

/// The plan of reads for the keys of `wanted` the isolate holds nothing of ([`records::untouched`]; the others are
/// dropped from `wanted`, in place: a new `Vec` of the rest would be code a new isolate's first visit compiles),
/// each marked as a load under way until [`first_store`] has its text; `None` when there are none. The KV binding
/// is not looked up here: without one, the entry module's reads fail (`readKey`), [`first_store_missing`] takes
/// them as failed reads, and the full path then logs the missing binding, as it would have at once (on every
/// visit: a failed read leaves nothing in the isolate); looking it up would be glue a new isolate's first visit
/// compiles (BENCHMARKS.md, issue 28).
pub(super) fn plan(wanted: &mut Vec<String>, now_ms: u64) -> Option<JsValue> {
    // A new isolate's first visit finds every key untouched, and compiles no `retain` for it (two loops and the
    // strings' drops).
    if !wanted.iter().all(|key| records::untouched(key, now_ms)) {
        keep_untouched(wanted, now_ms);
    }
    if wanted.is_empty() {
        return None;
    }
    Some(plan_of(wanted))
}

/// [`plan`]'s `wanted` without the keys the isolate holds something of.
#[inline(never)]
fn keep_untouched(wanted: &mut Vec<String>, now_ms: u64) {
    wanted.retain(|key| records::untouched(key, now_ms));
}

/// The plan: a line each for the KV binding's name, KV's `cacheTtl` (as the full path reads) and every key, the
/// reads marked as under way. One string rather than a JS `Array`: an array is built and read through an import
/// call per element, whose glue a new isolate's first request compiles (BENCHMARKS.md, issue 28). No key holds a
/// line break (hosts and codes are validated before a key is made of them, group ids are UUIDs, the blocklist's
/// key is fixed).
fn plan_of(keys: &[String]) -> JsValue {
    // Made with room for every line: growing it would be code (`realloc`) compiled for this alone.
    let mut plan = String::with_capacity(
        config::KV_PLAN_HEAD.len() + keys.iter().map(|key| key.len() + 1).sum::<usize>(),
    );
    plan.push_str(config::KV_PLAN_HEAD);
    records::start_reads(keys);
    for key in keys {
        plan.push('\n');
        plan.push_str(key);
    }
    JsValue::from_str(&plan)
}

/// Holds what KV had for a plan's `key` (`text`; `None`: no such key) for this visit, to be cached after its answer
/// ([`records::hold_read`]); true. False, holding nothing, for a link KV lacks, which may be the origin's to answer:
/// the entry module then hands it to [`first_store_missing`], as it does a failed read. Apart, so that a first visit
/// whose reads all came back (a deployment that never blocked a domain and has no platform domain has no blocklist
/// record: its absence comes back too) hands over no `env` and compiles no configuration read (BENCHMARKS.md,
/// issue 28).
#[wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export: reached by the entry module, not by Rust paths
pub fn first_store(key: &str, text: Option<String>) -> bool {
    if text.is_none() && key.starts_with("link:") {
        return false;
    }
    records::hold_read(key, text);
    true
}

/// Stores a plan's `key` that [`first_store`] does not hold: its read failed (not `read`: nothing is cached; the
/// full path reads it again, and logs the failure), or it is a link KV lacks (`read`: stored at once, for the full
/// path to ask the origin under the read's mark, or cached as absent when there is no origin to ask).
#[wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `first_store`
pub fn first_store_missing(key: &str, read: bool, env: Env) {
    // A link KV lacks is absent for good when there is no origin to ask: the configuration is read for that alone.
    let absent_link_final = read && key.starts_with("link:") && !super::has_origin(&env);
    records::store_read(key, read.then_some(None), absent_link_final);
}

/// `fetch` after [`first_store`]: the fast path, allowed to decide a persistent link's first visit from its copy of the
/// group's settings, else the full path. With `replan` (the entry module's first call, when every read came back), one
/// more plan when the visit turned out to need records the first did not read; never a plan otherwise. Without `sealed`
/// ([`Pass::First`]): for a dynamic link whose token the group's record in the isolate has not opened, the token to
/// open with WebCrypto instead (a `Uint8Array`: the group key, 32 bytes, the IV, 12, then the ciphertext and its tag).
/// With what it handed on (`sealed`) and WebCrypto's plaintext of it, as text (`plaintext`; `None`: WebCrypto did not
/// open it, or it is not UTF-8; Rust's AES-GCM then opens it, and reads its bytes as it reads any token's):
/// [`Pass::Opened`], which never hands a token on again. Text rather than bytes: the entry module's strict
/// `TextDecoder` checks it, and wasm-bindgen hands a string over with the glue every string argument uses, so a first
/// visit compiles no UTF-8 check of Rust's (`core::str::from_utf8`, 0.7 KB of wasm). One export for both calls: a
/// second was one more shim (its `externref` arguments) for a dynamic first visit to compile.
#[wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `first_store`
pub fn first_fetch(
    req: worker::worker_sys::web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
    sealed: Option<Vec<u8>>,
    plaintext: Option<String>,
    replan: bool,
) -> JsValue {
    let pass = match &sealed {
        None => Pass::First { replan },
        Some(sealed) => Pass::Opened {
            sealed,
            plaintext: plaintext.as_deref(),
        },
    };
    super::answer(req, env, ctx, pass)
}

/// The plan of the reads to make after the response [`first_fetch`] just gave (`undefined`: none): the group's own
/// record, when the redirect was decided from the link's copy, and the blocklist, when it was decided on the
/// origin's word, so that the next visits have them.
#[wasm_bindgen]
#[allow(unreachable_pub)] // a wasm export, like `first_store`
pub fn first_after() -> JsValue {
    match super::fast::take_read_after() {
        Some(read_after) => plan_after(read_after),
        None => JsValue::UNDEFINED,
    }
}

/// [`first_after`]'s plan, out of line: a dynamic link's first visit, which reads nothing after its response,
/// compiles none of it.
#[inline(never)]
fn plan_after(read_after: super::fast::ReadAfter) -> JsValue {
    // The fast path found each key untouched, and the entry module calls this right after it: no other request
    // can have started a load of one in between.
    plan_of(&read_after.keys())
}
