//! An import's CSV, read into rows that create-link's rules can take (issue 24). Columns are found by header name
//! (case, spaces and `-` ignored), so our own export, Bitly's "Export links" CSV and Shlink's `short-url:list` CSV
//! are read as they are:
//!
//! | field | our columns | also read from |
//! |---|---|---|
//! | destination | `long_url` (required) | Bitly and Shlink: `long_url`; `Long URL` |
//! | short code | `short_code` | Bitly: the path of `link` (`https://bit.ly/abc` → `abc`); Shlink: `short_code`, `Short Code` |
//! | title | `title` | |
//! | tags | `tags`, joined with `|` | joined with `,` too (Bitly, Shlink) |
//! | group | `group` (a name or an id) | our export: `group_id`, else `group_name` |
//! | domain | `domain` (a hostname) | |
//! | expiry | `expires_at` (RFC 3339, UTC) | |
//! | status | `is_active` (`true` / `false`) | |
//! | forwarding | `forward_query` (`true` / `false`) | |
//!
//! Other columns (our export's `id`, `short_url`, `created_at`, `clicks`; Bitly's and Shlink's statistics) are
//! ignored. A row's problems are its own: they are reported with its row number and the others go on.

use crate::domain::{Micros, ShortCode, Tag, Title};

/// The longest CSV an import takes.
pub const MAX_IMPORT_BYTES: usize = 20 * 1024 * 1024;

/// Why an import's file is refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileError(pub String);

/// Where each known field is in a record.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns {
    long_url: usize,
    short_code: Option<usize>,
    link: Option<usize>,
    title: Option<usize>,
    tags: Option<usize>,
    group: Option<usize>,
    group_id: Option<usize>,
    group_name: Option<usize>,
    domain: Option<usize>,
    expires_at: Option<usize>,
    is_active: Option<usize>,
    forward_query: Option<usize>,
}

/// A header name as compared: lowercase, without spaces, `_` or `-`.
fn key(name: &str) -> String {
    name.trim()
        .trim_start_matches('\u{feff}')
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

impl Columns {
    /// The columns of a header row; the destination's column is required.
    pub(crate) fn of(header: &csv::StringRecord) -> Result<Self, FileError> {
        let find = |names: &[&str]| header.iter().position(|h| names.contains(&key(h).as_str()));
        let long_url = find(&["longurl", "destination", "originalurl"]).ok_or_else(|| {
            FileError(
                "the first row must name the columns, one of them long_url (the destination)"
                    .to_owned(),
            )
        })?;
        Ok(Self {
            long_url,
            short_code: find(&["shortcode"]),
            link: find(&["link", "bitlink"]),
            title: find(&["title"]),
            tags: find(&["tags"]),
            group: find(&["group"]),
            group_id: find(&["groupid"]),
            group_name: find(&["groupname"]),
            domain: find(&["domain"]),
            expires_at: find(&["expiresat"]),
            is_active: find(&["isactive"]),
            forward_query: find(&["forwardquery"]),
        })
    }
}

/// One row, read: each field either its value or why the row cannot be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) long_url: String,
    /// The code asked for; `None`: one is made up.
    pub(crate) short_code: Option<ShortCode>,
    pub(crate) title: Option<Title>,
    pub(crate) tags: Vec<Tag>,
    /// `group`: a group's name or id.
    pub(crate) group: Option<String>,
    /// Our export's `group_id` and `group_name`: the group if it is the account's, else one of that name.
    pub(crate) group_id: Option<String>,
    pub(crate) group_name: Option<String>,
    /// A hostname; `None`: the account's default domain.
    pub(crate) domain: Option<String>,
    pub(crate) expires_at: Option<Micros>,
    pub(crate) is_active: bool,
    pub(crate) forward_query: bool,
}

/// A row refused: its error code (create-link's where it has one) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowError {
    pub(crate) code: &'static str,
    pub(crate) detail: String,
}

fn invalid(detail: impl Into<String>) -> RowError {
    RowError {
        code: "validation_error",
        detail: detail.into(),
    }
}

fn boolean(field: &str, raw: &str, default: bool) -> Result<bool, RowError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "" => Ok(default),
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(invalid(format!("{field} must be true or false"))),
    }
}

/// Bitly's `link` (`https://bit.ly/abc`, or `bit.ly/abc`): its path's one segment.
fn code_of_link(link: &str) -> Option<&str> {
    let rest = link.trim();
    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
    let (_, path) = rest.split_once('/')?;
    let path = path.trim_end_matches('/');
    (!path.is_empty() && !path.contains('/')).then_some(path)
}

impl Row {
    /// A record's fields by `columns`; `Err` when the row breaks a rule. A short code that create-link would
    /// refuse is not an error: the row gets a made-up one, as a taken code does (the runner reports both).
    pub(crate) fn read(
        columns: &Columns,
        record: &csv::StringRecord,
    ) -> Result<(Self, Option<String>), RowError> {
        let field = |i: Option<usize>| i.and_then(|i| record.get(i)).map(str::trim).unwrap_or("");
        let long_url = field(Some(columns.long_url)).to_owned();
        if long_url.is_empty() {
            return Err(invalid("long_url is empty"));
        }
        let wanted = match field(columns.short_code) {
            "" => code_of_link(field(columns.link)).unwrap_or(""),
            code => code,
        };
        let (short_code, refused_code) = match wanted {
            "" => (None, None),
            code => match ShortCode::parse(code) {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(format!("short code {code:?}: {e}"))),
            },
        };
        let title = Title::parse(field(columns.title)).map_err(|e| invalid(e.0))?;
        let names: Vec<String> = field(columns.tags)
            .split(['|', ','])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        let tags = Tag::parse_list("tags", &names).map_err(|e| invalid(e.0))?;
        let some = |i: Option<usize>| Some(field(i)).filter(|v| !v.is_empty()).map(str::to_owned);
        let (group, group_id, group_name) = (
            some(columns.group),
            some(columns.group_id),
            some(columns.group_name),
        );
        let domain = Some(field(columns.domain))
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        let expires_at = match field(columns.expires_at) {
            "" => None,
            raw => {
                let at = Micros::parse_rfc3339_utc("expires_at", raw).map_err(|e| invalid(e.0))?;
                if at <= Micros::now() {
                    return Err(invalid("expires_at must be in the future"));
                }
                Some(at)
            }
        };
        Ok((
            Self {
                long_url,
                short_code,
                title,
                tags,
                group,
                group_id,
                group_name,
                domain,
                expires_at,
                is_active: boolean("is_active", field(columns.is_active), true)?,
                forward_query: boolean("forward_query", field(columns.forward_query), true)?,
            },
            refused_code,
        ))
    }
}

/// A reader over an import's CSV (RFC 4180; rows of differing lengths allowed, missing fields are empty).
pub(crate) fn reader(body: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(true)
        .from_reader(body.as_bytes())
}

/// Checks a whole file before it is queued: readable CSV, a header with the destination's column, at least one
/// row. Returns the number of rows.
pub fn check_file(body: &str) -> Result<u64, FileError> {
    let mut reader = reader(body);
    let header = reader
        .headers()
        .map_err(|e| FileError(format!("not a CSV file: {e}")))?
        .clone();
    Columns::of(&header)?;
    let mut rows = 0u64;
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => rows += 1,
            Ok(false) => break,
            Err(e) => return Err(FileError(format!("not a CSV file: {e}"))),
        }
    }
    if rows == 0 {
        return Err(FileError(
            "the file has no rows below its header".to_owned(),
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(csv: &str) -> Vec<Result<(Row, Option<String>), RowError>> {
        let mut r = reader(csv);
        let columns = Columns::of(&r.headers().unwrap().clone()).unwrap();
        r.records()
            .map(|rec| Row::read(&columns, &rec.unwrap()))
            .collect()
    }

    #[test]
    fn our_export_bitly_and_shlink() {
        let ours = "id,short_url,short_code,domain,long_url,title,tags,group_id,group_name,is_active,created_at,expires_at,forward_query,clicks\r\n\
            x,https://sho.rt/abc,abc,sho.rt,https://example.com/a,Sale,Mail|promo,g1,Spring,false,2024-01-01T00:00:00.000000Z,,false,3\r\n";
        let (row, refused) = rows(ours).remove(0).unwrap();
        assert_eq!(refused, None);
        assert_eq!(row.long_url, "https://example.com/a");
        assert_eq!(row.short_code.unwrap().as_str(), "abc");
        assert_eq!(row.title.unwrap().as_str(), "Sale");
        assert_eq!(
            row.tags.iter().map(|t| t.name()).collect::<Vec<_>>(),
            ["Mail", "promo"]
        );
        assert_eq!(
            (row.group_id.as_deref(), row.group_name.as_deref()),
            (Some("g1"), Some("Spring"))
        );
        assert_eq!(row.domain.as_deref(), Some("sho.rt"));
        assert!(!row.is_active && !row.forward_query);

        let bitly = "\u{feff}long_url,link,title,tags,created_at\nhttps://example.com/b,https://bit.ly/3xYz9,Bee,\"one, two\",2020\n";
        let (row, _) = rows(bitly).remove(0).unwrap();
        assert_eq!(row.short_code.unwrap().as_str(), "3xyz9");
        assert_eq!(row.tags.len(), 2);
        assert!(row.is_active && row.forward_query, "defaults");

        let shlink = "Short Code,Short URL,Long URL,Title,Tags,Date created,Visits count\nab_cd,https://s.test/ab_cd,https://example.com/c,,x,2020,4\n";
        let (row, _) = rows(shlink).remove(0).unwrap();
        assert_eq!(row.short_code.unwrap().as_str(), "ab_cd");
        assert_eq!(row.long_url, "https://example.com/c");
    }

    #[test]
    fn row_problems_are_the_rows() {
        let csv = "long_url,short_code,tags,expires_at,is_active\n\
                   ,abc,,,\n\
                   https://example.com/,a!,,,\n\
                   https://example.com/,,a/b,,\n\
                   https://example.com/,,,2000-01-01T00:00:00Z,\n\
                   https://example.com/,,,,maybe\n";
        let got = rows(csv);
        assert_eq!(got[0].as_ref().unwrap_err().detail, "long_url is empty");
        let (row, refused) = got[1].clone().unwrap();
        assert!(
            row.short_code.is_none() && refused.unwrap().contains("a!"),
            "a bad code is made up"
        );
        assert!(got[2].as_ref().unwrap_err().detail.contains("tag"));
        assert!(got[3].as_ref().unwrap_err().detail.contains("future"));
        assert!(got[4].as_ref().unwrap_err().detail.contains("is_active"));
    }

    #[test]
    fn whole_file_checks() {
        assert_eq!(
            check_file("long_url\nhttps://a.example/\nhttps://b.example/\n"),
            Ok(2)
        );
        assert!(
            check_file("url,title\nx,y\n")
                .unwrap_err()
                .0
                .contains("long_url")
        );
        assert!(check_file("long_url\n").unwrap_err().0.contains("no rows"));
        assert!(check_file("").is_err());
        assert_eq!(code_of_link("bit.ly/abc/"), Some("abc"));
        assert_eq!(code_of_link("https://bit.ly/"), None);
        assert_eq!(code_of_link("https://bit.ly/a/b"), None);
    }
}
