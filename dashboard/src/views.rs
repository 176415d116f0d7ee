//! The pages' templates (askama, compiled in, HTML-escaped by default) and what each one shows. Handlers fill
//! these from the store; no template reaches the store itself.

use crate::stats_view::StatsSection;
use askama::Template;
use axum::response::Html;
use shortlink_store::domain::{Permission, Role};
use shortlink_store::{AccountChoice, DomainState};

/// The header of a signed-in page: whose session, the CSRF token of its forms (sign-out, the account switcher),
/// the current section, the account being looked at and the user's other accounts, and which sections the
/// member's role may open.
#[derive(Debug, Clone)]
pub(crate) struct Nav {
    pub(crate) email: String,
    pub(crate) csrf: String,
    pub(crate) current: &'static str,
    pub(crate) account_id: String,
    pub(crate) account_name: String,
    pub(crate) role: &'static str,
    /// The switcher's choices (shown when there are two or more).
    pub(crate) accounts: Vec<AccountChoice>,
    pub(crate) may: Abilities,
}

/// What the member's role allows, for templates to show only the controls it may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Abilities {
    /// Create, edit, pause, delete links; see group keys; the builder.
    pub(crate) edit_links: bool,
    /// Create, change, rotate, delete groups.
    pub(crate) manage_groups: bool,
    /// The API key page.
    pub(crate) manage_key: bool,
    /// Members and Activity.
    pub(crate) manage_members: bool,
    /// Webhooks.
    pub(crate) manage_webhooks: bool,
}

impl Abilities {
    pub(crate) fn of(role: Role) -> Self {
        Self {
            edit_links: role.may(Permission::EditLinks),
            manage_groups: role.may(Permission::ManageGroups),
            manage_key: role.may(Permission::ManageApiKey),
            manage_members: role.may(Permission::ManageMembers),
            manage_webhooks: role.may(Permission::ManageWebhooks),
        }
    }
}

#[derive(Template)]
#[template(path = "no_account.html")]
pub(crate) struct NoAccountPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
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
    /// Where to go after signing in (a checked invitation page), or empty.
    pub(crate) next: String,
    /// `--signup open`: the page links to "Create account".
    pub(crate) signup_open: bool,
    /// A fixed message after a redirect (a password just set through a reset link).
    pub(crate) notice: Option<&'static str>,
}

/// What the invitation page shows.
pub(crate) enum InviteState {
    /// Unknown, used or expired.
    Gone,
    /// Nobody has the invited email yet: choose a password.
    NewUser,
    /// The invited user is signed in: one button.
    SignedIn,
    /// A user with that email exists but is not signed in here: sign in first.
    SignInFirst,
    /// Someone else is signed in here.
    OtherUser { signed_in_as: String },
}

#[derive(Template)]
#[template(path = "invite.html")]
pub(crate) struct InvitePage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) state: InviteState,
    pub(crate) account_name: String,
    pub(crate) email: String,
    pub(crate) role: &'static str,
    pub(crate) action: String,
    /// The signed-in user's CSRF token (the one-button form).
    pub(crate) csrf: String,
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
    /// What the member's role may use on this page.
    pub(crate) may: Abilities,
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
    /// What the member's role may use on this page.
    pub(crate) may: Abilities,
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
    /// The clicks attributed to the group over the range asked for.
    pub(crate) stats: StatsSection,
}

pub(crate) struct LinkItem {
    pub(crate) id: String,
    pub(crate) short_url: String,
    pub(crate) long_url: String,
    pub(crate) title: Option<String>,
    /// Its tags, each with the address of the list filtered by it.
    pub(crate) tags: Vec<TagChip>,
    pub(crate) status: &'static str,
    pub(crate) is_active: bool,
    pub(crate) created: String,
}

/// The Links page's text fields and sort as typed (the selects are [`Choice`] lists).
pub(crate) struct FilterForm {
    pub(crate) q: String,
    pub(crate) destination: String,
    pub(crate) starts_with: bool,
    /// The sort's value; empty: newest first.
    pub(crate) sort: String,
}

/// A tag shown on a link's row: a link to the list filtered by it.
pub(crate) struct TagChip {
    pub(crate) name: String,
    pub(crate) href: String,
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
    /// What the member's role may use on this page.
    pub(crate) may: Abilities,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) links: Vec<LinkItem>,
    pub(crate) total: i64,
    /// The account's clicks of today (UTC).
    pub(crate) today_clicks: i64,
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) prev: Option<String>,
    pub(crate) next: Option<String>,
    /// The search, filters and sort as the form shows them.
    pub(crate) filters: FilterForm,
    /// Why the filters were refused, if they were (the list is then empty).
    pub(crate) filter_error: Option<String>,
    pub(crate) filtered: bool,
    pub(crate) tag_choices: Vec<Choice>,
    pub(crate) group_choices: Vec<Choice>,
    pub(crate) domain_choices: Vec<Choice>,
    pub(crate) status_choices: Vec<Choice>,
    pub(crate) sort_choices: Vec<Choice>,
    /// "Export links": the CSV of every link these filters match.
    pub(crate) export_href: String,
    pub(crate) groups: Vec<Choice>,
    pub(crate) domains: Vec<Choice>,
    pub(crate) form: CreateForm,
    pub(crate) notice: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "link.html")]
pub(crate) struct LinkPage {
    pub(crate) nav: Option<Nav>,
    /// What the member's role may use on this page.
    pub(crate) may: Abilities,
    pub(crate) title: String,
    pub(crate) csrf: String,
    pub(crate) id: String,
    pub(crate) short_url: String,
    pub(crate) status: &'static str,
    pub(crate) is_active: bool,
    pub(crate) long_url: String,
    pub(crate) link_title: String,
    /// Tag names joined by ", ", as the form shows them.
    pub(crate) tags: String,
    pub(crate) expires_at: String,
    pub(crate) forward_query: bool,
    /// The smart-link fields: the editor, or the viewer's read-only values.
    pub(crate) smart: crate::smart_view::SmartView,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<&'static str>,
    /// The live view: the last hour's chart per minute ([`crate::chart::clicks_per_minute`]) and its total.
    pub(crate) live_chart: String,
    pub(crate) live_text: String,
    /// The statistics over the range asked for.
    pub(crate) stats: StatsSection,
}

#[derive(Template)]
#[template(path = "analytics.html")]
pub(crate) struct AnalyticsPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: String,
    /// The account's statistics over the range asked for.
    pub(crate) stats: StatsSection,
}

#[derive(Template)]
#[template(path = "domains.html")]
pub(crate) struct DomainsPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) domains: Vec<DomainState>,
}

/// A member's row on the Members page.
pub(crate) struct MemberItem {
    pub(crate) user_id: String,
    pub(crate) email: String,
    pub(crate) role: &'static str,
    pub(crate) joined: String,
    /// The viewer's role may re-role and remove this member.
    pub(crate) manageable: bool,
    /// The viewer themselves.
    pub(crate) is_me: bool,
}

/// The invitation just made: its link, shown once.
pub(crate) struct InvitationMade {
    pub(crate) email: String,
    pub(crate) role: &'static str,
    pub(crate) url: String,
    pub(crate) expires_at: String,
    /// It was also sent by email.
    pub(crate) mailed: bool,
}

#[derive(Template)]
#[template(path = "members.html")]
pub(crate) struct MembersPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) members: Vec<MemberItem>,
    /// Live invitations: email, role, expiry.
    pub(crate) pending: Vec<(String, &'static str, String)>,
    /// The roles the viewer may give.
    pub(crate) assignable: Vec<&'static str>,
    pub(crate) may_rename: bool,
    pub(crate) account_name: String,
    pub(crate) made: Option<InvitationMade>,
    pub(crate) error: Option<String>,
    /// The invitation form's values after a refusal.
    pub(crate) email: String,
    pub(crate) role: String,
    pub(crate) notice: Option<&'static str>,
}

/// A row of the Activity page.
pub(crate) struct ActivityItem {
    pub(crate) at: String,
    pub(crate) who: String,
    pub(crate) action: String,
    pub(crate) target: String,
    pub(crate) details: String,
}

#[derive(Template)]
#[template(path = "activity.html")]
pub(crate) struct ActivityPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) items: Vec<ActivityItem>,
    pub(crate) page: i64,
    pub(crate) pages: i64,
    pub(crate) total: i64,
}

/// A webhook endpoint as the Webhooks pages show it (never its secret).
pub(crate) struct WebhookItem {
    pub(crate) id: String,
    pub(crate) url: String,
    /// The event types it receives, comma-separated.
    pub(crate) events: String,
    pub(crate) description: String,
    pub(crate) enabled: bool,
    /// "Enabled" or "Disabled".
    pub(crate) status: &'static str,
    /// What else its status needs said: failing since when; disabled by the account, or automatically and why.
    pub(crate) status_detail: String,
    pub(crate) created: String,
}

/// One checkbox of the "Events" fieldset.
pub(crate) struct EventChoice {
    pub(crate) name: &'static str,
    /// The checkbox's id (`event-link-created`; with a prefix on the edit form).
    pub(crate) id: String,
    pub(crate) checked: bool,
}

/// The add-endpoint form's values (kept after a refusal) and why it was refused.
pub(crate) struct WebhookForm {
    pub(crate) url: String,
    pub(crate) description: String,
    pub(crate) events: Vec<EventChoice>,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "webhooks.html")]
pub(crate) struct WebhooksPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) endpoints: Vec<WebhookItem>,
    /// Most endpoints an account may have.
    pub(crate) max: u32,
    pub(crate) form: WebhookForm,
    pub(crate) notice: Option<&'static str>,
}

/// A row of an endpoint's delivery log.
pub(crate) struct DeliveryItem {
    pub(crate) at: String,
    pub(crate) event_id: String,
    pub(crate) event_type: String,
    pub(crate) attempt: i64,
    pub(crate) status_code: String,
    pub(crate) duration: String,
    pub(crate) error: String,
    pub(crate) success: bool,
}

#[derive(Template)]
#[template(path = "webhook.html")]
pub(crate) struct WebhookPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: String,
    pub(crate) csrf: String,
    pub(crate) endpoint: WebhookItem,
    /// The signing secret, on the one response that made it (creation, rotation).
    pub(crate) secret: Option<String>,
    pub(crate) deliveries: Vec<DeliveryItem>,
    pub(crate) page: i64,
    pub(crate) pages: i64,
    pub(crate) total: i64,
    pub(crate) notice: Option<&'static str>,
    /// Why the last action was refused (a redelivery to a disabled endpoint).
    pub(crate) error: Option<String>,
    /// The edit form: the endpoint's values, or what was typed before a refusal.
    pub(crate) form: WebhookForm,
}

#[derive(Template)]
#[template(path = "import.html")]
pub(crate) struct ImportPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) csrf: String,
    pub(crate) limit_per_day: u32,
    pub(crate) max_megabytes: usize,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "import_job.html")]
pub(crate) struct ImportJobPage {
    pub(crate) nav: Option<Nav>,
    pub(crate) title: &'static str,
    pub(crate) job: shortlink_store::ImportStatus,
    /// What the heading says of the job's status.
    pub(crate) state: &'static str,
    pub(crate) ended: bool,
    /// Where the page's script reads the counts while the job runs.
    pub(crate) status_url: String,
}
