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

/// A link group.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Group {
    /// Group id, used as `group_id`.
    #[schema(format = Uuid)]
    id: String,
    /// Name.
    name: String,
}

/// The account's groups.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct GroupList {
    /// By name, case-insensitively (then by exact name and id).
    results: Vec<Group>,
}

/// The account's link groups, by name (spec 4.4).
#[utoipa::path(
    get,
    path = "/api/v1/external/groups",
    tag = "groups",
    operation_id = "list_groups",
    security(("Token" = [])),
    responses(
        (status = 200, description = "The groups", body = GroupList),
        super::openapi::AuthErrors,
        super::openapi::ServerErrors,
    ),
)]
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
