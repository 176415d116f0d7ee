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
