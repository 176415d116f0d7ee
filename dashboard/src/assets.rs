//! The stylesheet, the scripts and the icon, compiled into the binary: no CDN, nothing to deploy beside it.

use crate::error::DashboardError;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// `(name, content type, bytes)`.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../assets/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    ),
    (
        "dynamic-link.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/dynamic-link.js"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../assets/icon.svg"),
    ),
];

/// `GET /dashboard/assets/{file}`. Cached for five minutes: a deploy shows within minutes without asset hashes.
pub(crate) async fn serve(Path(file): Path<String>) -> Result<Response, DashboardError> {
    let (_, content_type, body) = ASSETS
        .iter()
        .find(|(name, _, _)| *name == file)
        .ok_or(DashboardError::NotFound)?;
    Ok((
        [
            (header::CONTENT_TYPE, *content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        *body,
    )
        .into_response())
}
