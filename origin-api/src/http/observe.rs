//! Seeing the origin at work (issue "Production"): a request id on every request and response, one access-log line
//! per request, and Prometheus metrics on a listener of their own.
//!
//! What is logged and labelled is the matched route (`/api/v1/external/links/{id}`), never the raw path or query:
//! paths carry ids and short codes, queries may carry anything a client put there, and route labels keep the
//! metrics' cardinality fixed. Headers are never logged (the `Authorization` header is a secret).

use super::state::AppState;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tracing::Instrument;

/// The request id header, accepted from the client or a proxy, else generated; always on the response.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest request id taken from a client: a UUID is 36, a trace id 32; longer ones are replaced.
const MAX_REQUEST_ID: usize = 128;

/// The route a request matched, carried on the response from inside the router (where axum knows it) to the access
/// log outside it (where unmatched requests are seen too).
#[derive(Clone)]
struct Route(String);

/// Inside the router, per route: notes the matched route on the response.
pub(crate) async fn note_route(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let mut response = next.run(req).await;
    if let Some(route) = route {
        response.extensions_mut().insert(Route(route));
    }
    response
}

/// Outermost: drops a request id that is empty, too long or not visible ASCII (it goes into logs), so a fresh one is
/// made in its place.
pub(crate) async fn sanitize_request_id(mut req: Request, next: Next) -> Response {
    let acceptable = |v: &HeaderValue| {
        !v.is_empty() && v.len() <= MAX_REQUEST_ID && v.as_bytes().iter().all(u8::is_ascii_graphic)
    };
    if req
        .headers()
        .get(&REQUEST_ID)
        .is_some_and(|v| !acceptable(v))
    {
        req.headers_mut().remove(&REQUEST_ID);
    }
    next.run(req).await
}

/// One `info` line per request (target `access`): method, route, status, latency, request id; the request's other
/// log lines run inside a span with the same id. Also the request metrics.
pub(crate) async fn access(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let request_id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    let span = tracing::info_span!("request", %method, request_id = %request_id);
    let response = next.run(req).instrument(span).await;
    let latency = started.elapsed();
    let route = response
        .extensions()
        .get::<Route>()
        .map_or("unmatched", |r| r.0.as_str())
        .to_owned();
    let status = response.status().as_u16();
    tracing::info!(
        target: "access",
        %method,
        route,
        status,
        latency_ms = latency.as_secs_f64() * 1000.0,
        request_id = %request_id,
        "request"
    );
    let method = method.to_string();
    metrics::counter!("http_requests_total", "method" => method.clone(), "route" => route.clone(),
        "status" => status.to_string())
    .increment(1);
    metrics::histogram!("http_request_duration_seconds", "method" => method, "route" => route)
        .record(latency.as_secs_f64());
    response
}

/// Counts a refusal by a rate limit (`limit`: which one).
pub(crate) fn rate_limited(limit: &'static str) {
    metrics::counter!("rate_limit_refusals_total", "limit" => limit).increment(1);
}

/// Counts click events stored from the edge.
pub(crate) fn clicks_ingested(n: u64) {
    metrics::counter!("click_events_ingested_total").increment(n);
}

/// Counts click reports answered as duplicates (a batch id seen before: a redelivery).
pub(crate) fn click_batch_duplicate() {
    metrics::counter!("click_batches_duplicate_total").increment(1);
}

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
