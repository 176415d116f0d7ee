//! The HTTP error: every failure a handler can have, each with an explicit status and a
//! `{detail, error_code}` body (spec 7), so no path leaks a framework default.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shortlink_store::domain::{ListParam, ListQueryError};
use shortlink_store::{RateLimitState, StoreError};
use utoipa::ToSchema;

/// Every failure a handler can return.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A field fails validation (400 `validation_error`).
    #[error("{0}")]
    Validation(String),
    /// The body is not JSON (400 `invalid_json`).
    #[error("{0}")]
    InvalidJson(String),
    /// A list-links query parameter is invalid (400 with a per-parameter code).
    #[error("{detail}")]
    InvalidQuery {
        /// The parameter.
        param: ListParam,
        /// Message.
        detail: String,
    },
    /// 400 `short_code_exists`.
    #[error("short_code is already taken on this domain")]
    ShortCodeExists,
    /// 400 `platform_domain_unavailable`.
    #[error(
        "no platform domain is available at the moment; retry later or pass the domain_id of a custom domain"
    )]
    PlatformDomainUnavailable,
    /// 401: missing header, wrong scheme, malformed, unknown or revoked key.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// 403: a valid key whose account may not use the API.
    #[error("this account does not have API access")]
    Forbidden,
    /// 403: the operator disabled the account.
    #[error("this account is disabled")]
    AccountDisabled,
    /// 400 `default_group`: the account's default group cannot be deleted.
    #[error("the account's default group cannot be deleted")]
    DefaultGroup,
    /// 400 `invalid_webhook_url`: not https (or http with `--webhooks-allow-private`), too long, with
    /// credentials, or a host that does not resolve or resolves to a non-public address.
    #[error("{0}")]
    InvalidWebhookUrl(String),
    /// 400 `unknown_event_type`: `events` names something that is not an event type (or nothing, or `ping`).
    #[error("{0}")]
    UnknownEventType(String),
    /// 409 `webhook_limit`: the account has its most webhook endpoints already.
    #[error("an account has at most {0} webhook endpoints: delete one before creating another")]
    WebhookLimit(u32),
    /// 409 `webhook_disabled`: a redelivery to a disabled endpoint.
    #[error("the webhook endpoint is disabled: enable it (PATCH {{\"enabled\": true}}) first")]
    WebhookDisabled,
    /// 404 for unknown routes and for ids that do not exist or are another account's.
    #[error("no such resource")]
    NotFound,
    /// 405 for a known path with the wrong method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 413: body over the limit.
    #[error("request body is too large")]
    PayloadTooLarge,
    /// 415: a body that is not declared as JSON.
    #[error("the body must be JSON (Content-Type: application/json)")]
    UnsupportedMediaType,
    /// 429 with the limit state.
    #[error("rate limit exceeded: at most 100 link creations per hour per API key")]
    RateLimited(RateLimitState),
    /// 429: the key's budget of management writes (PATCH, DELETE, groups) for the last minute is spent.
    #[error(
        "rate limit exceeded: at most {} management writes per minute per API key",
        .0.limit
    )]
    WriteLimited(RateLimitState),
    /// 429 from a per-address limiter (the public endpoint, wrong internal secrets).
    #[error("too many requests from this address, retry later")]
    TooManyRequests {
        /// Which limit (the metric's label).
        limit: &'static str,
        /// Seconds until the next request is allowed.
        retry_after: u64,
    },
    /// 503: too many PNG QR codes or CSV exports are being made in this process right now.
    #[error("too many images and exports are being made right now, retry in a second")]
    Busy,
    /// 503: the database is unreachable or overloaded, or the request ran out of time.
    #[error("the service is temporarily unavailable, retry later")]
    Unavailable,
    /// 500: a bug or an unexpected database error; the cause is logged, not returned.
    #[error("internal error")]
    Internal,
}

/// The stable error codes (see the README's error table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: a field fails validation, or a JSON value has the wrong type.
    ValidationError,
    /// 400: the body is not JSON.
    InvalidJson,
    /// 400: the short code is taken on the target domain.
    ShortCodeExists,
    /// 400: no platform domain is enabled.
    PlatformDomainUnavailable,
    /// 400: list links, bad `limit`.
    InvalidLimit,
    /// 400: list links, bad `offset`.
    InvalidOffset,
    /// 400: list links, bad `match`.
    InvalidMatch,
    /// 400: list links, bad `long_url`.
    InvalidLongUrl,
    /// 400: list links, bad `q` (2 to 200 characters, no control characters).
    InvalidQ,
    /// 400: list links, bad `tag`.
    InvalidTag,
    /// 400: list links, `group_id` not a UUID.
    InvalidGroupId,
    /// 400: list links, `domain` not a hostname.
    InvalidDomain,
    /// 400: list links, `is_active` not `true` or `false`.
    InvalidIsActive,
    /// 400: list links, unknown `sort`.
    InvalidSort,
    /// 400: export links, `format` not `csv` or `ndjson`.
    InvalidFormat,
    /// 400: the account's default group cannot be deleted.
    DefaultGroup,
    /// 400: a webhook endpoint's URL is refused (scheme, length, credentials, or a non-public host).
    InvalidWebhookUrl,
    /// 400: a webhook subscription names an unknown event type.
    UnknownEventType,
    /// 409: the account has its most webhook endpoints (20).
    WebhookLimit,
    /// 409: the webhook endpoint is disabled.
    WebhookDisabled,
    /// 401: missing, malformed, unknown, replaced or revoked key, or another scheme.
    NotAuthenticated,
    /// 403: the account has no API access.
    PermissionDenied,
    /// 404: unknown path or resource.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 413: body over the limit.
    PayloadTooLarge,
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType,
    /// 429: rate limit exceeded.
    RateLimited,
    /// 503: database unreachable or request over 10 s.
    ServiceUnavailable,
    /// 500: a bug; the cause is logged, never returned.
    InternalError,
}

/// Every error response: a message for people and a stable code for programs.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// What went wrong, for people.
    detail: String,
    /// What went wrong, for programs.
    error_code: ErrorCode,
}

/// The failures of every endpoint that needs an API key (spec 5), for the OpenAPI document. Never built: the
/// responses themselves are [`ApiError`]s; this only names them once for every `#[utoipa::path]`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum AuthErrors {
    /// `not_authenticated`: missing, malformed, unknown or revoked key, or another scheme
    #[response(status = 401, headers(("WWW-Authenticate" = String, description = "`Token`")))]
    Unauthenticated(ErrorBody),
    /// `permission_denied`: the account has no API access, or the operator disabled it
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// The refusal of a management write over the key's budget, for the OpenAPI document (never built, like
/// [`AuthErrors`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum WriteLimitErrors {
    /// `rate_limited`: the key made its budget of management writes (600 by default) in the last minute
    #[response(status = 429, headers(
        ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
        ("X-RateLimit-Remaining" = i64, description = "0"),
        ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        ("Retry-After" = i64, description = "Seconds until one more write is allowed"),
    ))]
    Limited(ErrorBody),
}

/// The failures any endpoint may have, for the OpenAPI document (never built, like [`AuthErrors`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ServerErrors {
    /// `internal_error`: a bug
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `service_unavailable`: database unreachable or request over 10 s
    #[response(status = 503, headers(("Retry-After" = i64, description = "1")))]
    Unavailable(ErrorBody),
}

impl ApiError {
    /// The status and code this error answers with (also what a bulk-create entry reports).
    pub(crate) fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            Self::Validation(_) => (StatusCode::BAD_REQUEST, ErrorCode::ValidationError),
            Self::InvalidJson(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidJson),
            Self::InvalidQuery { param, .. } => (
                StatusCode::BAD_REQUEST,
                match param {
                    ListParam::Limit => ErrorCode::InvalidLimit,
                    ListParam::Offset => ErrorCode::InvalidOffset,
                    ListParam::LongUrl => ErrorCode::InvalidLongUrl,
                    ListParam::Match => ErrorCode::InvalidMatch,
                    ListParam::Q => ErrorCode::InvalidQ,
                    ListParam::Tag => ErrorCode::InvalidTag,
                    ListParam::GroupId => ErrorCode::InvalidGroupId,
                    ListParam::Domain => ErrorCode::InvalidDomain,
                    ListParam::IsActive => ErrorCode::InvalidIsActive,
                    ListParam::Sort => ErrorCode::InvalidSort,
                    ListParam::Format => ErrorCode::InvalidFormat,
                },
            ),
            Self::ShortCodeExists => (StatusCode::BAD_REQUEST, ErrorCode::ShortCodeExists),
            Self::PlatformDomainUnavailable => (
                StatusCode::BAD_REQUEST,
                ErrorCode::PlatformDomainUnavailable,
            ),
            Self::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, ErrorCode::NotAuthenticated),
            Self::Forbidden | Self::AccountDisabled => {
                (StatusCode::FORBIDDEN, ErrorCode::PermissionDenied)
            }
            Self::DefaultGroup => (StatusCode::BAD_REQUEST, ErrorCode::DefaultGroup),
            Self::InvalidWebhookUrl(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidWebhookUrl),
            Self::UnknownEventType(_) => (StatusCode::BAD_REQUEST, ErrorCode::UnknownEventType),
            Self::WebhookLimit(_) => (StatusCode::CONFLICT, ErrorCode::WebhookLimit),
            Self::WebhookDisabled => (StatusCode::CONFLICT, ErrorCode::WebhookDisabled),
            Self::NotFound => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed),
            Self::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge),
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
            ),
            Self::RateLimited(_) | Self::WriteLimited(_) | Self::TooManyRequests { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited)
            }
            Self::Unavailable | Self::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ServiceUnavailable,
            ),
            Self::Internal => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError),
        }
    }
}

/// The `X-RateLimit-*` headers (and `Retry-After` when exhausted).
pub(crate) fn rate_limit_headers(state: &RateLimitState, headers: &mut HeaderMap) {
    let mut put = |name: &'static str, v: i64| {
        headers.insert(name, HeaderValue::from(v));
    };
    put("x-ratelimit-limit", i64::from(state.limit));
    put("x-ratelimit-remaining", i64::from(state.remaining));
    put("x-ratelimit-reset", state.reset_at);
    if state.remaining == 0 && state.retry_after > 0 {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(state.retry_after));
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error_code) = self.status_and_code();
        let body = ErrorBody {
            detail: self.to_string(),
            error_code,
        };
        let mut response = (status, axum::Json(body)).into_response();
        match &self {
            Self::RateLimited(state) => {
                super::observe::rate_limited("create_link");
                rate_limit_headers(state, response.headers_mut());
            }
            Self::WriteLimited(state) => {
                super::observe::rate_limited("management_write");
                rate_limit_headers(state, response.headers_mut());
            }
            Self::Unauthenticated(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Token"));
            }
            Self::TooManyRequests { limit, retry_after } => {
                super::observe::rate_limited(limit);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            Self::Unavailable | Self::Busy => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1));
            }
            _ => {}
        }
        response
    }
}

impl From<ListQueryError> for ApiError {
    /// A refused list parameter: its own `invalid_*` code.
    fn from(e: ListQueryError) -> Self {
        Self::InvalidQuery {
            param: e.param,
            detail: e.detail,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::RateLimited(state) => Self::RateLimited(state),
            StoreError::ShortCodeExists => Self::ShortCodeExists,
            StoreError::PlatformDomainUnavailable => Self::PlatformDomainUnavailable,
            StoreError::BlockedDestination => {
                Self::Validation("long_url points to a blocked domain".to_owned())
            }
            // The key was revoked between authentication and the write.
            StoreError::KeyRevoked => Self::Unauthenticated("invalid API key"),
            StoreError::NotFound(_) => Self::NotFound,
            StoreError::Invalid(detail) => Self::Validation(detail),
            StoreError::DefaultGroup => Self::DefaultGroup,
            StoreError::WebhookLimit(max) => Self::WebhookLimit(max),
            StoreError::WebhookDisabled => Self::WebhookDisabled,
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable");
                Self::Unavailable
            }
            // Password hashing is the dashboard's; an API path that ever met it is overloaded all the same.
            StoreError::Busy { .. } => Self::Unavailable,
            // Duplicates the API never asks for (emails, hosts: operator commands), bad configuration, broken
            // invariants and unexpected database errors: logged, never shown.
            // Member management is the dashboard's and the operator's: an API key acts for its whole account.
            StoreError::Forbidden | StoreError::LastOwner => Self::Forbidden,
            StoreError::Conflict(_)
            | StoreError::Config(_)
            | StoreError::Internal(_)
            | StoreError::Database(_)
            | StoreError::Migrate(_) => {
                tracing::error!(error = %e, "internal error");
                Self::Internal
            }
        }
    }
}
