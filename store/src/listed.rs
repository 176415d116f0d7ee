//! A link as the API lists it, and as webhooks send it: one shape, read from one set of columns. Its own module
//! because the writers (creation, the webhooks' events) and the readers (the list) all need it.

use crate::domain::Micros;
use crate::link_options::SmartFields;
use sqlx::Row;

/// A listed link (spec 2 "Link (as listed)"). Its serialisation is the one JSON shape of a link: the API's answers
/// and the webhooks' `data` both come from it ([`ListedLink::to_json`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListedLink {
    /// Link id.
    pub id: String,
    /// Alias.
    pub short_code: String,
    /// Destination.
    pub long_url: String,
    /// Hostname it is served on.
    pub domain: String,
    /// Owning group.
    pub group_id: String,
    /// Redirects (true) or paused (false).
    pub is_active: bool,
    /// ISO 8601, microseconds, `Z`.
    pub created_at: String,
    /// When it stops redirecting (ISO 8601 as `created_at`); `None`: never.
    pub expires_at: Option<String>,
    /// Whether the edge appends the visitor's query string to the destination.
    pub forward_query: bool,
    /// Its title; `None`: none.
    pub title: Option<String>,
    /// Its tags as the account spells them, sorted case-insensitively.
    pub tags: Vec<String>,
    /// Its smart-link fields (issue 25), after the others in the JSON.
    #[serde(flatten)]
    pub smart: SmartFields,
}

/// The columns [`ListedLink::from_row`] reads, for a query over `links l JOIN domains d`.
/// The tags come as one string, joined by line breaks (which no tag can hold), in no particular order: sorted in
/// Rust, so both engines sort alike whatever the database's collation.
pub(crate) const LISTED_COLUMNS: &str = concat!(
    "l.id, l.short_code, l.long_url, d.host, l.group_id, l.is_active, \
     l.created_at, l.expires_at, l.forward_query, l.title, ",
    // link_options::SMART_COLUMNS (concat! takes literals only; a test checks they agree).
    "l.rules, l.ios_url, l.android_url, \
     CAST(CASE WHEN l.password_hash IS NULL THEN 0 ELSE 1 END AS BIGINT) AS password_protected, \
     l.expired_url, l.max_clicks, l.redirect_status, l.og_title, l.og_description, l.og_image, ",
    "\
     (SELECT string_agg(t.name, '\n') FROM link_tags lt JOIN tags t ON t.id = lt.tag_id WHERE lt.link_id = l.id) \
     AS tags"
);

impl ListedLink {
    /// A link from a row with [`LISTED_COLUMNS`].
    pub(crate) fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        Ok(ListedLink {
            id: r.try_get("id")?,
            short_code: r.try_get("short_code")?,
            long_url: r.try_get("long_url")?,
            domain: r.try_get("host")?,
            group_id: r.try_get("group_id")?,
            is_active: r.try_get::<i64, _>("is_active")? != 0,
            created_at: Micros(r.try_get("created_at")?).to_iso8601(),
            expires_at: r
                .try_get::<Option<i64>, _>("expires_at")?
                .map(|t| Micros(t).to_iso8601()),
            forward_query: r.try_get::<i64, _>("forward_query")? != 0,
            title: r.try_get("title")?,
            tags: tag_list(r.try_get("tags")?),
            smart: SmartFields::from_row(r)?,
        })
    }

    /// The link as the API lists it (and as webhooks send it): `id`, `short_code`, `long_url`, `domain`,
    /// `group_id`, `is_active`, `created_at`, `expires_at`, `forward_query`, `title`, `tags`, then the smart-link
    /// fields ([`SmartFields`]).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The URL visitors follow.
    pub fn short_url(&self) -> String {
        short_url(&self.domain, &self.short_code)
    }
}

/// A link's tags from the joined column of [`LISTED_COLUMNS`], sorted case-insensitively.
pub(crate) fn tag_list(joined: Option<String>) -> Vec<String> {
    let mut tags: Vec<String> = joined
        .as_deref()
        .unwrap_or_default()
        .split('\n')
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    crate::domain::sort_tag_names(&mut tags);
    tags
}

/// What `q` searches for a link: its short code, destination and title, lowercase, joined by line breaks (`q`
/// holds no control character, so it never matches across two of them). Written with every change of these.
pub(crate) fn search_text(short_code: &str, long_url: &str, title: Option<&str>) -> String {
    format!("{short_code}\n{long_url}\n{}", title.unwrap_or_default()).to_lowercase()
}

/// A link's public URL: always https, the only scheme the edge serves.
pub(crate) fn short_url(host: &str, code: &str) -> String {
    format!("https://{host}/{code}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_listed_columns_carry_the_smart_link_columns() {
        assert!(super::LISTED_COLUMNS.contains(crate::link_options::SMART_COLUMNS));
    }
}
