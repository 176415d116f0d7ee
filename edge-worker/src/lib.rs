//! Shortlink's edge worker: answers every visitor request from Workers KV, the origin only on a KV miss.
//!
//! - `GET`/`HEAD /<short_code>`: a persistent link (`link:<host>:<code>` in KV) → `302` to its `long_url`;
//!   a paused link, an unknown code or `/` → the domain's fallback.
//! - `GET`/`HEAD /e/<group_id>?signature=<token>`: a dynamic link, evaluated as spec 4.5 orders it (decrypt with
//!   the group key, destination and expiry rules, access rules, monetization, `back_param`, redirect). Every
//!   failure is a silent `302` to the domain's fallback.
//! - `POST /__shortlink/sync`: the origin's authenticated KV writer ([`sync`]).
//!
//! With `ORIGIN_URL` and `ORIGIN_SECRET` set, a link missing from KV is looked up at the origin ([`origin`]) and
//! written back to KV, and requests of groups with analytics on yield click events ([`analytics`]) reported to the
//! origin after the response.
//!
//! The decision (which status, which URL, which page, which click) is plain Rust in [`route`], [`visitor`],
//! [`decision`], [`reply`], [`interstitial`], [`origin`] and [`analytics`], and so are the isolate cache ([`cache`]),
//! the coordination of loads ([`loads`]) and the sync route's rules ([`sync`]), all tested on the host. The Workers
//! entry point and the I/O (KV, the origin, the sync route's writes) live in a thin shell compiled only for `wasm32`
//! (`src/shell/`: the entry, the isolate's records, the origin calls, the sync route). The KV contract is [`kv_model`]'s; see `edge-worker/README.md`.

pub mod analytics;
pub mod cache;
pub mod config;
pub mod decision;
pub mod interstitial;
pub mod loads;
pub mod origin;
pub mod reply;
pub mod route;
pub mod sync;
pub mod visitor;

#[cfg(target_arch = "wasm32")]
mod shell;
