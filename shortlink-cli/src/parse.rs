//! Argument parsers (used as clap `value_parser`s) and small encoding helpers.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use shared_crypto::GroupKey;

/// A group key: base64url of 32 bytes.
pub(crate) fn group_key(s: &str) -> Result<GroupKey, String> {
    GroupKey::from_base64url(s).map_err(|e| e.to_string())
}

/// A UUID in the hyphenated 8-4-4-4-12 hex form, as the dashboard shows group ids; returned lowercase. The `uuid`
/// crate also reads the simple, braced and URN forms; those are refused, so a mistyped id is not silently fixed.
pub(crate) fn uuid(s: &str) -> Result<String, String> {
    match uuid::Uuid::try_parse(s) {
        Ok(id) if s.len() == uuid::fmt::Hyphenated::LENGTH => Ok(id.hyphenated().to_string()),
        _ => Err("expected a UUID like 0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b".into()),
    }
}

/// A hostname with an optional port (`go.example.com`, `localhost:8787`); returned lowercase.
pub(crate) fn domain(s: &str) -> Result<String, String> {
    let err = || format!("expected a host name like go.example.com, got {s:?}");
    if s.is_empty() || s.contains(['/', '?', '#', '@', '\\']) {
        return Err(err());
    }
    // Reuse the destination rules' host parser: it validates characters and the port.
    let url = format!("https://{s}/");
    shared_crypto::extract_host(&url).map_err(|_| err())?;
    Ok(s.trim_end_matches('.').to_ascii_lowercase())
}

/// A duration such as `30s`, `15m`, `1h`, `7d` or `1h30m` (humantime's syntax, which also takes `1h 30m` and
/// long unit names), in whole seconds. Must be positive.
pub(crate) fn duration_secs(s: &str) -> Result<i64, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| {
        format!("expected a duration like 30s, 15m, 1h, 7d or 1h30m, got {s:?}: {e}")
    })?;
    if d.subsec_nanos() != 0 {
        return Err("duration must be whole seconds".into());
    }
    match i64::try_from(d.as_secs()) {
        Ok(0) => Err("duration must be positive".into()),
        Ok(secs) => Ok(secs),
        Err(_) => Err("duration is too large".into()),
    }
}

/// RFC 3986's unreserved characters stay as they are (a base64url token passes unchanged); the rest is encoded.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a query value.
pub(crate) fn percent_encode(s: &str) -> Cow<'_, str> {
    utf8_percent_encode(s, QUERY_VALUE).into()
}

/// The token in a `verify` argument: the argument itself, or the decoded `signature` query parameter when the
/// argument is a whole dynamic-link URL.
pub(crate) fn token_from_arg(arg: &str) -> String {
    let query = match arg.split_once('?') {
        Some((_, query)) if arg.contains("://") => query.split('#').next().unwrap_or_default(),
        _ => return arg.to_owned(),
    };
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "signature")
        .map(|(_, token)| token.into_owned())
        .unwrap_or_else(|| arg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_secs("30s"), Ok(30));
        assert_eq!(duration_secs("15m"), Ok(900));
        assert_eq!(duration_secs("1h"), Ok(3_600));
        assert_eq!(duration_secs("7d"), Ok(604_800));
        assert_eq!(duration_secs("1h30m"), Ok(5_400));
        assert_eq!(duration_secs(" 2d12h "), Ok(216_000));
        assert_eq!(duration_secs("1h 30m"), Ok(5_400));
        assert_eq!(duration_secs("1.5h"), Ok(5_400));
        for bad in [
            "",
            "1",
            "h",
            "1x",
            "-1h",
            "0.5s",
            "0s",
            "99999999999999999999s",
            "1500ms",
            "1é",
            "s1",
        ] {
            assert!(duration_secs(bad).is_err(), "{bad:?}");
        }
        assert!(duration_secs("9223372036854775807d").is_err());
    }

    #[test]
    fn uuids() {
        assert_eq!(
            uuid("0B7E2C1A-3F4D-4E5F-8A9B-0C1D2E3F4A5B").as_deref(),
            Ok("0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b")
        );
        for bad in [
            "",
            "not-a-uuid",
            "0b7e2c1a3f4d4e5f8a9b0c1d2e3f4a5b",
            "0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5",
            "0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5g",
            "{0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b}",
        ] {
            assert!(uuid(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn domains() {
        assert_eq!(domain("Go.Example.com").as_deref(), Ok("go.example.com"));
        assert_eq!(domain("localhost:8787").as_deref(), Ok("localhost:8787"));
        for bad in [
            "",
            "https://go.example.com",
            "go.example.com/x",
            "a@b.com",
            "bad host",
            "host:port",
        ] {
            assert!(domain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys() {
        assert!(group_key("UvImZaYMEtKJGF2VDuiBNgkWb2sRPReNbA_TkB_yOaE").is_ok());
        assert!(group_key("short").is_err());
    }

    #[test]
    fn percent_coding() {
        assert_eq!(percent_encode("AQ-_x"), "AQ-_x");
        assert_eq!(percent_encode("a+b=/"), "a%2Bb%3D%2F");
    }

    #[test]
    fn token_in_url() {
        assert_eq!(token_from_arg("AQ-_x"), "AQ-_x");
        assert_eq!(
            token_from_arg("https://go.example.com/e/id?signature=AQ-_x"),
            "AQ-_x"
        );
        assert_eq!(
            token_from_arg("https://go.example.com/e/id?a=1&signature=AQ%2D_x#f"),
            "AQ-_x"
        );
        assert_eq!(
            token_from_arg("https://go.example.com/e/id"),
            "https://go.example.com/e/id"
        );
    }
}
