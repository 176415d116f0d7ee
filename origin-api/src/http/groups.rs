//! `/api/v1/external/groups` (spec 4.4).

use super::error::{ApiError, AuthErrors, ServerErrors};
use super::extract::Caller;
use super::state::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/groups", get(list_groups))
}

/// A link group, as listed (no key in lists).
#[derive(Serialize, ToSchema)]
pub(crate) struct Group {
    /// Group id, used as `group_id`.
    #[schema(format = Uuid)]
    id: String,
    /// Name.
    name: String,
}

/// The account's groups.
#[derive(Serialize, ToSchema)]
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
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn list_groups(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<GroupList>, ApiError> {
    let groups = state.db.list_groups(&caller.account_id).await?;
    Ok(Json(GroupList {
        results: groups
            .into_iter()
            .map(|(id, name)| Group { id, name })
            .collect(),
    }))
}
