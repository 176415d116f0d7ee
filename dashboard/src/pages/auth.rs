//! Invitation, sign-in, sign-out and the profile's password change.

use super::{Done, nav, see_other};
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::forms::{ChangePasswordForm, CsrfOnly, NewPasswordForm, SignInForm};
use crate::session::{self, SignedIn};
use crate::views::{InvitePage, ProfilePage, SignInPage, render};
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{MAX_PASSWORD_CHARS, Password, SecretToken};
use shortlink_store::{PasswordCheck, SignIn};

/// The one message for a wrong email or a wrong password: it does not say which.
const REFUSED: &str = "Wrong email or password.";

/// `GET /dashboard/sign-in`; a signed-in visitor goes straight to their links.
pub(crate) async fn sign_in_page(
    State(state): State<DashboardState>,
    headers: HeaderMap,
) -> Result<Response, DashboardError> {
    if let Some(token) = session::token(&headers, state.secure_cookies) {
        if state.db.session(&token).await?.is_some() {
            return Ok(see_other("/dashboard/"));
        }
    }
    Ok(render(&SignInPage {
        nav: None,
        title: "Sign in",
        email: String::new(),
        error: None,
    })
    .into_response())
}

/// `POST /dashboard/sign-in`: a new session (and so a new id) on success.
pub(crate) async fn sign_in(
    State(state): State<DashboardState>,
    ClientKey(ip): ClientKey,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, DashboardError> {
    let email: String = form.email.chars().take(254).collect();
    let outcome = if form.password.chars().count() > MAX_PASSWORD_CHARS {
        // No password this long was ever set; not worth a hash.
        SignIn::Refused
    } else {
        state.db.sign_in(&email, &form.password, &ip).await?
    };
    let (status, message, retry_after) = match outcome {
        SignIn::Ok(new) => {
            // A session the browser already had is ended: one browser, one session.
            if let Some(old) = session::token(&headers, state.secure_cookies) {
                state.db.end_session(&old).await?;
            }
            let mut r = see_other("/dashboard/");
            r.headers_mut().insert(
                header::SET_COOKIE,
                session::set_cookie(&new.token, state.secure_cookies),
            );
            return Ok(r);
        }
        SignIn::Refused => (StatusCode::UNAUTHORIZED, REFUSED.to_owned(), None),
        SignIn::Throttled { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Too many failed sign-ins. Try again in {} minute{}.",
                (retry_after + 59) / 60,
                if (retry_after + 59) / 60 == 1 {
                    ""
                } else {
                    "s"
                }
            ),
            Some(retry_after),
        ),
    };
    let mut r = (
        status,
        render(&SignInPage {
            nav: None,
            title: "Sign in",
            email,
            error: Some(message),
        }),
    )
        .into_response();
    if let Some(secs) = retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, secs.into());
    }
    Ok(r)
}

/// `POST /dashboard/sign-out`: the session ends on the server, not only in the browser.
pub(crate) async fn sign_out(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    state.db.end_session(&user.token).await?;
    let mut r = see_other("/dashboard/sign-in");
    r.headers_mut().insert(
        header::SET_COOKIE,
        session::clear_cookie(state.secure_cookies),
    );
    Ok(r)
}

fn invite_view(email: Option<String>, token: &str, error: Option<String>) -> InvitePage {
    InvitePage {
        nav: None,
        title: "Set your password",
        email,
        action: format!("/dashboard/invite/{token}"),
        error,
    }
}

/// `GET /dashboard/invite/{token}`.
pub(crate) async fn invite_page_get(
    State(state): State<DashboardState>,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok((StatusCode::NOT_FOUND, render(&invite_view(None, "", None))).into_response());
    };
    let email = state.db.invited_email(&token).await?;
    let status = if email.is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    Ok((status, render(&invite_view(email, token.expose(), None))).into_response())
}

/// `POST /dashboard/invite/{token}`: sets the password, spends the invitation, signs in.
pub(crate) async fn accept_invite(
    State(state): State<DashboardState>,
    Path(raw): Path<String>,
    Form(form): Form<NewPasswordForm>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok((StatusCode::NOT_FOUND, render(&invite_view(None, "", None))).into_response());
    };
    let password = match Password::new(&form.password, &form.confirm) {
        Ok(p) => p,
        Err(e) => {
            let email = state.db.invited_email(&token).await?;
            return Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                render(&invite_view(email, token.expose(), Some(e.0))),
            )
                .into_response());
        }
    };
    match state.db.accept_invite(&token, &password).await? {
        Some(session) => {
            let mut r = see_other("/dashboard/");
            r.headers_mut().insert(
                header::SET_COOKIE,
                session::set_cookie(&session.token, state.secure_cookies),
            );
            Ok(r)
        }
        None => Ok((StatusCode::NOT_FOUND, render(&invite_view(None, "", None))).into_response()),
    }
}

fn profile_page(
    user: &SignedIn,
    error: Option<String>,
    notice: Option<&'static str>,
) -> ProfilePage {
    ProfilePage {
        nav: nav(user, "profile"),
        title: "Profile",
        email: user.account.email.clone(),
        csrf: user.csrf.clone(),
        error,
        notice,
    }
}

/// `GET /dashboard/profile`.
pub(crate) async fn profile(user: SignedIn, Query(done): Query<Done>) -> Response {
    render(&profile_page(&user, None, done.notice())).into_response()
}

/// `POST /dashboard/profile/password`: needs the current password (throttled like sign-in); the account's other
/// sessions end.
pub(crate) async fn change_password(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Form(form): Form<ChangePasswordForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    let refuse = |status, message: String| {
        Ok((status, render(&profile_page(&user, Some(message), None))).into_response())
    };
    let new = match Password::new(&form.password, &form.confirm) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, e.0),
    };
    let check = if form.current.is_empty() || form.current.chars().count() > MAX_PASSWORD_CHARS {
        PasswordCheck::Wrong
    } else {
        state
            .db
            .change_password(
                &user.account.account_id,
                &user.token,
                &form.current,
                &new,
                &client,
            )
            .await?
    };
    match check {
        PasswordCheck::Right => Ok(see_other("/dashboard/profile?done=password")),
        PasswordCheck::Wrong => refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The current password is wrong.".to_owned(),
        ),
        PasswordCheck::Throttled { retry_after } => {
            let mut r = (
                StatusCode::TOO_MANY_REQUESTS,
                render(&profile_page(
                    &user,
                    Some(crate::reauth::throttled(retry_after)),
                    None,
                )),
            )
                .into_response();
            r.headers_mut()
                .insert(header::RETRY_AFTER, retry_after.into());
            Ok(r)
        }
    }
}
