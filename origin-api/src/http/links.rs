//! `/api/v1/external/links`: create (4.1), list (4.2), enabled domains (4.3).

use super::AppState;
use super::error::{ApiError, rate_limit_headers};
use super::extract::{Caller, JsonBody};
use crate::db::{CreateLink, CreatedLink, DomainRow, ListedLink};
use crate::domain::{ListQuery, LongUrl, ShortCode};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/external/links/create-link", post(create_link))
        .route("/api/v1/external/links", get(list_links))
        .route(
            "/api/v1/external/links/enabled-domains",
            get(enabled_domains),
        )
}

/// create-link request body (spec 4.1). `null` is the same as an absent field.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct CreateLinkBody {
    /// Destination: `https://` (checked literally), at most 2048 characters, no whitespace
    /// or control characters, a valid host, not on the blocked domain list.
    #[schema(
        max_length = 2048,
        pattern = "^https://",
        example = "https://www.rust-lang.org/"
    )]
    long_url: String,
    /// Custom alias, stored lowercase; generated (7 of `[a-z0-9]`) when absent.
    #[serde(default)]
    #[schema(
        min_length = 3,
        max_length = 50,
        pattern = "^[A-Za-z0-9_-]{3,50}$",
        example = "rust"
    )]
    short_code: Option<String>,
    /// One of the account's groups; absent, unknown or another account's: the default group.
    #[serde(default)]
    #[schema(format = Uuid)]
    group_id: Option<String>,
    /// An enabled platform domain or one of the account's active custom domains; otherwise
    /// the oldest enabled platform domain.
    #[serde(default)]
    #[schema(format = Uuid)]
    domain_id: Option<String>,
}

/// A UUID field: refused when it is not one (a typed field of the spec), normalised so that
/// upper- and lowercase spellings find the same row.
fn parse_uuid(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    value
        .map(|v| {
            uuid::Uuid::try_parse(&v)
                .map(|u| u.hyphenated().to_string())
                .map_err(|_| ApiError::Validation(format!("{field} must be a UUID")))
        })
        .transpose()
}

/// Creates a persistent short link (spec 4.1). At most 100 successful creations per
/// rolling hour per API key.
#[utoipa::path(
    post,
    path = "/api/v1/external/links/create-link",
    tag = "links",
    operation_id = "create_link",
    request_body(content = CreateLinkBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 201, description = "The link", body = super::openapi::CreatedLink,
            headers(
                ("X-RateLimit-Limit" = i64, description = "Creations allowed per rolling hour (100)"),
                ("X-RateLimit-Remaining" = i64, description = "Creations left now"),
                ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted creation leaves the window"),
            )),
        (status = 400, description = "`validation_error`, `invalid_json`, `short_code_exists` or `platform_domain_unavailable`",
            body = super::openapi::ErrorBody),
        super::openapi::AuthErrors,
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = super::openapi::ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = super::openapi::ErrorBody),
        (status = 429, description = "`rate_limited`: 100 creations in the last hour with this key",
            body = super::openapi::ErrorBody,
            headers(
                ("X-RateLimit-Limit" = i64, description = "Creations allowed per rolling hour (100)"),
                ("X-RateLimit-Remaining" = i64, description = "0"),
                ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted creation leaves the window"),
                ("Retry-After" = i64, description = "Seconds until one more creation is allowed"),
            )),
        super::openapi::ServerErrors,
    ),
)]
async fn create_link(
    State(state): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody<CreateLinkBody>,
) -> Result<Response, ApiError> {
    let long_url = LongUrl::parse(&body.long_url).map_err(|e| ApiError::Validation(e.0))?;
    let short_code = body
        .short_code
        .as_deref()
        .map(ShortCode::parse)
        .transpose()
        .map_err(|e| ApiError::Validation(e.to_string()))?;
    let group_id = parse_uuid("group_id", body.group_id)?;
    let domain_id = parse_uuid("domain_id", body.domain_id)?;
    let req = CreateLink {
        key_id: caller.key_id,
        account_id: caller.account_id,
        long_url,
        short_code,
        group_id,
        domain_id,
    };
    let (link, limit): (CreatedLink, _) = state.db.create_link(&req).await?;
    // The link is committed with its outbox row; tell the publisher now rather than at its next poll.
    state.publisher.wake.notify_one();
    let mut response = (StatusCode::CREATED, Json(link)).into_response();
    rate_limit_headers(&limit, response.headers_mut());
    Ok(response)
}

/// One page of the account's links, newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LinkList {
    /// Offset applied.
    offset: u64,
    /// Limit applied.
    limit: u32,
    /// Links matching the filter, ignoring pagination.
    total: i64,
    /// The page.
    #[schema(value_type = Vec<super::openapi::ListedLink>)]
    results: Vec<ListedLink>,
}

/// The account's links, newest first (`created_at`, then `id`), with an optional
/// destination filter (spec 4.2). Unknown parameters are ignored; a known one given twice
/// is refused with its `invalid_*` code.
#[utoipa::path(
    get,
    path = "/api/v1/external/links",
    tag = "links",
    operation_id = "list_links",
    params(super::openapi::ListParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "One page of links", body = LinkList),
        (status = 400, description = "`invalid_limit`, `invalid_offset`, `invalid_match` or `invalid_long_url`",
            body = super::openapi::ErrorBody),
        super::openapi::AuthErrors,
        super::openapi::ServerErrors,
    ),
)]
async fn list_links(
    State(state): State<AppState>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<LinkList>, ApiError> {
    let q = ListQuery::parse(query.as_deref()).map_err(|e| ApiError::InvalidQuery {
        code: e.code,
        detail: e.detail,
    })?;
    let filter = q.filter.as_ref().map(|(v, m)| (v.as_str(), *m));
    let page = state
        .db
        .list_links(&caller.account_id, q.limit, q.offset, filter)
        .await?;
    Ok(Json(LinkList {
        offset: q.offset,
        limit: q.limit,
        total: page.total,
        results: page.results,
    }))
}

/// `{"results": [...]}`, the envelope of the unpaginated lists.
#[derive(Serialize)]
pub(crate) struct Results<T> {
    pub(crate) results: Vec<T>,
}

/// The domains usable as `domain_id`: the platform domains and the account's active custom
/// domains, by hostname (spec 4.3).
#[utoipa::path(
    get,
    path = "/api/v1/external/links/enabled-domains",
    tag = "links",
    operation_id = "enabled_domains",
    security(("Token" = [])),
    responses(
        (status = 200, description = "The enabled domains", body = super::openapi::DomainList),
        super::openapi::AuthErrors,
        super::openapi::ServerErrors,
    ),
)]
async fn enabled_domains(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<Results<DomainRow>>, ApiError> {
    Ok(Json(Results {
        results: state.db.enabled_domains(&caller.account_id).await?,
    }))
}
