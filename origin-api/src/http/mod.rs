//! The HTTP surface: one router per resource, merged here with the cross-cutting layers.

mod audit;
mod bulk;
mod click_export;
mod client_ip;
mod dynamic;
mod error;
mod extract;
mod groups;
mod health;
mod imports;
mod internal;
mod limits;
mod link_attempts;
mod link_edits;
mod link_export;
mod links;
mod metrics;
mod observe;
pub mod openapi;
mod qr;
mod smart_fields;
mod state;
mod stats;
mod tags;
mod webhooks;

pub use client_ip::IpRateLimiter;
pub use error::{ApiError, ErrorBody, ErrorCode};
pub use limits::{Limits, RenderGate};
pub use metrics::metrics_handle;
pub use state::AppState;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Router, middleware};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// Everything: the public API and the worker's `/internal/v1/…` (one listener, the default).
    All,
    /// The public API only (`/internal/v1/…` answer 404 here: they have a listener of their own).
    Public,
    /// `/internal/v1/…` only (the `--internal-listen` listener).
    Internal,
}

/// The whole application as a router, so tests can also drive it in-process.
pub fn app(state: AppState) -> Router {
    app_for(state, Routes::All)
}

/// The routes of one listener, with the cross-cutting layers.
pub fn app_for(state: AppState, routes: Routes) -> Router {
    let mut router = Router::new();
    if routes != Routes::Internal {
        router = router
            .merge(links::router())
            .merge(link_edits::router())
            .merge(link_export::router())
            .merge(imports::router())
            .merge(qr::router())
            .merge(bulk::router())
            .merge(groups::router())
            .merge(dynamic::router())
            .merge(stats::router())
            .merge(click_export::router())
            .merge(audit::router())
            .merge(tags::router())
            .merge(webhooks::router())
            .merge(health::router())
            .merge(openapi::router());
    }
    if routes != Routes::Public {
        router = router.merge(internal::router());
    }
    let mut router = router.with_state(state.clone());
    if routes != Routes::Internal {
        router = router.merge(shortlink_dashboard::router(
            shortlink_dashboard::DashboardState {
                db: state.db.clone(),
                wake: state.publisher.wake.clone(),
                secure_cookies: state
                    .public_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("https://")),
                public_origin: state.public_url.clone(),
                client_addr: state.client_ip.clone(),
                write_limit_per_minute: state.limits.writes_per_minute,
                max_groups_per_account: state.limits.max_groups_per_account,
                mailer: state.mailer.clone(),
                signup_open: state.signup_open,
                webhooks: shortlink_dashboard::DashboardWebhooks {
                    allow_private: state.webhooks.settings.allow_private,
                    tester: std::sync::Arc::new(state.webhooks.clone()),
                },
                imports: shortlink_dashboard::DashboardImports {
                    wake: state.imports.wake.clone(),
                    limit_per_day: state.imports.limit_per_day,
                },
            },
        ));
    }
    router
        .route_layer(middleware::from_fn(observe::note_route))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), timeout))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal.into_response()
        }))
        // Outermost first: a clean request id, made when absent, logged with the request, returned on the response.
        .layer(middleware::from_fn(observe::access))
        .layer(PropagateRequestIdLayer::new(observe::REQUEST_ID))
        .layer(SetRequestIdLayer::new(observe::REQUEST_ID, MakeRequestUuid))
        .layer(middleware::from_fn(observe::sanitize_request_id))
}

/// The metrics listener (`--metrics-listen`): `GET /metrics` in the Prometheus text format.
pub fn metrics_app(
    state: AppState,
    handle: metrics_exporter_prometheus::PrometheusHandle,
) -> Router {
    metrics::metrics_router(state, handle)
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
