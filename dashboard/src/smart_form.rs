//! The smart-link fields of a link's edit form (issue 25): what the person typed, kept as typed so that a refusal
//! or a button of the rule editor shows the form again as it was, and its translation into the store's
//! [`LinkOptionsPatch`]. The translation only reshapes text (a rule's row into the API's JSON of a rule); every
//! check is the store's own parser, the one the API uses (`LinkRules::parse`, `LongUrl::parse_field`,
//! `PreviewText`, `MaxClicks`, `RedirectStatus`, `LinkPassword`), so a refusal is the API's message naming its
//! place (`rules[2].if.os[0] must be one of …`).
//!
//! Each field is sent to the store only when it differs from the link's: saving the form unchanged writes no
//! activity row, publishes nothing, and keeps what the form cannot show exactly (an instant's milliseconds).

use crate::forms::FormPairs;
use serde_json::{Map, Value};
use shortlink_store::domain::{
    LinkPassword, LinkRules, LongUrl, MAX_LINK_RULES, MAX_OG_DESCRIPTION_CHARS, MAX_OG_TITLE_CHARS,
    MaxClicks, PreviewText, RedirectStatus,
};
use shortlink_store::{LinkOptionsPatch, ListedLink};
use std::collections::BTreeMap;

/// The devices a rule may name: `(value, label)`, in the order the form shows them.
pub(crate) const DEVICES: [(&str, &str); 3] = [
    ("mobile", "Mobile"),
    ("tablet", "Tablet"),
    ("desktop", "Desktop"),
];

/// The operating systems a rule may name: `(value, label)`.
pub(crate) const SYSTEMS: [(&str, &str); 6] = [
    ("ios", "iOS"),
    ("android", "Android"),
    ("windows", "Windows"),
    ("macos", "macOS"),
    ("linux", "Linux"),
    ("other", "Other"),
];

/// "Redirect type": each status with whether it is permanent (short enough for a phone's select; the page's hint
/// says what permanent implies).
pub(crate) const REDIRECTS: [(u16, &str); 4] = [
    (301, "301 Moved Permanently (permanent)"),
    (302, "302 Found (temporary, default)"),
    (307, "307 Temporary Redirect (temporary)"),
    (308, "308 Permanent Redirect (permanent)"),
];

/// Marks a body that carries the smart-link fields; without it (a page from before them) they are left alone.
pub(crate) const MARKER: &str = "smart";

// Bounds on what is kept of a typed value to show it again: above each field's own limit, so the store still
// refuses an over-long value with its message, yet a forged body cannot make the page large.
const URL_CHARS: usize = 4096;
const LIST_CHARS: usize = 600;
const QUERY_CHARS: usize = 2400;
const INSTANT_CHARS: usize = 40;

fn cap(raw: &str, max: usize) -> String {
    raw.chars().take(max).collect()
}

/// One rule's row as typed: lists as the form shows them (comma-separated, one `name=value` per line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RuleRow {
    pub(crate) country: String,
    /// Checked devices, in [`DEVICES`]' order (any other value after them, to be refused by the store).
    pub(crate) devices: Vec<String>,
    /// Checked systems, in [`SYSTEMS`]' order.
    pub(crate) systems: Vec<String>,
    pub(crate) language: String,
    /// One `name=value` per line, `\n`-separated.
    pub(crate) query: String,
    /// `datetime-local` values in UTC (`2030-01-31T12:00`).
    pub(crate) after: String,
    pub(crate) before: String,
    pub(crate) to: String,
}

/// `values` without repeats, the known ones first in `known`'s order: a stored rule and the same rule sent back
/// by the checkboxes compare equal.
fn in_form_order(values: Vec<String>, known: &[(&str, &str)]) -> Vec<String> {
    let mut out: Vec<String> = known
        .iter()
        .filter(|(v, _)| values.iter().any(|x| x == v))
        .map(|(v, _)| (*v).to_owned())
        .collect();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// A textarea's lines as the form keeps them: browsers send `\r\n`; blank lines and edge spaces go.
fn lines(raw: &str) -> String {
    raw.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A stored instant (`2030-01-01T00:00:00.000000Z`) as a `datetime-local` value: to the minute, or to the
/// second when it has seconds.
fn local_field(iso: &str) -> String {
    match iso.get(17..19) {
        Some("00") | None => iso.get(..16).unwrap_or_default().to_owned(),
        Some(_) => iso.get(..19).unwrap_or_default().to_owned(),
    }
}

/// A `datetime-local` value (in UTC) as RFC 3339; anything else goes on as typed, for the store to refuse.
fn rfc3339(local: &str) -> String {
    match local.len() {
        16 => format!("{local}:00Z"),
        19 => format!("{local}Z"),
        _ => local.to_owned(),
    }
}

fn join(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl RuleRow {
    /// The row of a rule in the API's form (as [`shortlink_store::SmartFields`] shows it).
    fn from_api(rule: &Value) -> Self {
        let when = rule.get("if");
        let field = |name: &str| when.and_then(|w| w.get(name));
        let query = field("query")
            .and_then(Value::as_object)
            .map(|q| {
                q.iter()
                    .map(|(name, v)| format!("{name}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let instant = |name: &str| {
            field(name)
                .and_then(Value::as_str)
                .map(local_field)
                .unwrap_or_default()
        };
        Self {
            country: join(field("country")).join(", "),
            devices: in_form_order(join(field("device")), &DEVICES),
            systems: in_form_order(join(field("os")), &SYSTEMS),
            language: join(field("language")).join(", "),
            query,
            after: instant("after"),
            before: instant("before"),
            to: rule
                .get("to")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }
    }

    /// The rule as the API's JSON: empty fields are no condition; the store checks the rest. `at` is the rule's
    /// place (`rules[2]`), for the one refusal that is the form's own (a query name given twice, which JSON
    /// cannot say).
    fn to_api(&self, at: &str) -> Result<Value, String> {
        let list = |raw: &str| -> Vec<Value> {
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(Value::from)
                .collect()
        };
        let mut when = Map::new();
        let mut put = |name: &str, items: Vec<Value>| {
            if !items.is_empty() {
                when.insert(name.to_owned(), Value::Array(items));
            }
        };
        put("country", list(&self.country));
        put(
            "device",
            self.devices
                .iter()
                .map(|d| Value::from(d.as_str()))
                .collect(),
        );
        put(
            "os",
            self.systems
                .iter()
                .map(|o| Value::from(o.as_str()))
                .collect(),
        );
        put("language", list(&self.language));
        let mut query = Map::new();
        for line in self.query.lines() {
            // A line without "=" is a name without a value, which the store refuses with its message.
            let (name, value) = line.split_once('=').unwrap_or((line, ""));
            let (name, value) = (name.trim(), value.trim());
            if query.insert(name.to_owned(), value.into()).is_some() {
                return Err(format!("{at}.if.query names {name:?} twice"));
            }
        }
        if !query.is_empty() {
            when.insert("query".to_owned(), Value::Object(query));
        }
        for (name, raw) in [("after", &self.after), ("before", &self.before)] {
            let raw = raw.trim();
            if !raw.is_empty() {
                when.insert(name.to_owned(), rfc3339(raw).into());
            }
        }
        let mut rule = Map::new();
        rule.insert("if".to_owned(), Value::Object(when));
        rule.insert("to".to_owned(), self.to.trim().into());
        Ok(Value::Object(rule))
    }
}

/// The smart-link fields as typed. No `Debug`: it holds the typed password.
#[derive(Clone, Default)]
pub(crate) struct SmartTyped {
    pub(crate) rules: Vec<RuleRow>,
    pub(crate) ios_url: String,
    pub(crate) android_url: String,
    /// A new password; empty: the password stays as it is. Never shown back.
    pub(crate) password: String,
    /// "Remove password" is ticked.
    pub(crate) remove_password: bool,
    pub(crate) expired_url: String,
    pub(crate) max_clicks: String,
    pub(crate) redirect_status: String,
    pub(crate) og_title: String,
    pub(crate) og_description: String,
    pub(crate) og_image: String,
}

/// A button of the rule editor: it changes the rows and shows the form again, saving nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleAction {
    Add,
    Remove(usize),
    Up(usize),
}

impl RuleAction {
    /// The pressed button's value (`add`, `remove:2`, `up:2`), if one of them was pressed.
    pub(crate) fn of(pairs: &FormPairs) -> Option<Self> {
        let raw = pairs.get("rule_action")?;
        let at = |s: &str| s.parse::<usize>().ok();
        match raw.split_once(':') {
            None if raw == "add" => Some(Self::Add),
            Some(("remove", i)) => at(i).map(Self::Remove),
            Some(("up", i)) => at(i).map(Self::Up),
            _ => None,
        }
    }
}

/// `rules[2].country` → `(2, "country")`, for rows the form may hold.
fn rule_field(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix("rules[")?;
    let (index, field) = rest.split_once("].")?;
    let index: usize = index.parse().ok()?;
    (index < MAX_LINK_RULES).then_some((index, field))
}

impl SmartTyped {
    /// The link's values as the form shows them.
    pub(crate) fn of_link(link: &ListedLink) -> Self {
        let s = &link.smart;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        Self {
            rules: s
                .rules
                .as_array()
                .map(|r| r.iter().map(RuleRow::from_api).collect())
                .unwrap_or_default(),
            ios_url: text(&s.ios_url),
            android_url: text(&s.android_url),
            password: String::new(),
            remove_password: false,
            expired_url: text(&s.expired_url),
            max_clicks: s.max_clicks.map(|m| m.to_string()).unwrap_or_default(),
            redirect_status: s.redirect_status.to_string(),
            og_title: text(&s.og_title),
            og_description: text(&s.og_description),
            og_image: text(&s.og_image),
        }
    }

    /// The fields of a posted form; `None` when it does not carry them ([`MARKER`]). Rows come in the order of
    /// their numbers; numbers from [`MAX_LINK_RULES`] on are dropped (the form never offers them).
    pub(crate) fn from_pairs(pairs: &FormPairs) -> Option<Self> {
        pairs.get(MARKER)?;
        let mut rows: BTreeMap<usize, RuleRow> = BTreeMap::new();
        for (name, value) in &pairs.0 {
            let Some((index, field)) = rule_field(name) else {
                continue;
            };
            let row = rows.entry(index).or_default();
            match field {
                "country" => row.country = cap(value, LIST_CHARS),
                "language" => row.language = cap(value, LIST_CHARS),
                "query" => row.query = lines(&cap(value, QUERY_CHARS)),
                "after" => row.after = cap(value, INSTANT_CHARS),
                "before" => row.before = cap(value, INSTANT_CHARS),
                "to" => row.to = cap(value, URL_CHARS),
                // Checkboxes: a few names at most (the store refuses an unknown one, naming it).
                "device" if row.devices.len() < DEVICES.len() + 1 => {
                    row.devices.push(cap(value, 20));
                }
                "os" if row.systems.len() < SYSTEMS.len() + 1 => row.systems.push(cap(value, 20)),
                _ => {}
            }
        }
        let rules = rows
            .into_values()
            .map(|mut r| {
                r.devices = in_form_order(r.devices, &DEVICES);
                r.systems = in_form_order(r.systems, &SYSTEMS);
                r
            })
            .collect();
        let url = |name: &str| cap(pairs.first(name), URL_CHARS);
        Some(Self {
            rules,
            ios_url: url("ios_url"),
            android_url: url("android_url"),
            // Not capped: LinkPassword refuses an over-long one, and the body is bounded.
            password: pairs.first("password").to_owned(),
            remove_password: pairs.get("remove_password").is_some(),
            expired_url: url("expired_url"),
            max_clicks: cap(pairs.first("max_clicks"), 40),
            redirect_status: cap(pairs.first("redirect_status"), 10),
            og_title: cap(pairs.first("og_title"), 2 * MAX_OG_TITLE_CHARS),
            og_description: cap(pairs.first("og_description"), 2 * MAX_OG_DESCRIPTION_CHARS),
            og_image: url("og_image"),
        })
    }

    /// Applies a rule-editor button; `false` when it could not (a 21st rule).
    pub(crate) fn apply(&mut self, action: RuleAction) -> bool {
        match action {
            RuleAction::Add if self.rules.len() >= MAX_LINK_RULES => return false,
            RuleAction::Add => self.rules.push(RuleRow::default()),
            RuleAction::Remove(i) if i < self.rules.len() => {
                self.rules.remove(i);
            }
            RuleAction::Up(i) if i > 0 && i < self.rules.len() => self.rules.swap(i - 1, i),
            // A stale button (the row is gone): nothing to do.
            RuleAction::Remove(_) | RuleAction::Up(_) => {}
        }
        true
    }

    /// The changes against `link`, and the new password still to hash; a refusal is the store's message.
    pub(crate) fn patch(
        &self,
        link: &ListedLink,
    ) -> Result<(LinkOptionsPatch, Option<Option<LinkPassword>>), String> {
        let s = &link.smart;
        let message = |e: shortlink_store::domain::ValidationError| e.0;
        let url = |field: &str, typed: &str, stored: &Option<String>| {
            let typed = typed.trim();
            let new = match typed {
                "" => None,
                u => Some(LongUrl::parse_field(field, u).map_err(message)?),
            };
            let same = new.as_ref().map(LongUrl::as_str) == stored.as_deref();
            Ok::<_, String>((!same).then_some(new))
        };
        let text = |field: &str, typed: &str, max: usize, stored: &Option<String>| {
            let new = PreviewText::parse(field, typed, max).map_err(message)?;
            let same = new.as_ref().map(PreviewText::as_str) == stored.as_deref();
            Ok::<_, String>((!same).then_some(new))
        };
        let rules = self.rules_change(link)?;
        let max_clicks = match self.max_clicks.trim() {
            "" => None,
            // Not a whole number is out of the range as much as 0 is: the store's message says what is wanted.
            n => Some(MaxClicks::parse(n.parse().unwrap_or(0)).map_err(message)?),
        };
        let redirect = RedirectStatus::parse(self.redirect_status.trim().parse().unwrap_or(0))
            .map_err(message)?;
        let password = match (self.password.as_str(), self.remove_password) {
            ("", false) => None,
            ("", true) => Some(None),
            (typed, false) => Some(Some(LinkPassword::parse(typed).map_err(|e| {
                // The API's "null removes it" is "Remove password" here.
                e.0.replace(" (null removes it)", "")
            })?)),
            (_, true) => {
                return Err(
                    "password: type a new password or tick Remove password, not both".to_owned(),
                );
            }
        };
        let patch = LinkOptionsPatch {
            rules,
            ios_url: url("ios_url", &self.ios_url, &s.ios_url)?,
            android_url: url("android_url", &self.android_url, &s.android_url)?,
            // Hashed by the caller, after the change is charged.
            password: None,
            expired_url: url("expired_url", &self.expired_url, &s.expired_url)?,
            max_clicks: (max_clicks.map(MaxClicks::get) != s.max_clicks).then_some(max_clicks),
            redirect_status: (redirect.code() != s.redirect_status).then_some(redirect),
            og_title: text("og_title", &self.og_title, MAX_OG_TITLE_CHARS, &s.og_title)?,
            og_description: text(
                "og_description",
                &self.og_description,
                MAX_OG_DESCRIPTION_CHARS,
                &s.og_description,
            )?,
            og_image: url("og_image", &self.og_image, &s.og_image)?,
        };
        // Removing a password the link does not have changes nothing.
        let password = password.filter(|p| p.is_some() || s.password_protected);
        Ok((patch, password))
    }

    /// The new rules, or `None` when they are the link's: the rows as shown, or the rules they parse to.
    fn rules_change(&self, link: &ListedLink) -> Result<Option<LinkRules>, String> {
        let stored: Vec<RuleRow> = link
            .smart
            .rules
            .as_array()
            .map(|r| r.iter().map(RuleRow::from_api).collect())
            .unwrap_or_default();
        if stored == self.rules {
            return Ok(None);
        }
        let json = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| r.to_api(&format!("rules[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let new = LinkRules::parse(&Value::Array(json)).map_err(|e| e.0)?;
        let same = LinkRules::parse(&link.smart.rules).is_ok_and(|old| old == new);
        Ok((!same).then_some(new))
    }
}

/// The place an error names (`og_title`, `rules[2].if.os[0]`, …): its first word, for the form to mark the field.
pub(crate) fn error_place(message: &str) -> &str {
    let end = message.find([' ', ':', '\'']).unwrap_or(message.len());
    &message[..end]
}

/// The rule an error place names (`rules[2].if.os[0]` → 2).
pub(crate) fn error_rule(place: &str) -> Option<usize> {
    place
        .strip_prefix("rules[")?
        .split_once(']')?
        .0
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> FormPairs {
        FormPairs(
            list.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn rows_come_in_order_with_their_checkboxes() {
        let typed = SmartTyped::from_pairs(&pairs(&[
            ("smart", "1"),
            ("rules[1].to", "https://b.example/"),
            ("rules[0].os", "android"),
            ("rules[0].os", "ios"),
            ("rules[0].os", "ios"),
            ("rules[0].query", "a=1\r\n\r\n b = * \r\n"),
            ("rules[0].to", "https://a.example/"),
            ("rules[25].to", "https://dropped.example/"),
            ("redirect_status", "308"),
        ]))
        .unwrap();
        assert_eq!(typed.rules.len(), 2);
        assert_eq!(typed.rules[0].systems, ["ios", "android"]);
        assert_eq!(typed.rules[0].query, "a=1\nb = *");
        assert_eq!(typed.rules[1].to, "https://b.example/");
        assert!(SmartTyped::from_pairs(&pairs(&[("title", "x")])).is_none());
        let json = typed.rules[0].to_api("rules[0]").unwrap();
        assert_eq!(json["if"]["os"], serde_json::json!(["ios", "android"]));
        assert_eq!(json["if"]["query"], serde_json::json!({"a": "1", "b": "*"}));
        let twice = RuleRow {
            query: "a=1\na=2".to_owned(),
            ..RuleRow::default()
        };
        assert_eq!(
            twice.to_api("rules[3]").unwrap_err(),
            "rules[3].if.query names \"a\" twice"
        );
    }

    #[test]
    fn a_stored_rule_round_trips_through_its_row() {
        let api = serde_json::json!({"if": {"country": ["DE", "AT"], "device": ["mobile", "desktop"],
            "after": "2030-01-01T00:00:00.000000Z", "before": "2030-01-01T10:20:30.000000Z",
            "query": {"utm": "*"}}, "to": "https://x.example/"});
        let row = RuleRow::from_api(&api);
        assert_eq!(row.country, "DE, AT");
        assert_eq!(row.devices, ["mobile", "desktop"]);
        assert_eq!(
            (row.after.as_str(), row.before.as_str()),
            ("2030-01-01T00:00", "2030-01-01T10:20:30")
        );
        let back = LinkRules::parse(&Value::Array(vec![row.to_api("rules[0]").unwrap()])).unwrap();
        assert_eq!(back, LinkRules::parse(&Value::Array(vec![api])).unwrap());
    }

    #[test]
    fn rule_buttons() {
        assert_eq!(
            RuleAction::of(&pairs(&[("rule_action", "up:2")])),
            Some(RuleAction::Up(2))
        );
        assert_eq!(
            RuleAction::of(&pairs(&[("rule_action", "remove:0")])),
            Some(RuleAction::Remove(0))
        );
        assert_eq!(
            RuleAction::of(&pairs(&[("rule_action", "add")])),
            Some(RuleAction::Add)
        );
        assert_eq!(RuleAction::of(&pairs(&[("rule_action", "up:x")])), None);
        let mut typed = SmartTyped::default();
        for _ in 0..MAX_LINK_RULES {
            assert!(typed.apply(RuleAction::Add));
        }
        assert!(!typed.apply(RuleAction::Add), "at most 20");
        typed.rules[1].to = "second".to_owned();
        typed.apply(RuleAction::Up(1));
        assert_eq!(typed.rules[0].to, "second");
        typed.apply(RuleAction::Up(0));
        typed.apply(RuleAction::Remove(99));
        typed.apply(RuleAction::Remove(0));
        assert_eq!(
            (typed.rules.len(), typed.rules[0].to.as_str()),
            (MAX_LINK_RULES - 1, "")
        );
    }

    #[test]
    fn error_places() {
        assert_eq!(
            error_place("rules[2].if.os[0] must be one of"),
            "rules[2].if.os[0]"
        );
        assert_eq!(
            error_place("rules[0].if.country[0]: \"DEU\" is not"),
            "rules[0].if.country[0]"
        );
        assert_eq!(
            error_place("rules[1].if.query's names must"),
            "rules[1].if.query"
        );
        assert_eq!(error_rule("rules[12].to"), Some(12));
        assert_eq!(error_rule("og_title"), None);
    }
}
