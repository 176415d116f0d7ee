//! The query of list-links (spec 4.2): page size, offset, the destination filter, and our filters and sort
//! (issue 24: `q`, `tag`, `group_id`, `domain`, `is_active`, `sort`), each refused on its own.

use super::long_url::MAX_LEN as MAX_FILTER_LEN;
use super::{Hostname, MAX_TAGS, Tag};

/// Shortest `q`, in characters.
pub const MIN_Q_CHARS: usize = 2;
/// Longest `q`, in characters.
pub const MAX_Q_CHARS: usize = 200;

/// Default page size (spec 4.2).
pub(crate) const DEFAULT_LIMIT: u32 = 20;
/// Largest page size (spec 4.2).
pub(crate) const MAX_LIMIT: u32 = 100;
/// Largest offset we accept: far beyond any real account, small enough to stay an i64 everywhere.
pub(crate) const MAX_OFFSET: u64 = 1_000_000_000;

/// How `long_url` filters (spec 4.2 `match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    /// Full URL equality.
    Exact,
    /// Literal prefix: `%` and `_` are ordinary characters.
    StartsWith,
}

/// The order of the list (`sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkSort {
    /// `created_at`: newest first (the default, spec 4.2).
    #[default]
    Newest,
    /// `-created_at`: oldest first.
    Oldest,
    /// `short_code`: by short code (byte order), then newest first.
    ShortCode,
    /// `clicks`: most clicks of all time first, then newest first.
    Clicks,
}

/// The validated query of `GET /api/v1/external/links`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Zero-based offset.
    pub offset: u64,
    /// Destination filter and how it matches.
    pub filter: Option<(String, MatchMode)>,
    /// `q`, lowercase: a substring of the short code, destination or title.
    pub q: Option<String>,
    /// `tag` (repeatable, merged case-insensitively): the links carry every one.
    pub tags: Vec<Tag>,
    /// `group_id`, normalised UUID.
    pub group_id: Option<String>,
    /// `domain`: the links served on that hostname.
    pub domain: Option<Hostname>,
    /// `is_active`.
    pub is_active: Option<bool>,
    /// `sort`.
    pub sort: LinkSort,
}

impl ListQuery {
    /// A page with no filter, newest first.
    pub fn page(limit: u32, offset: u64) -> Self {
        Self {
            limit,
            offset,
            filter: None,
            q: None,
            tags: Vec::new(),
            group_id: None,
            domain: None,
            is_active: None,
            sort: LinkSort::Newest,
        }
    }

    /// True when any filter is set (the total is then counted, not read from the account's counter).
    pub fn is_filtered(&self) -> bool {
        !self.tags.is_empty() || self.is_filtered_beyond_tags()
    }

    /// Whether any filter other than `tag` is set.
    pub fn is_filtered_beyond_tags(&self) -> bool {
        self.filter.is_some()
            || self.q.is_some()
            || self.group_id.is_some()
            || self.domain.is_some()
            || self.is_active.is_some()
    }
}

/// A parameter of list-links; each has its own error code (README "list links errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListParam {
    /// `limit`.
    Limit,
    /// `offset`.
    Offset,
    /// `long_url`.
    LongUrl,
    /// `match`.
    Match,
    /// `q`.
    Q,
    /// `tag`.
    Tag,
    /// `group_id`.
    GroupId,
    /// `domain`.
    Domain,
    /// `is_active`.
    IsActive,
    /// `sort`.
    Sort,
    /// `format` (the export's).
    Format,
}

/// What an export is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// CSV with a header row.
    Csv,
    /// One JSON object per line.
    Ndjson,
}

/// A refused query parameter and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ListQueryError {
    /// The parameter refused.
    pub param: ListParam,
    /// Human-readable reason.
    pub detail: String,
}

fn err(param: ListParam, detail: impl Into<String>) -> ListQueryError {
    ListQueryError {
        param,
        detail: detail.into(),
    }
}

/// Plain decimal digits only: no sign, no spaces, no exponent.
fn parse_digits(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// `limit`: absent is the default, else 1 to [`MAX_LIMIT`] in plain digits.
fn parse_limit(raw: Option<String>) -> Result<u32, ListQueryError> {
    match raw {
        None => Ok(DEFAULT_LIMIT),
        Some(v) => parse_digits(&v)
            .filter(|n| (1..=u64::from(MAX_LIMIT)).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| {
                err(
                    ListParam::Limit,
                    format!("limit must be an integer from 1 to {MAX_LIMIT}"),
                )
            }),
    }
}

/// `offset`: absent is 0, else 0 to [`MAX_OFFSET`] in plain digits.
fn parse_offset(raw: Option<String>) -> Result<u64, ListQueryError> {
    match raw {
        None => Ok(0),
        Some(v) => parse_digits(&v)
            .filter(|n| *n <= MAX_OFFSET)
            .ok_or_else(|| {
                err(
                    ListParam::Offset,
                    format!("offset must be an integer from 0 to {MAX_OFFSET}"),
                )
            }),
    }
}

/// The pagination of any other list (the activity log): list-links' `limit` and `offset`, by its rules and with
/// its error codes, and nothing else (`long_url` and `match` are unknown parameters here, so ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageQuery {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Zero-based offset.
    pub offset: u64,
}

impl PageQuery {
    /// Parses a raw query string as [`ListQuery::parse`] does its `limit` and `offset`: unknown parameters are
    /// ignored, a known one given twice is refused.
    pub fn parse(raw: Option<&str>) -> Result<Self, ListQueryError> {
        let (mut limit, mut offset) = (None, None);
        for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            let (slot, param) = match k.as_ref() {
                "limit" => (&mut limit, ListParam::Limit),
                "offset" => (&mut offset, ListParam::Offset),
                _ => continue,
            };
            if slot.replace(v.into_owned()).is_some() {
                return Err(err(param, format!("{k} is given more than once")));
            }
        }
        Ok(Self {
            limit: parse_limit(limit)?,
            offset: parse_offset(offset)?,
        })
    }
}

impl ListQuery {
    /// Parses a raw query string. Unknown parameters are ignored (clients add cache busters);
    /// a known parameter given twice is refused, since we could not tell which one was meant.
    pub fn parse(raw: Option<&str>) -> Result<Self, ListQueryError> {
        Self::parse_as(raw, false).map(|(query, _)| query)
    }

    /// Parses the query of an export: the list's filters and sort by the list's rules, and `format` (`csv`, the
    /// default, or `ndjson`). `limit` and `offset` are not the export's parameters, so they are ignored like any
    /// unknown one (an export is every match).
    pub fn parse_export(raw: Option<&str>) -> Result<(Self, ExportFormat), ListQueryError> {
        let (query, format) = Self::parse_as(raw, true)?;
        let format = match format.as_deref() {
            None | Some("csv") => ExportFormat::Csv,
            Some("ndjson") => ExportFormat::Ndjson,
            Some(_) => return Err(err(ListParam::Format, "format must be csv or ndjson")),
        };
        Ok((
            Self {
                limit: MAX_LIMIT,
                offset: 0,
                ..query
            },
            format,
        ))
    }

    /// The list's parameters (`export`: without `limit` and `offset`, with `format`, returned raw).
    fn parse_as(raw: Option<&str>, export: bool) -> Result<(Self, Option<String>), ListQueryError> {
        let (mut limit, mut offset, mut long_url, mut mode) = (None, None, None, None);
        let mut format = None;
        let (mut q, mut group_id, mut domain, mut is_active, mut sort) =
            (None, None, None, None, None);
        let mut tags: Vec<Tag> = Vec::new();
        for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            let (slot, param) = match k.as_ref() {
                "limit" if !export => (&mut limit, ListParam::Limit),
                "offset" if !export => (&mut offset, ListParam::Offset),
                "format" if export => (&mut format, ListParam::Format),
                "long_url" => (&mut long_url, ListParam::LongUrl),
                "match" => (&mut mode, ListParam::Match),
                "q" => (&mut q, ListParam::Q),
                "group_id" => (&mut group_id, ListParam::GroupId),
                "domain" => (&mut domain, ListParam::Domain),
                "is_active" => (&mut is_active, ListParam::IsActive),
                "sort" => (&mut sort, ListParam::Sort),
                // Repeatable by contract: every tag must match.
                "tag" => {
                    let tag =
                        Tag::parse(&v).map_err(|e| err(ListParam::Tag, format!("tag: {e}")))?;
                    if !tags.iter().any(|t| t.key() == tag.key()) {
                        tags.push(tag);
                    }
                    if tags.len() > MAX_TAGS {
                        return Err(err(
                            ListParam::Tag,
                            format!("at most {MAX_TAGS} different tag parameters"),
                        ));
                    }
                    continue;
                }
                _ => continue,
            };
            if slot.replace(v.into_owned()).is_some() {
                return Err(err(param, format!("{k} is given more than once")));
            }
        }
        let limit = parse_limit(limit)?;
        let offset = parse_offset(offset)?;
        let mode = match mode.as_deref() {
            None | Some("exact") => MatchMode::Exact,
            Some("startswith") => MatchMode::StartsWith,
            Some(_) => return Err(err(ListParam::Match, "match must be exact or startswith")),
        };
        let filter = match long_url {
            None => None,
            Some(v) if v.chars().count() > MAX_FILTER_LEN => {
                return Err(err(
                    ListParam::LongUrl,
                    format!("long_url must be at most {MAX_FILTER_LEN} characters"),
                ));
            }
            Some(v) => Some((v, mode)),
        };
        let q = q
            .map(|v| {
                let n = v.chars().count();
                if !(MIN_Q_CHARS..=MAX_Q_CHARS).contains(&n) {
                    Err(err(
                        ListParam::Q,
                        format!("q must be {MIN_Q_CHARS} to {MAX_Q_CHARS} characters"),
                    ))
                } else if v.chars().any(char::is_control) {
                    Err(err(ListParam::Q, "q must not contain control characters"))
                } else {
                    Ok(v.to_lowercase())
                }
            })
            .transpose()?;
        let group_id = group_id
            .map(|v| {
                uuid::Uuid::try_parse(&v)
                    .map(|u| u.hyphenated().to_string())
                    .map_err(|_| err(ListParam::GroupId, "group_id must be a UUID"))
            })
            .transpose()?;
        let domain = domain
            .map(|v| {
                Hostname::parse(&v).map_err(|e| err(ListParam::Domain, format!("domain: {e}")))
            })
            .transpose()?;
        let is_active = match is_active.as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(_) => return Err(err(ListParam::IsActive, "is_active must be true or false")),
        };
        let sort = match sort.as_deref() {
            None | Some("created_at") => LinkSort::Newest,
            Some("-created_at") => LinkSort::Oldest,
            Some("short_code") => LinkSort::ShortCode,
            Some("clicks") => LinkSort::Clicks,
            Some(_) => {
                return Err(err(
                    ListParam::Sort,
                    "sort must be created_at, -created_at, short_code or clicks",
                ));
            }
        };
        Ok((
            Self {
                limit,
                offset,
                filter,
                q,
                tags,
                group_id,
                domain,
                is_active,
                sort,
            },
            format,
        ))
    }
}

/// The smallest string greater than every string that starts with `prefix`, in code-point
/// (= UTF-8 byte) order, or `None` when no such bound exists. `long_url >= prefix AND
/// long_url < bound` is then exactly "starts with", with no wildcard characters involved.
pub fn prefix_upper_bound(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 {
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(c) = next {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<ListQuery, ListQueryError> {
        ListQuery::parse(Some(s))
    }

    #[test]
    fn defaults() {
        let d = ListQuery::parse(None).unwrap();
        assert_eq!((d.limit, d.offset, d.filter), (20, 0, None));
        assert_eq!(q("foo=bar").unwrap().limit, 20);
    }

    #[test]
    fn bounds_and_codes() {
        assert_eq!(q("limit=1").unwrap().limit, 1);
        assert_eq!(q("limit=100").unwrap().limit, 100);
        for bad in [
            "limit=0",
            "limit=101",
            "limit=",
            "limit=-1",
            "limit=+5",
            "limit=1.0",
            "limit=abc",
            "limit=1&limit=2",
        ] {
            assert_eq!(q(bad).unwrap_err().param, ListParam::Limit, "{bad}");
        }
        for bad in [
            "offset=-1",
            "offset=x",
            "offset=",
            "offset=99999999999999999999",
        ] {
            assert_eq!(q(bad).unwrap_err().param, ListParam::Offset, "{bad}");
        }
        assert_eq!(q("match=prefix").unwrap_err().param, ListParam::Match);
        assert_eq!(q("match=EXACT").unwrap_err().param, ListParam::Match);
        let long = format!("long_url={}", "a".repeat(2049));
        assert_eq!(q(&long).unwrap_err().param, ListParam::LongUrl);
    }

    #[test]
    fn export_takes_the_filters_and_a_format_but_no_paging() {
        let (d, f) = ListQuery::parse_export(None).unwrap();
        assert_eq!(
            (d.offset, d.sort, f),
            (0, LinkSort::Newest, ExportFormat::Csv)
        );
        let (d, f) =
            ListQuery::parse_export(Some("format=ndjson&limit=0&offset=x&tag=a&sort=clicks"))
                .unwrap();
        assert_eq!(
            (d.sort, f, d.tags.len()),
            (LinkSort::Clicks, ExportFormat::Ndjson, 1)
        );
        for (bad, param) in [
            ("format=xml", ListParam::Format),
            ("format=CSV", ListParam::Format),
            ("format=csv&format=csv", ListParam::Format),
            ("q=a", ListParam::Q),
            ("sort=up", ListParam::Sort),
        ] {
            assert_eq!(
                ListQuery::parse_export(Some(bad)).unwrap_err().param,
                param,
                "{bad}"
            );
        }
        // `format` means nothing to the list itself.
        assert_eq!(q("format=xml").unwrap().limit, 20);
    }

    #[test]
    fn page_query_has_the_list_rules() {
        let d = PageQuery::parse(None).unwrap();
        assert_eq!((d.limit, d.offset), (20, 0));
        let p =
            PageQuery::parse(Some("limit=100&offset=1000000000&match=nope&long_url=x")).unwrap();
        assert_eq!((p.limit, p.offset), (100, 1_000_000_000));
        for bad in [
            "limit=0",
            "limit=101",
            "limit=",
            "limit=+5",
            "limit=1&limit=1",
        ] {
            let e = PageQuery::parse(Some(bad)).unwrap_err();
            assert_eq!(e.param, ListParam::Limit, "{bad}");
            assert_eq!(
                q(bad).unwrap_err(),
                e,
                "{bad}: the same error as list-links"
            );
        }
        for bad in ["offset=-1", "offset=1000000001", "offset=1&offset=2"] {
            let e = PageQuery::parse(Some(bad)).unwrap_err();
            assert_eq!(e.param, ListParam::Offset, "{bad}");
            assert_eq!(
                q(bad).unwrap_err(),
                e,
                "{bad}: the same error as list-links"
            );
        }
    }

    #[test]
    fn filter_is_decoded() {
        let f = q("long_url=https%3A%2F%2Fa.com%2F%25_&match=startswith")
            .unwrap()
            .filter;
        assert_eq!(
            f,
            Some(("https://a.com/%_".to_owned(), MatchMode::StartsWith))
        );
    }

    #[test]
    fn our_filters() {
        let p = q("q=Spring%20SALE&tag=News&tag=news&tag=Promo&group_id=5A1F5E2C-0D5B-4C8E-9F00-0123456789AB\
                   &domain=Go.Example.com&is_active=false&sort=clicks")
        .unwrap();
        assert_eq!(p.q.as_deref(), Some("spring sale"));
        let tags: Vec<&str> = p.tags.iter().map(Tag::name).collect();
        assert_eq!(tags, ["News", "Promo"]);
        assert_eq!(
            p.group_id.as_deref(),
            Some("5a1f5e2c-0d5b-4c8e-9f00-0123456789ab")
        );
        assert_eq!(p.domain.unwrap().as_str(), "go.example.com");
        assert_eq!((p.is_active, p.sort), (Some(false), LinkSort::Clicks));
        assert!(q("sort=-created_at").unwrap().sort == LinkSort::Oldest);
        assert!(q("sort=short_code").unwrap().sort == LinkSort::ShortCode);
        assert!(q("sort=created_at").unwrap().sort == LinkSort::Newest);
        assert!(!ListQuery::parse(None).unwrap().is_filtered());
        let max_q = format!("q={}", "é".repeat(200));
        assert!(q(&max_q).is_ok());
        let cases = [
            ("q=a", ListParam::Q),
            ("q=", ListParam::Q),
            ("q=ab&q=cd", ListParam::Q),
            ("q=a%0Ab", ListParam::Q),
            ("tag=a%2Fb", ListParam::Tag),
            ("tag=", ListParam::Tag),
            ("group_id=nope", ListParam::GroupId),
            ("group_id=", ListParam::GroupId),
            ("domain=not_a_host", ListParam::Domain),
            ("domain=localhost", ListParam::Domain),
            ("is_active=1", ListParam::IsActive),
            ("is_active=TRUE", ListParam::IsActive),
            ("is_active=true&is_active=true", ListParam::IsActive),
            ("sort=clicks&sort=clicks", ListParam::Sort),
            ("sort=-clicks", ListParam::Sort),
            ("sort=", ListParam::Sort),
        ];
        for (bad, param) in cases {
            assert_eq!(q(bad).unwrap_err().param, param, "{bad}");
        }
        assert_eq!(
            q(&format!("q={}", "a".repeat(201))).unwrap_err().param,
            ListParam::Q
        );
        let eleven: Vec<String> = (0..11).map(|i| format!("tag=t{i}")).collect();
        assert_eq!(q(&eleven.join("&")).unwrap_err().param, ListParam::Tag);
    }

    #[test]
    fn upper_bound() {
        assert_eq!(prefix_upper_bound("abc").as_deref(), Some("abd"));
        assert_eq!(prefix_upper_bound("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper_bound("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_upper_bound(""), None);
        assert_eq!(prefix_upper_bound("\u{10FFFF}"), None);
    }
}
