//! `POST /api/v1/external/links/bulk-create`: up to 100 create-link bodies in one request, each created (or
//! refused) exactly as create-link would, in request order.

use super::error::{ApiError, AuthErrors, ErrorBody, ErrorCode, ServerErrors, rate_limit_headers};
use super::extract::{Caller, JsonBody};
use super::links::{CreateLinkBody, CreatedLink};
use super::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shortlink_store::RateLimitState;
use utoipa::ToSchema;

/// Most links in one request.
pub(crate) const MAX_LINKS: usize = 100;

/// Largest bulk body: a hundred create-link bodies at their largest (~2.3 KB each), with room for whitespace.
const MAX_BULK_BODY_BYTES: usize = 512 * 1024;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/links/bulk-create", post(bulk_create))
}

/// The request: create-link bodies.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkCreateBody {
    /// 1 to 100 objects, each a create-link body. Each object is checked on its own, by create-link's rules (so
    /// the schema here is only "an object"): one that is not a valid create-link body gets its own `400` entry
    /// and the others are still created. An entry that is not an object refuses the whole request.
    #[schema(value_type = Vec<Object>, min_items = 1, max_items = 100)]
    links: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// One entry of the answer, at the index of its request.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum BulkResult {
    /// Created.
    Created {
        /// 201.
        #[schema(minimum = 201, maximum = 201)]
        status: u16,
        /// The link as create-link returns it.
        link: CreatedLink,
    },
    /// Refused, as create-link would have refused it.
    Refused {
        /// 400 or 429.
        status: u16,
        /// create-link's 400 codes, or `rate_limited` for a 429.
        error_code: ErrorCode,
        /// What went wrong.
        detail: String,
    },
}

/// The outcomes, in request order.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BulkCreateResponse {
    /// One per requested link.
    results: Vec<BulkResult>,
}

/// Creates up to 100 links in request order. Each success counts against the key's 100 creations per rolling
/// hour like create-link; once an entry is refused with `429`, the remaining entries are `429` too, without
/// being evaluated. The response carries the
/// `X-RateLimit-*` headers as they stand after the last entry.
#[utoipa::path(
    post,
    path = "/api/v1/external/links/bulk-create",
    tag = "links",
    operation_id = "bulk_create_links",
    request_body(content = BulkCreateBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 200, description = "One outcome per requested link, in order", body = BulkCreateResponse),
        (status = 400, description = "`validation_error` (no links, more than 100, not a list) or `invalid_json`; \
            nothing was created", body = ErrorBody),
        AuthErrors,
        (status = 413, description = "`payload_too_large`: body over 512 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn bulk_create(
    State(state): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody<BulkCreateBody, MAX_BULK_BODY_BYTES>,
) -> Result<Response, ApiError> {
    if body.links.is_empty() || body.links.len() > MAX_LINKS {
        return Err(ApiError::Validation(format!(
            "links must hold 1 to {MAX_LINKS} create-link bodies"
        )));
    }
    let mut results = Vec::with_capacity(body.links.len());
    let mut last_limit: Option<RateLimitState> = None;
    // The state of the first entry refused with 429, once there is one.
    let mut limited: Option<RateLimitState> = None;
    // One after another, so the limit is spent in request order; each creation is its own transaction, with the
    // same guarantees as create-link under concurrency.
    for value in body.links {
        // Once an entry met the limit, the rest would too (a creation frees up only when the oldest one leaves
        // the hour): they are answered at once, without a transaction each, so a spent key's 100-entry request
        // costs the database one query, not a hundred.
        if let Some(limit) = limited {
            let refused = ApiError::RateLimited(limit);
            let (status, error_code) = refused.status_and_code();
            super::observe::rate_limited("create_link");
            results.push(BulkResult::Refused {
                status: status.as_u16(),
                error_code,
                detail: refused.to_string(),
            });
            continue;
        }
        let outcome = async {
            let item: CreateLinkBody =
                serde_path_to_error::deserialize(serde_json::Value::Object(value))
                    .map_err(|e| ApiError::Validation(format!("not a create-link body: {e}")))?;
            let req = item.prepare(&state, &caller).await?;
            Ok::<_, ApiError>(state.db.create_link(&req).await?)
        }
        .await;
        results.push(match outcome {
            Ok((link, limit)) => {
                last_limit = Some(limit);
                BulkResult::Created {
                    status: 201,
                    link: link.into(),
                }
            }
            Err(e) => {
                let (status, error_code) = e.status_and_code();
                match &e {
                    ApiError::RateLimited(limit) => {
                        super::observe::rate_limited("create_link");
                        last_limit = Some(*limit);
                        limited = Some(*limit);
                    }
                    // The key went away or the database failed: the whole request fails as create-link would;
                    // what was created so far stays created and is in the list.
                    _ if status.as_u16() != 400 => return Err(e),
                    _ => {}
                }
                BulkResult::Refused {
                    status: status.as_u16(),
                    error_code,
                    detail: e.to_string(),
                }
            }
        });
    }
    if results
        .iter()
        .any(|r| matches!(r, BulkResult::Created { .. }))
    {
        state.publisher.wake.notify_one();
    }
    let mut response = Json(BulkCreateResponse { results }).into_response();
    if let Some(limit) = &last_limit {
        rate_limit_headers(limit, response.headers_mut());
    }
    Ok(response)
}
