//! `/api/v1/external/groups`: the spec's list (4.4), and each group's life: create, read, rename, new settings,
//! a new signing key, delete. Another account's group id answers exactly like an unknown one (404).

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors, WriteLimitErrors};
use super::extract::{Caller, JsonBody, ResourceId};
use super::limits;
use super::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shortlink_store::domain::GroupSettings;
use shortlink_store::{Actor, GroupRow};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/external/groups",
            get(list_groups).post(create_group),
        )
        .route(
            "/api/v1/external/groups/{id}",
            get(get_group).patch(update_group).delete(delete_group),
        )
        .route("/api/v1/external/groups/{id}/rotate-key", post(rotate_key))
        // Most answers here carry a group's signing key: no cache (a browser's, a proxy's) may keep one.
        .route_layer(axum::middleware::map_response(no_store))
}

async fn no_store(mut response: axum::response::Response) -> axum::response::Response {
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
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

/// One group with its signing key and settings.
#[derive(Serialize, ToSchema)]
pub(crate) struct GroupDetail {
    /// Group id, used as `group_id`.
    #[schema(format = Uuid)]
    id: String,
    /// Name, 1 to 100 characters.
    name: String,
    /// The signing key of the group's dynamic links: 32 bytes, base64url without padding. A secret: shown to
    /// the group's owner only.
    key: String,
    /// The rules the edge applies to the group's links (README "Group settings").
    #[schema(value_type = Object)]
    settings: GroupSettings,
    /// The account's default group: new links go there unless told otherwise; it cannot be deleted.
    is_default: bool,
}

impl From<GroupRow> for GroupDetail {
    fn from(g: GroupRow) -> Self {
        Self {
            id: g.id,
            name: g.name,
            key: g.key,
            settings: g.settings,
            is_default: g.is_default,
        }
    }
}

/// A new group.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateGroupBody {
    /// 1 to 100 characters (trimmed).
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    /// README "Group settings"; absent or `null`: no rules.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    settings: Option<serde_json::Value>,
}

/// Changes to a group; absent fields stay as they are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateGroupBody {
    /// 1 to 100 characters (trimmed).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    /// Replaces all the settings (README "Group settings").
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    settings: Option<serde_json::Value>,
}

/// Settings from a body: an object, checked field by field; the error names the field.
fn settings(value: &serde_json::Value) -> Result<GroupSettings, ApiError> {
    GroupSettings::parse(&value.to_string())
        .map_err(|e| ApiError::Validation(format!("settings: {}", e.0)))
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

/// Creates a group with a fresh signing key.
#[utoipa::path(
    post,
    path = "/api/v1/external/groups",
    tag = "groups",
    operation_id = "create_group",
    request_body(content = CreateGroupBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 201, description = "The group, with its key", body = GroupDetail, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`validation_error` (naming the field, a fallback URL on the blocked domain \
            list, or the account at its cap of groups, 1,000 by default) or `invalid_json`", body = ErrorBody),
        AuthErrors,
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn create_group(
    State(state): State<AppState>,
    Caller(caller): Caller,
    JsonBody(body): JsonBody<CreateGroupBody>,
) -> Result<Response, ApiError> {
    let settings = body
        .settings
        .as_ref()
        .map(settings)
        .transpose()?
        .unwrap_or_default();
    let limit = state.limits.charge(&state.db, &caller).await?;
    let group = state
        .db
        .create_group_capped(
            &caller.account_id,
            &body.name,
            &settings,
            state.limits.max_groups_per_account,
            &Actor::ApiKey,
        )
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        group.map(|g| (StatusCode::CREATED, Json(GroupDetail::from(g)))),
    ))
}

/// One of the account's groups, with its key and settings.
#[utoipa::path(
    get,
    path = "/api/v1/external/groups/{id}",
    tag = "groups",
    operation_id = "get_group",
    params(("id" = String, Path, format = Uuid, description = "Group id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The group", body = GroupDetail),
        AuthErrors,
        (status = 404, description = "`not_found`: no such group in this account", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn get_group(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Json<GroupDetail>, ApiError> {
    Ok(Json(
        state.db.group(Some(&caller.account_id), &id).await?.into(),
    ))
}

/// Renames a group and/or replaces its settings; the edge applies new settings within the propagation time.
#[utoipa::path(
    patch,
    path = "/api/v1/external/groups/{id}",
    tag = "groups",
    operation_id = "update_group",
    params(("id" = String, Path, format = Uuid, description = "Group id")),
    request_body(content = UpdateGroupBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The group as it now is", body = GroupDetail, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`validation_error` (naming the field, or a fallback URL on the blocked \
            domain list) or `invalid_json`", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such group in this account", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn update_group(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    JsonBody(body): JsonBody<UpdateGroupBody>,
) -> Result<Response, ApiError> {
    let settings = body.settings.as_ref().map(settings).transpose()?;
    let limit = state.limits.charge(&state.db, &caller).await?;
    let group = state
        .db
        .update_group(
            Some(&caller.account_id),
            &id,
            body.name.as_deref(),
            settings.as_ref(),
            &Actor::ApiKey,
        )
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        group.map(|g| Json(GroupDetail::from(g))),
    ))
}

/// Deletes a group: its links move to the account's default group and its dynamic links stop working. The
/// default group cannot be deleted (`400 default_group`).
#[utoipa::path(
    delete,
    path = "/api/v1/external/groups/{id}",
    tag = "groups",
    operation_id = "delete_group",
    params(("id" = String, Path, format = Uuid, description = "Group id")),
    security(("Token" = [])),
    responses(
        (status = 204, description = "Deleted", headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`default_group`: the account's default group", body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such group in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn delete_group(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let deleted = state
        .db
        .delete_group(Some(&caller.account_id), &id, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        deleted.map(|()| StatusCode::NO_CONTENT),
    ))
}

/// Replaces the group's signing key. Dynamic links signed with the old key stop working at the edge within the
/// propagation time; the answer carries the new key.
#[utoipa::path(
    post,
    path = "/api/v1/external/groups/{id}/rotate-key",
    tag = "groups",
    operation_id = "rotate_group_key",
    params(("id" = String, Path, format = Uuid, description = "Group id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The group with its new key", body = GroupDetail, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such group in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn rotate_key(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let group = state
        .db
        .rotate_group_key(Some(&caller.account_id), &id, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        group.map(|g| Json(GroupDetail::from(g))),
    ))
}
