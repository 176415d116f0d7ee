//! `POST /api/v1/public/links/validate-dynamic` (spec 4.6): is a client-built token valid?
//! Public (no API key): it reveals no more than following the link would.

use super::client_ip::ClientIp;
use super::error::{ApiError, ErrorBody, ServerErrors};
use super::extract::JsonBody;
use super::state::AppState;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shared_crypto::{GroupKey, TokenCipher};
use shortlink_store::domain::Micros;

/// A token is at most ~3 KB (a 2048-character destination, base64url); 8 KiB leaves room.
const MAX_BODY_BYTES: usize = 8 * 1024;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/public/links/validate-dynamic", post(validate))
}

/// A dynamic link to check (spec 4.6).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct ValidateBody {
    /// The group the link names (a string; one that is not a UUID names no group).
    group_id: String,
    /// The token, as in `?signature=` (base64url, no padding).
    signature: String,
}

/// The verdict.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Outcome {
    /// false when the token cannot be decrypted with the group's key, the payload is
    /// invalid, the link is expired, the destination is not accepted or the group does not exist.
    success: bool,
}

/// Checks a client-built dynamic link (spec 4.6). Public: no `Authorization`. Limited per
/// client IP (a burst of 120, then 600 a minute, by default).
#[utoipa::path(
    post,
    path = "/api/v1/public/links/validate-dynamic",
    tag = "dynamic",
    operation_id = "validate_dynamic",
    request_body(content = ValidateBody, content_type = "application/json"),
    security(()),
    responses(
        (status = 200, description = "The verdict", body = Outcome),
        (status = 400, description = "`invalid_json` or `validation_error`: not `{group_id: string, signature: string}`",
            body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 8 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many requests from this address",
            body = ErrorBody,
            headers(("Retry-After" = i64, description = "Seconds until the next request is allowed"))),
        ServerErrors,
    ),
)]
pub(crate) async fn validate(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    JsonBody(body): JsonBody<ValidateBody, MAX_BODY_BYTES>,
) -> Result<Json<Outcome>, ApiError> {
    state
        .validate_limiter
        .check(ip)
        .map_err(|retry_after| ApiError::TooManyRequests {
            limit: "validate_dynamic",
            retry_after,
        })?;
    let verdict = evaluate(&state, &body).await?;
    if let Err(reason) = verdict {
        // The reason is for operators; the client only learns success: false (spec 4.6).
        tracing::debug!(reason, "dynamic link rejected");
    }
    Ok(Json(Outcome {
        success: verdict.is_ok(),
    }))
}

/// Ok(()) for a valid token, Err(reason) for an invalid one; the outer error is ours (503/500).
async fn evaluate(
    state: &AppState,
    body: &ValidateBody,
) -> Result<Result<(), &'static str>, ApiError> {
    // An id that is not a UUID names no group: "the group does not exist".
    let Ok(group_id) = uuid::Uuid::try_parse(&body.group_id) else {
        return Ok(Err("group"));
    };
    let Some(key) = state
        .db
        .group_key(&group_id.hyphenated().to_string())
        .await?
    else {
        return Ok(Err("group"));
    };
    let Ok(key) = GroupKey::from_base64url(&key) else {
        tracing::error!(group_id = %group_id, "stored group key does not decode");
        return Err(ApiError::Internal);
    };
    let now = Micros::now().unix_seconds();
    // The blocklist lives in the database: check the final host there, after the token rules.
    let no_blocklist: &[&str] = &[];
    let evaluation =
        match TokenCipher::new(&key).evaluate_with_payload(&body.signature, now, no_blocklist) {
            Ok(e) => e,
            Err(e) => return Ok(Err(e.reason())),
        };
    let host = shared_crypto::extract_host(&evaluation.redirect_to)
        .map(shared_crypto::normalize_host)
        .unwrap_or_default();
    if state.db.is_host_blocked(&host).await? {
        return Ok(Err("destination"));
    }
    Ok(Ok(()))
}
