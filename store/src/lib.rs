//! Shortlink's store: the origin's domain types and every rule of accounts, API keys, groups, domains, links and
//! clicks, written once over SQLite (the embedded default) or PostgreSQL, and the transactional outbox that carries
//! each change to the edge. The management API and the dashboard both use it; neither holds a rule of its own.
//!
//! The SQL is written once, in the common subset of both engines (`$n` parameters, 0/1 flags, `ON CONFLICT`), with
//! runtime-checked queries: compile-time macros would need both schemas at build time. Identifiers are UUID text
//! and times are microseconds, so every value round-trips identically on both engines. The engine is looked at
//! once, when [`Db::connect`] opens the pools and picks how links are written ([`pool`]).

pub mod domain;

mod accounts;
mod audit;
mod audit_log;
mod backup;
mod blocklist;
mod click_export;
mod click_ingest;
mod click_live;
mod click_retention;
mod click_stats;
mod click_writer;
mod clicks;
mod creation;
pub mod csv;
mod digests;
mod domains;
mod error;
mod groups;
mod ids;
mod keys;
mod link_edits;
mod link_export;
mod link_import;
mod link_options;
mod link_password;
mod link_password_attempts;
mod link_tags;
mod link_writer;
mod links;
mod listed;
mod members;
mod outbox;
mod password_hashing;
mod password_resets;
mod password_throttle;
mod pool;
mod publishing;
mod rate_limit;
mod signup;
mod sql_chunks;
mod tags;
mod unique_visitors;
mod user_agent;
mod vouch;
mod web_auth;
mod webhooks;
mod write_budget;

pub use accounts::{AccountRow, NewAccount};
pub use audit::{Action, Actor, DEFAULT_AUDIT_RETENTION_DAYS};
pub use audit_log::{AuditEntry, AuditPage};
pub use click_export::{
    CLICK_EXPORT_COLUMNS, ClickBatch, ExportScope, RawClick, click_export_stream,
};
pub use click_live::{LIVE_MINUTES, LastHour, MinuteCount};
pub use click_retention::Aged;
pub use click_stats::{
    ClickStats, DayCount, PlaceCount, StatsScope, TOP_VALUES, UtmStats, ValueCount,
};
pub use clicks::Ingested;
pub use creation::{CreateLink, CreatedLink, Creator};
#[doc(hidden)]
pub use digests::fold::CHUNK as CLICK_FOLD_CHUNK;
pub use digests::{SeedDay, SeedScope};
pub use domains::{DomainOwner, DomainRow, DomainState};
pub use error::{Entity, StoreError};
pub use groups::{DEFAULT_MAX_GROUPS_PER_ACCOUNT, GroupRow, Owner};
pub use keys::AuthContext;
/// The click report's events, as the worker sends them (the contract is `kv-model`'s).
pub use kv_model::{ClickEvent, Device};
pub use link_edits::LinkPatch;
pub use link_export::{
    CSV_HEADER, ExportBatch, ExportCursor, ExportedLink, MAX_EXPORT_BATCH, export_head,
    export_stream, write_batch,
};
pub use link_import::{
    DEFAULT_IMPORT_LIMIT_PER_DAY, FileError, ImportProblem, ImportStatus, MAX_IMPORT_BYTES,
    MAX_OPEN_IMPORTS, MAX_REPORTED_ERRORS, check_file,
};
pub use link_options::{LinkOptions, LinkOptionsPatch, SmartFields};
pub use link_password::{LINK_PASSWORD_ITERATIONS, verify_link_password};
pub use link_password_attempts::LinkAttempt;
pub use links::LinkPage;
pub use listed::ListedLink;
pub use members::{
    Accepted, Acting, INVITE_TTL_MICROS, InvitationView, Invite, MAX_ACCOUNT_NAME_CHARS, MemberRow,
    PendingInvitation, validate_account_name,
};
pub use password_hashing::{DEFAULT_HASH_WAIT, HashLimit};
pub use password_resets::{PasswordReset, RESET_TTL_MICROS, ResetLink, ResetRequest};
pub use password_throttle::{THROTTLE_FAILURES, THROTTLE_WINDOW_MICROS};
pub use pool::{Db, Engine, PoolUse};
pub use publishing::OutboxLag;
pub use rate_limit::{RATE_LIMIT, RateLimitState, RateWindow};
pub use signup::SignUp;
pub use tags::TagCount;
pub use unique_visitors::SaltRotation;
pub use web_auth::{
    AccountChoice, NewSession, PasswordCheck, SESSION_ABSOLUTE_MICROS, SESSION_IDLE_MICROS,
    SessionAccount, SessionUser, SignIn,
};
pub use webhooks::{
    AttemptPage, AttemptRow, Attempted, DISABLE_AFTER, DueDelivery, EventType,
    MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOKS_PER_ACCOUNT, NewWebhook, UnknownEvent,
    WEBHOOK_RETENTION_DAYS, WebhookEndpoint, WebhookPatch,
};
pub use write_budget::{DEFAULT_WRITES_PER_MINUTE, WriteCharge, WriteSubject};
