//! The query of list-links (spec 4.2): page size, offset and the destination filter, each refused on its own.

use super::long_url::MAX_LEN as MAX_FILTER_LEN;

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

/// The validated query of `GET /api/v1/external/links`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Zero-based offset.
    pub offset: u64,
    /// Destination filter and how it matches.
    pub filter: Option<(String, MatchMode)>,
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
        let (mut limit, mut offset, mut long_url, mut mode) = (None, None, None, None);
        for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            let (slot, param) = match k.as_ref() {
                "limit" => (&mut limit, ListParam::Limit),
                "offset" => (&mut offset, ListParam::Offset),
                "long_url" => (&mut long_url, ListParam::LongUrl),
                "match" => (&mut mode, ListParam::Match),
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
        Ok(Self {
            limit,
            offset,
            filter,
        })
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
    fn upper_bound() {
        assert_eq!(prefix_upper_bound("abc").as_deref(), Some("abd"));
        assert_eq!(prefix_upper_bound("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper_bound("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_upper_bound(""), None);
        assert_eq!(prefix_upper_bound("\u{10FFFF}"), None);
    }
}
