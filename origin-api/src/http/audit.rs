//! `GET /api/v1/external/audit-log`: the key's account's activity log (the audit trail), newest first, paged by
//! list-links' rules (`limit` 1 to 100, default 20; `offset` 0 to 1,000,000,000; the same error codes). Every
//! change to the account's links, groups, API key, members, domains and the account itself has one row, written
//! in the change's own transaction by the store ([`shortlink_store::Action`]); rows are kept
//! `--audit-retention-days` days.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::Caller;
use super::state::AppState;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use shortlink_store::AuditEntry;
use shortlink_store::domain::PageQuery;
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/audit-log", get(audit_log))
}

/// Query parameters of the activity log, for the OpenAPI document. The handler parses the raw query itself
/// ([`PageQuery`]: list-links' rules and codes), so this is never built.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct AuditParams {
    /// Page size, plain decimal digits.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u32>,
    /// Rows to skip, plain decimal digits.
    #[param(minimum = 0, maximum = 1_000_000_000, default = 0)]
    offset: Option<u64>,
}

/// Who made a change.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditActor {
    /// `user` (a person signed in to the dashboard), `api_key` (the account's API key) or `operator` (the
    /// operator's `admin` command line).
    #[serde(rename = "type")]
    #[schema(pattern = "^(user|api_key|operator)$", example = "api_key")]
    kind: String,
    /// The user's email, present only when `type` is `user` (kept as it was when they acted).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Email)]
    email: Option<String>,
}

/// One change.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditRow {
    /// The row's id: a decimal integer as a string (increasing, but treat it as opaque).
    #[schema(pattern = "^[0-9]+$", example = "42")]
    id: String,
    /// When the change was made: UTC, six fractional digits and `Z`, as links' `created_at`.
    #[schema(format = DateTime, example = "2026-11-22T04:48:11.614362Z")]
    at: String,
    /// Who made it.
    actor: AuditActor,
    /// What was done: `link.created`, `link.updated`, `link.deleted`, `link.paused`, `link.resumed`,
    /// `group.created`, `group.updated`, `group.deleted`, `group.key_rotated`, `api_key.generated`,
    /// `api_key.revoked`, `member.invited`, `member.joined`, `member.role_changed`, `member.removed`,
    /// `account.renamed`, `domain.added` or `domain.disabled` (more may be added).
    #[schema(example = "link.paused")]
    action: String,
    /// What kind of thing was changed: `link`, `group`, `api_key`, `member`, `account` or `domain`.
    #[schema(example = "link")]
    target_type: String,
    /// Which one: a link's, group's, key's or domain's id, a member's email, the account's id.
    target_id: String,
    /// What changed, as a JSON object (never a secret, a key or a password): for links their `short_url` and the
    /// fields set with their new values, for groups their `name` and the settings sections that changed.
    #[schema(value_type = Object)]
    details: serde_json::Value,
}

impl From<AuditEntry> for AuditRow {
    fn from(e: AuditEntry) -> Self {
        Self {
            id: e.id.to_string(),
            at: e.at.to_iso8601(),
            actor: AuditActor {
                email: e.actor_email.filter(|_| e.actor_type == "user"),
                kind: e.actor_type,
            },
            action: e.action,
            target_type: e.target_type,
            target_id: e.target_id,
            details: e.details,
        }
    }
}

/// One page of the activity log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditLog {
    /// Offset applied.
    offset: u64,
    /// Limit applied.
    limit: u32,
    /// All of the account's rows.
    total: i64,
    /// The page.
    results: Vec<AuditRow>,
}

/// The account's activity log, newest first (`at`, then `id`): one row per change made through the API, the
/// dashboard or the operator's command line, kept 365 days by default. Pagination as list links: unknown
/// parameters are ignored; a known one given twice is refused with its `invalid_*` code.
#[utoipa::path(
    get,
    path = "/api/v1/external/audit-log",
    tag = "activity",
    operation_id = "audit_log",
    params(AuditParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "One page of the activity log", body = AuditLog),
        (status = 400, description = "`invalid_limit` or `invalid_offset`", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn audit_log(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<AuditLog>, ApiError> {
    let q = PageQuery::parse(query.as_deref())?;
    let page = state
        .db
        .audit_log(
            &caller.account_id,
            i64::from(q.limit),
            // Bounded by the parser (1,000,000,000).
            i64::try_from(q.offset).unwrap_or(i64::MAX),
        )
        .await?;
    Ok(Json(AuditLog {
        offset: q.offset,
        limit: q.limit,
        total: page.total,
        results: page.results.into_iter().map(AuditRow::from).collect(),
    }))
}
