//! The destination of a persistent link, checked by the spec's rules and the edge's.

use super::ValidationError;
use shared_crypto::{Destination, DestinationError};

/// Maximum length of a destination, in characters (spec 4.1, 8).
pub(crate) const MAX_LEN: usize = shared_crypto::MAX_URL_LEN;
const SCHEME: &str = "https://";

/// The destination of a persistent link: starts with `https://` (the spec's rule, checked
/// literally: no http upgrade for stored links), at most 2048 characters, ASCII without
/// whitespace or control characters (a URI per RFC 3986: it goes verbatim into a `Location`
/// header, and it keeps index entries within PostgreSQL's B-tree row limit), and has a host
/// that passes the same rules the edge applies to dynamic links (shared-crypto).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongUrl {
    url: String,
    host: String,
}

impl LongUrl {
    /// Validates a destination URL.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        Self::parse_field("long_url", raw)
    }

    /// Validates another URL a link sends visitors to by the same rules (a rule's `to`, `ios_url`,
    /// `expired_url`, …); `field` names it in the error.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, ValidationError> {
        if !raw.starts_with(SCHEME) {
            return Err(ValidationError::new(format!(
                "{field} must start with https://"
            )));
        }
        if !raw.is_ascii() {
            return Err(ValidationError::new(format!(
                "{field} must be ASCII: percent-encode other characters (RFC 3986)"
            )));
        }
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ValidationError::new(format!(
                "{field} must not contain whitespace or control characters"
            )));
        }
        let dest = Destination::parse(raw).map_err(|e| match e {
            DestinationError::TooLong { .. } => {
                ValidationError::new(format!("{field} must be at most {MAX_LEN} characters"))
            }
            other => ValidationError::new(format!("{field} is not a valid URL: {other}")),
        })?;
        Ok(Self {
            host: dest.host().to_owned(),
            url: dest.into_string(),
        })
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The lowercase host, without userinfo, port or trailing dot (for the blocklist).
    pub fn host(&self) -> &str {
        &self.host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_https_up_to_the_limit() {
        assert!(LongUrl::parse("https://example.com").is_ok());
        let base = "https://example.com/";
        let url = format!("{base}{}", "a".repeat(MAX_LEN - base.len()));
        assert!(LongUrl::parse(&url).is_ok());
        assert!(LongUrl::parse(&format!("{url}a")).is_err());
        assert!(LongUrl::parse("https://example.com/caf%C3%A9").is_ok());
        assert!(LongUrl::parse("https://example.com/café").is_err());
        assert!(LongUrl::parse("https://exämple.com/").is_err());
    }

    #[test]
    fn rejects_other_schemes_and_garbage() {
        for bad in [
            "http://example.com",
            "HTTPS://example.com",
            "ftp://example.com",
            "example.com",
            "https://",
            "https:///path",
            "https://exa mple.com",
            "https://example.com/\n",
            "javascript:alert(1)",
        ] {
            assert!(LongUrl::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = LongUrl::parse_field("ios_url", "http://apps.example/").unwrap_err();
        assert_eq!(e.0, "ios_url must start with https://");
        assert!(
            LongUrl::parse("http://a/")
                .unwrap_err()
                .0
                .starts_with("long_url ")
        );
    }

    #[test]
    fn host_extraction() {
        let host = |s: &str| LongUrl::parse(s).unwrap().host().to_owned();
        assert_eq!(host("https://Ex.COM./p?q#f"), "ex.com");
        assert_eq!(host("https://user:pw@evil.com@good.com:8443/x"), "good.com");
        assert_eq!(host("https://good.com?@evil.com"), "good.com");
    }
}
