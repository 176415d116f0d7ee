//! A link's smart-link fields (issue 25) as written and read: what create-link sets ([`LinkOptions`]), what a
//! PATCH changes ([`LinkOptionsPatch`]), how they are shown ([`SmartFields`]), their columns, the blocklist check
//! of their URLs, and the group rule of `max_clicks` (it counts clicks, so the group must have analytics on).

use crate::domain::parent_domains;
use crate::domain::{
    LinkPasswordHash, LinkRules, LongUrl, MaxClicks, PreviewText, RedirectStatus, rules_to_api,
};
use crate::error::StoreError;
use link_rules::Rule;
use serde_json::{Map, Value};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, AnyConnection, Row};

/// The smart-link fields of a new link; the default is a plain link.
#[derive(Debug, Clone, Default)]
pub struct LinkOptions {
    /// Rules, in order (empty: none).
    pub rules: LinkRules,
    /// Where iOS visitors go (a leading `os` rule at the edge).
    pub ios_url: Option<LongUrl>,
    /// Where Android visitors go (a leading `os` rule at the edge, after iOS's).
    pub android_url: Option<LongUrl>,
    /// The password's hash ([`crate::Db::hash_link_password`]).
    pub password: Option<LinkPasswordHash>,
    /// Where visitors go once the link has expired.
    pub expired_url: Option<LongUrl>,
    /// After this many counted clicks the link behaves as expired.
    pub max_clicks: Option<MaxClicks>,
    /// The redirect's status.
    pub redirect_status: RedirectStatus,
    /// Preview card title.
    pub og_title: Option<PreviewText>,
    /// Preview card description.
    pub og_description: Option<PreviewText>,
    /// Preview card image.
    pub og_image: Option<LongUrl>,
}

/// A column's new value.
#[derive(Debug, Clone)]
pub(crate) enum Column {
    Text(Option<String>),
    Int(Option<i64>),
}

/// The columns of the smart-link fields, in [`LinkOptions::columns`]'s order.
pub(crate) const COLUMNS: [&str; 10] = [
    "rules",
    "ios_url",
    "android_url",
    "password_hash",
    "expired_url",
    "max_clicks",
    "redirect_status",
    "og_title",
    "og_description",
    "og_image",
];

fn url(u: Option<&LongUrl>) -> Column {
    Column::Text(u.map(|u| u.as_str().to_owned()))
}

fn text(t: Option<&PreviewText>) -> Column {
    Column::Text(t.map(|t| t.as_str().to_owned()))
}

impl LinkOptions {
    /// Every column's value, in [`COLUMNS`]' order.
    pub(crate) fn columns(&self) -> [Column; 10] {
        [
            Column::Text(self.rules.to_stored()),
            url(self.ios_url.as_ref()),
            url(self.android_url.as_ref()),
            Column::Text(self.password.as_ref().map(|p| p.as_str().to_owned())),
            url(self.expired_url.as_ref()),
            Column::Int(self.max_clicks.map(MaxClicks::get)),
            Column::Int(Some(i64::from(self.redirect_status.code()))),
            text(self.og_title.as_ref()),
            text(self.og_description.as_ref()),
            url(self.og_image.as_ref()),
        ]
    }

    /// `(field, host)` of every URL besides `long_url`, for the blocklist.
    pub(crate) fn destinations(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = self.rules.destinations().collect();
        for (field, u) in [
            ("ios_url", &self.ios_url),
            ("android_url", &self.android_url),
            ("expired_url", &self.expired_url),
            ("og_image", &self.og_image),
        ] {
            if let Some(u) = u {
                out.push((field.to_owned(), u.host()));
            }
        }
        out
    }

    /// The activity log's details of a creation: the fields set (the password only as `password_protected`).
    pub(crate) fn details(&self, details: &mut Value) {
        let patch = LinkOptionsPatch {
            rules: (!self.rules.is_empty()).then(|| self.rules.clone()),
            ios_url: self.ios_url.clone().map(Some),
            android_url: self.android_url.clone().map(Some),
            password: self.password.clone().map(Some),
            expired_url: self.expired_url.clone().map(Some),
            max_clicks: self.max_clicks.map(Some),
            redirect_status: (self.redirect_status != RedirectStatus::FOUND)
                .then_some(self.redirect_status),
            og_title: self.og_title.clone().map(Some),
            og_description: self.og_description.clone().map(Some),
            og_image: self.og_image.clone().map(Some),
        };
        if let Some(map) = details.as_object_mut() {
            patch.details(map);
        }
    }
}

/// The smart-link fields a PATCH changes: `None` leaves a field alone, `Some(None)` (JSON `null`) clears it.
#[derive(Debug, Clone, Default)]
pub struct LinkOptionsPatch {
    /// Replaces the rules as a whole (empty: removes them).
    pub rules: Option<LinkRules>,
    /// `Some(None)` removes it.
    pub ios_url: Option<Option<LongUrl>>,
    /// `Some(None)` removes it.
    pub android_url: Option<Option<LongUrl>>,
    /// A new password's hash, or `Some(None)` to remove the password.
    pub password: Option<Option<LinkPasswordHash>>,
    /// `Some(None)` removes it.
    pub expired_url: Option<Option<LongUrl>>,
    /// `Some(None)` removes the limit.
    pub max_clicks: Option<Option<MaxClicks>>,
    /// The new status (`null` in the API sets 302).
    pub redirect_status: Option<RedirectStatus>,
    /// `Some(None)` removes it.
    pub og_title: Option<Option<PreviewText>>,
    /// `Some(None)` removes it.
    pub og_description: Option<Option<PreviewText>>,
    /// `Some(None)` removes it.
    pub og_image: Option<Option<LongUrl>>,
}

impl LinkOptionsPatch {
    /// True when the patch changes none of these fields.
    pub fn is_empty(&self) -> bool {
        self.columns().is_empty()
    }

    /// `(column, value)` of each field the patch sets.
    pub(crate) fn columns(&self) -> Vec<(&'static str, Column)> {
        let mut out = Vec::new();
        let mut set = |i: usize, c: Column| out.push((COLUMNS[i], c));
        if let Some(rules) = &self.rules {
            set(0, Column::Text(rules.to_stored()));
        }
        if let Some(u) = &self.ios_url {
            set(1, url(u.as_ref()));
        }
        if let Some(u) = &self.android_url {
            set(2, url(u.as_ref()));
        }
        if let Some(p) = &self.password {
            set(3, Column::Text(p.as_ref().map(|p| p.as_str().to_owned())));
        }
        if let Some(u) = &self.expired_url {
            set(4, url(u.as_ref()));
        }
        if let Some(m) = self.max_clicks {
            set(5, Column::Int(m.map(MaxClicks::get)));
        }
        if let Some(s) = self.redirect_status {
            set(6, Column::Int(Some(i64::from(s.code()))));
        }
        if let Some(t) = &self.og_title {
            set(7, text(t.as_ref()));
        }
        if let Some(t) = &self.og_description {
            set(8, text(t.as_ref()));
        }
        if let Some(u) = &self.og_image {
            set(9, url(u.as_ref()));
        }
        out
    }

    /// `(field, host)` of every URL the patch sets, for the blocklist.
    pub(crate) fn destinations(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = self
            .rules
            .iter()
            .flat_map(LinkRules::destinations)
            .collect();
        for (field, u) in [
            ("ios_url", &self.ios_url),
            ("android_url", &self.android_url),
            ("expired_url", &self.expired_url),
            ("og_image", &self.og_image),
        ] {
            if let Some(Some(u)) = u {
                out.push((field.to_owned(), u.host()));
            }
        }
        out
    }

    /// The activity log's details: each field set, with its new value; never the password or its hash, only
    /// `password_protected`.
    pub(crate) fn details(&self, details: &mut Map<String, Value>) {
        let url = |u: &Option<LongUrl>| Value::from(u.as_ref().map(LongUrl::as_str));
        let text = |t: &Option<PreviewText>| Value::from(t.as_ref().map(PreviewText::as_str));
        if let Some(rules) = &self.rules {
            details.insert("rules".to_owned(), rules_to_api(rules.as_slice()));
        }
        for (field, u) in [
            ("ios_url", &self.ios_url),
            ("android_url", &self.android_url),
            ("expired_url", &self.expired_url),
        ] {
            if let Some(u) = u {
                details.insert(field.to_owned(), url(u));
            }
        }
        if let Some(p) = &self.password {
            details.insert("password_protected".to_owned(), p.is_some().into());
        }
        if let Some(m) = self.max_clicks {
            details.insert("max_clicks".to_owned(), m.map(MaxClicks::get).into());
        }
        if let Some(s) = self.redirect_status {
            details.insert("redirect_status".to_owned(), s.code().into());
        }
        for (field, t) in [
            ("og_title", &self.og_title),
            ("og_description", &self.og_description),
        ] {
            if let Some(t) = t {
                details.insert(field.to_owned(), text(t));
            }
        }
        if let Some(u) = &self.og_image {
            details.insert("og_image".to_owned(), url(u));
        }
    }
}

/// Binds a column's value.
pub(crate) fn bind<'q>(
    q: sqlx::query::Query<'q, Any, AnyArguments<'q>>,
    value: Column,
) -> sqlx::query::Query<'q, Any, AnyArguments<'q>> {
    match value {
        Column::Text(t) => q.bind(t),
        Column::Int(i) => q.bind(i),
    }
}

/// The smart-link fields of a link as the API shows them (flattened into [`crate::ListedLink`]): the password
/// only as `password_protected`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SmartFields {
    /// Rules in the API's form (`after` and `before` as ISO 8601); `[]`: none.
    pub rules: Value,
    /// iOS destination.
    pub ios_url: Option<String>,
    /// Android destination.
    pub android_url: Option<String>,
    /// Whether a password protects the link.
    pub password_protected: bool,
    /// Where visitors go once the link has expired.
    pub expired_url: Option<String>,
    /// Click limit.
    pub max_clicks: Option<i64>,
    /// 301, 302, 307 or 308.
    pub redirect_status: u16,
    /// Preview card title.
    pub og_title: Option<String>,
    /// Preview card description.
    pub og_description: Option<String>,
    /// Preview card image.
    pub og_image: Option<String>,
}

/// The columns [`SmartFields::from_row`] reads, over `links l` (or a subquery aliased `l` with
/// [`INNER_COLUMNS`]).
pub(crate) const SMART_COLUMNS: &str = "l.rules, l.ios_url, l.android_url, \
     CAST(CASE WHEN l.password_hash IS NULL THEN 0 ELSE 1 END AS BIGINT) AS password_protected, \
     l.expired_url, l.max_clicks, l.redirect_status, l.og_title, l.og_description, l.og_image";

/// What a subquery over `links l` must select for [`SMART_COLUMNS`] to read from it.
pub(crate) const INNER_COLUMNS: &str = "l.rules, l.ios_url, l.android_url, l.password_hash, \
     l.expired_url, l.max_clicks, l.redirect_status, l.og_title, l.og_description, l.og_image";

impl SmartFields {
    /// The fields from a row with [`SMART_COLUMNS`].
    pub(crate) fn from_row(r: &AnyRow) -> Result<Self, sqlx::Error> {
        let rules = stored_rules(r.try_get("rules")?)?;
        Ok(SmartFields {
            rules: rules_to_api(&rules),
            ios_url: r.try_get("ios_url")?,
            android_url: r.try_get("android_url")?,
            password_protected: r.try_get::<i64, _>("password_protected")? != 0,
            expired_url: r.try_get("expired_url")?,
            max_clicks: r.try_get("max_clicks")?,
            redirect_status: u16::try_from(r.try_get::<i64, _>("redirect_status")?)
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            og_title: r.try_get("og_title")?,
            og_description: r.try_get("og_description")?,
            og_image: r.try_get("og_image")?,
        })
    }
}

/// The rules of the `rules` column (`NULL`: none).
pub(crate) fn stored_rules(raw: Option<String>) -> Result<Vec<Rule>, sqlx::Error> {
    match raw {
        None => Ok(Vec::new()),
        Some(json) => serde_json::from_str(&json).map_err(|e| sqlx::Error::Decode(Box::new(e))),
    }
}

/// The first of `destinations` (`(field, host)`) whose host or a parent domain is blocked, as
/// [`StoreError::Invalid`] naming the field: one query for all of them.
pub(crate) async fn check_destinations(
    conn: &mut AnyConnection,
    destinations: &[(String, &str)],
) -> Result<(), StoreError> {
    let per_dest: Vec<(&str, Vec<&str>)> = destinations
        .iter()
        .map(|(field, host)| (field.as_str(), parent_domains(host)))
        .collect();
    let mut candidates: Vec<&str> = per_dest
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    if candidates.is_empty() {
        return Ok(());
    }
    let placeholders: Vec<String> = (1..=candidates.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT domain FROM blocked_domains WHERE domain IN ({})",
        placeholders.join(", ")
    );
    let mut q = sqlx::query(&sql);
    for c in &candidates {
        q = q.bind(*c);
    }
    let blocked: Vec<String> = q
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get("domain"))
        .collect::<Result<_, _>>()?;
    if blocked.is_empty() {
        return Ok(());
    }
    match per_dest
        .iter()
        .find(|(_, parents)| parents.iter().any(|p| blocked.iter().any(|b| b == p)))
    {
        Some((field, _)) => Err(StoreError::Invalid(format!(
            "{field} points to a blocked domain"
        ))),
        None => Ok(()),
    }
}

/// Refuses a click limit in a group without analytics: its clicks would never be counted, so the limit would
/// never be reached.
pub(crate) async fn check_max_clicks_group(
    conn: &mut AnyConnection,
    group_id: &str,
) -> Result<(), StoreError> {
    let settings: Option<String> = sqlx::query("SELECT settings FROM groups WHERE id = $1")
        .bind(group_id)
        .fetch_optional(&mut *conn)
        .await?
        .map(|r| r.try_get("settings"))
        .transpose()?;
    let counts = match settings {
        Some(json) => {
            serde_json::from_str::<kv_model::GroupSettings>(&json)
                .map_err(|e| {
                    StoreError::Internal(format!("stored group settings do not parse: {e}"))
                })?
                .analytics
                .enabled
        }
        // The group went away meanwhile: the write that follows fails on its own.
        None => true,
    };
    if counts {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "max_clicks needs click analytics in the link's group (its settings' analytics.enabled)"
                .to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(c: &Column) -> Option<&str> {
        match c {
            Column::Text(t) => t.as_deref(),
            Column::Int(_) => None,
        }
    }

    #[test]
    fn a_plain_link_sets_nothing_but_the_default_status() {
        let columns = LinkOptions::default().columns();
        for (name, value) in COLUMNS.iter().zip(&columns) {
            match value {
                Column::Int(Some(302)) => assert_eq!(*name, "redirect_status"),
                Column::Text(None) | Column::Int(None) => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(LinkOptions::default().destinations().is_empty());
    }

    #[test]
    fn a_patch_sets_only_its_fields_and_never_logs_the_hash() {
        let patch = LinkOptionsPatch {
            password: Some(Some(LinkPasswordHash::new(
                "pbkdf2-sha256$1$a$b".to_owned(),
            ))),
            og_image: Some(None),
            expired_url: Some(Some(LongUrl::parse("https://Sub.Example.com/x").unwrap())),
            ..LinkOptionsPatch::default()
        };
        let columns = patch.columns();
        let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["password_hash", "expired_url", "og_image"]);
        assert_eq!(text_of(&columns[0].1), Some("pbkdf2-sha256$1$a$b"));
        assert_eq!(text_of(&columns[2].1), None, "null clears");
        assert_eq!(
            patch.destinations(),
            [("expired_url".to_owned(), "sub.example.com")]
        );
        let mut details = Map::new();
        patch.details(&mut details);
        let logged = Value::Object(details).to_string();
        assert!(!logged.contains("pbkdf2"), "{logged}");
        assert!(logged.contains(r#""password_protected":true"#), "{logged}");
        assert!(LinkOptionsPatch::default().is_empty() && !patch.is_empty());
    }
}
