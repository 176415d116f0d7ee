//! Shortlink origin: the management API (`/api/v1/external/…`), the public validation endpoint, the internal
//! routes the edge worker calls, the publisher that drains the outbox to the edge, the webhook delivery loop, and the
//! operator CLI. Every
//! rule of the data lives in the store crate (`shortlink_store`); this crate is HTTP, CLI and startup. The
//! binary in `main.rs` only wires these together.

pub mod cli;
pub mod click_folding;
pub mod http;
pub mod imports;
pub mod publisher;
pub mod retention;
pub mod startup;
pub mod visitor_salts;
pub mod webhooks;
