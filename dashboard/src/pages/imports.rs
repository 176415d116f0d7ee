//! "Import links" (issue 24): a CSV file uploaded from the Links page becomes an import job, the same as the API's
//! `POST links/import` ([`shortlink_store::Db::queue_import`]); its page shows a progress bar that the page's
//! script moves while the job runs (from `…/status`) and that is right on reload too, then the problems by row.

use super::{nav, see_other, uuid};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::session::SignedIn;
use crate::views::{ImportJobPage, ImportPage, render};
use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::Permission;
use shortlink_store::{ImportStatus, MAX_IMPORT_BYTES, StoreError};

/// `GET /dashboard/links/import`: the form.
pub(crate) async fn page(
    State(state): State<DashboardState>,
    user: SignedIn,
) -> Result<Response, DashboardError> {
    user.require(Permission::EditLinks)?;
    Ok(render(&form_page(&state, &user, None)).into_response())
}

fn form_page(state: &DashboardState, user: &SignedIn, error: Option<String>) -> ImportPage {
    ImportPage {
        nav: nav(user, "links"),
        title: "Import links",
        csrf: user.csrf.clone(),
        limit_per_day: state.imports.limit_per_day,
        max_megabytes: MAX_IMPORT_BYTES / (1024 * 1024),
        error,
    }
}

/// `POST /dashboard/links/import` (multipart: `csrf`, then `file`): queued, then the job's page.
pub(crate) async fn upload(
    State(state): State<DashboardState>,
    user: SignedIn,
    mut form: Multipart,
) -> Result<Response, DashboardError> {
    user.require(Permission::EditLinks)?;
    let (mut csrf, mut file) = (None, None);
    // Any read error (a body over the limit included) is the form's fault: shown on the form.
    let refused = |message: &str| {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            render(&form_page(&state, &user, Some(message.to_owned()))),
        )
            .into_response()
    };
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                user.check_csrf(csrf.as_deref().unwrap_or_default())?;
                return Ok(refused(&format!(
                    "The file is larger than {} MB.",
                    MAX_IMPORT_BYTES / (1024 * 1024)
                )));
            }
            Err(_) => return Err(DashboardError::CsrfToken),
        };
        match field.name() {
            Some("csrf") => csrf = field.text().await.ok(),
            Some("file") => {
                // The token comes first in the form: nothing of the file is read for a forged post.
                user.check_csrf(csrf.as_deref().unwrap_or_default())?;
                match field.bytes().await {
                    Ok(b) => file = Some(b),
                    Err(_) => {
                        return Ok(refused(&format!(
                            "The file is larger than {} MB.",
                            MAX_IMPORT_BYTES / (1024 * 1024)
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    user.check_csrf(csrf.as_deref().unwrap_or_default())?;
    let Some(bytes) = file.filter(|b| !b.is_empty()) else {
        return Ok(refused("Choose a CSV file to import."));
    };
    if bytes.len() > MAX_IMPORT_BYTES {
        return Ok(refused(&format!(
            "The file is larger than {} MB.",
            MAX_IMPORT_BYTES / (1024 * 1024)
        )));
    }
    let Ok(text) = String::from_utf8(bytes.to_vec()) else {
        return Ok(refused(
            "The file must be UTF-8 text (save it as “CSV UTF-8”).",
        ));
    };
    match state
        .db
        .queue_import(
            &user.account.account_id,
            &user.actor(),
            text,
            state.imports.limit_per_day,
        )
        .await
    {
        Ok(job) => {
            state.imports.wake.notify_one();
            Ok(see_other(&format!("/dashboard/links/imports/{}", job.id)))
        }
        Err(StoreError::Invalid(message)) => {
            let mut m = message;
            if let Some(first) = m.get(..1) {
                m = format!("{}{}", first.to_uppercase(), &m[1..]);
            }
            Ok(refused(&format!("{m}.")))
        }
        Err(StoreError::RateLimited(limit)) => Ok(refused(&format!(
            "Not now: the account imported its {} links of the day, or has imports still running. Try again in {} minutes.",
            limit.limit,
            (limit.retry_after + 59) / 60
        ))),
        Err(e) => Err(e.into()),
    }
}

async fn own_import(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
) -> Result<ImportStatus, DashboardError> {
    let id = uuid(raw).ok_or(DashboardError::NotFound)?;
    Ok(state
        .db
        .import_status(&user.account.account_id, &id)
        .await?)
}

/// `GET /dashboard/links/imports/{id}`: the progress bar, the counts, and the problems once it ends.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    let job = own_import(&state, &user, &id).await?;
    let ended = job.status == "done" || job.status == "failed";
    Ok(render(&ImportJobPage {
        nav: nav(&user, "links"),
        title: "Import",
        status_url: format!("/dashboard/links/imports/{}/status", job.id),
        state: state_text(&job.status),
        ended,
        job,
    })
    .into_response())
}

/// What the page says of a status.
fn state_text(status: &str) -> &'static str {
    match status {
        "queued" => "Waiting to start",
        "running" => "Importing",
        "done" => "Done",
        _ => "Failed",
    }
}

/// The counts the page's script reads while the job runs.
#[derive(serde::Serialize)]
pub(crate) struct Progress {
    status: String,
    state: &'static str,
    total: i64,
    processed: i64,
    created: i64,
    failed: i64,
}

/// `GET /dashboard/links/imports/{id}/status`: the job's counts as JSON.
pub(crate) async fn status(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Progress>, DashboardError> {
    let job = own_import(&state, &user, &id).await?;
    Ok(Json(Progress {
        state: state_text(&job.status),
        status: job.status,
        total: job.total,
        processed: job.processed,
        created: job.created,
        failed: job.failed,
    }))
}
