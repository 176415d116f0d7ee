//! The smart-link fields of a link (issue 25), checked at the boundary: rules, redirect status, click limit,
//! preview texts and the password. URLs (a rule's `to`, `ios_url`, …) are [`LongUrl`]s
//! ([`LongUrl::parse_field`]).

use super::{LongUrl, Micros, ValidationError};
use link_rules::{
    ANY_VALUE, Conditions, Device, MAX_LIST_ITEMS, MAX_QUERY_CHARS, MAX_QUERY_KEYS, MAX_RULES, Os,
    Rule,
};
use serde_json::{Map, Value};
use std::fmt;

/// Longest `og_title`, in characters (a title's bound; crawlers cut far shorter).
pub const MAX_OG_TITLE_CHARS: usize = 200;
/// Longest `og_description`, in characters.
pub const MAX_OG_DESCRIPTION_CHARS: usize = 500;
/// Longest link password, in characters: every verification at the edge hashes it, so it is bounded.
pub const MAX_LINK_PASSWORD_CHARS: usize = 128;
/// The fewest characters of a link's password: its hash is published to KV, and a shorter one could be found from
/// the hash by trying every candidate (an 8-character password from 60 symbols is 1.7 × 10^14 tries at 50,000
/// PBKDF2 iterations each).
pub const MIN_LINK_PASSWORD_CHARS: usize = 8;
/// Largest `max_clicks`.
pub const MAX_MAX_CLICKS: i64 = 1_000_000_000;
/// The most rules a link holds (link-rules' bound, which the edge also applies), for forms that edit them.
pub const MAX_LINK_RULES: usize = MAX_RULES;

/// A link's rules, validated: at most [`MAX_RULES`], each with at least one condition and an `https://`
/// destination by create-link's rules. Empty: none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkRules {
    rules: Vec<Rule>,
    /// The host of each rule's destination, for the blocklist.
    hosts: Vec<String>,
}

impl LinkRules {
    /// The rules of the API's JSON (`null`: none). Errors name the offending place, e.g. `rules[2].if.os[0]`.
    pub fn parse(value: &Value) -> Result<Self, ValidationError> {
        let items = match value {
            Value::Null => return Ok(Self::default()),
            Value::Array(items) => items,
            _ => {
                return Err(ValidationError::new(
                    "rules must be a list of {\"if\": {…}, \"to\": \"https://…\"} objects",
                ));
            }
        };
        if items.len() > MAX_RULES {
            return Err(ValidationError::new(format!(
                "rules must hold at most {MAX_RULES} rules"
            )));
        }
        let mut parsed = Self::default();
        for (i, item) in items.iter().enumerate() {
            let (rule, host) = parse_rule(&format!("rules[{i}]"), item)?;
            parsed.rules.push(rule);
            parsed.hosts.push(host);
        }
        Ok(parsed)
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules, in order.
    pub fn as_slice(&self) -> &[Rule] {
        &self.rules
    }

    /// `(field, host)` of each rule's destination, for the blocklist check.
    pub fn destinations(&self) -> impl Iterator<Item = (String, &str)> {
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (format!("rules[{i}].to"), h.as_str()))
    }

    /// The stored (and published) form: the rules as JSON, instants in UNIX milliseconds; `None` when empty.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(&self.rules).unwrap_or_default())
    }
}

/// Rules in the API's form: as stored, with `query` as an object (stored as `[name, value]` pairs) and `after`
/// and `before` as ISO 8601 instants (as `created_at`).
pub fn rules_to_api(rules: &[Rule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|rule| {
                let mut value = serde_json::to_value(rule).unwrap_or_default();
                if let Some(when) = value.get_mut("if").and_then(Value::as_object_mut) {
                    if !rule.when.query.is_empty() {
                        let query: Map<String, Value> = rule
                            .when
                            .query
                            .iter()
                            .map(|(name, v)| (name.clone(), Value::from(v.as_str())))
                            .collect();
                        when.insert("query".to_owned(), Value::Object(query));
                    }
                    for (key, ms) in [("after", rule.when.after), ("before", rule.when.before)] {
                        if let Some(ms) = ms {
                            let at = Micros(ms.saturating_mul(1_000)).to_iso8601();
                            when.insert(key.to_owned(), at.into());
                        }
                    }
                }
                value
            })
            .collect(),
    )
}

/// One rule: `{"if": {…}, "to": "https://…"}`, nothing else.
fn parse_rule(at: &str, item: &Value) -> Result<(Rule, String), ValidationError> {
    let object = item.as_object().ok_or_else(|| {
        ValidationError::new(format!(
            "{at} must be an object {{\"if\": {{…}}, \"to\": \"https://…\"}}"
        ))
    })?;
    only_keys(at, object, &["if", "to"])?;
    let to = match object.get("to") {
        Some(Value::String(to)) => LongUrl::parse_field(&format!("{at}.to"), to)?,
        _ => {
            return Err(ValidationError::new(format!(
                "{at}.to must be an https:// URL"
            )));
        }
    };
    let when = match object.get("if") {
        Some(Value::Object(when)) => parse_conditions(&format!("{at}.if"), when)?,
        _ => {
            return Err(ValidationError::new(format!(
                "{at}.if must be an object of conditions"
            )));
        }
    };
    let host = to.host().to_owned();
    Ok((
        Rule {
            when,
            to: to.as_str().to_owned(),
        },
        host,
    ))
}

const CONDITIONS: [&str; 7] = [
    "country", "device", "os", "language", "query", "after", "before",
];

fn parse_conditions(at: &str, when: &Map<String, Value>) -> Result<Conditions, ValidationError> {
    only_keys(at, when, &CONDITIONS)?;
    let mut c = Conditions::default();
    for (key, value) in when {
        let field = format!("{at}.{key}");
        match key.as_str() {
            "country" => {
                c.country = strings(&field, value)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, code)| country(&format!("{field}[{i}]"), code))
                    .collect::<Result<_, _>>()?;
            }
            "language" => {
                c.language = strings(&field, value)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, tag)| language(&format!("{field}[{i}]"), tag))
                    .collect::<Result<_, _>>()?;
            }
            "device" => {
                c.device = names(&field, value, Device::parse, "mobile, tablet or desktop")?;
            }
            "os" => {
                c.os = names(
                    &field,
                    value,
                    Os::parse,
                    "ios, android, windows, macos, linux or other",
                )?;
            }
            "query" => c.query = query(&field, value)?,
            "after" => c.after = Some(instant(&field, value)?),
            "before" => c.before = Some(instant(&field, value)?),
            // only_keys refused every other key.
            _ => {}
        }
    }
    if c.is_empty() {
        return Err(ValidationError::new(format!(
            "{at} must hold at least one condition ({})",
            CONDITIONS.join(", ")
        )));
    }
    if let (Some(after), Some(before)) = (c.after, c.before) {
        if after >= before {
            return Err(ValidationError::new(format!(
                "{at}.after must be earlier than {at}.before"
            )));
        }
    }
    Ok(c)
}

/// Refuses keys outside `allowed`: a misspelt condition must not silently match everyone.
fn only_keys(
    at: &str,
    object: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), ValidationError> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(ValidationError::new(format!(
            "{at} has an unknown field {unknown:?} (known: {})",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A list of 1 to [`MAX_LIST_ITEMS`] strings.
fn strings<'a>(field: &str, value: &'a Value) -> Result<Vec<&'a str>, ValidationError> {
    let bad = || {
        ValidationError::new(format!(
            "{field} must be a list of 1 to {MAX_LIST_ITEMS} strings"
        ))
    };
    let items = value.as_array().ok_or_else(bad)?;
    if items.is_empty() || items.len() > MAX_LIST_ITEMS {
        return Err(bad());
    }
    items.iter().map(|v| v.as_str().ok_or_else(bad)).collect()
}

/// `device` and `os`: one name, or a list of names, kept in order without repeats.
fn names<T: Copy + PartialEq>(
    field: &str,
    value: &Value,
    parse: fn(&str) -> Option<T>,
    known: &str,
) -> Result<Vec<T>, ValidationError> {
    let list = match value {
        Value::String(one) => vec![one.as_str()],
        other => strings(field, other)?,
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, name) in list.into_iter().enumerate() {
        let parsed = parse(name).ok_or_else(|| {
            ValidationError::new(format!("{field}[{i}] must be one of {known}, not {name:?}"))
        })?;
        if !out.contains(&parsed) {
            out.push(parsed);
        }
    }
    Ok(out)
}

/// Two ASCII letters, uppercased: the check group settings apply to country codes.
fn country(field: &str, code: &str) -> Result<String, ValidationError> {
    if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(ValidationError::new(format!(
            "{field}: {code:?} is not an ISO 3166-1 alpha-2 country code (e.g. DE)"
        )));
    }
    Ok(code.to_ascii_uppercase())
}

/// A primary language subtag (ISO 639: 2 or 3 letters), lowercased.
fn language(field: &str, tag: &str) -> Result<String, ValidationError> {
    if !(2..=3).contains(&tag.len()) || !tag.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(ValidationError::new(format!(
            "{field}: {tag:?} is not a primary language tag (2 or 3 letters, e.g. de)"
        )));
    }
    Ok(tag.to_ascii_lowercase())
}

/// `{"name": "value" | "*"}`: 1 to [`MAX_QUERY_KEYS`] parameters, names and values 1 to [`MAX_QUERY_CHARS`]
/// characters without control characters; kept as `(name, value)` pairs sorted by name.
fn query(field: &str, value: &Value) -> Result<Vec<(String, String)>, ValidationError> {
    let object = value
        .as_object()
        .filter(|o| !o.is_empty() && o.len() <= MAX_QUERY_KEYS);
    let object = object.ok_or_else(|| {
        ValidationError::new(format!(
            "{field} must be an object of 1 to {MAX_QUERY_KEYS} parameters, each \"name\": \"value\" or \"{ANY_VALUE}\""
        ))
    })?;
    let text = |what: &str, s: &str| {
        let n = s.chars().count();
        if n == 0 || n > MAX_QUERY_CHARS || s.chars().any(char::is_control) {
            return Err(ValidationError::new(format!(
                "{what} must be 1 to {MAX_QUERY_CHARS} characters without control characters"
            )));
        }
        Ok(s.to_owned())
    };
    let mut pairs = object
        .iter()
        .map(|(name, v)| {
            let at = format!("{field}.{name}");
            let v = v.as_str().ok_or_else(|| {
                ValidationError::new(format!(
                    "{at} must be a string (\"{ANY_VALUE}\": any value)"
                ))
            })?;
            Ok((text(&format!("{field}'s names"), name)?, text(&at, v)?))
        })
        .collect::<Result<Vec<_>, ValidationError>>()?;
    // A JSON object's names are unique already; sorted, the stored form does not depend on the client's order.
    pairs.sort_unstable();
    Ok(pairs)
}

/// An RFC 3339 UTC instant, as UNIX milliseconds (rounded up, as expiries are: never reached early).
fn instant(field: &str, value: &Value) -> Result<i64, ValidationError> {
    let raw = value.as_str().ok_or_else(|| {
        ValidationError::new(format!(
            "{field} must be an RFC 3339 time in UTC, e.g. 2030-01-31T12:00:00Z"
        ))
    })?;
    Ok(Micros::parse_rfc3339_utc(field, raw)?.unix_millis_ceil())
}

/// The status of a link's redirect: 301, 302 (the default), 307 or 308.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedirectStatus(u16);

impl RedirectStatus {
    /// 302 Found: what every link answered before this field.
    pub const FOUND: RedirectStatus = RedirectStatus(302);

    /// One of the four redirect statuses.
    pub fn parse(n: i64) -> Result<Self, ValidationError> {
        match n {
            301 | 302 | 307 | 308 => Ok(Self(n as u16)),
            _ => Err(ValidationError::new(
                "redirect_status must be 301, 302, 307 or 308",
            )),
        }
    }

    /// The status code.
    pub fn code(self) -> u16 {
        self.0
    }
}

impl Default for RedirectStatus {
    fn default() -> Self {
        Self::FOUND
    }
}

/// After how many counted clicks a link behaves as expired: 1 to [`MAX_MAX_CLICKS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxClicks(i64);

impl MaxClicks {
    /// A positive count.
    pub fn parse(n: i64) -> Result<Self, ValidationError> {
        if (1..=MAX_MAX_CLICKS).contains(&n) {
            Ok(Self(n))
        } else {
            Err(ValidationError::new(format!(
                "max_clicks must be an integer from 1 to {MAX_MAX_CLICKS}"
            )))
        }
    }

    /// The count.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// A preview text (`og_title`, `og_description`): trimmed, at most its field's length, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewText(String);

impl PreviewText {
    /// `field`'s text of at most `max` characters once trimmed; `None` when empty.
    pub fn parse(field: &str, raw: &str, max: usize) -> Result<Option<Self>, ValidationError> {
        let t = raw.trim();
        if t.is_empty() {
            return Ok(None);
        }
        if t.chars().count() > max {
            return Err(ValidationError::new(format!(
                "{field} must be at most {max} characters"
            )));
        }
        if t.chars().any(char::is_control) {
            return Err(ValidationError::new(format!(
                "{field} must not contain control characters"
            )));
        }
        Ok(Some(Self(t.to_owned())))
    }

    /// The trimmed text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A link's password as a client sets it: [`MIN_LINK_PASSWORD_CHARS`] to [`MAX_LINK_PASSWORD_CHARS`]
/// characters, kept exactly (not trimmed). Only its hash is stored ([`crate::Db::hash_link_password`]); `Debug` is redacted.
#[derive(Clone)]
pub struct LinkPassword(String);

impl LinkPassword {
    /// Checks a password.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let n = raw.chars().count();
        if !(MIN_LINK_PASSWORD_CHARS..=MAX_LINK_PASSWORD_CHARS).contains(&n) {
            return Err(ValidationError::new(format!(
                "password must be {MIN_LINK_PASSWORD_CHARS} to {MAX_LINK_PASSWORD_CHARS} characters (null removes it)"
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The characters, for hashing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LinkPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkPassword(<redacted>)")
    }
}

/// The stored hash of a link's password (`pbkdf2-sha256$…`); only [`crate::Db::hash_link_password`] makes one.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkPasswordHash(String);

impl LinkPasswordHash {
    pub(crate) fn new(encoded: String) -> Self {
        Self(encoded)
    }

    /// The encoded hash, as stored and published.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LinkPasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkPasswordHash(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        LinkRules::parse(&v).unwrap_err().0
    }

    #[test]
    fn rules_parse_and_normalise() {
        let rules = LinkRules::parse(&json!([
            {"if": {"country": ["de", "AT"], "device": "mobile", "os": ["ios", "ios", "android"],
                    "language": ["DE"], "query": {"utm": "*"}, "after": "2030-01-01T00:00:00Z",
                    "before": "2030-01-02T00:00:00.0005Z"},
             "to": "https://Example.com/de"}
        ]))
        .unwrap();
        let c = &rules.as_slice()[0].when;
        assert_eq!(c.country, ["DE", "AT"]);
        assert_eq!(c.device, [Device::Mobile]);
        assert_eq!(c.os, [Os::Ios, Os::Android]);
        assert_eq!(c.language, ["de"]);
        assert_eq!(c.after, Some(1_893_456_000_000));
        assert_eq!(c.before, Some(1_893_542_400_001), "rounded up");
        assert_eq!(
            rules.destinations().collect::<Vec<_>>(),
            [("rules[0].to".to_owned(), "example.com")]
        );
        let api = rules_to_api(rules.as_slice());
        assert_eq!(api[0]["if"]["after"], "2030-01-01T00:00:00.000000Z");
        assert_eq!(api[0]["if"]["device"], json!(["mobile"]));
        assert_eq!(c.query, [("utm".to_owned(), "*".to_owned())]);
        assert_eq!(api[0]["if"]["query"], json!({"utm": "*"}));
        assert!(LinkRules::parse(&Value::Null).unwrap().is_empty());
        assert!(LinkRules::parse(&json!([])).unwrap().to_stored().is_none());
    }

    #[test]
    fn rule_errors_name_their_place() {
        let to = "https://a.example/";
        let many: Vec<Value> = (0..=MAX_RULES)
            .map(|_| json!({"if": {"os": "ios"}, "to": to}))
            .collect();
        assert!(err(Value::Array(many)).contains("at most 20"));
        assert!(err(json!({})).starts_with("rules must be a list"));
        assert!(err(json!([{"if": {}, "to": to}])).contains("rules[0].if must hold at least one"));
        assert!(err(json!([{"to": to}])).contains("rules[0].if must be an object"));
        assert!(err(json!([{"if": {"os": "ios"}}])).contains("rules[0].to"));
        assert!(
            err(json!([{"if": {"os": "ios"}, "to": "http://a.example/"}]))
                .contains("rules[0].to must start with https://")
        );
        assert!(
            err(json!([{"if": {"os": "ios"}, "to": to, "x": 1}])).contains("unknown field \"x\"")
        );
        assert!(err(json!([{"if": {"oss": "ios"}, "to": to}])).contains("unknown field \"oss\""));
        assert!(
            err(json!([{"if": {"country": ["DEU"]}, "to": to}])).contains("rules[0].if.country[0]")
        );
        assert!(err(json!([{"if": {"country": []}, "to": to}])).contains("1 to 50"));
        assert!(err(json!([{"if": {"os": "bsd"}, "to": to}])).contains("rules[0].if.os[0]"));
        assert!(
            err(json!([{"if": {"device": ["tv"]}, "to": to}])).contains("rules[0].if.device[0]")
        );
        assert!(err(json!([{"if": {"language": ["de-CH"]}, "to": to}])).contains("language[0]"));
        assert!(err(json!([{"if": {"query": {}}, "to": to}])).contains("rules[0].if.query"));
        assert!(
            err(json!([{"if": {"query": {"a": 1}}, "to": to}])).contains("rules[0].if.query.a")
        );
        let long = "x".repeat(MAX_QUERY_CHARS + 1);
        assert!(err(json!([{"if": {"query": {"a": long}}, "to": to}])).contains("query.a"));
        assert!(
            err(json!([{"if": {"after": "2030-01-01T00:00:00+02:00"}, "to": to}]))
                .contains("after")
        );
        assert!(
            err(
                json!([{"if": {"after": "2030-01-02T00:00:00Z", "before": "2030-01-01T00:00:00Z"},
                            "to": to}])
            )
            .contains("earlier")
        );
        let countries: Vec<&str> = vec!["DE"; MAX_LIST_ITEMS + 1];
        assert!(err(json!([{"if": {"country": countries}, "to": to}])).contains("1 to 50"));
    }

    #[test]
    fn scalar_fields() {
        for ok in [301, 302, 307, 308] {
            assert_eq!(RedirectStatus::parse(ok).unwrap().code(), ok as u16);
        }
        for bad in [300, 303, 0, -1, 70_000] {
            assert!(RedirectStatus::parse(bad).is_err());
        }
        assert_eq!(RedirectStatus::default().code(), 302);
        assert!(MaxClicks::parse(0).is_err() && MaxClicks::parse(-5).is_err());
        assert!(MaxClicks::parse(MAX_MAX_CLICKS + 1).is_err());
        assert_eq!(MaxClicks::parse(1).unwrap().get(), 1);
        assert_eq!(PreviewText::parse("og_title", "  ", 200).unwrap(), None);
        assert!(PreviewText::parse("og_title", &"x".repeat(201), 200).is_err());
        assert!(PreviewText::parse("og_title", "a\u{7}", 200).is_err());
        assert_eq!(
            PreviewText::parse("og_title", " Hi ", 200)
                .unwrap()
                .unwrap()
                .as_str(),
            "Hi"
        );
        assert!(LinkPassword::parse("").is_err());
        assert!(LinkPassword::parse("1234567").is_err());
        assert!(LinkPassword::parse("12345678").is_ok());
        assert!(LinkPassword::parse(&"é".repeat(MAX_LINK_PASSWORD_CHARS)).is_ok());
        assert!(LinkPassword::parse(&"x".repeat(MAX_LINK_PASSWORD_CHARS + 1)).is_err());
        assert_eq!(
            format!("{:?}", LinkPassword::parse(" secret ").unwrap()),
            "LinkPassword(<redacted>)"
        );
        assert_eq!(
            LinkPassword::parse(" secret ").unwrap().expose(),
            " secret "
        );
    }
}
