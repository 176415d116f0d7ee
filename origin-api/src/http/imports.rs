//! `POST /api/v1/external/links/import` and `GET /api/v1/external/links/imports/{id}` (issue 24): a CSV queued as
//! a job that the origin's import runner ([`crate::imports`]) carries out in the background, and its progress.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::Caller;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use shortlink_store::{Actor, ImportStatus, MAX_IMPORT_BYTES};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/external/links/import",
            // One byte over the limit, so that a body over it is ours to refuse with 413 and our error body.
            post(queue_import).layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES + 1)),
        )
        .route("/api/v1/external/links/imports/{id}", get(import_status))
}

/// A queued import.
#[derive(Serialize, ToSchema)]
pub(crate) struct Queued {
    /// The import's id, for `GET links/imports/{id}`.
    #[schema(format = Uuid)]
    id: String,
    /// `queued`.
    status: String,
}

/// An import's progress (documentation of [`ImportStatus`]).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub(crate) struct ImportProgress {
    /// The import's id.
    #[schema(format = Uuid)]
    id: String,
    /// `queued`, `running`, `done` or `failed`.
    #[schema(example = "running")]
    status: String,
    /// Rows below the header.
    total: i64,
    /// Rows dealt with so far.
    processed: i64,
    /// Links created.
    created: i64,
    /// Rows refused.
    failed: i64,
    /// The first 1,000 problems by row: refused rows, and rows created with a made-up short code
    /// (`short_code_exists`, `invalid_short_code`).
    errors: Vec<ImportRowProblem>,
}

/// A row's problem.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub(crate) struct ImportRowProblem {
    /// The row's number as a spreadsheet shows it (the header is row 1).
    row: i64,
    /// `validation_error`, `blocked_destination`, `platform_domain_unavailable`, `import_limit`,
    /// `short_code_exists` or `invalid_short_code`.
    error_code: String,
    /// Why.
    detail: String,
}

/// Queues a CSV file (`Content-Type: text/csv`, UTF-8, at most 20 MB) of links to create in the key's account:
/// columns by header name, `long_url` required; `short_code`, `title`, `tags` (`|`-separated), `group` (a name,
/// created if missing, or an id), `domain` (an enabled hostname of the account), `expires_at`, `is_active`,
/// `forward_query` optional. Our export, Bitly's and Shlink's CSV files are read as they are. Each row follows
/// create-link's rules; imported links count against the account's daily import budget (50,000 by default), not
/// the hourly creation limit. Follow the job with `GET links/imports/{id}`.
#[utoipa::path(
    post,
    path = "/api/v1/external/links/import",
    tag = "links",
    operation_id = "import_links",
    request_body(content = String, content_type = "text/csv"),
    security(("Token" = [])),
    responses(
        (status = 202, description = "Queued", body = Queued),
        (status = 400, description = "`validation_error`: not UTF-8, not CSV, no `long_url` column, or no rows",
            body = ErrorBody),
        AuthErrors,
        (status = 413, description = "`payload_too_large`: over 20 MB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as `text/csv`",
            body = ErrorBody),
        (status = 429, description = "`rate_limited`: the account imported its links of the day, or has 3 \
            imports not yet done", body = ErrorBody,
            headers(("Retry-After" = i64, description = "Seconds until an import is possible"))),
        ServerErrors,
    ),
)]
pub(crate) async fn queue_import(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let csv = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/csv"));
    if !csv {
        return Err(ApiError::UnsupportedMediaType);
    }
    let body = body.map_err(|_| ApiError::PayloadTooLarge)?;
    if body.len() > MAX_IMPORT_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::Validation("the file must be UTF-8 text".to_owned()))?;
    let queued = state
        .db
        .queue_import(
            &caller.account_id,
            &Actor::ApiKey,
            text,
            state.imports.limit_per_day,
        )
        .await;
    // A spent daily budget is create-link's 429 with its headers (ApiError::RateLimited).
    let queued = queued?;
    state.imports.wake.notify_one();
    Ok((
        StatusCode::ACCEPTED,
        Json(Queued {
            id: queued.id,
            status: queued.status,
        }),
    )
        .into_response())
}

/// One of the account's imports: its state, counts and first 1,000 problems. Another account's import, an unknown
/// id and a malformed one all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/imports/{id}",
    tag = "links",
    operation_id = "import_status",
    params(("id" = String, Path, format = Uuid, description = "The import's id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The import", body = ImportProgress),
        AuthErrors,
        (status = 404, description = "`not_found`", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn import_status(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Path(id): Path<String>,
) -> Result<Json<ImportStatus>, ApiError> {
    let id = uuid::Uuid::try_parse(&id)
        .map_err(|_| ApiError::NotFound)?
        .hyphenated()
        .to_string();
    Ok(Json(state.db.import_status(&caller.account_id, &id).await?))
}
