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

use super::csv;
use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::Caller;
use super::links::FilterParams;
use super::state::AppState;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt as _;
use serde::Serialize;
use shortlink_store::domain::{ExportFormat, ListQuery};
use shortlink_store::{Db, ExportBatch, ExportCursor, ExportedLink, StoreError};

/// Links per batch: about 200 KB of CSV, a few milliseconds of reading.
const BATCH: u32 = 1_000;

/// The CSV header, in the order of [`csv_row`]'s fields.
const CSV_HEADER: &str = "id,short_url,short_code,domain,long_url,title,tags,group_id,group_name,is_active,\
                          created_at,expires_at,forward_query,clicks\r\n";

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

/// One exported link as an NDJSON line.
#[derive(Serialize)]
struct JsonLine<'a> {
    id: &'a str,
    short_url: String,
    short_code: &'a str,
    domain: &'a str,
    long_url: &'a str,
    title: Option<&'a str>,
    tags: &'a [String],
    group_id: &'a str,
    group_name: &'a str,
    is_active: bool,
    created_at: &'a str,
    expires_at: Option<&'a str>,
    forward_query: bool,
    clicks: i64,
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
    let (query, format) =
        ListQuery::parse_export(query.as_deref()).map_err(|e| ApiError::InvalidQuery {
            param: e.param,
            detail: e.detail,
        })?;
    let first = {
        let _place = state.limits.renders.enter().await?;
        state
            .db
            .export_links(&caller.account_id, &query, None, BATCH)
            .await?
    };
    let (content_type, file, head) = match format {
        ExportFormat::Csv => ("text/csv; charset=utf-8", "links.csv", CSV_HEADER),
        ExportFormat::Ndjson => ("application/x-ndjson", "links.ndjson", ""),
    };
    let mut first_chunk = String::from(head);
    write_batch(&mut first_chunk, format, &first);
    let export = Export {
        db: state.db.clone(),
        gate: state.limits.renders.clone(),
        account_id: caller.account_id.clone(),
        query,
        format,
    };
    let rest = futures::stream::unfold((export, first.next), |(export, cursor)| async move {
        let cursor = cursor?;
        match export.next_chunk(&cursor).await {
            Ok((chunk, next)) => Some((Ok(Bytes::from(chunk)), (export, next))),
            Err(e) => {
                tracing::warn!(error = %e, "link export failed mid-way; the response is cut short");
                Some((Err(std::io::Error::other(e.to_string())), (export, None)))
            }
        }
    });
    let body = futures::stream::once(async move { Ok(Bytes::from(first_chunk)) }).chain(rest);
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

/// What the later batches of one export need.
struct Export {
    db: Db,
    gate: super::limits::RenderGate,
    account_id: String,
    query: ListQuery,
    format: ExportFormat,
}

impl Export {
    /// The batch after `cursor`, written, and where the one after it starts.
    async fn next_chunk(
        &self,
        cursor: &ExportCursor,
    ) -> Result<(String, Option<ExportCursor>), StoreError> {
        let _place = self.gate.turn().await;
        let batch = self
            .db
            .export_links(&self.account_id, &self.query, Some(cursor), BATCH)
            .await?;
        let mut chunk = String::new();
        write_batch(&mut chunk, self.format, &batch);
        Ok((chunk, batch.next))
    }
}

/// Appends a batch's links in `format`.
fn write_batch(out: &mut String, format: ExportFormat, batch: &ExportBatch) {
    for l in &batch.links {
        match format {
            ExportFormat::Csv => csv_row(out, l),
            ExportFormat::Ndjson => json_line(out, l),
        }
    }
}

/// One link as a CSV record.
fn csv_row(out: &mut String, e: &ExportedLink) {
    let l = &e.link;
    let short_url = l.short_url();
    let tags = l.tags.join("|");
    let clicks = e.clicks.to_string();
    csv::row(
        out,
        &[
            &l.id,
            &short_url,
            &l.short_code,
            &l.domain,
            &l.long_url,
            l.title.as_deref().unwrap_or_default(),
            &tags,
            &l.group_id,
            &e.group_name,
            bool_text(l.is_active),
            &l.created_at,
            l.expires_at.as_deref().unwrap_or_default(),
            bool_text(l.forward_query),
            &clicks,
        ],
    );
}

fn bool_text(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// One link as an NDJSON line.
fn json_line(out: &mut String, e: &ExportedLink) {
    let l = &e.link;
    let line = JsonLine {
        id: &l.id,
        short_url: l.short_url(),
        short_code: &l.short_code,
        domain: &l.domain,
        long_url: &l.long_url,
        title: l.title.as_deref(),
        tags: &l.tags,
        group_id: &l.group_id,
        group_name: &e.group_name,
        is_active: l.is_active,
        created_at: &l.created_at,
        expires_at: l.expires_at.as_deref(),
        forward_query: l.forward_query,
        clicks: e.clicks,
    };
    // Strings, booleans and integers only: serialising cannot fail.
    if let Ok(json) = serde_json::to_string(&line) {
        out.push_str(&json);
        out.push('\n');
    }
}
