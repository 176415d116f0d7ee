//! What a link's page shows of its smart-link fields (issue 25): the editor's rows and fields as typed (or as
//! stored), the field an error names marked, and for viewers the same values read-only. Never the password:
//! only whether the link has one.

use crate::smart_form::{
    DEVICES, REDIRECTS, RuleRow, SYSTEMS, SmartTyped, error_place, error_rule,
};
use crate::views::Choice;
use shortlink_store::domain::MAX_LINK_RULES;

/// A checkbox of a rule's row.
pub(crate) struct Check {
    pub(crate) value: &'static str,
    pub(crate) label: &'static str,
    pub(crate) checked: bool,
}

/// One rule's row of the editor.
pub(crate) struct RuleView {
    /// Its place, 0-based, as the fields' names and the API's messages say it (`rules[2]`).
    pub(crate) index: usize,
    /// Its number as the page says it ("Rule 3").
    pub(crate) number: usize,
    pub(crate) country: String,
    pub(crate) devices: Vec<Check>,
    pub(crate) systems: Vec<Check>,
    pub(crate) language: String,
    pub(crate) query: String,
    pub(crate) after: String,
    pub(crate) before: String,
    pub(crate) to: String,
    /// The error is about this rule.
    pub(crate) invalid: bool,
    /// The viewer's sentence for it ("Country DE, AT · Devices Mobile").
    pub(crate) summary: String,
}

/// The smart-link part of a link's page.
pub(crate) struct SmartView {
    pub(crate) rules: Vec<RuleView>,
    /// "Add rule" is offered (fewer than the most rules).
    pub(crate) can_add: bool,
    pub(crate) max_rules: usize,
    pub(crate) ios_url: String,
    pub(crate) android_url: String,
    pub(crate) expired_url: String,
    pub(crate) max_clicks: String,
    pub(crate) redirects: Vec<Choice>,
    /// The chosen redirect's label, for viewers.
    pub(crate) redirect_label: String,
    pub(crate) og_title: String,
    pub(crate) og_description: String,
    pub(crate) og_image: String,
    /// The link has a password now.
    pub(crate) password_set: bool,
    pub(crate) remove_password: bool,
    /// A password was typed and not saved: the page never sends it back, so it must be typed again.
    pub(crate) password_typed: bool,
    /// The rule editor changed the rows and nothing is saved yet.
    pub(crate) unsaved: bool,
    /// The place the error names (`og_title`, `rules[2].if.os[0]`), empty when none.
    pub(crate) error_at: String,
}

fn checks(known: &[(&'static str, &'static str)], chosen: &[String]) -> Vec<Check> {
    known
        .iter()
        .map(|(value, label)| Check {
            value,
            label,
            checked: chosen.iter().any(|c| c == value),
        })
        .collect()
}

fn labels(known: &[(&str, &str)], chosen: &[String]) -> String {
    chosen
        .iter()
        .map(|c| {
            known
                .iter()
                .find(|(v, _)| v == c)
                .map_or(c.as_str(), |(_, l)| l)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A rule in words, for viewers.
fn summary(r: &RuleRow) -> String {
    let mut parts = Vec::new();
    let mut add = |what: &str, value: String| {
        if !value.is_empty() {
            parts.push(format!("{what} {value}"));
        }
    };
    add("Countries", r.country.clone());
    add("Devices", labels(&DEVICES, &r.devices));
    add("Systems", labels(&SYSTEMS, &r.systems));
    add("Languages", r.language.clone());
    add("Query", r.query.replace('\n', ", "));
    add("After", utc(&r.after));
    add("Before", utc(&r.before));
    parts.join(" · ")
}

fn utc(local: &str) -> String {
    if local.is_empty() {
        String::new()
    } else {
        format!("{} UTC", local.replacen('T', " ", 1))
    }
}

impl SmartView {
    /// The page's view of `typed`; `password_set` is the link's state, `error` the form's error, if any.
    pub(crate) fn new(
        typed: SmartTyped,
        password_set: bool,
        error: Option<&str>,
        unsaved: bool,
    ) -> Self {
        let error_at = error.map(error_place).unwrap_or_default().to_owned();
        let bad_rule = error_rule(&error_at);
        let chosen = typed.redirect_status.trim().to_owned();
        let redirects: Vec<Choice> = REDIRECTS
            .iter()
            .map(|(code, label)| Choice {
                value: code.to_string(),
                label: (*label).to_owned(),
                selected: code.to_string() == chosen,
            })
            .collect();
        let redirect_label = redirects
            .iter()
            .find(|c| c.selected)
            .map_or_else(|| chosen.clone(), |c| c.label.clone());
        let can_add = typed.rules.len() < MAX_LINK_RULES;
        Self {
            rules: typed
                .rules
                .into_iter()
                .enumerate()
                .map(|(index, r)| RuleView {
                    index,
                    number: index + 1,
                    devices: checks(&DEVICES, &r.devices),
                    systems: checks(&SYSTEMS, &r.systems),
                    invalid: bad_rule == Some(index),
                    summary: summary(&r),
                    country: r.country,
                    language: r.language,
                    query: r.query,
                    after: r.after,
                    before: r.before,
                    to: r.to,
                })
                .collect(),
            can_add,
            max_rules: MAX_LINK_RULES,
            ios_url: typed.ios_url,
            android_url: typed.android_url,
            expired_url: typed.expired_url,
            max_clicks: typed.max_clicks,
            redirects,
            redirect_label,
            og_title: typed.og_title,
            og_description: typed.og_description,
            og_image: typed.og_image,
            password_set,
            remove_password: typed.remove_password,
            password_typed: !typed.password.is_empty(),
            unsaved,
            error_at,
        }
    }

    /// Whether the error names `field` (for `aria-invalid` on its input).
    pub(crate) fn bad(&self, field: &str) -> bool {
        self.error_at == field
    }
}
