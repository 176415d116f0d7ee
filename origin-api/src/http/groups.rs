//! `/api/v1/external/groups` (spec 4.4).

use super::AppState;
use super::error::ApiError;
use super::extract::Caller;
use super::links::Results;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/groups", get(list_groups))
}

#[derive(Serialize)]
struct Group {
    id: String,
    name: String,
}

async fn list_groups(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<Results<Group>>, ApiError> {
    let groups = state.db.list_groups(&caller.account_id).await?;
    Ok(Json(Results {
        results: groups
            .into_iter()
            .map(|(id, name)| Group { id, name })
            .collect(),
    }))
}
