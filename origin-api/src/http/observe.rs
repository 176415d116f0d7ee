//! Seeing the origin at work (issue "Production"): a request id on every request and response, one access-log line
//! per request, and the counters of events (the Prometheus listener that renders them is [`super::metrics`]).
//!
//! What is logged and labelled is the matched route (`/api/v1/external/links/{id}`), never the raw path or query:
//! paths carry ids and short codes, queries may carry anything a client put there, and route labels keep the
//! metrics' cardinality fixed. Headers are never logged (the `Authorization` header is a secret).

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
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
