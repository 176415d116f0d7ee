//! The forms' bodies. Every field defaults to empty, so a form with a missing field is refused by the handler
//! with a message next to that field rather than by the extractor with a bare 422; axum's body limit bounds size.

use serde::Deserialize;

/// A form with nothing but the session's CSRF token (sign-out, generate, revoke, delete, …).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CsrfOnly {
    pub(crate) csrf: String,
    /// Where to go afterwards (`list`: the links page), for the buttons that appear in two places.
    pub(crate) back: String,
}

/// Sign-in.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct SignInForm {
    pub(crate) email: String,
    pub(crate) password: String,
    /// Where to go afterwards (only the dashboard's invitation pages are honoured).
    pub(crate) next: String,
}

/// A new password, typed twice (invitation, password reset, sign-up); the CSRF token when a session posts it.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct NewPasswordForm {
    pub(crate) csrf: String,
    pub(crate) password: String,
    pub(crate) confirm: String,
}

/// Inviting a member.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct InviteForm {
    pub(crate) csrf: String,
    pub(crate) email: String,
    pub(crate) role: String,
}

/// A member's new role.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RoleForm {
    pub(crate) csrf: String,
    pub(crate) role: String,
}

/// The account's new name.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RenameForm {
    pub(crate) csrf: String,
    pub(crate) name: String,
}

/// The account switcher.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SwitchForm {
    pub(crate) csrf: String,
    pub(crate) account_id: String,
}

/// Change password (profile).
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct ChangePasswordForm {
    pub(crate) csrf: String,
    pub(crate) current: String,
    pub(crate) password: String,
    pub(crate) confirm: String,
}

/// New group.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GroupForm {
    pub(crate) csrf: String,
    pub(crate) name: String,
}

/// A group's settings; unchecked checkboxes are absent from the body.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SettingsForm {
    pub(crate) csrf: String,
    pub(crate) allow: String,
    pub(crate) block: String,
    pub(crate) block_bots: Option<String>,
    pub(crate) fallback: String,
    pub(crate) interstitial: String,
    pub(crate) analytics: Option<String>,
}

/// New link.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LinkForm {
    pub(crate) csrf: String,
    pub(crate) long_url: String,
    pub(crate) short_code: String,
    pub(crate) group_id: String,
    pub(crate) domain_id: String,
}

/// A form's fields in the order sent, repeated names kept: the link's edit form names fields by position
/// (`rules[2].to`) and repeats checkbox names, which a struct cannot take. No `Debug`: it may hold a password.
#[derive(Default, Deserialize)]
#[serde(transparent)]
pub(crate) struct FormPairs(pub(crate) Vec<(String, String)>);

impl FormPairs {
    /// The first value of `name`, or empty when absent.
    pub(crate) fn first(&self, name: &str) -> &str {
        self.get(name).unwrap_or_default()
    }

    /// The first value of `name`, `None` when absent.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A link's edit form (its plain fields; the smart-link ones are [`crate::smart_form::SmartTyped`]).
#[derive(Debug, Default)]
pub(crate) struct EditForm {
    pub(crate) csrf: String,
    pub(crate) long_url: String,
    pub(crate) title: String,
    /// Tag names separated by commas.
    pub(crate) tags: String,
    pub(crate) expires_at: String,
    pub(crate) forward_query: Option<String>,
}

impl EditForm {
    /// The plain fields of the edit form's body.
    pub(crate) fn from_pairs(pairs: &FormPairs) -> Self {
        Self {
            csrf: pairs.first("csrf").to_owned(),
            long_url: pairs.first("long_url").to_owned(),
            title: pairs.first("title").to_owned(),
            tags: pairs.first("tags").to_owned(),
            expires_at: pairs.first("expires_at").to_owned(),
            forward_query: pairs.get("forward_query").map(str::to_owned),
        }
    }
}

/// The links page's query: page number, search, filters and sort ([`crate::pages::link_filters`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ListParams {
    pub(crate) page: Option<String>,
    pub(crate) q: String,
    pub(crate) tag: String,
    pub(crate) group: String,
    pub(crate) domain: String,
    pub(crate) status: String,
    pub(crate) sort: String,
    pub(crate) destination: String,
    #[serde(rename = "match")]
    pub(crate) match_mode: String,
    pub(crate) done: Option<String>,
}
