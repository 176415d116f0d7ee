//! "Forgot password": with mail configured, an email address gets a one-use link, valid one hour, that sets a new
//! password and ends every session of that user; the page answers the same whether the email has a user or not.
//! Without mail, the page says to ask the operator. Nobody is signed in by a reset: they sign in with the new
//! password (a link that leaked is then worth one password change, never a session).
//!
//! These pages have no session to protect (the visitor has forgotten their password): the posts rely on the
//! guard's Origin check, as the sign-in form does.

use super::see_other;
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::mail::send_password_reset;
use crate::session;
use crate::views::{Nav, render};
use askama::Template;
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::domain::{Password, SecretToken};
use shortlink_store::{PasswordReset, ResetRequest};

/// "Forgot password"'s form.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct EmailForm {
    pub(crate) email: String,
}

/// `?sent=1`: the answer after a request, the same for every email.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct Sent {
    sent: Option<String>,
}

/// A new password, typed twice.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct NewPasswordForm {
    pub(crate) password: String,
    pub(crate) confirm: String,
}

#[derive(Template)]
#[template(path = "forgot.html")]
pub(crate) struct ForgotPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    /// Mail is configured: the form; else a word about the operator.
    pub(crate) mail: bool,
    /// A request was taken (whatever the email).
    pub(crate) sent: bool,
    pub(crate) email: String,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "reset.html")]
pub(crate) struct ResetPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    /// Unknown, used, replaced or expired.
    pub(crate) gone: bool,
    pub(crate) action: String,
    pub(crate) error: Option<String>,
}

/// Where mailed links point: the public URL, which the origin requires with mail (never a `Host` header a
/// client chose, which would mail a working token to another site). None: mail cannot be used.
fn link_base(state: &DashboardState) -> Option<&str> {
    state.mailer.as_ref()?;
    state
        .public_origin
        .as_deref()
        .map(|u| u.trim_end_matches('/'))
}

fn forgot(state: &DashboardState, sent: bool) -> ForgotPage {
    ForgotPage {
        nav: None,
        title: "Forgot password",
        mail: link_base(state).is_some(),
        sent,
        email: String::new(),
        error: None,
    }
}

/// `GET /dashboard/forgot-password` (`?sent=1` after a request).
pub(crate) async fn forgot_page(
    State(state): State<DashboardState>,
    Query(sent): Query<Sent>,
) -> Response {
    render(&forgot(&state, sent.sent.is_some())).into_response()
}

/// `POST /dashboard/forgot-password`: counted per email and per address; a link is made and mailed (in the
/// background) only when the email is an enabled user's, and the answer is the same redirect either way.
pub(crate) async fn forgot_post(
    State(state): State<DashboardState>,
    ClientKey(ip): ClientKey,
    Form(form): Form<EmailForm>,
) -> Result<Response, DashboardError> {
    let Some(base) = link_base(&state).map(str::to_owned) else {
        return Ok(render(&forgot(&state, false)).into_response());
    };
    let email: String = form.email.chars().take(254).collect();
    match state.db.request_password_reset(&email, &ip).await? {
        ResetRequest::Accepted(link) => {
            if let Some(link) = link {
                let url = format!("{base}/dashboard/reset/{}", link.token.expose());
                send_password_reset(&state, link.email, url);
            }
            Ok(see_other("/dashboard/forgot-password?sent=1"))
        }
        ResetRequest::Throttled { retry_after } => {
            let minutes = (retry_after + 59) / 60;
            let page = ForgotPage {
                email,
                error: Some(format!(
                    "Too many reset links were asked for this email or from your network. Try again in {minutes} minute{}.",
                    if minutes == 1 { "" } else { "s" }
                )),
                ..forgot(&state, false)
            };
            Ok((
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after.to_string())],
                render(&page),
            )
                .into_response())
        }
    }
}

fn reset_page_for(token: &str, error: Option<String>) -> ResetPage {
    ResetPage {
        nav: None,
        title: "Set a new password",
        gone: false,
        action: format!("/dashboard/reset/{token}"),
        error,
    }
}

fn gone() -> Response {
    (
        StatusCode::NOT_FOUND,
        render(&ResetPage {
            nav: None,
            title: "Link cannot be used",
            gone: true,
            action: String::new(),
            error: None,
        }),
    )
        .into_response()
}

/// `GET /dashboard/reset/{token}`.
pub(crate) async fn reset_page(
    State(state): State<DashboardState>,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok(gone());
    };
    if !state.db.password_reset_is_live(&token).await? {
        return Ok(gone());
    }
    Ok(render(&reset_page_for(token.expose(), None)).into_response())
}

/// `POST /dashboard/reset/{token}`: sets the password, spends the link, ends every session of the user; then
/// the sign-in page.
pub(crate) async fn reset(
    State(state): State<DashboardState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<NewPasswordForm>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok(gone());
    };
    // A dead link is said so before the password is looked at.
    if !state.db.password_reset_is_live(&token).await? {
        return Ok(gone());
    }
    let password = match Password::new(&form.password, &form.confirm) {
        Ok(p) => p,
        Err(e) => {
            return Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                render(&reset_page_for(token.expose(), Some(e.0))),
            )
                .into_response());
        }
    };
    match state.db.reset_password(&token, &password).await? {
        PasswordReset::Done { .. } => {
            // This browser's session (theirs, already ended with the others, or someone else's) ends too: one
            // browser, and the next step is signing in.
            if let Some(old) = session::token(&headers, state.secure_cookies) {
                state.db.end_session(&old).await?;
            }
            let mut r = see_other("/dashboard/sign-in?done=reset");
            r.headers_mut().insert(
                header::SET_COOKIE,
                session::clear_cookie(state.secure_cookies),
            );
            Ok(r)
        }
        PasswordReset::Gone => Ok(gone()),
    }
}
