//! The origin's integration tests, one binary (one link step instead of twelve): each module starts the real
//! origin on a random port against a fresh database, SQLite and PostgreSQL (`common`), and speaks HTTP to it.

#![allow(missing_docs, clippy::unwrap_used)]

#[macro_use]
mod common;

mod analytics;
mod audit;
mod auth;
mod backup;
mod cli;
mod click_dimensions;
mod click_export;
mod click_folding;
mod concurrent_deletes;
mod create_link;
mod dashboard;
mod dashboard_analytics;
mod dashboard_links;
mod dashboard_live;
mod dashboard_smart;
mod dashboard_webhooks;
mod export;
mod fallback_blocklist;
mod faults;
mod groups;
mod hardening;
mod imports;
mod isolation;
mod lifecycle;
mod link_attempts;
mod listing;
mod mail;
mod observability;
mod openapi;
mod outbox;
mod process;
mod publisher;
mod rate_limit;
mod smart_links;
mod tags;
mod teams;
mod tls;
mod unique_visitors;
mod validate_dynamic;
mod vouched;
mod webhooks;
mod write_limits;
