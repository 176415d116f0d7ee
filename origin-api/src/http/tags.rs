//! `/api/v1/external/tags`: the account's tags with their counts, rename (merging into an existing tag) and delete
//! (issue 24). A tag is named in the path by its name (percent-encoded), compared case-insensitively; a name that
//! is not a valid tag, or a tag no link of the account carries, is `404 not_found`.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors, WriteLimitErrors};
use super::extract::{Caller, JsonBody};
use super::limits;
use super::state::AppState;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use axum::routing::{get, patch};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shortlink_store::domain::Tag;
use shortlink_store::{Actor, TagCount};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/external/tags", get(list_tags))
        .route(
            "/api/v1/external/tags/{name}",
            patch(rename_tag).delete(delete_tag),
        )
}

/// The `{name}` of a tag path: not a valid tag name is not the name of any tag, so a 404.
pub(crate) struct TagName(Tag);

impl<S: Send + Sync> FromRequestParts<S> for TagName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::NotFound)?;
        Tag::parse(&raw).map(Self).map_err(|_| ApiError::NotFound)
    }
}

/// A tag and how many of the account's links carry it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TagItem {
    /// The tag as the account spells it.
    #[schema(example = "Spring")]
    name: String,
    /// The account's links with this tag (at least 1).
    #[schema(minimum = 1)]
    links: i64,
}

impl From<TagCount> for TagItem {
    fn from(t: TagCount) -> Self {
        Self {
            name: t.name,
            links: t.links,
        }
    }
}

/// The account's tags.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TagList {
    /// Every tag some link of the account carries, sorted case-insensitively.
    results: Vec<TagItem>,
}

/// A rename.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TagRenameBody {
    /// The new name, by the rules of a link's tags. When the account has another tag of that name (any case),
    /// the two are merged; the tag is then spelled as given here.
    #[schema(min_length = 1, max_length = 50, example = "Spring 2027")]
    name: String,
}

/// The account's tags with the count of links carrying each, sorted case-insensitively. A read: not limited.
#[utoipa::path(
    get,
    path = "/api/v1/external/tags",
    tag = "tags",
    operation_id = "list_tags",
    security(("Token" = [])),
    responses(
        (status = 200, description = "The tags", body = TagList),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn list_tags(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<TagList>, ApiError> {
    let tags = state.db.list_tags(&caller.account_id).await?;
    Ok(Json(TagList {
        results: tags.into_iter().map(TagItem::from).collect(),
    }))
}

/// Renames a tag on every link that carries it, merging it into the account's tag of the new name if there is
/// one. The edge is not involved (tags are not served); each link whose tags change gets a `link.updated` event.
/// A management write (see `update_link`).
#[utoipa::path(
    patch,
    path = "/api/v1/external/tags/{name}",
    tag = "tags",
    operation_id = "rename_tag",
    params(("name" = String, Path, description = "The tag's name (any case), percent-encoded")),
    request_body(content = TagRenameBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The tag as it now is", body = TagItem, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`validation_error` (the new name, an unknown field) or `invalid_json`",
            body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no link of this account carries this tag", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn rename_tag(
    State(state): State<AppState>,
    Caller(caller): Caller,
    TagName(from): TagName,
    JsonBody(body): JsonBody<TagRenameBody>,
) -> Result<Response, ApiError> {
    let to = Tag::parse(&body.name).map_err(|e| ApiError::Validation(format!("name: {e}")))?;
    let limit = state.limits.charge(&state.db, &caller).await?;
    let renamed = state
        .db
        .rename_tag(&caller.account_id, &from, &to, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        renamed.map(|t| Json(TagItem::from(t))),
    ))
}

/// Removes a tag from every link that carries it (`204`); each of them gets a `link.updated` event. A management
/// write (see `update_link`).
#[utoipa::path(
    delete,
    path = "/api/v1/external/tags/{name}",
    tag = "tags",
    operation_id = "delete_tag",
    params(("name" = String, Path, description = "The tag's name (any case), percent-encoded")),
    security(("Token" = [])),
    responses(
        (status = 204, description = "Deleted", headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no link of this account carries this tag", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn delete_tag(
    State(state): State<AppState>,
    Caller(caller): Caller,
    TagName(name): TagName,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let deleted = state
        .db
        .delete_tag(&caller.account_id, &name, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        deleted.map(|()| StatusCode::NO_CONTENT),
    ))
}
