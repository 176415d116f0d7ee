//! The origin's word in a link's KV record (`kv_model::LinkRecord::vouched`): that none of the record's
//! destinations, nor a parent domain of one, was blocked when it was published. [`vouched`] gives the word when a
//! record is built; [`links_to`] finds the links a new block takes it back from, so that
//! [`crate::Db::block_domain`] republishes them in its own transaction.
//!
//! A destination is `long_url`, each rule's `to` (the record's rules include `ios_url` and `android_url`, compiled
//! into `os` rules) and `expired_url`: everywhere the edge may send a visitor of the link; and the preview card's
//! image (`og_image`), which the edge shows link-preview crawlers only when it is not blocked. Hosts are read as at
//! the link's creation ([`LongUrl`], the blocklist check of every write), and a listed domain blocks itself and
//! its subdomains ([`parent_domains`]).

use crate::blocklist::any_blocked_in;
use crate::domain::{Hostname, LongUrl, parent_domains};
use crate::error::StoreError;
use crate::link_options::stored_rules;
use crate::webhooks::emit::is_postgres;
use futures_util::TryStreamExt;
use kv_model::LinkRecord;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

/// The `links` columns holding destinations, for the scan of [`links_to`].
const DESTINATION_COLUMNS: [&str; 6] = [
    "long_url",
    "ios_url",
    "android_url",
    "rules",
    "expired_url",
    "og_image",
];

/// The lowercase host of a stored destination, or `None` when it cannot be read (it was checked when written,
/// so only data written outside the store's rules gets here).
fn host_of(url: &str) -> Option<String> {
    LongUrl::parse_field("destination", url)
        .ok()
        .map(|u| u.host().to_owned())
}

/// True when `record` may carry the word (on `conn`, the connection the record was read on): every destination's
/// host can be read, and neither it nor a parent domain of it is blocked. One query for all of them.
pub(crate) async fn vouched(
    conn: &mut AnyConnection,
    record: &LinkRecord,
) -> Result<bool, StoreError> {
    let urls = std::iter::once(record.long_url.as_str())
        .chain(record.rules.iter().map(|r| r.to.as_str()))
        .chain(record.expired_url.as_deref())
        .chain(record.preview.as_ref().and_then(|p| p.image.as_deref()));
    // A host that cannot be read cannot be checked: the edge reads the blocklist first for such a link.
    let Some(hosts) = urls.map(host_of).collect::<Option<Vec<String>>>() else {
        return Ok(false);
    };
    let mut candidates: Vec<&str> = hosts.iter().flat_map(|h| parent_domains(h)).collect();
    candidates.sort_unstable();
    candidates.dedup();
    if candidates.is_empty() {
        return Ok(false);
    }
    Ok(!any_blocked_in(conn, &candidates).await?)
}

/// The scan of [`links_to`]: every link with a destination column that contains `$1` (`%<domain>%`) once
/// lowercased. `LOWER` must fold ASCII letters only, as Rust's host normalisation does: SQLite's built-in `lower`
/// does; PostgreSQL's follows the database's collation (in a Turkish one, `I` becomes a dotless `ı` and
/// `EVIL.example` would not contain `evil.example`), hence `COLLATE "C"` there.
fn scan_sql(postgres: bool) -> String {
    let filter: Vec<String> = DESTINATION_COLUMNS
        .iter()
        .map(|c| {
            if postgres {
                format!("LOWER(l.{c} COLLATE \"C\") LIKE $1")
            } else {
                format!("LOWER(l.{c}) LIKE $1")
            }
        })
        .collect();
    format!(
        "SELECT d.host, l.short_code, l.long_url, l.ios_url, l.android_url, l.rules, l.expired_url, l.og_image \
         FROM links l JOIN domains d ON d.id = l.domain_id WHERE {}",
        filter.join(" OR ")
    )
}

/// The KV keys of every link with a destination on `domain` (a blocked domain: lowercase ASCII letters, digits,
/// `-` and `.`) or a subdomain of it, read on `conn`.
///
/// There is no index of destination hosts: the links are scanned, with a filter in SQL that cannot miss one, and
/// each row it lets through is decided here with the rule of [`vouched`]. It cannot miss because every host that
/// [`host_of`] reads is a substring of its stored URL (`extract_host`: the authority's host as written, only ASCII
/// letters, digits, `-`, `.` and `_`), which Rust lowercases (ASCII only) and trims of trailing dots; a host on
/// `domain` or below it ends with `domain`, so the URL lowercased the same way contains it. The rules column is
/// the JSON of `LinkRules::to_stored` (serde_json), which escapes none of those characters, so each `to`'s host
/// is in it verbatim too. `domain` holds no `%`, `_` or `\`, so the pattern matches it literally. Rows are
/// streamed; only the matching keys are kept.
pub(crate) async fn links_to(
    conn: &mut AnyConnection,
    domain: &Hostname,
) -> Result<Vec<String>, StoreError> {
    let domain = domain.as_str();
    let sql = scan_sql(is_postgres(conn));
    let pattern = format!("%{domain}%");
    let mut rows = sqlx::query(&sql).bind(pattern).fetch(&mut *conn);
    let mut keys = Vec::new();
    while let Some(row) = rows.try_next().await? {
        if row_links_to(&row, domain)? {
            keys.push(kv_model::link_key(
                &row.try_get::<String, _>("host")?,
                &row.try_get::<String, _>("short_code")?,
            ));
        }
    }
    Ok(keys)
}

/// Whether a row of [`scan_sql`] has a destination on `domain` or below it.
fn row_links_to(row: &AnyRow, domain: &str) -> Result<bool, sqlx::Error> {
    let mut urls: Vec<String> = vec![row.try_get("long_url")?];
    for column in ["ios_url", "android_url", "expired_url", "og_image"] {
        urls.extend(row.try_get::<Option<String>, _>(column)?);
    }
    match stored_rules(row.try_get("rules")?) {
        Ok(rules) => urls.extend(rules.into_iter().map(|r| r.to)),
        // Its record cannot be built as it is (the publisher fails on it), and the filter found `domain` in it:
        // it is put in the outbox rather than this block refused over it.
        Err(_) => return Ok(true),
    }
    Ok(urls.iter().any(|url| on_domain(url, domain)))
}

/// True when `url`'s host is `domain` or a subdomain of it. A host that cannot be read is not: such a link's record
/// is never vouched ([`vouched`]), so there is nothing to take back.
fn on_domain(url: &str, domain: &str) -> bool {
    host_of(url).is_some_and(|host| parent_domains(&host).contains(&domain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_covers_itself_and_its_subdomains_only() {
        for url in [
            "https://evil.example/",
            "https://Shop.EVIL.Example./p?q=1",
            "https://user:pw@a.b.evil.example:8443/x",
        ] {
            assert!(on_domain(url, "evil.example"), "{url}");
        }
        for url in [
            "https://notevil.example/",
            "https://vil.example/",
            "https://ok.example/?u=evil.example",
            "https://ok.example/evil.example/#evil.example",
            "https://evil.example@ok.example/",
            "https://evil.example.ok/",
            "http://evil.example/",
        ] {
            assert!(!on_domain(url, "evil.example"), "{url}");
        }
        assert!(!on_domain("https://evil.example/", "vil.example"));
    }

    #[test]
    fn the_scan_filters_every_destination_column() {
        for postgres in [false, true] {
            let sql = scan_sql(postgres);
            for column in DESTINATION_COLUMNS {
                assert!(sql.contains(&format!("LOWER(l.{column}")), "{sql}");
            }
            assert_eq!(sql.contains("COLLATE \"C\""), postgres, "{sql}");
        }
    }
}
