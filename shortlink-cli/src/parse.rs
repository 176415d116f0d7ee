//! Argument parsers (used as clap `value_parser`s) and small encoding helpers.

use std::borrow::Cow;

use shared_crypto::GroupKey;

/// A group key: base64url of 32 bytes.
pub(crate) fn group_key(s: &str) -> Result<GroupKey, String> {
    GroupKey::from_base64url(s).map_err(|e| e.to_string())
}

/// A UUID in the hyphenated 8-4-4-4-12 hex form; returned lowercase.
pub(crate) fn uuid(s: &str) -> Result<String, String> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    let well_formed = groups.len() == lens.len()
        && groups
            .iter()
            .zip(lens)
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if well_formed {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("expected a UUID like 0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b".into())
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

/// A duration such as `30s`, `15m`, `1h`, `7d` or `1h30m`, in seconds. Must be positive.
pub(crate) fn duration_secs(s: &str) -> Result<i64, String> {
    let err = || format!("expected a duration like 30s, 15m, 1h, 7d or 1h30m, got {s:?}");
    let mut total: i64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
        if digits == 0 {
            return Err(err());
        }
        let value: i64 = rest[..digits].parse().map_err(|_| err())?;
        let unit = rest[digits..].chars().next().ok_or_else(err)?;
        let scale = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            _ => return Err(err()),
        };
        total = value
            .checked_mul(scale)
            .and_then(|v| total.checked_add(v))
            .ok_or("duration is too large")?;
        rest = &rest[digits + unit.len_utf8()..];
    }
    if total == 0 {
        return Err("duration must be positive".into());
    }
    Ok(total)
}

/// Percent-encodes everything except RFC 3986 unreserved characters (a base64url token passes unchanged).
pub(crate) fn percent_encode(s: &str) -> Cow<'_, str> {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~');
    if s.bytes().all(unreserved) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(out)
}

/// Percent-decodes `s`; invalid escapes are kept literally.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token in a `verify` argument: the argument itself, or the decoded `signature` query parameter when the
/// argument is a whole dynamic-link URL.
pub(crate) fn token_from_arg(arg: &str) -> String {
    let query = match arg.split_once('?') {
        Some((_, query)) if arg.contains("://") => query.split('#').next().unwrap_or_default(),
        _ => return arg.to_owned(),
    };
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("signature="))
        .map(percent_decode)
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
        for bad in [
            "",
            "1",
            "h",
            "1x",
            "-1h",
            "1.5h",
            "0s",
            "1h 30m",
            "99999999999999999999s",
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
        assert_eq!(percent_decode("a%2Bb%3D%2F%zz%"), "a+b=/%zz%");
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
