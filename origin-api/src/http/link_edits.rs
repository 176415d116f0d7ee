//! `/api/v1/external/links/{id}`: read, change (pause, resume, new destination, group, expiry, query forwarding,
//! title, tags, the smart-link fields)
//! and delete one of the account's links. Another account's id answers exactly like an unknown one (404).

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors, WriteLimitErrors};
use super::extract::{Caller, JsonBody, ResourceId};
use super::limits;
use super::links::{ListedLink, parse_expiry, parse_uuid};
use super::smart_fields::{RuleSchema, SmartPatch, hash_password};
use super::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use shortlink_store::domain::{LongUrl, Tag, Title};
use shortlink_store::{Actor, LinkOptionsPatch, LinkPatch};
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route(
        "/api/v1/external/links/{id}",
        get(get_link).patch(patch_link).delete(delete_link),
    )
}

/// `null` kept apart from an absent field: `Some(None)` is an explicit `null`.
pub(crate) fn explicit_null<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The fields of a link a PATCH may change; absent fields stay as they are, `{}` changes nothing. Unknown fields
/// are refused (a typo must not look like success).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkPatchBody {
    /// New destination, by create-link's rules.
    #[serde(default)]
    #[schema(max_length = 2048, pattern = "^https://")]
    long_url: Option<String>,
    /// false pauses the link (visitors go to the domain's fallback), true resumes it.
    #[serde(default)]
    is_active: Option<bool>,
    /// Another of the account's groups.
    #[serde(default)]
    #[schema(format = Uuid)]
    group_id: Option<String>,
    /// RFC 3339 in UTC, in the future; `null` removes the expiry.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, format = DateTime)]
    expires_at: Option<Option<String>>,
    /// Append the visitor's query string to the destination.
    #[serde(default)]
    forward_query: Option<bool>,
    /// A title by create-link's rules; `null` or `""` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>)]
    title: Option<Option<String>>,
    /// Replaces the link's tags as a whole, by create-link's rules; `[]` removes them all (`null` is refused).
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<Vec<String>>)]
    tags: Option<Option<Vec<String>>>,
    /// Replaces the rules as a whole, by create-link's rules; `null` or `[]` removes them.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<Vec<RuleSchema>>, max_items = 20)]
    rules: Option<Option<Value>>,
    /// By create-link's rules; `null` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 2048, pattern = "^https://")]
    ios_url: Option<Option<String>>,
    /// By create-link's rules; `null` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 2048, pattern = "^https://")]
    android_url: Option<Option<String>>,
    /// A new password (8 to 128 characters; write-only); `null` removes the password.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128, write_only)]
    password: Option<Option<String>>,
    /// By create-link's rules; `null` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 2048, pattern = "^https://")]
    expired_url: Option<Option<String>>,
    /// 1 to 1,000,000,000 (the link's group must have analytics on); `null` removes the limit.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1_000_000_000)]
    max_clicks: Option<Option<i64>>,
    /// 301, 302, 307 or 308; `null` sets 302.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<u16>)]
    redirect_status: Option<Option<i64>>,
    /// By create-link's rules; `null` or `""` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 200)]
    og_title: Option<Option<String>>,
    /// By create-link's rules; `null` or `""` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 500)]
    og_description: Option<Option<String>>,
    /// By create-link's rules; `null` removes it.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, max_length = 2048, pattern = "^https://")]
    og_image: Option<Option<String>>,
}

/// One of the account's links, as listed.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/{id}",
    tag = "links",
    operation_id = "get_link",
    params(("id" = String, Path, format = Uuid, description = "Link id")),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The link", body = ListedLink),
        AuthErrors,
        (status = 404, description = "`not_found`: no such link in this account", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn get_link(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Json<shortlink_store::ListedLink>, ApiError> {
    Ok(Json(state.db.get_link(&caller.account_id, &id).await?))
}

/// Changes a link; the edge follows within the propagation time. Returns the link as listed. A management
/// write: it counts against the key's budget of writes per minute (600 by default) once the body is valid.
#[utoipa::path(
    patch,
    path = "/api/v1/external/links/{id}",
    tag = "links",
    operation_id = "update_link",
    params(("id" = String, Path, format = Uuid, description = "Link id")),
    request_body(content = LinkPatchBody, content_type = "application/json"),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The link as it now is", body = ListedLink, headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        (status = 400, description = "`validation_error` (a field, an unknown field, a group not of this \
            account, a click limit in a group without analytics, a URL on the blocklist) or `invalid_json`",
            body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such link in this account", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 16 KiB", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not declared as JSON", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn patch_link(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    JsonBody(body): JsonBody<LinkPatchBody>,
) -> Result<Response, ApiError> {
    let (mut options, password) = SmartPatch {
        rules: body.rules,
        ios_url: body.ios_url,
        android_url: body.android_url,
        password: body.password,
        expired_url: body.expired_url,
        max_clicks: body.max_clicks,
        redirect_status: body.redirect_status,
        og_title: body.og_title,
        og_description: body.og_description,
        og_image: body.og_image,
    }
    .parse()?;
    let patch = LinkPatch {
        long_url: body
            .long_url
            .as_deref()
            .map(LongUrl::parse)
            .transpose()
            .map_err(|e| ApiError::Validation(e.0))?,
        is_active: body.is_active,
        group_id: parse_uuid("group_id", body.group_id)?,
        expires_at: body
            .expires_at
            .map(|e| e.as_deref().map(parse_expiry).transpose())
            .transpose()?,
        forward_query: body.forward_query,
        title: body
            .title
            .map(|t| {
                t.as_deref()
                    .map(Title::parse)
                    .transpose()
                    .map(Option::flatten)
            })
            .transpose()
            .map_err(|e| ApiError::Validation(e.0))?,
        tags: match body.tags {
            None => None,
            Some(None) => {
                return Err(ApiError::Validation(
                    "tags must be a list of strings ([] removes every tag)".to_owned(),
                ));
            }
            Some(Some(tags)) => {
                Some(Tag::parse_list("tags", &tags).map_err(|e| ApiError::Validation(e.0))?)
            }
        },
        options: LinkOptionsPatch::default(),
    };
    // The write is charged before the password is hashed: the key's budget also bounds how much hashing it can
    // ask for (a busy hasher's 503 then costs one write of the budget).
    let limit = state.limits.charge(&state.db, &caller).await?;
    options.password = match password {
        Some(p) => Some(hash_password(&state, p).await?),
        None => None,
    };
    let patch = LinkPatch { options, ..patch };
    let link = state
        .db
        .update_link(&caller.account_id, &id, &patch, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        link.map(Json),
    ))
}

/// Deletes a link: it leaves the list, its short code is free again on its domain, and the edge sends its
/// visitors to the domain's fallback. Its creation still counts against the key's hourly limit. Of concurrent
/// deletes of one link exactly one answers 204, the others 404. A management write (see `update_link`).
#[utoipa::path(
    delete,
    path = "/api/v1/external/links/{id}",
    tag = "links",
    operation_id = "delete_link",
    params(("id" = String, Path, format = Uuid, description = "Link id")),
    security(("Token" = [])),
    responses(
        (status = 204, description = "Deleted", headers(
            ("X-RateLimit-Limit" = i64, description = "Management writes allowed per rolling minute"),
            ("X-RateLimit-Remaining" = i64, description = "Management writes left now"),
            ("X-RateLimit-Reset" = i64, description = "UNIX seconds when the oldest counted write leaves the window"),
        )),
        AuthErrors,
        (status = 404, description = "`not_found`: no such link in this account", body = ErrorBody),
        WriteLimitErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn delete_link(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
) -> Result<Response, ApiError> {
    let limit = state.limits.charge(&state.db, &caller).await?;
    let deleted = state
        .db
        .delete_link(&caller.account_id, &id, &Actor::ApiKey)
        .await
        .map_err(ApiError::from);
    Ok(limits::answer(
        &limit,
        &state.publisher.wake,
        deleted.map(|()| StatusCode::NO_CONTENT),
    ))
}
