//! `GET /healthz`: liveness, and the publisher's lag (outbox rows not yet at the edge).

use super::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;
use utoipa::ToSchema;

/// The route of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz))
}

/// The publisher's lag and counters.
#[derive(Serialize, ToSchema)]
pub(crate) struct PublisherHealth {
    /// Outbox rows not yet at the edge.
    pending: i64,
    /// Milliseconds since the oldest pending row was written (0 when none).
    oldest_age_ms: i64,
    /// Keys published since start.
    published: u64,
    /// Failed rounds since start.
    failures: u64,
    /// UNIX milliseconds of the last successful round (0: none yet).
    last_success_ms: i64,
}

/// The origin is up and its database answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct Health {
    /// Always `ok`.
    #[schema(pattern = "^ok$")]
    status: &'static str,
    /// The publisher.
    publisher: PublisherHealth,
}

/// The database does not answer.
#[derive(Serialize, ToSchema)]
pub(crate) struct Unhealthy {
    /// Always `unavailable`.
    #[schema(pattern = "^unavailable$")]
    status: &'static str,
}

/// Liveness plus the publisher's lag (outbox rows not yet at the edge).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    operation_id = "healthz",
    responses(
        (status = 200, description = "The database answers", body = Health),
        (status = 503, description = "The database does not answer", body = Unhealthy),
    ),
)]
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    match state.db.outbox_lag().await {
        Ok(lag) => {
            let stats = &state.publisher.stats;
            Json(Health {
                status: "ok",
                publisher: PublisherHealth {
                    pending: lag.pending,
                    oldest_age_ms: lag.oldest_age_ms,
                    published: stats.published.load(Relaxed),
                    failures: stats.failures.load(Relaxed),
                    last_success_ms: stats.last_success_ms.load(Relaxed),
                },
            })
            .into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Unhealthy {
                    status: "unavailable",
                }),
            )
                .into_response()
        }
    }
}
