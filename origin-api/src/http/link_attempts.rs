//! `/internal/v1/password-attempts…`: the throttle of a link's password form, as the worker asks for it (issue 25).
//! The worker verifies passwords itself, from the hash in KV; what it cannot do is count a visitor's attempts
//! across isolates and locations, so before each check it reserves one here, and gives it back when the password
//! was right ([`shortlink_store::LinkAttempt`]: 10 wrong attempts per link and visitor address in 15 minutes, exact
//! under concurrency). Nothing here sees a password.
//!
//! - `POST /internal/v1/password-attempts` `{"host","code","address"}` → `200 {"allowed": true, "at": <µs>}` or
//!   `200 {"allowed": false, "retry_after": <seconds>}`.
//! - `POST /internal/v1/password-attempts/give-back` `{"host","code","address","at"}` → `204`.

use std::net::IpAddr;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use shortlink_store::LinkAttempt;
use shortlink_store::domain::Micros;

use super::error::ApiError;
use super::extract::JsonBody;
use super::internal::Edge;
use super::state::AppState;

/// Bodies are three short strings and a number.
const MAX_BODY: usize = 1024;

/// The link and the visitor, as the worker names them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AttemptBody {
    /// The link's host, as the worker normalised it (lowercase, no port).
    host: String,
    /// The link's short code, lowercase.
    code: String,
    /// The visitor's address (`CF-Connecting-IP`).
    address: String,
    /// The reservation to give back (only for `give-back`).
    #[serde(default)]
    at: Option<i64>,
}

/// The validated link and address: the throttle's subject is built from these, so each is bounded here.
struct Subject {
    host: String,
    code: String,
    address: IpAddr,
}

impl AttemptBody {
    fn subject(&self) -> Result<Subject, ApiError> {
        let host_ok = !self.host.is_empty()
            && self.host.len() <= 253
            && self.host.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'-' | b'.' | b'_' | b'[' | b']' | b':')
            });
        if !host_ok {
            return Err(ApiError::Validation("host: not a host name".into()));
        }
        let code_ok = !self.code.is_empty()
            && self.code.len() <= 64
            && self
                .code
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !code_ok {
            return Err(ApiError::Validation("code: not a short code".into()));
        }
        let address = self
            .address
            .parse::<IpAddr>()
            .map_err(|_| ApiError::Validation("address: not an IP address".into()))?;
        Ok(Subject {
            host: self.host.clone(),
            code: self.code.to_ascii_lowercase(),
            // An IPv6 visitor by its /64, as every limit of ours counts them.
            address: client_addr::limit_key(address),
        })
    }
}

/// Reserves an attempt, or says how long the visitor must wait.
pub(super) async fn reserve(
    State(state): State<AppState>,
    _edge: Edge,
    JsonBody(body): JsonBody<AttemptBody, MAX_BODY>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let s = body.subject()?;
    let now = Micros::now().0;
    Ok(Json(
        match state
            .db
            .reserve_link_attempt(&s.host, &s.code, s.address, now)
            .await?
        {
            LinkAttempt::Go(at) => serde_json::json!({ "allowed": true, "at": at }),
            LinkAttempt::Throttled(secs) => {
                serde_json::json!({ "allowed": false, "retry_after": secs })
            }
        },
    ))
}

/// Gives back a reserved attempt: the password was right.
pub(super) async fn give_back(
    State(state): State<AppState>,
    _edge: Edge,
    JsonBody(body): JsonBody<AttemptBody, MAX_BODY>,
) -> Result<StatusCode, ApiError> {
    let s = body.subject()?;
    let at = body
        .at
        .ok_or_else(|| ApiError::Validation("at: required".into()))?;
    state
        .db
        .give_back_link_attempt(&s.host, &s.code, s.address, at)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
