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
#[derive(Debug, Deserialize)]
struct CreateLinkBody {
    long_url: String,
    #[serde(default)]
    short_code: Option<String>,
    #[serde(default)]
    group_id: Option<String>,
    #[serde(default)]
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
        .map_err(|e| ApiError::Validation(e.0))?;
    let group_id = parse_uuid("group_id", body.group_id)?;
    let domain_id = parse_uuid("domain_id", body.domain_id)?;
    if state.db.is_host_blocked(long_url.host()).await? {
        return Err(ApiError::Validation(
            "long_url points to a blocked domain".to_owned(),
        ));
    }
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

#[derive(Serialize)]
struct LinkList {
    offset: u64,
    limit: u32,
    total: i64,
    results: Vec<ListedLink>,
}

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

async fn enabled_domains(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<Results<DomainRow>>, ApiError> {
    Ok(Json(Results {
        results: state.db.enabled_domains(&caller.account_id).await?,
    }))
}
