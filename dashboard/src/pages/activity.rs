//! Activity (admins and owners): the account's audit trail, newest first, 50 a page.

use super::{nav, show_time};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use crate::views::{ActivityItem, ActivityPage, render};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::AuditEntry;
use shortlink_store::domain::Permission;

/// Rows per page (the rule).
const PER_PAGE: i64 = 50;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PageParam {
    page: Option<String>,
}

/// Who, as the page shows it: a user's email, "API key" or "operator".
fn who(e: &AuditEntry) -> String {
    match e.actor_type.as_str() {
        "user" => e.actor_email.clone().unwrap_or_else(|| "a user".to_owned()),
        "api_key" => "API key".to_owned(),
        _ => "operator".to_owned(),
    }
}

/// The target, as the page shows it: a link's short URL, a group's name, a member's email, the account's name.
fn target(e: &AuditEntry) -> String {
    let text = |key: &str| {
        e.details
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    match e.target_type.as_str() {
        "link" => text("short_url"),
        "group" => text("name"),
        "member" => text("email"),
        "account" => text("to"),
        "domain" => text("host"),
        "api_key" => Some("API key".to_owned()),
        _ => None,
    }
    .unwrap_or_else(|| e.target_id.clone())
}

/// What changed, in a line: the details' fields other than those the target column already shows.
fn details(e: &AuditEntry) -> String {
    let Some(map) = e.details.as_object() else {
        return String::new();
    };
    map.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "short_url" | "email" | "host"))
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}: {s}"),
            other => format!("{k}: {other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `GET /dashboard/activity?page=N`.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(p): Query<PageParam>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageMembers)?;
    let page = p
        .page
        .as_deref()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| (1..=1_000_000).contains(n))
        .unwrap_or(1);
    let log = state
        .db
        .audit_log(&user.account.account_id, PER_PAGE, (page - 1) * PER_PAGE)
        .await?;
    let items = log
        .results
        .iter()
        .map(|e| ActivityItem {
            at: show_time(&e.at.to_iso8601()),
            who: who(e),
            action: e.action.clone(),
            target: target(e),
            details: details(e),
        })
        .collect();
    let pages = ((log.total + PER_PAGE - 1) / PER_PAGE).max(1);
    Ok(render(&ActivityPage {
        nav: nav(&user, "activity"),
        title: "Activity",
        items,
        page,
        pages,
        total: log.total,
    })
    .into_response())
}
