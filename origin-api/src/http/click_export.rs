//! The raw click events (issue 26): `GET /api/v1/external/links/{id}/clicks`, `…/groups/{id}/clicks` and
//! `…/clicks` (the whole account), streamed as NDJSON (the default) or CSV, oldest first, a batch at a time
//! ([`click_export_stream`]) while the client reads, under the render bound like the link export. Ranges are the
//! statistics' (the same 400s); a range reaching before the raw events' retention says where what is kept starts
//! (`X-Retention-From`).

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::{Caller, ResourceId};
use super::state::AppState;
use axum::Router;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt as _;
use shortlink_store::domain::{ClickExportFormat, ClickExportQuery, Day};
use shortlink_store::{ExportScope, click_export_stream};

/// Events per batch: about 300 KB of NDJSON.
const BATCH: u32 = 1_000;

/// The header naming the first day whose raw events are kept, when the range starts before it.
const RETENTION_FROM: HeaderName = HeaderName::from_static("x-retention-from");

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/external/links/{id}/clicks", get(link_clicks))
        .route("/api/v1/external/groups/{id}/clicks", get(group_clicks))
        .route("/api/v1/external/clicks", get(account_clicks))
}

/// The query of the raw click exports, for the OpenAPI document; the handlers read the raw query with
/// [`ClickExportQuery::parse`], so each bad value is a `validation_error` naming its parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct ClickExportParams {
    /// First UTC day exported, `YYYY-MM-DD` (default: 29 days before `to`). At most 3,660 days before `to`.
    #[param(format = Date)]
    from: Option<String>,
    /// Last UTC day exported, inclusive, `YYYY-MM-DD` (default: today).
    #[param(format = Date)]
    to: Option<String>,
    /// `ndjson` (the default: one object per event) or `csv` (a header row, then one row per event).
    #[param(pattern = "^(ndjson|csv)$")]
    format: Option<String>,
}

async fn export(
    state: &AppState,
    account_id: &str,
    scope: ExportScope,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let today = Day::today();
    let q = ClickExportQuery::parse(query, today).map_err(|e| ApiError::Validation(e.0))?;
    let first = {
        let _place = state.limits.renders.enter().await?;
        state
            .db
            .click_export_batch(account_id, &scope, (q.from, q.to), None, BATCH)
            .await?
            .ok_or(ApiError::NotFound)?
    };
    let (content_type, file) = match q.format {
        ClickExportFormat::Csv => ("text/csv; charset=utf-8", "clicks.csv"),
        ClickExportFormat::Ndjson => ("application/x-ndjson", "clicks.ndjson"),
    };
    let body = click_export_stream(
        state.db.clone(),
        account_id.to_owned(),
        scope,
        (q.from, q.to),
        q.format,
        first,
        BATCH,
        Some(state.limits.renders.places()),
    )
    .inspect(|chunk| {
        if let Err(e) = chunk {
            tracing::warn!(error = %e, "click export failed mid-way; the response is cut short");
        }
    });
    let mut response = (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response();
    // Raw events older than the retention (at least a day) are deleted hourly, so the day that many days back is
    // partly gone already: the first whole day kept is the one after it. A range reaching before that gets what
    // is kept, and says from when.
    let kept_from = Day(today.0 - i64::from(state.click_retention_days.max(1)) + 1);
    if q.from < kept_from
        && let Ok(value) = HeaderValue::from_str(&kept_from.to_iso_date())
    {
        response.headers_mut().insert(RETENTION_FROM, value);
    }
    Ok(response)
}

/// The raw click events of one of the account's links (our extension, issue 26), oldest first: `at` (ISO 8601
/// UTC, microseconds), `link_id`, `country`, `region`, `city`, `device`, `browser`, `os`, `referer_host`,
/// `utm_source`, `utm_medium`, `utm_campaign` and `unique` (the visitor's first click on the link that UTC day;
/// null where not known); unknown values are null (NDJSON) or empty (CSV). Never an address, a User-Agent or a
/// visitor hash: no address or User-Agent is stored, and a day's visitor hashes only until 02:00 UTC the next day. Streamed; a range starting before the retention period answers what is kept,
/// with `X-Retention-From`. Another account's link, an unknown id and a malformed id all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/{id}/clicks",
    tag = "links",
    operation_id = "link_clicks",
    params(("id" = String, Path, format = Uuid, description = "The link's id"), ClickExportParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The link's events in the range, streamed",
            headers(("X-Retention-From" = String, description = "The first day whose raw events are kept, when \
                the range starts before it")),
            content((String = "application/x-ndjson"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: not one of the account's links", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn link_clicks(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    export(
        &state,
        &caller.account_id,
        ExportScope::Link(id),
        query.as_deref(),
    )
    .await
}

/// The raw click events attributed to one of the account's groups (its links' and its dynamic links'), as the
/// link's export. Another account's group, an unknown id and a malformed id all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/groups/{id}/clicks",
    tag = "groups",
    operation_id = "group_clicks",
    params(("id" = String, Path, format = Uuid, description = "Group id"), ClickExportParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The group's events in the range, streamed",
            headers(("X-Retention-From" = String, description = "The first day whose raw events are kept, when \
                the range starts before it")),
            content((String = "application/x-ndjson"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: not one of the account's groups", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn group_clicks(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    export(
        &state,
        &caller.account_id,
        ExportScope::Group(id),
        query.as_deref(),
    )
    .await
}

/// Every raw click event of the account, as the link's export.
#[utoipa::path(
    get,
    path = "/api/v1/external/clicks",
    tag = "stats",
    operation_id = "account_clicks",
    params(ClickExportParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The account's events in the range, streamed",
            headers(("X-Retention-From" = String, description = "The first day whose raw events are kept, when \
                the range starts before it")),
            content((String = "application/x-ndjson"), (String = "text/csv"))),
        (status = 400, description = "`validation_error`: `from`, `to` or `format` malformed or given twice, \
            `from` after `to`, or more than 3,660 days", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn account_clicks(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    export(
        &state,
        &caller.account_id,
        ExportScope::Account,
        query.as_deref(),
    )
    .await
}
