//! The pages' templates (askama, compiled in, HTML-escaped by default) and what each one shows. Handlers fill
//! these from the store; no template reaches the store itself.

use askama::Template;
use axum::response::Html;
use shortlink_store::DomainState;

/// The header of a signed-in page: whose session, the CSRF token of its sign-out form, the current section.
#[derive(Debug, Clone)]
pub(crate) struct Nav {
    pub(crate) email: String,
    pub(crate) csrf: String,
    pub(crate) current: &'static str,
}

/// Renders a page; a template that fails to render (it cannot, for these types) is a plain error text.
pub(crate) fn render<T: Template>(page: &T) -> Html<String> {
    Html(page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "template failed");
        "The page could not be rendered.".to_owned()
    }))
}

#[derive(Template)]
#[template(path = "error.html")]
pub(crate) struct ErrorPage<'a> {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'a str,
    pub(crate) message: &'a str,
}

#[derive(Template)]
#[template(path = "sign_in.html")]
pub(crate) struct SignInPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) email: String,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "invite.html")]
pub(crate) struct InvitePage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    /// None: the invitation is unknown, used or expired.
    pub(crate) email: Option<String>,
    pub(crate) action: String,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "profile.html")]
pub(crate) struct ProfilePage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) email: String,
    pub(crate) csrf: String,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<&'static str>,
}

/// The account's key as the dashboard may show it: never the key itself.
pub(crate) struct KeyView {
    pub(crate) masked: String,
    pub(crate) created_at: String,
    pub(crate) last_used_at: Option<String>,
}

#[derive(Template)]
#[template(path = "key.html")]
pub(crate) struct KeyPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) key: Option<KeyView>,
    /// The plaintext, on the one response that generated it.
    pub(crate) new_key: Option<String>,
    pub(crate) notice: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "confirm.html")]
pub(crate) struct ConfirmPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: String,
    pub(crate) message: String,
    pub(crate) csrf: String,
    pub(crate) action: String,
    pub(crate) button: &'static str,
    pub(crate) cancel: String,
    /// A sensitive action: the form asks for the current password ([`crate::reauth`]).
    pub(crate) password: bool,
    /// Why the last try was refused (wrong password, throttled).
    pub(crate) error: Option<String>,
}

pub(crate) struct GroupItem {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) is_default: bool,
}

#[derive(Template)]
#[template(path = "groups.html")]
pub(crate) struct GroupsPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) groups: Vec<GroupItem>,
    pub(crate) name: String,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<&'static str>,
}

/// A group's settings as form values.
pub(crate) struct SettingsForm {
    pub(crate) allow: String,
    pub(crate) block: String,
    pub(crate) block_bots: bool,
    pub(crate) fallback: String,
    pub(crate) interstitial: String,
    pub(crate) analytics: bool,
}

#[derive(Template)]
#[template(path = "group.html")]
pub(crate) struct GroupPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: String,
    pub(crate) csrf: String,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) is_default: bool,
    pub(crate) settings: SettingsForm,
    pub(crate) domains: Vec<String>,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<&'static str>,
}

pub(crate) struct LinkItem {
    pub(crate) id: String,
    pub(crate) short_url: String,
    pub(crate) long_url: String,
    pub(crate) status: &'static str,
    pub(crate) is_active: bool,
    pub(crate) created: String,
}

pub(crate) struct Choice {
    pub(crate) value: String,
    pub(crate) label: String,
    pub(crate) selected: bool,
}

/// The create-link form's values and its errors, each shown next to its field.
#[derive(Default)]
pub(crate) struct CreateForm {
    pub(crate) long_url: String,
    pub(crate) short_code: String,
    pub(crate) long_url_error: Option<String>,
    pub(crate) short_code_error: Option<String>,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "links.html")]
pub(crate) struct LinksPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) links: Vec<LinkItem>,
    pub(crate) total: i64,
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) prev: Option<String>,
    pub(crate) next: Option<String>,
    pub(crate) filter: String,
    pub(crate) starts_with: bool,
    pub(crate) filtered: bool,
    pub(crate) groups: Vec<Choice>,
    pub(crate) domains: Vec<Choice>,
    pub(crate) form: CreateForm,
    pub(crate) notice: Option<&'static str>,
}

pub(crate) struct CountRow {
    pub(crate) label: String,
    pub(crate) clicks: i64,
}

#[derive(Template)]
#[template(path = "link.html")]
pub(crate) struct LinkPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: String,
    pub(crate) csrf: String,
    pub(crate) id: String,
    pub(crate) short_url: String,
    pub(crate) status: &'static str,
    pub(crate) is_active: bool,
    pub(crate) long_url: String,
    pub(crate) expires_at: String,
    pub(crate) forward_query: bool,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<&'static str>,
    /// The chart, already SVG markup built from numbers and escaped labels ([`crate::chart`]).
    pub(crate) chart: String,
    pub(crate) total_clicks: i64,
    pub(crate) countries: Vec<CountRow>,
    pub(crate) devices: Vec<CountRow>,
    pub(crate) referrers: Vec<CountRow>,
}

#[derive(Template)]
#[template(path = "domains.html")]
pub(crate) struct DomainsPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) domains: Vec<DomainState>,
}
