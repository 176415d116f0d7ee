//! Sign-in, sign-out and the profile's password change.

use super::{Done, nav, see_other};
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::forms::{ChangePasswordForm, CsrfOnly, SignInForm};
use crate::session::{self, SignedIn};
use crate::views::{ProfilePage, SignInPage, render};
use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{MAX_PASSWORD_CHARS, Password};
use shortlink_store::{PasswordCheck, SignIn};

/// The one message for a wrong email or a wrong password: it does not say which.
const REFUSED: &str = "Wrong email or password.";

/// Where to go after signing in: `?next=` when it is one of the dashboard's own invitation pages (an existing
/// user accepting an invitation), never anywhere else, so the parameter cannot send anyone off-site.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct Next {
    next: String,
}

/// `next` if it is a safe place to go after sign-in, else None.
pub(crate) fn safe_next(next: &str) -> Option<String> {
    let rest = next.strip_prefix("/dashboard/invite/")?;
    (!rest.is_empty()
        && rest.len() <= 128
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then(|| next.to_owned())
}

/// `GET /dashboard/sign-in`; a signed-in visitor goes straight to their links (or where `next` says).
pub(crate) async fn sign_in_page(
    State(state): State<DashboardState>,
    headers: HeaderMap,
    Query(next): Query<Next>,
    Query(done): Query<Done>,
) -> Result<Response, DashboardError> {
    let next = safe_next(&next.next);
    if let Some(token) = session::token(&headers, state.secure_cookies) {
        if state.db.session(&token).await?.is_some() {
            return Ok(see_other(next.as_deref().unwrap_or("/dashboard/")));
        }
    }
    Ok(render(&SignInPage {
        nav: None,
        title: "Sign in",
        email: String::new(),
        error: None,
        next: next.unwrap_or_default(),
        signup_open: state.signup_open,
        notice: done.notice(),
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
    let next = safe_next(&form.next);
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
            let mut r = see_other(next.as_deref().unwrap_or("/dashboard/"));
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
            next: next.unwrap_or_default(),
            signup_open: state.signup_open,
            notice: None,
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

fn profile_page(
    user: &SignedIn,
    error: Option<String>,
    notice: Option<&'static str>,
) -> ProfilePage {
    ProfilePage {
        nav: nav(user, "profile"),
        title: "Profile",
        email: user.user.email.clone(),
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
                &user.user.user_id,
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

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_invitation_pages() {
        assert!(safe_next("/dashboard/invite/abc_DEF-123").is_some());
        for bad in [
            "",
            "/dashboard/",
            "https://evil.example/",
            "//evil.example/dashboard/invite/x",
            "/dashboard/invite/",
            "/dashboard/invite/x/../../y",
            "/dashboard/invite/x?y=1",
        ] {
            assert!(safe_next(bad).is_none(), "{bad}");
        }
    }
}
