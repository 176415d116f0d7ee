//! Shortlink origin: the management API (`/api/v1/external/…`), storage on SQLite or
//! PostgreSQL, and the operator CLI. The binary in `main.rs` only wires these together.

pub mod cli;
pub mod db;
pub mod domain;
pub mod http;
pub mod publisher;
pub mod startup;
