//! `GET /api/v1/external/links/export` (issue 24): every link the list's filters match, as CSV or NDJSON, streamed.
//!
//! The body is written a batch at a time ([`Db::export_links`], [`BATCH`] links) while the client reads: memory
//! stays at one batch whatever the count, and a client that stops reading stops the reads (the stream is polled
//! only as the connection drains). Each batch takes a place under the render bound ([`RenderGate`]) while it is
//! read and written, so exports share the cores with QR codes and stats CSVs as those do with each other; the
//! first batch is read before the answer starts, so a busy origin or a failing database still gets a proper
//! error answer. A failure after that aborts the response (the client sees a truncated transfer, never a body
//! that looks complete).
//!
//! [`Db::export_links`]: shortlink_store::Db::export_links
//! [`RenderGate`]: super::limits::RenderGate

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::Caller;
use super::links::FilterParams;
use super::state::AppState;
use axum::Router;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt as _;
use shortlink_store::domain::{ExportFormat, ListQuery};
use shortlink_store::export_stream;

/// Links per batch: about 200 KB of CSV, a few milliseconds of reading.
const BATCH: u32 = 1_000;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/links/export", get(export_links))
}

/// `format` of the export (documentation of the route; never built).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum FormatParam {
    /// CSV (RFC 4180) with a header row.
    Csv,
    /// One JSON object per line.
    Ndjson,
}

/// The export's own parameter (documentation; never built).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct ExportParams {
    /// `csv` (the default) or `ndjson`.
    #[param(inline)]
    format: Option<FormatParam>,
}

/// Every link of the account that the filters match (the list's filters and sort, by its rules and error codes;
/// `limit` and `offset` are ignored), streamed as CSV (`format=csv`, the default: columns `id, short_url,
/// short_code, domain, long_url, title, tags, group_id, group_name, is_active, created_at, expires_at,
/// forward_query, clicks`, tags joined with `|`, cells a spreadsheet would read as a formula prefixed with `'`) or
/// NDJSON (`format=ndjson`: one object per line with the same fields, `tags` an array, `title` and `expires_at`
/// null when unset). Read in batches while the client reads: a link changed during a long export appears as its
/// batch saw it.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/export",
    tag = "links",
    operation_id = "export_links",
    params(FilterParams, ExportParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The links, streamed",
            content((String = "text/csv"), (String = "application/x-ndjson"))),
        (status = 400, description = "`invalid_format`, `invalid_match`, `invalid_long_url`, `invalid_q`, \
            `invalid_tag`, `invalid_group_id`, `invalid_domain`, `invalid_is_active` or `invalid_sort`",
            body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn export_links(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let (query, format) = ListQuery::parse_export(query.as_deref())?;
    let first = {
        let _place = state.limits.renders.enter().await?;
        state
            .db
            .export_links(&caller.account_id, &query, None, BATCH)
            .await?
    };
    let (content_type, file) = match format {
        ExportFormat::Csv => ("text/csv; charset=utf-8", "links.csv"),
        ExportFormat::Ndjson => ("application/x-ndjson", "links.ndjson"),
    };
    let body = export_stream(
        state.db.clone(),
        caller.account_id.clone(),
        query,
        format,
        first,
        BATCH,
        Some(state.limits.renders.places()),
    )
    .inspect(|chunk| {
        if let Err(e) = chunk {
            tracing::warn!(error = %e, "link export failed mid-way; the response is cut short");
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}
