//! "Create account" (`--signup open`): a new user with an account they own, signed in at once. Throttled per
//! client address before any work ([`shortlink_store::Db::sign_up`]). With `--signup invite` (the default) these
//! routes are the dashboard's 404. The form has no session to protect; the post relies on the guard's Origin
//! check, as sign-in does.

use super::see_other;
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::session;
use crate::views::{Nav, render};
use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::domain::Password;
use shortlink_store::{SignUp, StoreError};

/// The form.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct SignUpForm {
    pub(crate) email: String,
    pub(crate) password: String,
    pub(crate) confirm: String,
}

#[derive(Template)]
#[template(path = "signup.html")]
pub(crate) struct SignUpPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) email: String,
    pub(crate) error: Option<String>,
    /// The email has a user or an account: links to sign in and to reset the password.
    pub(crate) taken: bool,
}

/// The refusal for a taken email: no more than sign-in tells (that the email has a password here).
pub(crate) const TAKEN: &str = "An account with this email exists already.";

fn open(state: &DashboardState) -> Result<(), DashboardError> {
    if state.signup_open {
        Ok(())
    } else {
        Err(DashboardError::NotFound)
    }
}

fn refuse(status: StatusCode, email: String, error: String, taken: bool) -> Response {
    (
        status,
        render(&SignUpPage {
            nav: None,
            title: "Create account",
            email,
            error: Some(error),
            taken,
        }),
    )
        .into_response()
}

/// `GET /dashboard/sign-up`; a signed-in visitor goes to their links.
pub(crate) async fn page(
    State(state): State<DashboardState>,
    headers: HeaderMap,
) -> Result<Response, DashboardError> {
    open(&state)?;
    if let Some(token) = session::token(&headers, state.secure_cookies) {
        if state.db.session(&token).await?.is_some() {
            return Ok(see_other("/dashboard/"));
        }
    }
    Ok(render(&SignUpPage {
        nav: None,
        title: "Create account",
        email: String::new(),
        error: None,
        taken: false,
    })
    .into_response())
}

/// `POST /dashboard/sign-up`: the user, their account and a session (a new id), then the links page.
pub(crate) async fn create(
    State(state): State<DashboardState>,
    ClientKey(ip): ClientKey,
    headers: HeaderMap,
    Form(form): Form<SignUpForm>,
) -> Result<Response, DashboardError> {
    open(&state)?;
    let email: String = form.email.chars().take(254).collect();
    // Checked before the store is asked: a typo in the confirmation costs no attempt.
    let password = match Password::new(&form.password, &form.confirm) {
        Ok(p) => p,
        Err(e) => return Ok(refuse(StatusCode::UNPROCESSABLE_ENTITY, email, e.0, false)),
    };
    let outcome = match state.db.sign_up(&email, &password, &ip).await {
        Ok(o) => o,
        Err(StoreError::Invalid(_)) => {
            return Ok(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                email,
                "Enter a valid email address.".to_owned(),
                false,
            ));
        }
        Err(e) => return Err(e.into()),
    };
    match outcome {
        SignUp::Created { session: new, .. } => {
            // A session the browser already had ends: one browser, one session.
            if let Some(old) = session::token(&headers, state.secure_cookies) {
                state.db.end_session(&old).await?;
            }
            let mut r = see_other("/dashboard/?done=welcome");
            r.headers_mut().insert(
                header::SET_COOKIE,
                session::set_cookie(&new.token, state.secure_cookies),
            );
            Ok(r)
        }
        SignUp::Taken => Ok(refuse(StatusCode::CONFLICT, email, TAKEN.to_owned(), true)),
        SignUp::Throttled { retry_after } => {
            let minutes = (retry_after + 59) / 60;
            let mut r = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                email,
                format!(
                    "Too many accounts were asked for from your network. Try again in {minutes} minute{}.",
                    if minutes == 1 { "" } else { "s" }
                ),
                false,
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, retry_after.into());
            Ok(r)
        }
    }
}
