//! `/api/v1/external/webhooks`: the account's webhook endpoints (at most 20), their signing secrets, test pings,
//! the log of delivery attempts and redeliveries. The events themselves are written by the store with each change
//! and sent by the delivery loop ([`crate::webhooks`]). Another account's endpoint answers exactly like an unknown
//! one (404). Every write counts against the key's budget of management writes.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors, WriteLimitErrors};
use super::extract::{Caller, JsonBody, ResourceId};
use super::limits;
use super::link_edits::explicit_null;
use super::state::AppState;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shortlink_store::domain::PageQuery;
use shortlink_store::{Actor, AttemptRow, EventType, NewWebhook, WebhookEndpoint, WebhookPatch};
use std::time::Duration;
use utoipa::ToSchema;
use webhook_sender::{UrlError, WebhookSecret};

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/external/webhooks",
            get(list_webhooks).post(create_webhook),
        )
        .route(
            "/api/v1/external/webhooks/{id}",
            get(get_webhook)
                .patch(update_webhook)
                .delete(delete_webhook),
        )
        .route(
            "/api/v1/external/webhooks/{id}/rotate-secret",
            post(rotate_secret),
        )
        .route("/api/v1/external/webhooks/{id}/test", post(test_webhook))
        .route(
            "/api/v1/external/webhooks/{id}/deliveries",
            get(list_deliveries),
        )
        .route(
            "/api/v1/external/webhooks/{id}/deliveries/{event_id}/redeliver",
            post(redeliver),
        )
        // Creation and rotation answer with a signing secret: no cache may keep one.
        .route_layer(axum::middleware::map_response(no_store))
}

async fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

/// The event types an endpoint may subscribe to (documentation of the bodies; never built).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) enum EventName {
    /// A link was created.
    #[schema(rename = "link.created")]
    LinkCreated,
    /// A link was changed, paused or resumed.
    #[schema(rename = "link.updated")]
    LinkUpdated,
    /// A link was deleted.
    #[schema(rename = "link.deleted")]
    LinkDeleted,
    /// A link's clicks of one ingested report.
    #[schema(rename = "link.clicked")]
    LinkClicked,
    /// A group was created.
    #[schema(rename = "group.created")]
    GroupCreated,
    /// A group was renamed or its settings replaced.
    #[schema(rename = "group.updated")]
    GroupUpdated,
    /// A group was deleted.
    #[schema(rename = "group.deleted")]
    GroupDeleted,
}

/// A webhook endpoint (never with its secret).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Webhook {
    /// Endpoint id.
    #[schema(format = Uuid)]
    id: String,
    /// Where events are POSTed.
    #[schema(example = "https://crm.example.com/hooks/shortlink")]
    url: String,
    /// The event types it receives.
    #[schema(value_type = Vec<EventName>)]
    events: Vec<&'static str>,
    /// What the account wrote about it; `null`: nothing.
    description: Option<String>,
    /// Whether events are sent to it.
    enabled: bool,
    /// UTC, six fractional digits and `Z`.
    #[schema(format = DateTime, example = "2026-11-22T04:48:11.614362Z")]
    created_at: String,
    /// When its current unbroken run of failed deliveries began (five days of it disable the endpoint); `null`
    /// while it succeeds.
    #[schema(format = DateTime)]
    failing_since: Option<String>,
    /// Why it is disabled (`null` while enabled): by the account, or failing for five days, with the last error.
    disabled_reason: Option<String>,
}

impl From<WebhookEndpoint> for Webhook {
    fn from(e: WebhookEndpoint) -> Self {
        Self {
            id: e.id,
            url: e.url,
            events: e.events.iter().map(|t| t.as_str()).collect(),
            description: e.description,
            enabled: e.enabled,
            created_at: e.created_at.to_iso8601(),
            failing_since: e.failing_since.map(|t| t.to_iso8601()),
            disabled_reason: e.disabled_reason,
        }
    }
}

/// A webhook endpoint with its signing secret: the answer of creation and of rotate-secret only.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhookWithSecret {
    /// Endpoint id.
    #[schema(format = Uuid)]
    id: String,
    /// Where events are POSTed.
    url: String,
    /// The event types it receives.
    #[schema(value_type = Vec<EventName>)]
    events: Vec<&'static str>,
    /// What the account wrote about it; `null`: nothing.
    description: Option<String>,
    /// Whether events are sent to it.
    enabled: bool,
    /// UTC, six fractional digits and `Z`.
    #[schema(format = DateTime, example = "2026-11-22T04:48:11.614362Z")]
    created_at: String,
    /// See `Webhook`.
    #[schema(format = DateTime)]
    failing_since: Option<String>,
    /// See `Webhook`.
    disabled_reason: Option<String>,
    /// The signing secret (Standard Webhooks: `whsec_` and base64 of 32 bytes). Shown here only: keep it in the
    /// receiver to verify `webhook-signature`.
    #[schema(pattern = "^whsec_[A-Za-z0-9+/]+={0,2}$")]
    secret: String,
}

impl WebhookWithSecret {
    fn new(e: WebhookEndpoint, secret: String) -> Self {
        let w = Webhook::from(e);
        Self {
            id: w.id,
            url: w.url,
            events: w.events,
            description: w.description,
            enabled: w.enabled,
            created_at: w.created_at,
            failing_since: w.failing_since,
            disabled_reason: w.disabled_reason,
            secret,
        }
    }
}

/// The account's endpoints.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhookList {
    /// Oldest first.
    results: Vec<Webhook>,
}

/// A new endpoint.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateWebhookBody {
    /// `https://` (also `http://` when the operator allows private targets), at most 2048 characters, no user
    /// name or password; its host must resolve, to public addresses only (unless the operator allows private
    /// targets).
    #[schema(
        max_length = 2048,
        pattern = "^https?://",
        example = "https://crm.example.com/hooks/shortlink"
    )]
    url: String,
    /// The event types to receive: at least one (duplicates are ignored).
    #[schema(value_type = Vec<EventName>, min_items = 1)]
    events: Vec<String>,
    /// At most 500 characters; absent, `null` or blank: none.
    #[serde(default)]
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// Changes to an endpoint; absent fields stay as they are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateWebhookBody {
    /// A new URL, by creation's rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https?://")]
    url: Option<String>,
    /// New subscriptions (at least one).
    #[serde(default)]
    #[schema(value_type = Option<Vec<EventName>>, min_items = 1)]
    events: Option<Vec<String>>,
    /// A new description; `null` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 500)]
    description: Option<Option<String>>,
    /// false disables the endpoint (its pending deliveries are dropped); true enables it again, starting fresh
    /// (what happened while it was disabled is not sent).
    #[serde(default)]
    enabled: Option<bool>,
}

/// What a test ping came to.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TestOutcome {
    /// The ping's event id (its `webhook-id`); it is in the endpoint's delivery log.
    #[schema(example = "msg_2b1f0c8e4f0a4d6c9a3e5b7d1f2a4c6e")]
    event_id: String,
    /// The receiver answered 2xx.
    success: bool,
    /// The receiver's status, when it answered.
    status_code: Option<u16>,
    /// How long the attempt took.
    duration_ms: u64,
    /// Why it failed (`null` on success): "HTTP 500", "timeout", "connection refused", "address not public", …
    error: Option<String>,
}

/// One attempt of the delivery log.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryAttempt {
    /// The attempt's id: a decimal integer as a string (increasing, but treat it as opaque).
    #[schema(pattern = "^[0-9]+$", example = "42")]
    id: String,
    /// The event's id (its `webhook-id`).
    event_id: String,
    /// The event's type (`ping` for tests).
    #[schema(example = "link.created")]
    event_type: String,
    /// 1 for the first try, 2 for the first retry, …; a redelivery starts at 1 again.
    #[schema(minimum = 1)]
    attempt: i64,
    /// When it was made: UTC, six fractional digits and `Z`.
    #[schema(format = DateTime, example = "2026-11-22T04:48:11.614362Z")]
    at: String,
    /// The receiver's HTTP status, `null` when it did not answer.
    status_code: Option<i64>,
    /// How long it took, in milliseconds.
    #[schema(minimum = 0)]
    duration_ms: i64,
    /// Why it failed; `null` on success.
    error: Option<String>,
}

impl From<AttemptRow> for DeliveryAttempt {
    fn from(a: AttemptRow) -> Self {
        Self {
            id: a.id.to_string(),
            event_id: a.event_id,
            event_type: a.event_type,
            attempt: a.attempt,
            at: a.at.to_iso8601(),
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error,
        }
    }
}

/// One page of the delivery log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryLog {
    /// Offset applied.
    offset: u64,
    /// Limit applied.
    limit: u32,
    /// All of the endpoint's attempts of the last 30 days.
    total: i64,
    /// The page.
    results: Vec<DeliveryAttempt>,
}

/// A redelivery accepted: the event is due now, with a fresh retry schedule.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Redelivery {
    /// The endpoint.
    #[schema(format = Uuid)]
    endpoint_id: String,
    /// The event.
    event_id: String,
}

/// Query parameters of the delivery log (documentation; the handler parses the raw query as the activity log).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct DeliveryParams {
    /// Page size, plain decimal digits.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<u32>,
    /// Attempts to skip, plain decimal digits.
    #[param(minimum = 0, maximum = 1_000_000_000, default = 0)]
    offset: Option<u64>,
}

/// How long the creation-time DNS check may take before the URL is refused as not resolving.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

fn url_error(e: UrlError) -> ApiError {
    ApiError::InvalidWebhookUrl(e.to_string())
}

/// The URL's form (scheme, length, credentials, host; an IP literal's range): before the write is charged.
fn check_url(state: &AppState, raw: &str) -> Result<webhook_sender::Url, ApiError> {
    webhook_sender::check_url(raw, state.webhooks.settings.allow_private).map_err(url_error)
}

/// The URL's host resolves now, to public addresses only (unless the operator allows private targets); each
/// delivery checks again at connect time.
async fn resolve(state: &AppState, url: &webhook_sender::Url) -> Result<(), ApiError> {
    let allow = state.webhooks.settings.allow_private;
    match tokio::time::timeout(RESOLVE_TIMEOUT, webhook_sender::resolve_public(url, allow)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(url_error(e)),
        Err(_) => Err(url_error(UrlError::DoesNotResolve)),
    }
}

fn events(names: &[String]) -> Result<Vec<EventType>, ApiError> {
    EventType::parse_subscriptions(names).map_err(|e| ApiError::UnknownEventType(e.to_string()))
}

/// The account's webhook endpoints, oldest first (no secrets).
#[utoipa::path(
    get,
    path = "/api/v1/external/webhooks",
    tag = "webhooks",
    operation_id = "list_webhooks",
    security(("Token" = [])),
    responses(
        (status = 200, description = "The endpoints", body = WebhookList),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn list_webhooks(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<WebhookList>, ApiError> {
    let endpoints = state.db.webhooks(&caller.account_id).await?;
    Ok(Json(WebhookList {
        results: endpoints.into_iter().map(Webhook::from).collect(),
    }))
}

/// Creates a webhook endpoint with a fresh signing secret, shown in this answer only. At most 20 per account.
#[utoipa::path(
    post,
    path = "/api/v1/external/webhooks",
    tag = "webhooks",
    operation_id = "create_webhook",
    request_body(content = CreateWebhookBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 201, description = "The endpoint, with its secret", body = WebhookWithSecret, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`invalid_webhook_url`, `unknown_event_type`, `validation_error` (naming the \
            field) or `invalid_json`", body = ErrorBody),
        AuthErrors,
        (status = 409, description = "`webhook_limit`: the account has 20 endpoints", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn create_webhook(
    State(state): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody<CreateWebhookBody>,
) -> Result<Response, ApiError> {
    let url = check_url(&state, &body.url)?;
    let events = events(&body.events)?;
    let limit = state.limits.charge(&state.db, &caller).await?;
    let created = async {
        resolve(&state, &url).await?;
        let secret = WebhookSecret::generate();
        let new = NewWebhook {
            url: url.to_string(),
            events,
            description: body.description,
            secret: secret.expose().to_owned(),
        };
        let endpoint = state
            .db
            .create_webhook(&caller.account_id, &new, &Actor::ApiKey)
            .await?;
        Ok((
            StatusCode::CREATED,
            Json(WebhookWithSecret::new(endpoint, new.secret)),
        ))
    }
    .await;
    Ok(limits::answer(&limit, &state.publisher.wake, created))
}

/// One of the account's webhook endpoints (no secret).
#[utoipa::path(
    get,
    path = "/api/v1/external/webhooks/{id}",
    tag = "webhooks",
    operation_id = "get_webhook",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The endpoint", body = Webhook),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn get_webhook(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Json<Webhook>, ApiError> {
    Ok(Json(
        state.db.webhook(&caller.account_id, &id).await?.into(),
    ))
}

/// Changes an endpoint: its URL, events, description, or whether it is enabled. Disabling drops its pending
/// deliveries; enabling a disabled endpoint starts it fresh.
#[utoipa::path(
    patch,
    path = "/api/v1/external/webhooks/{id}",
    tag = "webhooks",
    operation_id = "update_webhook",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id")),
    request_body(content = UpdateWebhookBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The endpoint as it now is", body = Webhook, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`invalid_webhook_url`, `unknown_event_type`, `validation_error` (naming the \
            field, an unknown field) or `invalid_json`", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn update_webhook(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    JsonBody(body): JsonBody<UpdateWebhookBody>,
) -> Result<Response, ApiError> {
    let url = body
        .url
        .as_deref()
        .map(|u| check_url(&state, u))
        .transpose()?;
    let events = body.events.as_deref().map(events).transpose()?;
    let limit = state.limits.charge(&state.db, &caller).await?;
    let updated = async {
        if let Some(url) = &url {
            // Another account's id must not learn anything from a refused URL: look first.
            state.db.webhook(&caller.account_id, &id).await?;
            resolve(&state, url).await?;
        }
        let patch = WebhookPatch {
            url: url.map(|u| u.to_string()),
            events,
            description: body.description,
            enabled: body.enabled,
        };
        let endpoint = state
            .db
            .update_webhook(&caller.account_id, &id, &patch, &Actor::ApiKey)
            .await?;
        Ok(Json(Webhook::from(endpoint)))
    }
    .await;
    Ok(limits::answer(&limit, &state.publisher.wake, updated))
}

/// Deletes an endpoint, with its pending deliveries and its log.
#[utoipa::path(
    delete,
    path = "/api/v1/external/webhooks/{id}",
    tag = "webhooks",
    operation_id = "delete_webhook",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id")),
    security(("Token" = [])),
    responses(
        (status = 204, description = "Deleted", headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn delete_webhook(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let deleted = state
        .db
        .delete_webhook(&caller.account_id, &id, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        deleted.map(|()| StatusCode::NO_CONTENT),
    ))
}

/// Replaces the endpoint's signing secret; the answer carries the new one (shown here only). Every attempt from
/// now on, retries of earlier events included, is signed with it.
#[utoipa::path(
    post,
    path = "/api/v1/external/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    operation_id = "rotate_webhook_secret",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The endpoint with its new secret", body = WebhookWithSecret, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let secret = WebhookSecret::generate();
    let rotated = state
        .db
        .rotate_webhook_secret(&caller.account_id, &id, secret.expose(), &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        rotated.map(|e| Json(WebhookWithSecret::new(e, secret.expose().to_owned()))),
    ))
}

/// Sends a `ping` event to the endpoint now (enabled or not) and answers with what it came to (a receiver's
/// failure is a `200` whose `success` is false). One attempt, 5 s timeout, no retry; it is in the delivery log.
#[utoipa::path(
    post,
    path = "/api/v1/external/webhooks/{id}/test",
    tag = "webhooks",
    operation_id = "test_webhook",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The ping's outcome", body = TestOutcome, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn test_webhook(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let tested = async {
        let (event_id, outcome) =
            crate::webhooks::test_ping(&state.db, &state.webhooks, &caller.account_id, &id).await?;
        Ok(Json(TestOutcome {
            event_id,
            success: outcome.success,
            status_code: outcome.status_code,
            duration_ms: outcome.duration_ms,
            error: outcome.error,
        }))
    }
    .await;
    Ok(limits::answer(&limit, &state.publisher.wake, tested))
}

/// The endpoint's delivery attempts of the last 30 days, newest first (`at`, then `id`). Pagination as list
/// links: unknown parameters are ignored; a known one given twice is refused with its `invalid_*` code.
#[utoipa::path(
    get,
    path = "/api/v1/external/webhooks/{id}/deliveries",
    tag = "webhooks",
    operation_id = "list_webhook_deliveries",
    params(("id" = String, Path, format = Uuid, description = "Endpoint id"), DeliveryParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "One page of attempts", body = DeliveryLog),
        (status = 400, description = "`invalid_limit` or `invalid_offset`", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn list_deliveries(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Json<DeliveryLog>, ApiError> {
    let q = PageQuery::parse(query.as_deref())?;
    let page = state
        .db
        .webhook_attempts(
            &caller.account_id,
            &id,
            i64::from(q.limit),
            // Bounded by the parser (1,000,000,000).
            i64::try_from(q.offset).unwrap_or(i64::MAX),
        )
        .await?;
    Ok(Json(DeliveryLog {
        offset: q.offset,
        limit: q.limit,
        total: page.total,
        results: page
            .results
            .into_iter()
            .map(DeliveryAttempt::from)
            .collect(),
    }))
}

/// An event id as we make them: `msg_` and 32 lowercase hex digits.
fn is_event_id(raw: &str) -> bool {
    raw.strip_prefix("msg_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Sends one of the endpoint's events again: its delivery is due now with a fresh retry schedule, in its place in
/// its link's order. One being sent right now is left to finish.
#[utoipa::path(
    post,
    path = "/api/v1/external/webhooks/{id}/deliveries/{event_id}/redeliver",
    tag = "webhooks",
    operation_id = "redeliver_webhook_event",
    params(
        ("id" = String, Path, format = Uuid, description = "Endpoint id"),
        ("event_id" = String, Path, description = "Event id (`msg_…`) from the delivery log"),
    ),
    security(("Token" = [])),
    responses(
        (status = 202, description = "Queued", body = Redelivery, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such endpoint in this account, or no such event of it (events \
            are kept 30 days)", body = ErrorBody),
        (status = 409, description = "`webhook_disabled`: the endpoint is disabled", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn redeliver(
    State(state): State<AppState>,
    Caller(caller): Caller,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path((raw_id, event_id)) = path.map_err(|_| ApiError::NotFound)?;
    let id = uuid::Uuid::try_parse(&raw_id)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| ApiError::NotFound)?;
    if !is_event_id(&event_id) {
        return Err(ApiError::NotFound);
    }
    let limit = state.limits.charge(&state.db, &caller).await?;
    let queued = state
        .db
        .redeliver_webhook_event(&caller.account_id, &id, &event_id)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        queued.map(|()| {
            (
                StatusCode::ACCEPTED,
                Json(Redelivery {
                    endpoint_id: id,
                    event_id,
                }),
            )
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_ours_only() {
        assert!(is_event_id("msg_0123456789abcdef0123456789abcdef"));
        assert!(!is_event_id("msg_0123456789ABCDEF0123456789abcdef"));
        assert!(!is_event_id("msg_0123"));
        assert!(!is_event_id("0123456789abcdef0123456789abcdef"));
    }
}
