//! Members (admins and owners): who belongs to the account and with which role, inviting people, changing roles,
//! removing members; owners also rename the account. Every member may switch between their accounts and leave
//! one. The store checks every rule again ([`shortlink_store::Acting`]); this page shows only what the role may use.

use super::{Done, charge_change, nav, see_other, show_time, uuid};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::{CsrfOnly, InviteForm, RenameForm, RoleForm, SwitchForm};
use crate::session::SignedIn;
use crate::views::{ConfirmPage, InvitationMade, MemberItem, MembersPage, render};
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shortlink_store::StoreError;
use shortlink_store::domain::{Permission, Role};

/// The base of links the dashboard hands out (invitations): the configured public URL, else this request's host
/// (development only: behind a proxy, set the public URL so a forged `Host` never reaches a link).
pub(crate) fn base_url(state: &DashboardState, headers: &HeaderMap) -> String {
    if let Some(public) = &state.public_origin {
        return public.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        })
        .unwrap_or("localhost");
    let scheme = if state.secure_cookies {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}")
}

struct Shown {
    made: Option<InvitationMade>,
    error: Option<String>,
    email: String,
    role: String,
    status: StatusCode,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            made: None,
            error: None,
            email: String::new(),
            role: Role::Member.as_str().to_owned(),
            status: StatusCode::OK,
        }
    }
}

async fn page(
    state: &DashboardState,
    user: &SignedIn,
    notice: Option<&'static str>,
    shown: Shown,
) -> Result<Response, DashboardError> {
    let me = user.account.role;
    let members = state.db.members(&user.account.account_id).await?;
    let owners = members.iter().filter(|m| m.role == Role::Owner).count();
    let members = members
        .into_iter()
        .map(|m| MemberItem {
            // The last owner's row has no controls: demoting or removing them is always refused.
            manageable: me.may_manage(m.role) && !(m.role == Role::Owner && owners == 1),
            is_me: m.user_id == user.user.user_id,
            user_id: m.user_id,
            email: m.email,
            role: m.role.as_str(),
            joined: show_time(&m.joined.to_iso8601()),
        })
        .collect();
    let pending = state
        .db
        .pending_invitations(&user.account.account_id)
        .await?
        .into_iter()
        .map(|p| {
            (
                p.email,
                p.role.as_str(),
                show_time(&p.expires_at.to_iso8601()),
            )
        })
        .collect();
    let assignable = Role::ALL
        .into_iter()
        .filter(|r| me.may_manage(*r))
        .map(Role::as_str)
        .collect();
    Ok((
        shown.status,
        render(&MembersPage {
            nav: nav(user, "members"),
            title: "Members",
            csrf: user.csrf.clone(),
            members,
            pending,
            assignable,
            may_rename: user.may(Permission::ManageOwners),
            account_name: user.account.name.clone(),
            made: shown.made,
            error: shown.error,
            email: shown.email,
            role: shown.role,
            notice,
        }),
    )
        .into_response())
}

/// `GET /dashboard/members`.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(done): Query<Done>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageMembers)?;
    page(&state, &user, done.notice(), Shown::default()).await
}

/// `POST /dashboard/members/invite`: the one-use link, shown once on this response, and mailed when mail is set up.
pub(crate) async fn invite(
    State(state): State<DashboardState>,
    user: SignedIn,
    headers: HeaderMap,
    Form(form): Form<InviteForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageMembers)?;
    let email: String = form.email.chars().take(254).collect();
    let refuse = |status, message: String| Shown {
        error: Some(message),
        email: email.clone(),
        role: form.role.chars().take(10).collect(),
        status,
        made: None,
    };
    let role: Role = match form.role.parse() {
        Ok(r) => r,
        Err(e) => {
            let e: shortlink_store::domain::ValidationError = e;
            return page(
                &state,
                &user,
                None,
                refuse(StatusCode::UNPROCESSABLE_ENTITY, e.0),
            )
            .await;
        }
    };
    if !user.account.role.may_manage(role) {
        return Err(DashboardError::Forbidden);
    }
    charge_change(&state, &user).await?;
    let invite = match state
        .db
        .invite_member(&user.account.account_id, &user.acting(), &email, role)
        .await
    {
        Ok(i) => i,
        Err(StoreError::Invalid(m) | StoreError::Conflict(m)) => {
            return page(
                &state,
                &user,
                None,
                refuse(StatusCode::UNPROCESSABLE_ENTITY, m),
            )
            .await;
        }
        Err(e) => return Err(e.into()),
    };
    let url = format!(
        "{}/dashboard/invite/{}",
        base_url(&state, &headers),
        invite.token.expose()
    );
    let expires_at = show_time(&invite.expires_at.to_iso8601());
    let mailed = crate::mail::send_invitation(
        &state,
        &invite.email,
        &user.account.name,
        role.as_str(),
        &url,
        &expires_at,
    )
    .await;
    let made = InvitationMade {
        email: invite.email,
        role: role.as_str(),
        url,
        expires_at,
        mailed,
    };
    page(
        &state,
        &user,
        None,
        Shown {
            made: Some(made),
            ..Shown::default()
        },
    )
    .await
}

/// The member a path names, as the store knows them in this account; anything else is not found.
async fn member(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
) -> Result<shortlink_store::MemberRow, DashboardError> {
    let id = uuid(raw).ok_or(DashboardError::NotFound)?;
    state
        .db
        .members(&user.account.account_id)
        .await?
        .into_iter()
        .find(|m| m.user_id == id)
        .ok_or(DashboardError::NotFound)
}

/// `POST /dashboard/members/{id}/role`.
pub(crate) async fn change_role(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<RoleForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageMembers)?;
    let target = member(&state, &user, &raw).await?;
    let Ok(to) = form.role.parse::<Role>() else {
        return page(
            &state,
            &user,
            None,
            Shown {
                error: Some("Choose one of the four roles.".to_owned()),
                status: StatusCode::UNPROCESSABLE_ENTITY,
                ..Shown::default()
            },
        )
        .await;
    };
    charge_change(&state, &user).await?;
    state
        .db
        .change_role(
            &user.account.account_id,
            &user.acting(),
            &target.user_id,
            to,
        )
        .await?;
    Ok(see_other("/dashboard/members?done=role"))
}

/// `GET /dashboard/members/{id}/remove`: the confirmation.
pub(crate) async fn confirm_remove(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageMembers)?;
    let target = member(&state, &user, &raw).await?;
    if !user.account.role.may_manage(target.role) {
        return Err(DashboardError::Forbidden);
    }
    Ok(render(&ConfirmPage {
        nav: nav(&user, "members"),
        title: format!("Remove {}?", target.email),
        message: format!(
            "{} loses access to {} at once, on every device. You can invite them again later.",
            target.email, user.account.name
        ),
        csrf: user.csrf.clone(),
        action: format!("/dashboard/members/{}/remove", target.user_id),
        button: "Remove member",
        cancel: "/dashboard/members".to_owned(),
        password: false,
        error: None,
    })
    .into_response())
}

/// `POST /dashboard/members/{id}/remove`.
pub(crate) async fn remove(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(raw): Path<String>,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageMembers)?;
    let target = member(&state, &user, &raw).await?;
    charge_change(&state, &user).await?;
    state
        .db
        .remove_member(&user.account.account_id, &user.acting(), &target.user_id)
        .await?;
    if target.user_id == user.user.user_id {
        return Ok(see_other("/dashboard/"));
    }
    Ok(see_other("/dashboard/members?done=removed"))
}

/// `POST /dashboard/account/rename` (owners).
pub(crate) async fn rename(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<RenameForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageOwners)?;
    charge_change(&state, &user).await?;
    match state
        .db
        .rename_account(&user.account.account_id, &user.acting(), &form.name)
        .await
    {
        Ok(()) => Ok(see_other("/dashboard/members?done=renamed")),
        Err(StoreError::Invalid(m)) => {
            page(
                &state,
                &user,
                None,
                Shown {
                    error: Some(m),
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    ..Shown::default()
                },
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /dashboard/account/switch`: look at another of the user's accounts.
pub(crate) async fn switch(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<SwitchForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    let id = uuid(&form.account_id).ok_or(DashboardError::NotFound)?;
    state
        .db
        .switch_account(&user.token, &user.user.user_id, &id)
        .await?;
    Ok(see_other("/dashboard/?done=switched"))
}

/// `GET /dashboard/account/leave`: the confirmation.
pub(crate) async fn confirm_leave(user: SignedIn) -> Response {
    render(&ConfirmPage {
        nav: nav(&user, "profile"),
        title: format!("Leave {}?", user.account.name),
        message: "You lose access to this account's links, groups and statistics at once. Someone who manages its members can invite you again.".to_owned(),
        csrf: user.csrf.clone(),
        action: "/dashboard/account/leave".to_owned(),
        button: "Leave account",
        cancel: "/dashboard/profile".to_owned(),
        password: false,
        error: None,
    })
    .into_response()
}

/// `POST /dashboard/account/leave`: every member may leave, except the last owner.
pub(crate) async fn leave(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<CsrfOnly>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    // Leaving is removing oneself, whatever one's role may do to others.
    let me = shortlink_store::Acting {
        actor: user.actor(),
        role: Role::Owner,
    };
    state
        .db
        .remove_member(&user.account.account_id, &me, &user.user.user_id)
        .await?;
    Ok(see_other("/dashboard/"))
}
