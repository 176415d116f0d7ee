//! The domains page: where the account's links can live.

use super::nav;
use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use crate::views::{DomainsPage, render};
use axum::extract::State;
use axum::response::{IntoResponse, Response};

/// `GET /dashboard/domains`: enabled platform domains and the account's custom domains with their state.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
) -> Result<Response, DashboardError> {
    let domains = state.db.account_domains(&user.account.account_id).await?;
    Ok(render(&DomainsPage {
        nav: nav(&user, "domains"),
        title: "Domains",
        domains,
    })
    .into_response())
}
