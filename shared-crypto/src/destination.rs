//! Destination URL rules (spec sections 2 and 8), in pieces the origin can reuse for persistent links.
//!
//! Host extraction follows what a browser does with the URL, not a loose reading of it: the authority ends at
//! `/`, `?`, `#` or `\`, the host comes after the last `@`, and anything a browser would rewrite into another
//! host (percent-escapes, non-ASCII lookalikes, tabs or newlines) is rejected instead of guessed at.

use crate::ascii::{find_byte, rfind_byte, split_once_byte};
use alloc::borrow::Cow;
use alloc::string::String;

use crate::blocklist::Blocklist;
use crate::host::normalize_host;

/// The longest accepted destination, in characters (Unicode scalar values), counted on the final URL:
/// after an `http://` upgrade and after `back_param` is appended.
pub const MAX_URL_LEN: usize = 2048;

/// Why a destination URL is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// The scheme is missing or is not `https` (dynamic links upgrade `http` before this check).
    #[error("destination URL must start with https://")]
    Scheme,
    /// Longer than [`MAX_URL_LEN`] characters.
    #[error("destination URL is {len} characters long; the limit is 2048")]
    TooLong {
        /// Length in characters.
        len: usize,
    },
    /// The host is on the blocked domain list (itself or a parent domain).
    #[error("destination domain is blocked")]
    Blocked,
    /// Malformed: no host, an invalid host or port, or control characters.
    #[error("destination URL is malformed: {0}")]
    Invalid(&'static str),
}

impl DestinationError {
    /// A stable snake_case code: `"scheme"`, `"too_long"`, `"blocked"` or `"invalid"`.
    pub fn code(&self) -> &'static str {
        match self {
            DestinationError::Scheme => "scheme",
            DestinationError::TooLong { .. } => "too_long",
            DestinationError::Blocked => "blocked",
            DestinationError::Invalid(_) => "invalid",
        }
    }
}

/// An accepted `https` URL of at most [`MAX_URL_LEN`] characters with a well-formed host.
///
/// Whether the host is blocked is a separate step ([`Destination::check_blocklist`]), because the blocklist
/// lives elsewhere (KV at the edge, the database at the origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    url: String,
    host: String,
}

impl Destination {
    /// Parses a destination: `https://` scheme (any letter case; `http` is **not** upgraded here), at most
    /// [`MAX_URL_LEN`] characters, no control characters, a valid host.
    pub fn parse(url: &str) -> Result<Self, DestinationError> {
        Self::parse_owned(String::from(url))
    }

    pub(crate) fn parse_owned(url: String) -> Result<Self, DestinationError> {
        if has_control(&url) {
            // Browsers silently drop tabs and newlines, which could reassemble a blocked host.
            return Err(DestinationError::Invalid("control character"));
        }
        match split_scheme(&url) {
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {}
            _ => return Err(DestinationError::Scheme),
        }
        // Byte length bounds the character count; count only when it could matter.
        if url.len() > MAX_URL_LEN {
            let len = url.chars().count();
            if len > MAX_URL_LEN {
                return Err(DestinationError::TooLong { len });
            }
        }
        let host = normalize_host(extract_host(&url)?);
        if host.is_empty() {
            return Err(DestinationError::Invalid("empty host"));
        }
        Ok(Destination { url, host })
    }

    /// Fails with [`DestinationError::Blocked`] when the host or one of its parent domains is listed.
    pub fn check_blocklist<B: Blocklist + ?Sized>(
        &self,
        blocklist: &B,
    ) -> Result<(), DestinationError> {
        if blocklist.is_blocked(&self.host) {
            Err(DestinationError::Blocked)
        } else {
            Ok(())
        }
    }

    /// The URL, exactly as given.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The host, normalized by [`normalize_host`] (lowercase, no trailing dot, no port or userinfo).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The URL, exactly as given.
    pub fn into_string(self) -> String {
        self.url
    }
}

/// Same as [`Destination::parse`].
pub fn parse_destination(url: &str) -> Result<Destination, DestinationError> {
    Destination::parse(url)
}

/// Rewrites an `http://` URL (scheme in any letter case) to `https://`; returns anything else unchanged.
pub fn upgrade_http(url: &str) -> Cow<'_, str> {
    // By bytes, the `://` as it is: the seven bytes folded and compared as a `str` prefix were about 0.2 KB more of
    // the function a new edge isolate's first visit to a dynamic link compiles (crate::ascii says why that counts).
    let bytes = url.as_bytes();
    let http = bytes
        .get(..4)
        .is_some_and(|b| b.eq_ignore_ascii_case(b"http"));
    if http && bytes.get(4..7) == Some(&b"://"[..]) {
        let mut upgraded = String::with_capacity(url.len() + 1);
        upgraded.push_str("https://");
        // The first seven bytes are ASCII: 7 is a char boundary.
        upgraded.push_str(&url[7..]);
        Cow::Owned(upgraded)
    } else {
        Cow::Borrowed(url)
    }
}

/// Whether `text` holds a control character (`char::is_control`: U+0000–U+001F, U+007F–U+009F), read by bytes:
/// the first two ranges are single bytes, the third is `0xC2` then `0x80`–`0x9F` in UTF-8 (and `0xC2` is only ever
/// a lead byte). Decoding each `char` is code a new isolate's first visit would compile (crate::ascii says why).
fn has_control(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b < 0x20
            || b == 0x7f
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n)))
    })
}

/// Appends `back_param` to the query of `url`, before any `#fragment`.
///
/// Leading `?` and `&` on `back_param` are stripped; an empty `back_param` leaves `url` unchanged. The separator
/// is `?` when `url` has no query, `&` when it has one, and nothing when `url` (before the fragment) already ends
/// with `?` or `&`. The result must still pass the destination rules: check the final URL, not the parts.
pub fn append_back_param(url: &str, back_param: &str) -> String {
    // By bytes, not `trim_start_matches`/`ends_with` with `char` patterns: crate::ascii says why.
    let skip = back_param
        .bytes()
        .position(|b| b != b'?' && b != b'&')
        .unwrap_or(back_param.len());
    let back_param = &back_param[skip..];
    if back_param.is_empty() {
        return String::from(url);
    }
    let (base, fragment) = url.split_at(find_byte(url, b'#').unwrap_or(url.len()));
    let separator = if matches!(base.as_bytes().last(), Some(b'?' | b'&')) {
        ""
    } else if find_byte(base, b'?').is_some() {
        "&"
    } else {
        "?"
    };
    let mut out = String::with_capacity(url.len() + separator.len() + back_param.len());
    out.push_str(base);
    out.push_str(separator);
    out.push_str(back_param);
    out.push_str(fragment);
    out
}

/// A bracketed IPv6 host and its port, if any, from `host_port` (which starts with `[`). Out of line, like
/// [`check_port`]: a new isolate's first redirect compiles [`extract_host`] whole, and few destinations take either.
#[inline(never)]
fn ipv6_host(host_port: &str) -> Result<(&str, Option<&str>), DestinationError> {
    let end =
        find_byte(host_port, b']').ok_or(DestinationError::Invalid("unterminated IPv6 host"))?;
    let (host, after) = host_port.split_at(end + 1);
    let inner = &host[1..host.len() - 1];
    if inner.is_empty()
        || !inner
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    {
        return Err(DestinationError::Invalid("bad IPv6 host"));
    }
    match after {
        "" => Ok((host, None)),
        _ => match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None => Err(DestinationError::Invalid("bad port")),
        },
    }
}

/// An empty port means the default (`https://host:/` is valid); otherwise digits within `u16`.
#[inline(never)]
fn check_port(port: &str) -> Result<(), DestinationError> {
    if !port.is_empty()
        && (!port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err())
    {
        return Err(DestinationError::Invalid("bad port"));
    }
    Ok(())
}

/// The host of a `scheme://authority...` URL, as written (not normalized; IPv6 literals keep their brackets).
///
/// The authority ends at the first `/`, `?`, `#` or `\` (browsers treat `\` as `/` in http(s) URLs); userinfo is
/// everything up to the last `@`; a port must be digits. The host may contain only ASCII letters, digits, `-`,
/// `.` and `_` (or be a bracketed IPv6 literal): percent-escapes and non-ASCII hosts are rejected because a
/// browser would map them to a different, possibly blocked, host. Internationalized domains must be given in
/// their `xn--` form.
///
/// Hand-written rather than the `url` crate: its IDNA tables would add about 100 KB to the worker's wasm (cold
/// start), and this crate must stay `no_std`; the rules it needs are the few above.
pub fn extract_host(url: &str) -> Result<&str, DestinationError> {
    let (_, rest) = split_scheme(url).ok_or(DestinationError::Scheme)?;
    let rest = rest
        .strip_prefix("//")
        .ok_or(DestinationError::Invalid("missing //host"))?;
    let end = rest
        .bytes()
        .position(|b| matches!(b, b'/' | b'?' | b'#' | b'\\'))
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = match rfind_byte(authority, b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let (host, port) = if host_port.starts_with('[') {
        ipv6_host(host_port)?
    } else {
        match split_once_byte(host_port, b':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if let Some(port) = port {
        check_port(port)?;
    }
    if host.is_empty() {
        return Err(DestinationError::Invalid("missing host"));
    }
    if !host.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(DestinationError::Invalid("bad host character"));
    }
    Ok(host)
}

/// Splits `scheme:rest` when the part before the first `:` is a valid RFC 3986 scheme.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = split_once_byte(url, b':')?;
    let mut bytes = scheme.bytes();
    let first_is_alpha = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    if first_is_alpha && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        Some((scheme, rest))
    } else {
        None
    }
}

/// Applies the dynamic-link destination rules: upgrade `http`, append `back_param`, then check the final URL
/// (scheme, length, host) and the blocklist. Returns the final redirect URL.
pub(crate) fn resolve_dynamic<B: Blocklist + ?Sized>(
    destination_url: &str,
    back_param: Option<&str>,
    blocklist: &B,
) -> Result<String, DestinationError> {
    let upgraded = upgrade_http(destination_url);
    let url = match back_param {
        Some(back_param) => append_back_param(&upgraded, back_param),
        None => upgraded.into_owned(),
    };
    // The final URL is parsed, not the parts: a destination like `https://a.com&` with back_param `@b.com`
    // would otherwise move the host.
    let destination = Destination::parse_owned(url)?;
    destination.check_blocklist(blocklist)?;
    Ok(destination.into_string())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `append_back_param` as it read with `char` patterns, before it read bytes.
    fn append_by_chars(url: &str, back_param: &str) -> String {
        let back_param = back_param.trim_start_matches(['?', '&']);
        if back_param.is_empty() {
            return String::from(url);
        }
        let (base, fragment) = url.split_at(url.find('#').unwrap_or(url.len()));
        let separator = if base.ends_with(['?', '&']) {
            ""
        } else if base.contains('?') {
            "&"
        } else {
            "?"
        };
        format!("{base}{separator}{back_param}{fragment}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The byte reading finds a control character exactly where `char::is_control` does, the C1 range
        /// (`U+0080`–`U+009F`, two bytes each) and its neighbours included.
        #[test]
        fn control_characters_by_bytes(text in "[a\\x00-\\x20\\x7e-\\u{a1}\\u{100}\\u{2028}é]{0,12}") {
            prop_assert_eq!(has_control(&text), text.chars().any(char::is_control), "{:?}", text);
        }

        /// Upgrading by bytes gives what upgrading by a `str` prefix gave.
        #[test]
        fn upgrade_by_bytes(url in "(h|H)(t|T)?(t|T)(p|P)(s|S)?:?/{0,3}[a/é]{0,3}|httpé://a|[é]{0,2}") {
            let by_prefix = match url.get(..7) {
                Some(prefix) if prefix.eq_ignore_ascii_case("http://") => Cow::Owned(format!("https://{}", &url[7..])),
                _ => Cow::Borrowed(url.as_str()),
            };
            let upgraded = upgrade_http(&url);
            // Borrowed exactly when nothing changed.
            prop_assert_eq!(matches!(upgraded, Cow::Borrowed(_)), matches!(by_prefix, Cow::Borrowed(_)));
            prop_assert_eq!(upgraded, by_prefix, "{}", url);
        }

        /// Appending by bytes gives what appending by `char` patterns gave.
        #[test]
        fn back_param_by_bytes(url in "[a?&#é/]{0,10}", back in "[?&a=é#]{0,8}") {
            prop_assert_eq!(append_back_param(&url, &back), append_by_chars(&url, &back));
        }
    }

    const BLOCKED: &[&str] = &["blocked.example.net"];

    #[test]
    fn host_extraction() {
        let ok = [
            ("https://dest.example.org/path", "dest.example.org"),
            ("https://dest.example.org", "dest.example.org"),
            ("https://dest.example.org?q=1", "dest.example.org"),
            ("https://dest.example.org#f", "dest.example.org"),
            (
                "https://user:pw@dest.example.org:8443/x",
                "dest.example.org",
            ),
            (
                "https://evil.com@blocked.example.net/",
                "blocked.example.net",
            ),
            ("https://blocked.example.net@evil.com/", "evil.com"),
            ("https://a@b@evil.com/", "evil.com"),
            ("https://evil.com\\@blocked.example.net/", "evil.com"),
            ("https://[::1]:8080/", "[::1]"),
            ("https://Dest.Example.ORG./", "Dest.Example.ORG."),
            ("https://host:/", "host"),
        ];
        for (url, host) in ok {
            assert_eq!(extract_host(url), Ok(host), "{url}");
        }
        let bad = [
            "https://",
            "https:///path",
            "https:dest.example.org",
            "https://user@/x",
            "https://:443/",
            "https://host:abc/",
            "https://host:99999/",
            "https://blocked%2eexample.net/",
            "https://blocked\u{3002}example.net/",
            "https://café.example/",
            "https://[::1/",
            "https://[zz]/",
            "https://[::1]x/",
            "no scheme at all",
        ];
        for url in bad {
            assert!(extract_host(url).is_err(), "{url}");
        }
    }

    #[test]
    fn parse_requires_https() {
        assert!(parse_destination("https://a.example/").is_ok());
        assert!(parse_destination("HTTPS://a.example/").is_ok());
        for url in [
            "http://a.example/",
            "ftp://a.example/",
            "javascript:alert(1)",
            "a.example/x",
            "",
            "//a.example/",
        ] {
            assert_eq!(
                parse_destination(url).unwrap_err(),
                DestinationError::Scheme,
                "{url}"
            );
        }
        assert_eq!(
            parse_destination("https://a.example/\r\nx")
                .unwrap_err()
                .code(),
            "invalid"
        );
        assert_eq!(
            parse_destination("https://blocked.exa\tmple.net/")
                .unwrap_err()
                .code(),
            "invalid"
        );
        assert_eq!(
            parse_destination("https://./").unwrap_err().code(),
            "invalid"
        );
    }

    #[test]
    fn parse_normalizes_host() {
        let d = parse_destination("https://u@Blocked.Example.NET.:443/x").unwrap();
        assert_eq!(d.host(), "blocked.example.net");
        assert_eq!(d.as_str(), "https://u@Blocked.Example.NET.:443/x");
        assert_eq!(d.check_blocklist(BLOCKED), Err(DestinationError::Blocked));
    }

    #[test]
    fn length_limit_counts_characters() {
        let prefix = "https://a.example/";
        let at_limit = format!("{prefix}{}", "a".repeat(MAX_URL_LEN - prefix.len()));
        assert!(parse_destination(&at_limit).is_ok());
        let over = format!("{at_limit}a");
        assert_eq!(
            parse_destination(&over).unwrap_err(),
            DestinationError::TooLong { len: 2049 }
        );
        // 2048 characters but more bytes.
        let unicode = format!("{prefix}{}", "é".repeat(MAX_URL_LEN - prefix.len()));
        assert!(parse_destination(&unicode).is_ok());
    }

    #[test]
    fn upgrade() {
        assert_eq!(upgrade_http("http://a.example/x"), "https://a.example/x");
        assert_eq!(upgrade_http("HTTP://a.example/x"), "https://a.example/x");
        assert_eq!(upgrade_http("https://a.example/x"), "https://a.example/x");
        assert_eq!(upgrade_http("ftp://a.example/x"), "ftp://a.example/x");
        assert_eq!(upgrade_http("http:/"), "http:/");
        assert_eq!(upgrade_http("httpé://"), "httpé://");
    }

    #[test]
    fn back_param_separators() {
        let cases = [
            (
                "https://d.org/path",
                "utm=1&x=y",
                "https://d.org/path?utm=1&x=y",
            ),
            (
                "https://d.org/path?a=1",
                "b=2",
                "https://d.org/path?a=1&b=2",
            ),
            (
                "https://d.org/path#top",
                "b=2",
                "https://d.org/path?b=2#top",
            ),
            (
                "https://d.org/path?a=1#top",
                "b=2",
                "https://d.org/path?a=1&b=2#top",
            ),
            ("https://d.org/path", "&b=2", "https://d.org/path?b=2"),
            ("https://d.org/path", "?b=2", "https://d.org/path?b=2"),
            ("https://d.org/path?", "b=2", "https://d.org/path?b=2"),
            (
                "https://d.org/path?a=1&",
                "b=2",
                "https://d.org/path?a=1&b=2",
            ),
            ("https://d.org/path?#f", "b=2", "https://d.org/path?b=2#f"),
            ("https://d.org/path", "", "https://d.org/path"),
            ("https://d.org/path", "?&", "https://d.org/path"),
            ("https://d.org/p#a?b", "c=1", "https://d.org/p?c=1#a?b"),
        ];
        for (url, back, expected) in cases {
            assert_eq!(append_back_param(url, back), expected, "{url} + {back}");
        }
    }

    #[test]
    fn dynamic_rules() {
        let ok = |d: &str, b: Option<&str>| resolve_dynamic(d, b, BLOCKED);
        assert_eq!(ok("http://d.org/x", None).unwrap(), "https://d.org/x");
        assert_eq!(
            ok("https://notblocked.example.net/x", None).unwrap(),
            "https://notblocked.example.net/x"
        );
        assert_eq!(
            ok("https://blocked.example.net/x", None),
            Err(DestinationError::Blocked)
        );
        assert_eq!(
            ok("http://a.b.BLOCKED.example.net./x", None),
            Err(DestinationError::Blocked)
        );
        assert_eq!(
            ok("https://blocked.example.net:8443/", None),
            Err(DestinationError::Blocked)
        );
        assert_eq!(
            ok("https://evil.com@blocked.example.net/", None),
            Err(DestinationError::Blocked)
        );
        assert!(ok("https://blocked.example.net@evil.com/", None).is_ok());
        assert_eq!(ok("ftp://d.org/", None), Err(DestinationError::Scheme));
        // The host is taken from the final URL.
        assert!(ok("https://good.example&", Some("@blocked.example.net/")).is_err());
    }

    #[test]
    fn length_counted_after_back_param() {
        let prefix = "https://d.org/";
        let dest = format!("{prefix}{}", "a".repeat(MAX_URL_LEN - prefix.len() - 4));
        // "?b=2" brings it to exactly 2048.
        assert_eq!(
            resolve_dynamic(&dest, Some("b=2"), BLOCKED).unwrap().len(),
            2048
        );
        assert_eq!(
            resolve_dynamic(&dest, Some("b=22"), BLOCKED),
            Err(DestinationError::TooLong { len: 2049 })
        );
        // http upgrade adds a character.
        let http = format!(
            "http://d.org/{}",
            "a".repeat(MAX_URL_LEN - prefix.len() + 1)
        );
        assert_eq!(http.len(), 2048);
        assert_eq!(
            resolve_dynamic(&http, None, BLOCKED),
            Err(DestinationError::TooLong { len: 2049 })
        );
    }
}
