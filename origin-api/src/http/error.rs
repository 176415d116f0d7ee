//! The HTTP error: every failure a handler can have, each with an explicit status and a
//! `{detail, error_code}` body (spec 7), so no path leaks a framework default.

use crate::db::{RateLimitState, StoreError};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

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
        /// Stable code, see README.
        code: &'static str,
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
    /// 404 for unknown routes.
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
    /// 429 from the per-IP limiter of the public endpoint.
    #[error("too many requests from this address, retry later")]
    TooManyRequests {
        /// Seconds until the next request is allowed.
        retry_after: u64,
    },
    /// 503: the database is unreachable or overloaded, or the request ran out of time.
    #[error("the service is temporarily unavailable, retry later")]
    Unavailable,
    /// 500: a bug or an unexpected database error; the cause is logged, not returned.
    #[error("internal error")]
    Internal,
}

#[derive(Serialize)]
struct Body<'a> {
    detail: String,
    error_code: &'a str,
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Validation(_) => (StatusCode::BAD_REQUEST, "validation_error"),
            Self::InvalidJson(_) => (StatusCode::BAD_REQUEST, "invalid_json"),
            Self::InvalidQuery { code, .. } => (StatusCode::BAD_REQUEST, code),
            Self::ShortCodeExists => (StatusCode::BAD_REQUEST, "short_code_exists"),
            Self::PlatformDomainUnavailable => {
                (StatusCode::BAD_REQUEST, "platform_domain_unavailable")
            }
            Self::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "not_authenticated"),
            Self::Forbidden => (StatusCode::FORBIDDEN, "permission_denied"),
            Self::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::RateLimited(_) | Self::TooManyRequests { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "rate_limited")
            }
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "service_unavailable"),
            Self::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
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
        let body = Body {
            detail: self.to_string(),
            error_code,
        };
        let mut response = (status, axum::Json(body)).into_response();
        match &self {
            Self::RateLimited(state) => rate_limit_headers(state, response.headers_mut()),
            Self::Unauthenticated(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Token"));
            }
            Self::TooManyRequests { retry_after } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            Self::Unavailable => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1));
            }
            _ => {}
        }
        response
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
            StoreError::NotFound("api key") => Self::Unauthenticated("invalid API key"),
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable");
                Self::Unavailable
            }
            other => {
                tracing::error!(error = %other, "internal error");
                Self::Internal
            }
        }
    }
}
