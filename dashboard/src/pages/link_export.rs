//! `GET /dashboard/links/export`: "Export links" on the Links page, the CSV of every link its search and filters
//! match, streamed in batches as the API's export is ([`export_stream`]), so a large account costs the origin one
//! batch of memory. Any member may export: it shows what the Links page shows.

use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{ExportFormat, ListQuery};
use shortlink_store::export_stream;

/// Links per batch, as the API's.
const BATCH: u32 = 1_000;

/// The export, its query in the API's names (the Links page writes it: `Filters::export_query`).
pub(crate) async fn export(
    State(state): State<DashboardState>,
    user: SignedIn,
    RawQuery(query): RawQuery,
) -> Result<Response, DashboardError> {
    let (query, _) =
        ListQuery::parse_export(query.as_deref()).map_err(|_| DashboardError::BadFilters)?;
    let account = user.account.account_id.clone();
    // The first batch before the answer starts: a failure there is still an error page.
    let first = state.db.export_links(&account, &query, None, BATCH).await?;
    let body = export_stream(
        state.db.clone(),
        account,
        query,
        ExportFormat::Csv,
        first,
        BATCH,
        None,
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"links.csv\"",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(body),
    )
        .into_response())
}
