use super::ValidationError;

/// Maximum length of a destination, in characters (spec 4.1, 8).
pub(crate) const MAX_LEN: usize = 2048;
const SCHEME: &str = "https://";

/// The destination of a persistent link: starts with `https://` (the spec's rule, checked
/// literally: no http upgrade for stored links), at most 2048 characters, has a host, and
/// holds no whitespace or control characters (they would break the `Location` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongUrl(String);

impl LongUrl {
    /// Validates a destination URL.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw.chars().count() > MAX_LEN {
            return Err(ValidationError::new(format!(
                "long_url must be at most {MAX_LEN} characters"
            )));
        }
        let Some(rest) = raw.strip_prefix(SCHEME) else {
            return Err(ValidationError::new("long_url must start with https://"));
        };
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ValidationError::new(
                "long_url must not contain whitespace or control characters",
            ));
        }
        if host_of(rest).is_empty() {
            return Err(ValidationError::new("long_url must name a host"));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lowercase host, without userinfo, port or trailing dot (for the blocklist).
    pub fn host(&self) -> String {
        host_of(&self.0[SCHEME.len()..])
    }
}

/// Host part of `authority[/path][?query][#fragment]`.
fn host_of(after_scheme: &str) -> String {
    let authority = after_scheme
        .split(['/', '?', '#', '\\'])
        .next()
        .unwrap_or_default();
    // The host follows the last `@`: `https://a.com@b.com/` goes to b.com.
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    host.trim_end_matches('.').to_ascii_lowercase()
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
    fn host_extraction() {
        let host = |s: &str| LongUrl::parse(s).unwrap().host();
        assert_eq!(host("https://Ex.COM./p?q#f"), "ex.com");
        assert_eq!(host("https://user:pw@evil.com@good.com:8443/x"), "good.com");
        assert_eq!(host("https://good.com?@evil.com"), "good.com");
        assert_eq!(host("https://[::1]:80/"), "[::1]");
    }
}
