//! `GET /api/v1/external/links/{id}/stats` (our extension): clicks by day and by country.

use super::AppState;
use super::error::ApiError;
use super::extract::Caller;
use crate::db::LinkStats;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/links/{id}/stats", get(stats))
}

/// The clicks the edge recorded for one of the account's links (our extension). Another
/// account's link, an unknown id and a malformed id all answer 404.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/{id}/stats",
    tag = "links",
    operation_id = "link_stats",
    params(("id" = String, Path, format = Uuid, description = "The link's id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The link's clicks", body = super::openapi::LinkStats),
        (status = 404, description = "`not_found`: not one of the account's links", body = super::openapi::ErrorBody),
        super::openapi::AuthErrors,
        super::openapi::ServerErrors,
    ),
)]
async fn stats(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Path(id): Path<String>,
) -> Result<Json<LinkStats>, ApiError> {
    // Another account's link, an unknown one and a malformed id all look the same: 404.
    let Ok(id) = uuid::Uuid::try_parse(&id) else {
        return Err(ApiError::NotFound);
    };
    state
        .db
        .link_stats(&caller.account_id, &id.hyphenated().to_string())
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}
