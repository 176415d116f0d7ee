//! A link's edit form: `POST /dashboard/links/{id}`. "Save link" saves every field at once through the store's
//! `update_link`, the API PATCH's writer (activity log, webhooks, the edge's outbox); the rule editor's buttons
//! ("Add rule", "Remove", "Move up") are submit buttons of the same form that show it again with the rows
//! changed and every other input as typed, saving nothing, so the editor works without JavaScript.

use super::links::{link_page, own_link, readable, readable_field};
use super::{charge_change, see_other};
use crate::DashboardState;
use crate::error::DashboardError;
use crate::forms::{EditForm, FormPairs};
use crate::session::SignedIn;
use crate::smart_form::{RuleAction, SmartTyped};
use crate::views::render;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{LongUrl, Micros, Permission, Tag, Title};
use shortlink_store::{LinkPatch, ListedLink, StoreError};

/// The edit form's values as typed (or as stored), shown again with its error or after a rule-editor button.
pub(super) struct Typed {
    pub(super) long_url: String,
    pub(super) title: String,
    pub(super) tags: String,
    pub(super) expires_at: String,
    pub(super) forward_query: bool,
    pub(super) smart: SmartTyped,
    /// The rule editor changed the rows; nothing is saved yet.
    pub(super) unsaved: bool,
}

impl Typed {
    /// The link's values.
    pub(super) fn of_link(link: &ListedLink) -> Self {
        Self {
            long_url: link.long_url.clone(),
            title: link.title.clone().unwrap_or_default(),
            tags: link.tags.join(", "),
            expires_at: expiry_field(link),
            forward_query: link.forward_query,
            smart: SmartTyped::of_link(link),
            unsaved: false,
        }
    }
}

/// A stored expiry as a `datetime-local` value in UTC (`2030-01-31T12:00`).
fn expiry_field(link: &ListedLink) -> String {
    link.expires_at
        .as_deref()
        .and_then(|t| t.get(..16))
        .unwrap_or_default()
        .to_owned()
}

/// The form again, as typed: `status` 200 after a rule-editor button, 422 with a refusal.
async fn again(
    state: &DashboardState,
    user: &SignedIn,
    link: ListedLink,
    typed: Typed,
    error: Option<String>,
    status: StatusCode,
) -> Result<Response, DashboardError> {
    let page = link_page(state, user, link, Some(typed), error, None, None).await?;
    Ok((status, render(&page)).into_response())
}

/// `POST /dashboard/links/{id}`: destination, title, tags, expiry (UTC; empty: never), query forwarding and the
/// smart-link fields; or a rule-editor button.
pub(crate) async fn edit(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Form(pairs): Form<FormPairs>,
) -> Result<Response, DashboardError> {
    let form = EditForm::from_pairs(&pairs);
    user.check_csrf(&form.csrf)?;
    user.require(Permission::EditLinks)?;
    let link = own_link(&state, &user, &id).await?;
    let smart = SmartTyped::from_pairs(&pairs);
    let carries_smart = smart.is_some();
    let mut typed = Typed {
        long_url: form.long_url.chars().take(4096).collect(),
        title: form.title.chars().take(400).collect(),
        tags: form.tags.chars().take(1024).collect(),
        expires_at: form.expires_at.chars().take(40).collect(),
        forward_query: form.forward_query.is_some(),
        smart: smart.unwrap_or_else(|| SmartTyped::of_link(&link)),
        unsaved: false,
    };
    if let Some(action) = RuleAction::of(&pairs) {
        typed.unsaved = true;
        let error = (!typed.smart.apply(action)).then(|| {
            format!(
                "rules must hold at most {} rules",
                shortlink_store::domain::MAX_LINK_RULES
            )
        });
        return again(&state, &user, link, typed, error, StatusCode::OK).await;
    }
    let parsed = patch(&link, &form).and_then(|p| {
        if carries_smart {
            typed
                .smart
                .patch(&link)
                .map(|(o, pw)| (p, o, pw))
                .map_err(|m| readable(&m))
        } else {
            Ok((p, Default::default(), None))
        }
    });
    let (patch, mut options, password) = match parsed {
        Ok(p) => p,
        Err(message) => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return again(&state, &user, link, typed, Some(message), status).await;
        }
    };
    // Charged before the password is hashed, as the API does: the budget also bounds the hashing asked for.
    charge_change(&state, &user).await?;
    options.password = match password {
        Some(Some(p)) => Some(Some(state.db.hash_link_password(&p).await?)),
        Some(None) => Some(None),
        None => None,
    };
    let patch = LinkPatch { options, ..patch };
    match state
        .db
        .update_link(&user.account.account_id, &link.id, &patch, &user.actor())
        .await
    {
        Ok(_) => {
            state.wake.notify_one();
            Ok(see_other(&format!(
                "/dashboard/links/{}?done=saved",
                link.id
            )))
        }
        Err(e @ (StoreError::BlockedDestination | StoreError::Invalid(_))) => {
            let message = match e {
                StoreError::Invalid(m) => readable(&m),
                _ => "Links to this destination's domain are not allowed.".to_owned(),
            };
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            again(&state, &user, link, typed, Some(message), status).await
        }
        Err(e) => Err(e.into()),
    }
}

/// The changes the plain fields ask for. An expiry left as it was is not sent again, so a link that has expired
/// can still get a new destination without a "must be in the future" refusal.
fn patch(link: &ListedLink, form: &EditForm) -> Result<LinkPatch, String> {
    let long_url = LongUrl::parse(form.long_url.trim()).map_err(|e| readable(&e.0))?;
    let raw = form.expires_at.trim();
    let expires_at = if raw == expiry_field(link) {
        None
    } else if raw.is_empty() {
        Some(None)
    } else {
        // datetime-local sends `YYYY-MM-DDTHH:MM`, sometimes with seconds; the field is in UTC.
        let full = if raw.len() == 16 {
            format!("{raw}:00Z")
        } else {
            format!("{raw}Z")
        };
        let at = Micros::parse_rfc3339_utc("expires_at", &full)
            .map_err(|_| "Expires at must be a date and time, like 2030-01-31T12:00.".to_owned())?;
        if at <= Micros::now() {
            return Err("Expires at must be in the future.".to_owned());
        }
        Some(Some(at))
    };
    let title = Title::parse(&form.title).map_err(|e| readable_field("title", "Title", &e.0))?;
    let names: Vec<String> = form
        .tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let tags = Tag::parse_list("tags", &names).map_err(|e| readable_field("tags", "Tags", &e.0))?;
    // Sent only when changed (tags compared as the store compares them: case-insensitively), so saving the form
    // unchanged writes no activity row and publishes nothing.
    let same_tags = {
        let mut old: Vec<String> = link.tags.iter().map(|t| t.to_lowercase()).collect();
        let mut new: Vec<String> = tags.iter().map(|t| t.key().to_owned()).collect();
        old.sort();
        new.sort();
        old == new
    };
    Ok(LinkPatch {
        long_url: (long_url.as_str() != link.long_url).then_some(long_url),
        expires_at,
        forward_query: (form.forward_query.is_some() != link.forward_query)
            .then_some(form.forward_query.is_some()),
        title: (title.as_ref().map(Title::as_str) != link.title.as_deref()).then_some(title),
        tags: (!same_tags).then_some(tags),
        ..LinkPatch::default()
    })
}
