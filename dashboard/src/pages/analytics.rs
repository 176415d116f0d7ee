//! Click statistics in the dashboard (issue 26): the section the link and group pages show
//! ([`crate::stats_view`]), the account's Analytics page, and "Export clicks": the raw events of a link, a group or
//! the account over a range, as the API's CSV export streams them ([`click_export_stream`]). Any member may see
//! and export them, as any member sees the Links page; another account's link or group is a 404.

use super::nav;
use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use crate::stats_view::{self, StatsSection};
use crate::views::{AnalyticsPage, render};
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{ClickExportFormat, ClickExportQuery, Day};
use shortlink_store::{ExportScope, StatsScope, click_export_stream};

/// Raw events per batch, as the API's.
const BATCH: u32 = 1_000;

/// The statistics section of `scope` over the range in `query`, on the page at `page`, exporting from `export`.
pub(super) async fn section(
    state: &DashboardState,
    user: &SignedIn,
    scope: StatsScope<'_>,
    query: Option<&str>,
    page: &str,
    export: &str,
) -> Result<StatsSection, DashboardError> {
    let range = stats_view::range(query);
    let stats = state
        .db
        .click_stats(&user.account.account_id, scope, range.0, range.1)
        .await?
        .ok_or(DashboardError::NotFound)?;
    Ok(StatsSection::new(&stats, range, page.to_owned(), export))
}

/// `GET /dashboard/analytics`: every click of the account.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    RawQuery(query): RawQuery,
) -> Result<Response, DashboardError> {
    let stats = section(
        &state,
        &user,
        StatsScope::Account,
        query.as_deref(),
        "/dashboard/analytics",
        "/dashboard/clicks.csv",
    )
    .await?;
    Ok(render(&AnalyticsPage {
        nav: nav(&user, "analytics"),
        title: "Analytics".to_owned(),
        stats,
    })
    .into_response())
}

/// The CSV of `scope`'s raw events over the query's range (`from`, `to`: the API's rules; a bad range is a 400
/// page, the page's own links never make one).
async fn export(
    state: &DashboardState,
    user: &SignedIn,
    scope: ExportScope,
    query: Option<&str>,
    file: &str,
) -> Result<Response, DashboardError> {
    let q = ClickExportQuery::parse(Some(&stats_view::range_params(query)), Day::today())
        .map_err(|_| DashboardError::BadFilters)?;
    let account = user.account.account_id.clone();
    // The first batch before the answer starts: another account's link or group is still a 404 page.
    let first = state
        .db
        .click_export_batch(&account, &scope, (q.from, q.to), None, BATCH)
        .await?
        .ok_or(DashboardError::NotFound)?;
    let body = click_export_stream(
        state.db.clone(),
        account,
        scope,
        (q.from, q.to),
        ClickExportFormat::Csv,
        first,
        BATCH,
        None,
    );
    let disposition = format!(
        "attachment; filename=\"{file}-{}-{}.csv\"",
        q.from.to_iso_date(),
        q.to.to_iso_date()
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// `GET /dashboard/links/{id}/clicks.csv`.
pub(crate) async fn link_clicks(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, DashboardError> {
    let scope = ExportScope::Link(super::uuid(&id).ok_or(DashboardError::NotFound)?);
    export(&state, &user, scope, query.as_deref(), "link-clicks").await
}

/// `GET /dashboard/groups/{id}/clicks.csv`.
pub(crate) async fn group_clicks(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, DashboardError> {
    let scope = ExportScope::Group(super::uuid(&id).ok_or(DashboardError::NotFound)?);
    export(&state, &user, scope, query.as_deref(), "group-clicks").await
}

/// `GET /dashboard/clicks.csv`: the account's.
pub(crate) async fn account_clicks(
    State(state): State<DashboardState>,
    user: SignedIn,
    RawQuery(query): RawQuery,
) -> Result<Response, DashboardError> {
    export(
        &state,
        &user,
        ExportScope::Account,
        query.as_deref(),
        "clicks",
    )
    .await
}
