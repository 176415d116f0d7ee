//! Shortlink's edge worker: answers every visitor request from Workers KV, the origin only on a KV miss.
//!
//! - `GET`/`HEAD /<short_code>`: a persistent link (`link:<host>:<code>` in KV) → `302` to its `long_url`, with
//!   the visitor's query appended unless the link says otherwise ([`forward_query`]); a paused or expired link,
//!   one whose destination is blocklisted, an unknown code or `/` → the domain's fallback.
//! - `GET`/`HEAD /e/<group_id>?signature=<token>`: a dynamic link, evaluated as spec 4.5 orders it (decrypt with
//!   the group key, destination and expiry rules, access rules, monetization, `back_param`, redirect). Every
//!   failure is a silent `302` to the domain's fallback.
//! - `POST /<short_code>`: a protected link's password form, posted ([`password`]).
//! - `POST /__shortlink/sync`: the origin's authenticated KV writer ([`sync`]).
//!
//! With `ORIGIN_URL` and `ORIGIN_SECRET` set, a link missing from KV is looked up at the origin ([`origin`]) and
//! written back to KV, and requests of groups with analytics on yield click events ([`analytics`]) reported to the
//! origin after the response: directly, or through Cloudflare Queues when the `CLICK_QUEUE` binding is there
//! ([`click_queue`]: the same worker consumes the queue, and refused batches go to a dead-letter queue).
//!
//! The decision (which status, which URL, which page, which click) is plain Rust in [`route`], [`visitor`],
//! [`decision`], [`smart`], [`preview`], [`password`], [`password_form`], [`forward_query`], [`reply`], [`interstitial`], [`origin`], [`analytics`] and [`click_queue`],
//! and so are the isolate cache ([`cache`]), its maps' keyed hasher ([`hashing`]), the byte-bounded maps of what an
//! isolate keeps ([`bounded`]), first pushes without `Vec`'s growth ([`room`]), the
//! coordination of loads ([`loads`]), the records' JSON parse ([`json_record`]; in the shapes the origin publishes, without serde: [`plain_records`]), the sync route's rules ([`sync`]) and the log lines written for every failure
//! absorbed into a fallback ([`log`], throttled where a failure repeats per request), all tested on the host. The Workers entry points and the I/O (KV, the origin, the queues, the sync route's writes, the console)
//! live in a thin shell compiled only for `wasm32` (`src/shell/`: the entry, the isolate's records, the origin
//! calls, the click queue, the sync route). The KV
//! contract is [`kv_model`]'s; see `edge-worker/README.md`.

pub mod analytics;
pub mod bounded;
pub mod cache;
pub mod click_queue;
pub mod config;
pub mod decision;
pub mod forward_query;
pub mod hashing;
pub mod interstitial;
pub mod json_record;
pub mod loads;
pub mod log;
pub mod named_hosts;
pub mod origin;
pub mod password;
pub mod password_form;
pub mod plain_records;
pub mod preview;
pub mod reply;
pub mod room;
pub mod route;
pub mod smart;
pub mod sync;
pub mod unique;
pub mod visitor;

#[cfg(target_arch = "wasm32")]
mod shell;

/// talc instead of Rust's default wasm allocator (dlmalloc): a new isolate compiles every function its first request
/// calls, and talc's allocation path is a quarter of dlmalloc's `malloc` in wasm (1.3 KB against 4.8, plus `free`
/// and `unlink_chunk`), so a first visit compiles about 4.5 KB less (BENCHMARKS.md, issue 28). The dynamic variant
/// grows wasm memory as needed, as dlmalloc did. Not with threads (`atomics`), which this worker never uses.
///
/// Behind an arena for the isolate's first allocations (the `first-arena` crate), so that a new isolate's first
/// request compiles none of talc either: 32 KiB holds what the cold-start profile's first visits allocate (their
/// request's strings, the records they read), and the next requests' until one does not fit; from then on every
/// allocation is talc's. A blocklist text larger than the arena's room goes to talc on the first visit that reads
/// it, which then compiles talc as before.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: first_arena::FirstArena<talc::wasm::WasmDynamicTalc, ARENA_BYTES> =
    first_arena::FirstArena::new(talc::wasm::new_wasm_dynamic_allocator(), &ARENA);

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
const ARENA_BYTES: usize = 32 * 1024;

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
static ARENA: first_arena::Arena<ARENA_BYTES> = first_arena::Arena::new();
