//! The handlers, one file per section of the dashboard. What they share: the header, the one-word notices after
//! a redirect, and how a time is shown.

pub(crate) mod activity;
pub(crate) mod analytics;
pub(crate) mod auth;
pub(crate) mod domains;
pub(crate) mod groups;
pub(crate) mod imports;
pub(crate) mod invitations;
pub(crate) mod key;
pub(crate) mod link_edit;
pub(crate) mod link_export;
pub(crate) mod link_filters;
pub(crate) mod links;
pub(crate) mod live;
pub(crate) mod members;
pub(crate) mod recovery;
pub(crate) mod signup;
pub(crate) mod webhooks;

use crate::session::SignedIn;
use crate::views::{Abilities, Nav};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shortlink_store::{WriteCharge, WriteSubject};

/// The header of a signed-in page.
pub(crate) fn nav(user: &SignedIn, current: &'static str) -> Option<Nav> {
    Some(Nav {
        email: user.user.email.clone(),
        csrf: user.csrf.clone(),
        current,
        account_id: user.account.account_id.clone(),
        account_name: user.account.name.clone(),
        role: user.account.role.as_str(),
        accounts: user.user.accounts.clone(),
        may: Abilities::of(user.account.role),
    })
}

/// `?done=…` after a redirect: a word from this list picks a fixed message, so no user text is ever reflected.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Done {
    #[serde(default)]
    done: Option<String>,
}

impl Done {
    pub(crate) fn notice(&self) -> Option<&'static str> {
        Some(match self.done.as_deref()? {
            "created" => "Created.",
            "saved" => "Saved.",
            "deleted" => "Deleted.",
            "paused" => "Paused: visitors now go to the domain's fallback page.",
            "resumed" => "Resumed: the link redirects again.",
            "revoked" => "The key is revoked. Requests with it now get 401.",
            "rotated" => "The group has a new key. Tokens signed with the old key no longer work.",
            "password" => "Your password is changed. Your other sessions are signed out.",
            "joined" => "Welcome: you joined the account.",
            "switched" => "Switched account.",
            "invited" => "Invitation made.",
            "role" => "Role changed.",
            "removed" => "Member removed.",
            "renamed" => "Account renamed.",
            "reset" => {
                "Your new password is set, and every session was signed out. Sign in with the new password."
            }
            "welcome" => "Welcome: your account is ready, with a default group for your links.",
            "enabled" => "Enabled: events are sent to this endpoint again, starting now.",
            "disabled" => {
                "Disabled: no events are sent to this endpoint; its pending deliveries were dropped."
            }
            "tested" => {
                "Test event delivered: the endpoint answered 2xx. It is in the delivery log below."
            }
            "test_failed" => "The test event failed; the delivery log below says why.",
            "redelivered" => "The event is queued to be sent again now.",
            _ => return None,
        })
    }
}

/// Charges one change to the account's dashboard budget (the API key's budget is apart), before the store is
/// asked to make it; a change over the budget is a 429 page and changes nothing.
pub(crate) async fn charge_change(
    state: &crate::DashboardState,
    user: &SignedIn,
) -> Result<(), crate::error::DashboardError> {
    match state
        .db
        .charge_write(
            WriteSubject::Dashboard(&user.account.account_id),
            state.write_limit_per_minute,
        )
        .await?
    {
        WriteCharge::Allowed(_) => Ok(()),
        WriteCharge::Limited(limit) => Err(crate::error::DashboardError::TooManyChanges {
            retry_after: limit.retry_after,
        }),
    }
}

/// A `303 See Other` to `to`: the answer to every successful form post, so a reload never posts again.
pub(crate) fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// An ISO 8601 instant (`2026-11-23T14:05:09.123456Z`) as the dashboard shows it: `2026-11-23 14:05 UTC`.
pub(crate) fn show_time(iso: &str) -> String {
    match (iso.get(..10), iso.get(11..16)) {
        (Some(date), Some(time)) => format!("{date} {time} UTC"),
        _ => iso.to_owned(),
    }
}

/// A UUID from a path or form, normalised as the store keeps it; anything else is None (then: not found).
pub(crate) fn uuid(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let ok = raw.len() == 36
        && raw.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    ok.then(|| raw.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ids() {
        assert_eq!(
            show_time("2026-11-23T14:05:09.123456Z"),
            "2026-11-23 14:05 UTC"
        );
        assert_eq!(
            uuid("0F8FAD5B-D9CB-469F-A165-70867728950E").as_deref(),
            Some("0f8fad5b-d9cb-469f-a165-70867728950e")
        );
        for bad in [
            "",
            "x",
            "0f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5b_d9cb-469f-a165-70867728950e",
        ] {
            assert!(uuid(bad).is_none(), "{bad}");
        }
        assert_eq!(
            Done {
                done: Some("created".into())
            }
            .notice(),
            Some("Created.")
        );
        assert_eq!(
            Done {
                done: Some("<script>".into())
            }
            .notice(),
            None
        );
    }
}
