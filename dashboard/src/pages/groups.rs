//! Groups: the list, a new group, and a group's page (id, key, settings, rotate, delete, dynamic-link builder).

use super::{Done, charge_change, nav, see_other, uuid};
use crate::DashboardState;
use crate::client::ClientKey;
use crate::error::DashboardError;
use crate::forms::{GroupForm, SettingsForm as SettingsBody};
use crate::reauth::{self, ConfirmForm};
use crate::session::SignedIn;
use crate::views::{
    Abilities, ConfirmPage, GroupItem, GroupPage, GroupsPage, SettingsForm, render,
};
use axum::Form;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shortlink_store::domain::{GroupSettings, Permission};
use shortlink_store::{GroupRow, StatsScope, StoreError};

async fn groups_page(
    state: &DashboardState,
    user: &SignedIn,
    name: String,
    error: Option<String>,
    notice: Option<&'static str>,
) -> Result<GroupsPage, DashboardError> {
    let mut groups: Vec<GroupItem> = state
        .db
        .group_rows(&user.account.account_id)
        .await?
        .into_iter()
        .map(|g| GroupItem {
            id: g.id,
            name: g.name,
            is_default: g.is_default,
        })
        .collect();
    groups.sort_by(|a, b| {
        a.name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then(a.id.cmp(&b.id))
    });
    Ok(GroupsPage {
        nav: nav(user, "groups"),
        may: Abilities::of(user.account.role),
        title: "Groups",
        csrf: user.csrf.clone(),
        groups,
        name,
        error,
        notice,
    })
}

/// `GET /dashboard/groups`: the account's groups by name.
pub(crate) async fn index(
    State(state): State<DashboardState>,
    user: SignedIn,
    Query(done): Query<Done>,
) -> Result<Response, DashboardError> {
    Ok(
        render(&groups_page(&state, &user, String::new(), None, done.notice()).await?)
            .into_response(),
    )
}

/// `POST /dashboard/groups`: a group with default settings; then its page.
pub(crate) async fn create(
    State(state): State<DashboardState>,
    user: SignedIn,
    Form(form): Form<GroupForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageGroups)?;
    charge_change(&state, &user).await?;
    match state
        .db
        .create_group_capped(
            &user.account.account_id,
            &form.name,
            &GroupSettings::default(),
            state.max_groups_per_account,
            &user.actor(),
        )
        .await
    {
        Ok(group) => {
            state.wake.notify_one();
            Ok(see_other(&format!(
                "/dashboard/groups/{}?done=created",
                group.id
            )))
        }
        Err(StoreError::Invalid(message) | StoreError::Conflict(message)) => {
            let page = groups_page(&state, &user, form.name, Some(message), None).await?;
            Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

/// One of the account's groups; anything else (another account's, malformed id) is not found.
async fn own_group(
    state: &DashboardState,
    user: &SignedIn,
    raw: &str,
) -> Result<GroupRow, DashboardError> {
    let id = uuid(raw).ok_or(DashboardError::NotFound)?;
    Ok(state.db.group(Some(&user.account.account_id), &id).await?)
}

fn settings_form(s: &GroupSettings) -> SettingsForm {
    SettingsForm {
        allow: s.access.allow_countries.join(", "),
        block: s.access.block_countries.join(", "),
        block_bots: s.access.block_bots,
        fallback: s.access.fallback_url.clone().unwrap_or_default(),
        interstitial: s
            .monetization
            .as_ref()
            .map(|m| m.interstitial_seconds.to_string())
            .unwrap_or_default(),
        analytics: s.analytics.enabled,
    }
}

async fn group_page(
    state: &DashboardState,
    user: &SignedIn,
    group: GroupRow,
    settings: SettingsForm,
    error: Option<String>,
    notice: Option<&'static str>,
    range: Option<&str>,
) -> Result<GroupPage, DashboardError> {
    let page = format!("/dashboard/groups/{}", group.id);
    let stats = super::analytics::section(
        state,
        user,
        StatsScope::Group(&group.id),
        range,
        &page,
        &format!("{page}/clicks.csv"),
    )
    .await?;
    let domains = state
        .db
        .enabled_domains(&user.account.account_id)
        .await?
        .into_iter()
        .map(|d| d.domain)
        .collect();
    Ok(GroupPage {
        nav: nav(user, "groups"),
        may: Abilities::of(user.account.role),
        title: group.name.clone(),
        csrf: user.csrf.clone(),
        id: group.id,
        name: group.name,
        // The key is for members and up; a viewer's page never carries it.
        key: if user.may(Permission::EditLinks) {
            group.key
        } else {
            String::new()
        },
        is_default: group.is_default,
        settings,
        domains,
        error,
        notice,
        stats,
    })
}

/// `GET /dashboard/groups/{id}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Query(done): Query<Done>,
    RawQuery(range): RawQuery,
) -> Result<Response, DashboardError> {
    let group = own_group(&state, &user, &id).await?;
    let settings = settings_form(&group.settings);
    Ok(render(
        &group_page(
            &state,
            &user,
            group,
            settings,
            None,
            done.notice(),
            range.as_deref(),
        )
        .await?,
    )
    .into_response())
}

/// The form as the store's settings: built as the settings JSON and read by [`GroupSettings::parse`], so the
/// dashboard checks exactly what the API and the CLI check.
fn parse_settings(form: &SettingsBody) -> Result<GroupSettings, String> {
    let countries = |raw: &str| -> Vec<String> {
        raw.split([',', ' ', ';'])
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let interstitial =
        match form.interstitial.trim() {
            "" | "0" => None,
            raw => Some(raw.parse::<u32>().map_err(|_| {
                "Interstitial seconds must be a whole number from 0 to 60.".to_owned()
            })?),
        };
    let fallback = form.fallback.trim();
    let mut access = serde_json::json!({
        "allow_countries": countries(&form.allow),
        "block_countries": countries(&form.block),
        "block_bots": form.block_bots.is_some(),
    });
    if !fallback.is_empty() {
        access["fallback_url"] = fallback.into();
    }
    let mut json = serde_json::json!({
        "access": access,
        "analytics": {"enabled": form.analytics.is_some()},
    });
    if let Some(seconds) = interstitial {
        json["monetization"] = serde_json::json!({ "interstitial_seconds": seconds });
    }
    GroupSettings::parse(&json.to_string()).map_err(|e| readable(&e.0))
}

/// The store's settings messages name JSON fields; the form's labels are what the person typed into.
fn readable(message: &str) -> String {
    let message = message
        .strip_prefix("invalid group settings: ")
        .unwrap_or(message);
    message
        .replace("access.allow_countries", "Allowed countries")
        .replace("access.block_countries", "Blocked countries")
        .replace("access.fallback_url", "Fallback URL for blocked visitors")
        .replace("monetization.interstitial_seconds", "Interstitial seconds")
}

/// `POST /dashboard/groups/{id}/settings`.
pub(crate) async fn save_settings(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
    Form(form): Form<SettingsBody>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageGroups)?;
    let group = own_group(&state, &user, &id).await?;
    let message = match parse_settings(&form) {
        Ok(settings) => {
            charge_change(&state, &user).await?;
            match state
                .db
                .update_group(
                    Some(&user.account.account_id),
                    &group.id,
                    None,
                    Some(&settings),
                    &user.actor(),
                )
                .await
            {
                Ok(_) => {
                    state.wake.notify_one();
                    return Ok(see_other(&format!(
                        "/dashboard/groups/{}?done=saved",
                        group.id
                    )));
                }
                // What only the store can check (a fallback URL on the blocked domain list): next to the form too.
                Err(StoreError::Invalid(message)) => readable(&message),
                Err(e) => return Err(e.into()),
            }
        }
        Err(message) => message,
    };
    // The form comes back as typed, with the message.
    let typed = SettingsForm {
        allow: form.allow.clone(),
        block: form.block.clone(),
        block_bots: form.block_bots.is_some(),
        fallback: form.fallback.clone(),
        interstitial: form.interstitial.clone(),
        analytics: form.analytics.is_some(),
    };
    let page = group_page(&state, &user, group, typed, Some(message), None, None).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)).into_response())
}

fn confirm(
    user: &SignedIn,
    group: &GroupRow,
    title: String,
    message: &str,
    verb: &str,
    button: &'static str,
) -> ConfirmPage {
    ConfirmPage {
        nav: nav(user, "groups"),
        title,
        message: message.to_owned(),
        csrf: user.csrf.clone(),
        action: format!("/dashboard/groups/{}/{verb}", group.id),
        button,
        cancel: format!("/dashboard/groups/{}", group.id),
        // Rotating or deleting breaks every dynamic link signed with the group's key: the password again.
        password: true,
        error: None,
    }
}

fn confirm_rotate_page(user: &SignedIn, group: &GroupRow) -> ConfirmPage {
    confirm(
        user,
        group,
        format!("Rotate the key of {}?", group.name),
        "The group gets a new key. Tokens signed with the old key stop working: every dynamic link built with it sends visitors to the fallback page.",
        "rotate",
        "Rotate key",
    )
}

fn confirm_delete_page(user: &SignedIn, group: &GroupRow) -> ConfirmPage {
    confirm(
        user,
        group,
        format!("Delete {}?", group.name),
        "Its links move to your default group. Tokens signed with its key stop working: every dynamic link built with it sends visitors to the fallback page.",
        "delete",
        "Delete group",
    )
}

/// `GET /dashboard/groups/{id}/rotate`: the confirmation.
pub(crate) async fn confirm_rotate(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageGroups)?;
    let group = own_group(&state, &user, &id).await?;
    Ok(render(&confirm_rotate_page(&user, &group)).into_response())
}

/// `POST /dashboard/groups/{id}/rotate`, with the password.
pub(crate) async fn rotate(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Path(id): Path<String>,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageGroups)?;
    let group = own_group(&state, &user, &id).await?;
    let page = confirm_rotate_page(&user, &group);
    if let Some(refused) = reauth::confirm(&state, &user, &client, &form, page).await? {
        return Ok(refused);
    }
    charge_change(&state, &user).await?;
    state
        .db
        .rotate_group_key(Some(&user.account.account_id), &group.id, &user.actor())
        .await?;
    state.wake.notify_one();
    Ok(see_other(&format!(
        "/dashboard/groups/{}?done=rotated",
        group.id
    )))
}

/// `GET /dashboard/groups/{id}/delete`: the confirmation.
pub(crate) async fn confirm_delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, DashboardError> {
    user.require(Permission::ManageGroups)?;
    let group = own_group(&state, &user, &id).await?;
    if group.is_default {
        return Err(DashboardError::NotFound);
    }
    Ok(render(&confirm_delete_page(&user, &group)).into_response())
}

/// `POST /dashboard/groups/{id}/delete`, with the password.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    user: SignedIn,
    ClientKey(client): ClientKey,
    Path(id): Path<String>,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, DashboardError> {
    user.check_csrf(&form.csrf)?;
    user.require(Permission::ManageGroups)?;
    let group = own_group(&state, &user, &id).await?;
    if group.is_default {
        return Err(DashboardError::NotFound);
    }
    let page = confirm_delete_page(&user, &group);
    if let Some(refused) = reauth::confirm(&state, &user, &client, &form, page).await? {
        return Ok(refused);
    }
    charge_change(&state, &user).await?;
    match state
        .db
        .delete_group(Some(&user.account.account_id), &group.id, &user.actor())
        .await
    {
        Ok(()) | Err(StoreError::NotFound(_)) => {}
        Err(StoreError::DefaultGroup) => return Err(DashboardError::NotFound),
        Err(e) => return Err(e.into()),
    }
    state.wake.notify_one();
    Ok(see_other("/dashboard/groups?done=deleted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(allow: &str, block: &str, fallback: &str, interstitial: &str) -> SettingsBody {
        SettingsBody {
            allow: allow.into(),
            block: block.into(),
            fallback: fallback.into(),
            interstitial: interstitial.into(),
            block_bots: Some("on".into()),
            ..SettingsBody::default()
        }
    }

    #[test]
    fn settings_from_the_form() {
        let s = parse_settings(&form("us, de", "RU", "https://example.com/no", "5")).unwrap();
        assert_eq!(s.access.allow_countries, ["US", "DE"]);
        assert_eq!(s.access.block_countries, ["RU"]);
        assert!(s.access.block_bots && !s.analytics.enabled);
        assert_eq!(s.monetization.unwrap().interstitial_seconds, 5);
        let none = parse_settings(&form("", "", "", "0")).unwrap();
        assert!(none.monetization.is_none() && none.access.fallback_url.is_none());
    }

    #[test]
    fn settings_errors_name_the_field() {
        let e = parse_settings(&form("USA", "", "", "")).unwrap_err();
        assert!(e.starts_with("Allowed countries"), "{e}");
        let e = parse_settings(&form("", "", "ftp://x", "")).unwrap_err();
        assert!(e.starts_with("Fallback URL"), "{e}");
        let e = parse_settings(&form("", "", "", "600")).unwrap_err();
        assert!(e.contains("Interstitial seconds"), "{e}");
        assert!(parse_settings(&form("", "", "", "-1")).is_err());
    }
}
