//! The link page's "Live" panel (issue 26): the link's clicks per minute over the last hour. The page renders it
//! (so it is right without a script, as a snapshot); its script asks `GET /dashboard/links/{id}/live` every 5
//! seconds and swaps in the new chart and total without a reload.

use super::uuid;
use crate::DashboardState;
use crate::chart;
use crate::error::DashboardError;
use crate::session::SignedIn;
use axum::Json;
use axum::extract::{Path, State};
use shortlink_store::domain::Micros;

/// What the panel's script swaps in.
#[derive(serde::Serialize)]
pub(crate) struct Live {
    /// Clicks in the last 60 minutes.
    total: i64,
    /// The sentence above the chart.
    text: String,
    /// The chart: SVG built from numbers and times only ([`chart::clicks_per_minute`]).
    chart: String,
}

/// The panel's sentence.
pub(crate) fn live_text(total: i64) -> String {
    format!("{total} clicks in the last 60 minutes")
}

/// `GET /dashboard/links/{id}/live`: the last hour of one of the account's links (any role may read it, as the
/// link's page); another account's link is not found.
pub(crate) async fn live(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Live>, DashboardError> {
    let id = uuid(&id).ok_or(DashboardError::NotFound)?;
    let hour = state
        .db
        .link_last_hour(&user.account.account_id, &id, Micros::now())
        .await?;
    Ok(Json(Live {
        total: hour.total,
        text: live_text(hour.total),
        chart: chart::clicks_per_minute(&hour),
    }))
}
