//! `GET /api/v1/external/links/{id}/stats` (our extension): clicks by day and by country.

use super::error::{ApiError, AuthErrors, ErrorBody, ServerErrors};
use super::extract::Caller;
use super::state::AppState;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

/// The routes of this resource.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/api/v1/external/links/{id}/stats", get(stats))
}

/// Clicks on one day.
#[derive(Serialize, ToSchema)]
pub(crate) struct DayCount {
    /// UTC date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    date: String,
    /// Clicks that day.
    clicks: i64,
}

/// Clicks from one country.
#[derive(Serialize, ToSchema)]
pub(crate) struct CountryCount {
    /// ISO 3166-1 alpha-2, or null when the country was unknown.
    country: Option<String>,
    /// Clicks from it.
    clicks: i64,
}

/// The clicks of one link.
#[derive(Serialize, ToSchema)]
pub(crate) struct LinkStats {
    /// The link.
    #[schema(format = Uuid)]
    link_id: String,
    /// All clicks.
    total: i64,
    /// By UTC day, oldest first.
    by_day: Vec<DayCount>,
    /// By country, most clicks first.
    by_country: Vec<CountryCount>,
}

impl From<shortlink_store::LinkStats> for LinkStats {
    fn from(s: shortlink_store::LinkStats) -> Self {
        Self {
            link_id: s.link_id,
            total: s.total,
            by_day: s
                .by_day
                .into_iter()
                .map(|d| DayCount {
                    date: d.date,
                    clicks: d.clicks,
                })
                .collect(),
            by_country: s
                .by_country
                .into_iter()
                .map(|c| CountryCount {
                    country: c.country,
                    clicks: c.clicks,
                })
                .collect(),
        }
    }
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
        (status = 200, description = "The link's clicks", body = LinkStats),
        (status = 404, description = "`not_found`: not one of the account's links", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    ),
)]
pub(crate) async fn stats(
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
        .map(|s| Json(LinkStats::from(s)))
        .ok_or(ApiError::NotFound)
}
