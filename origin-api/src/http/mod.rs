//! The HTTP surface: one router per resource, merged here with the cross-cutting layers.

mod client_ip;
mod dynamic;
mod error;
mod extract;
mod groups;
mod internal;
mod links;
pub mod openapi;
mod stats;

pub use client_ip::{ClientIpSource, IpRateLimiter};
pub use error::ApiError;

use crate::db::Db;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router, middleware};
use std::sync::Arc;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// Shared state of every handler.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// How long a request may take before it is answered with 503.
    pub request_timeout: Duration,
    /// Where the client address of a request comes from.
    pub client_ip: ClientIpSource,
    /// Per-IP limit of the public validation endpoint.
    pub validate_limiter: Arc<IpRateLimiter>,
    /// Secret of the edge worker's calls to `/internal/…`; None disables those routes.
    pub internal_secret: Option<String>,
    /// Wakes the publisher after a change, and its counters.
    pub publisher: crate::publisher::PublisherHandle,
}

/// The whole application as a router, so tests can also drive it in-process.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(links::router())
        .merge(groups::router())
        .merge(dynamic::router())
        .merge(stats::router())
        .merge(internal::router())
        .merge(openapi::router())
        .route("/healthz", get(healthz))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), timeout))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal.into_response()
        }))
        // Spans carry method and path; headers (and so API keys) are never recorded.
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Bounds every request; a slow database becomes a clean 503 instead of a hung client.
async fn timeout(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    match tokio::time::timeout(state.request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!("request timed out");
            ApiError::Unavailable.into_response()
        }
    }
}

/// Liveness plus the publisher's lag (outbox rows not yet at the edge).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    operation_id = "healthz",
    responses(
        (status = 200, description = "The database answers", body = openapi::Health),
        (status = 503, description = "The database does not answer", body = openapi::Unhealthy),
    ),
)]
async fn healthz(State(state): State<AppState>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    match state.db.outbox_lag().await {
        Ok(lag) => Json(serde_json::json!({
            "status": "ok",
            "publisher": {
                "pending": lag.pending,
                "oldest_age_ms": lag.oldest_age_ms,
                "published": state.publisher.stats.published.load(Relaxed),
                "failures": state.publisher.stats.failures.load(Relaxed),
                "last_success_ms": state.publisher.stats.last_success_ms.load(Relaxed),
            }
        }))
        .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({"status": "unavailable"})),
            )
                .into_response()
        }
    }
}
