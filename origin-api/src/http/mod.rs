//! The HTTP surface: one router per resource, merged here with the cross-cutting layers.

mod client_ip;
mod dynamic;
mod error;
mod extract;
mod groups;
mod health;
mod internal;
mod links;
pub mod openapi;
mod state;
mod stats;

pub use client_ip::{ClientIpSource, IpRateLimiter};
pub use error::{ApiError, ErrorBody, ErrorCode};
pub use state::AppState;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Router, middleware};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// The whole application as a router, so tests can also drive it in-process.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(links::router())
        .merge(groups::router())
        .merge(dynamic::router())
        .merge(stats::router())
        .merge(internal::router())
        .merge(health::router())
        .merge(openapi::router())
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
