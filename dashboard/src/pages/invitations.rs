//! Accepting an invitation to join an account: a new person chooses a password; a user who already has one
//! accepts signed in (the invitation is for their email only).

use super::see_other;
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::NewPasswordForm;
use crate::session;
use crate::views::{InvitePage, InviteState, render};
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{Password, SecretToken};
use shortlink_store::{Accepted, InvitationView, SessionUser};
use subtle::ConstantTimeEq;

fn page(
    state: InviteState,
    view: Option<&InvitationView>,
    token: &str,
    csrf: String,
    error: Option<String>,
) -> InvitePage {
    InvitePage {
        nav: None,
        title: "Invitation",
        state,
        account_name: view.map(|v| v.account_name.clone()).unwrap_or_default(),
        email: view.map(|v| v.email.clone()).unwrap_or_default(),
        role: view.map_or("", |v| v.role.as_str()),
        action: format!("/dashboard/invite/{token}"),
        csrf,
        error,
    }
}

fn gone() -> Response {
    (
        StatusCode::NOT_FOUND,
        render(&page(InviteState::Gone, None, "", String::new(), None)),
    )
        .into_response()
}

/// The signed-in user of this browser, if any, with their session token.
async fn signed_in(
    state: &DashboardState,
    headers: &HeaderMap,
) -> Result<Option<(SessionUser, SecretToken)>, DashboardError> {
    let Some(token) = session::token(headers, state.secure_cookies) else {
        return Ok(None);
    };
    Ok(state.db.session(&token).await?.map(|u| (u, token)))
}

/// Which form the page shows for this visitor.
fn state_for(view: &InvitationView, user: Option<&SessionUser>) -> InviteState {
    match user {
        Some(u) if u.email == view.email => InviteState::SignedIn,
        Some(u) if view.user_exists => InviteState::OtherUser {
            signed_in_as: u.email.clone(),
        },
        _ if view.user_exists => InviteState::SignInFirst,
        _ => InviteState::NewUser,
    }
}

/// `GET /dashboard/invite/{token}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok(gone());
    };
    let Some(view) = state.db.invitation(&token).await? else {
        return Ok(gone());
    };
    let user = signed_in(&state, &headers).await?;
    let csrf = user
        .as_ref()
        .map(|(_, t)| t.derive("csrf"))
        .unwrap_or_default();
    let shown = state_for(&view, user.as_ref().map(|(u, _)| u));
    Ok(render(&page(shown, Some(&view), token.expose(), csrf, None)).into_response())
}

/// `POST /dashboard/invite/{token}`: a new person's password, or a signed-in user's one button.
pub(crate) async fn accept(
    State(state): State<DashboardState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<NewPasswordForm>,
) -> Result<Response, DashboardError> {
    let Some(token) = SecretToken::parse(&raw) else {
        return Ok(gone());
    };
    let Some(view) = state.db.invitation(&token).await? else {
        return Ok(gone());
    };
    let user = signed_in(&state, &headers).await?;
    match state_for(&view, user.as_ref().map(|(u, _)| u)) {
        InviteState::SignedIn => {
            let Some((user, session)) = user else {
                return Ok(gone());
            };
            // A signed-in post changes the session's account: it must come from this session's page.
            let csrf = session.derive("csrf");
            if !bool::from(csrf.as_bytes().ct_eq(form.csrf.as_bytes())) {
                return Err(DashboardError::CsrfToken);
            }
            match state
                .db
                .accept_invitation_signed_in(&token, &user.user_id, &session)
                .await?
            {
                Accepted::Joined { .. } => Ok(see_other("/dashboard/?done=joined")),
                _ => Ok(gone()),
            }
        }
        InviteState::NewUser => {
            let password = match Password::new(&form.password, &form.confirm) {
                Ok(p) => p,
                Err(e) => {
                    return Ok((
                        StatusCode::UNPROCESSABLE_ENTITY,
                        render(&page(
                            InviteState::NewUser,
                            Some(&view),
                            token.expose(),
                            String::new(),
                            Some(e.0),
                        )),
                    )
                        .into_response());
                }
            };
            match state
                .db
                .accept_invitation_new_user(&token, &password)
                .await?
            {
                Accepted::NewUser(new) => {
                    // A session this browser had (someone else's) ends: one browser, one session.
                    if let Some((_, old)) = &user {
                        state.db.end_session(old).await?;
                    }
                    let mut r = see_other("/dashboard/?done=joined");
                    r.headers_mut().insert(
                        header::SET_COOKIE,
                        session::set_cookie(&new.token, state.secure_cookies),
                    );
                    Ok(r)
                }
                Accepted::SignInFirst => Ok(render(&page(
                    InviteState::SignInFirst,
                    Some(&view),
                    token.expose(),
                    String::new(),
                    None,
                ))
                .into_response()),
                _ => Ok(gone()),
            }
        }
        // Nothing to post from these pages.
        shown => Ok((
            StatusCode::CONFLICT,
            render(&page(
                shown,
                Some(&view),
                token.expose(),
                String::new(),
                None,
            )),
        )
            .into_response()),
    }
}
