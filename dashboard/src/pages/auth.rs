//! Invitation, sign-in, sign-out and the profile's password change.

use super::{Done, nav, see_other};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::{ChangePasswordForm, CsrfOnly, NewPasswordForm, SignInForm};
use crate::session::{self, SignedIn};
use crate::views::{InvitePage, ProfilePage, SignInPage, render};
use axum::Form;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shortlink_store::SignIn;
use shortlink_store::domain::{MAX_PASSWORD_CHARS, Password, SecretToken};
use std::net::SocketAddr;

/// The one message for a wrong email or a wrong password: it does not say which.
const REFUSED: &str = "Wrong email or password.";

/// The client's address, for the sign-in throttle: the configured proxy header, else the TCP peer.
pub(crate) struct ClientIp(String);

impl FromRequestParts<DashboardState> for ClientIp {
    type Rejection = DashboardError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &DashboardState,
    ) -> Result<Self, Self::Rejection> {
        let from_header = state.client_ip_header.as_deref().and_then(|name| {
            let value = parts.headers.get(name)?.to_str().ok()?;
            // The first address of a list (X-Forwarded-For), bounded: it becomes a database key.
            let first = value.split(',').next()?.trim();
            (!first.is_empty() && first.len() <= 45).then(|| first.to_owned())
        });
        let peer = || {
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip().to_string())
        };
        Ok(ClientIp(
            from_header
                .or_else(peer)
                .unwrap_or_else(|| "unknown".to_owned()),
        ))
    }
}

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
    ClientIp(ip): ClientIp,
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

/// `POST /dashboard/profile/password`: needs the current password; the account's other sessions end.
pub(crate) async fn change_password(
    State(state): State<DashboardState>,
    user: SignedIn,
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
    if form.current.chars().count() > MAX_PASSWORD_CHARS
        || !state
            .db
            .change_password(&user.account.account_id, &user.token, &form.current, &new)
            .await?
    {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The current password is wrong.".to_owned(),
        );
    }
    Ok(see_other("/dashboard/profile?done=password"))
}
