//! The Prometheus listener (`--metrics-listen`): the process's one recorder, and `GET /metrics`, which reads the
//! figures that are states (outbox, publisher, pool) at scrape time. Apart from [`super::observe`], whose counters
//! every handler calls, so that those handlers do not depend on the application state through it.

use super::state::AppState;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;

/// Latency buckets of `http_request_duration_seconds`: from a cached read (sub-millisecond) to the 10 s bound.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The process's one Prometheus recorder, installed the first time metrics are asked for (a recorder is global to
/// the process: two servers in one test process share it).
pub fn metrics_handle() -> Result<PrometheusHandle, String> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("http_request_duration_seconds".to_owned()),
                    LATENCY_BUCKETS,
                )
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// The metrics listener's routes: `GET /metrics`.
pub(crate) fn metrics_router(state: AppState, handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((state, handle))
}

/// Reads the figures that are states rather than events (outbox, publisher, pool) at scrape time, then renders.
async fn scrape(State((state, handle)): State<(AppState, PrometheusHandle)>) -> Response {
    match state.db.outbox_lag().await {
        Ok(lag) => {
            metrics::gauge!("publisher_pending_rows").set(lag.pending as f64);
            metrics::gauge!("publisher_oldest_age_seconds").set(lag.oldest_age_ms as f64 / 1000.0);
            metrics::gauge!("database_up").set(1.0);
        }
        Err(_) => metrics::gauge!("database_up").set(0.0),
    }
    let stats = &state.publisher.stats;
    metrics::counter!("publisher_published_keys_total").absolute(stats.published.load(Relaxed));
    metrics::counter!("publisher_failed_rounds_total").absolute(stats.failures.load(Relaxed));
    let pool = state.db.pool_use();
    metrics::gauge!("database_pool_connections", "state" => "open").set(f64::from(pool.open));
    metrics::gauge!("database_pool_connections", "state" => "idle").set(f64::from(pool.idle));
    handle.run_upkeep();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
        .into_response()
}
