//! `/internal/v1/…`: what the edge worker asks of the origin, authenticated with the shared
//! `INTERNAL_API_SECRET` (Bearer, compared in constant time, at least 32 bytes). Without a configured secret
//! these routes do not exist. Wrong secrets are throttled per client address.

use super::client_ip::ClientIp;
use super::error::ApiError;
use super::extract::JsonBody;
use super::state::AppState;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::{header, request::Parts};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kv_model::ClickBatch;
use kv_model::ResolvedLink;
use secrecy::ExposeSecret;
use shortlink_store::Ingested;
use shortlink_store::domain::ClickBatchId;
use subtle::ConstantTimeEq;

/// Most events in one batch, and the body limit that fits them: an event with every fact at its bound (a
/// 256-byte User-Agent, region, city and three UTM values of 100 characters, up to 4 bytes each) is about 3 KB.
const MAX_EVENTS: usize = 1000;
const MAX_CLICKS_BODY: usize = 4 * 1024 * 1024;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/internal/v1/links/{host}/{code}", get(resolve))
        .route("/internal/v1/clicks", post(clicks))
        .route(
            "/internal/v1/password-attempts",
            post(super::link_attempts::reserve),
        )
        .route(
            "/internal/v1/password-attempts/give-back",
            post(super::link_attempts::give_back),
        )
}

/// Proof that the caller is our edge worker.
pub(super) struct Edge;

impl FromRequestParts<AppState> for Edge {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // Not configured: behave as if the route did not exist.
        let Some(secret) = state.internal_secret.as_ref() else {
            return Err(ApiError::NotFound);
        };
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if bool::from(given.as_bytes().ct_eq(secret.expose_secret().as_bytes())) {
            return Ok(Edge);
        }
        // Only failures are charged, and the right secret is never refused: the worker's calls leave Cloudflare
        // from addresses every worker shares, so a limit that refused them too would let anyone's worker lock ours
        // out. Guessing is hopeless anyway with the 32-byte minimum; this keeps a scanner from costing more than
        // a cheap 429.
        let Ok(ClientIp(ip)) = ClientIp::from_request_parts(parts, state).await;
        match state.internal_auth_limiter.check(ip) {
            Ok(()) => Err(ApiError::Unauthenticated("invalid internal credentials")),
            Err(retry_after) => Err(ApiError::TooManyRequests {
                limit: "internal_auth",
                retry_after,
            }),
        }
    }
}

/// The KV record of a link, for a worker that missed it in KV (a link created seconds ago), with its group's
/// record: the group may be as new as the link, and without it the worker would skip the group's rules.
async fn resolve(
    State(state): State<AppState>,
    _edge: Edge,
    Path((host, code)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let Some(link) = state.db.link_record(&host, &code).await? else {
        return Err(ApiError::NotFound);
    };
    let group = state.db.group_record(&link.group_id).await?;
    Ok(Json(ResolvedLink::new(link, group)).into_response())
}

/// A click report. A `batch_id` seen before answers `{"stored": 0, "duplicate": true}` (200: the worker is done
/// with it either way); the first delivery answers `{"stored": n}`.
async fn clicks(
    State(state): State<AppState>,
    _edge: Edge,
    JsonBody(batch): JsonBody<ClickBatch, MAX_CLICKS_BODY>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if batch.events.len() > MAX_EVENTS {
        return Err(ApiError::Validation(format!(
            "at most {MAX_EVENTS} events per batch"
        )));
    }
    let batch_id = batch
        .batch_id
        .as_deref()
        .map(ClickBatchId::parse)
        .transpose()
        .map_err(|e| ApiError::Validation(e.0))?;
    match state
        .db
        .record_clicks(batch_id.as_ref(), batch.events)
        .await?
    {
        Ingested::Stored(stored) => {
            super::observe::clicks_ingested(stored as u64);
            if stored > 0 {
                // Its `link.clicked` events, if any endpoint wants them (not the publisher: clicks are not at the edge).
                state.webhooks.wake.notify_one();
            }
            Ok(Json(serde_json::json!({ "stored": stored })))
        }
        Ingested::Duplicate => {
            super::observe::click_batch_duplicate();
            Ok(Json(serde_json::json!({ "stored": 0, "duplicate": true })))
        }
    }
}
