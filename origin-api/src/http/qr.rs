//! `GET /api/v1/external/links/{id}/qr`: the QR code of one of the account's links, pointing at its short URL, as
//! SVG (the default) or PNG of `size` × `size` pixels. Drawing is in `link-qr`, shared with the dashboard.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::{Caller, ResourceId};
use super::state::AppState;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use link_qr::{Format, QrRequest};

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/links/{id}/qr", get(qr))
}

/// Query parameters of the QR code, for the OpenAPI document; the handler reads the raw query with
/// [`QrRequest::parse`] so each bad value is a `validation_error` naming the parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct QrParams {
    /// `svg` (the default) or `png`.
    #[param(pattern = "^(svg|png)$")]
    format: Option<String>,
    /// Edge of the image in pixels (for SVG, its declared width and height).
    #[param(minimum = 64, maximum = 2048, default = 256)]
    size: Option<u32>,
}

/// A QR code of the link's short URL. PNGs are drawn under a process-wide bound (one per core by default): when
/// every place is taken for 2 s, the answer is `503` with `Retry-After: 1`.
#[utoipa::path(
    get,
    path = "/api/v1/external/links/{id}/qr",
    tag = "links",
    operation_id = "link_qr",
    params(("id" = String, Path, format = Uuid, description = "Link id"), QrParams),
    security(("Token" = [])),
    responses(
        (status = 200, description = "The code, light background, quiet zone included",
            content((String = "image/svg+xml"), (Vec<u8> = "image/png"))),
        (status = 400, description = "`validation_error`: `format` or `size` out of range, or given twice",
            body = ErrorBody),
        AuthErrors,
        (status = 404, description = "`not_found`: no such link in this account", body = ErrorBody),
        ServerErrors,
    ),
)]
pub(crate) async fn qr(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ResourceId(id): ResourceId,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let request =
        QrRequest::parse(query.as_deref()).map_err(|e| ApiError::Validation(e.to_string()))?;
    let link = state.db.get_link(&caller.account_id, &id).await?;
    // A 2048-pixel PNG takes milliseconds of CPU: off the async workers, so other requests keep flowing, and
    // under the render bound, so a burst of them cannot take every core (and blocking thread) from the rest.
    // An SVG is a few kilobytes of text: not worth a place.
    let permit = match request.format {
        Format::Png => Some(state.limits.renders.enter().await?),
        Format::Svg => None,
    };
    let rendered = tokio::task::spawn_blocking(move || {
        let rendered = link_qr::render(&link.short_url(), request);
        drop(permit);
        rendered
    })
    .await
    .map_err(|_| ApiError::Internal)?
    .map_err(|e| ApiError::Validation(e.to_string()))?;
    Ok((
        [
            (header::CONTENT_TYPE, rendered.content_type),
            // The short URL of a link never changes; the owner's browser may keep the image a day.
            (header::CACHE_CONTROL, "private, max-age=86400"),
        ],
        rendered.body,
    )
        .into_response())
}
