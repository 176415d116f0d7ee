//! Which route a request takes, from its method, host, path and query alone (no KV).

// Byte searches, not `str`'s with a `char` pattern: shared_crypto::ascii says why.
use shared_crypto::ascii::{self, find_byte, rfind_byte, split_once_byte};

/// The longest short code looked up in KV. Longer paths cannot be links (custom codes are at most 50 characters),
/// so they go straight to the fallback without costing a KV read.
pub const MAX_SHORT_CODE_LEN: usize = 64;

/// The path of the origin's KV sync route.
pub const SYNC_PATH: &str = "/__shortlink/sync";

/// The route of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET`/`HEAD /<short_code>`; the code is lowercased.
    Persistent {
        /// The short code, lowercase.
        code: String,
    },
    /// `GET`/`HEAD /e/<group_id>?signature=<token>`; the group id is lowercased, the token URL-decoded.
    Dynamic {
        /// The group id, lowercase.
        group_id: String,
        /// The token, URL-decoded; `None` when the query has no `signature`.
        token: Option<String>,
    },
    /// `GET`/`HEAD` of `/` or of a path that cannot be a link: the domain's fallback.
    Fallback,
    /// `POST /<short_code>`: a protected link's password form, posted; the code is lowercased.
    Unlock {
        /// The short code, lowercase.
        code: String,
    },
    /// `POST /__shortlink/sync`.
    Sync,
    /// Any other method: `405`.
    MethodNotAllowed,
}

/// Routes a request. `path` is the URL path as received (percent-encoded), `query` the raw query without `?`.
pub fn route(method: &str, path: &str, query: Option<&str>) -> Route {
    if method == "POST" && path == SYNC_PATH {
        return Route::Sync;
    }
    if method == "POST" {
        let rest = path.strip_prefix('/').unwrap_or(path);
        return if is_short_code(rest) {
            Route::Unlock {
                code: ascii::lowercase(rest),
            }
        } else {
            Route::MethodNotAllowed
        };
    }
    if method != "GET" && method != "HEAD" {
        return Route::MethodNotAllowed;
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    if let Some(group_id) = rest.strip_prefix("e/") {
        return if is_group_id(group_id) {
            Route::Dynamic {
                group_id: ascii::lowercase(group_id),
                token: query.and_then(signature),
            }
        } else {
            Route::Fallback
        };
    }
    if is_short_code(rest) {
        Route::Persistent {
            code: ascii::lowercase(rest),
        }
    } else {
        Route::Fallback
    }
}

/// Short codes are letters, digits, `_` and `-` (spec 4.1); anything else (`/`, `favicon.ico`, a nested path)
/// is not a link.
fn is_short_code(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SHORT_CODE_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Group ids are UUIDs; accepting only their alphabet keeps KV keys well-formed.
fn is_group_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The first `signature` parameter of a query, URL-decoded. Out of line: a persistent link's route never reads it.
#[inline(never)]
fn signature(query: &str) -> Option<String> {
    // A query with nothing encoded in it (a token is base64url, so every client's but one that escapes what needs
    // no escaping) is its own decoding: its pairs are read as they are. form_urlencoded's decoding (UTF-8 repair
    // included, about 2.5 KB of wasm) is then not compiled by a new isolate's first visit to a dynamic link.
    if query.bytes().any(|b| b == b'%' || b == b'+') {
        return form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "signature")
            .map(|(_, value)| value.into_owned());
    }
    let mut rest = query;
    loop {
        let (pair, next) = split_once_byte(rest, b'&').unwrap_or((rest, ""));
        // As form_urlencoded splits a pair: at its first `=`, and a pair without one is a name with an empty value.
        let (name, value) = split_once_byte(pair, b'=').unwrap_or((pair, ""));
        if name == "signature" {
            return Some(value.to_owned());
        }
        if next.is_empty() {
            return None;
        }
        rest = next;
    }
}

/// The parts of the line the fast path reads a request from (`shell::fast`'s `visit_line`, one call out of wasm):
/// `<method>\n<url>\n<"h" + the Host header, or nothing without one>` gives the method, the URL and the Host header
/// (`None` without one). A method and a serialized URL hold no line break, so the header, last, is the rest of the
/// line whatever it holds (the runtime's `Headers` refuses a line break in a value; should one come through, the
/// host's own check refuses it, as when the header was read on its own). `None` for a line with fewer than two.
pub fn split_visit_line(line: &str) -> Option<(&str, &str, Option<&str>)> {
    let (method, rest) = split_once_byte(line, b'\n')?;
    let (url, host) = split_once_byte(rest, b'\n')?;
    Some((method, url, host.strip_prefix('h')))
}

/// The parts of an absolute request URL (`scheme://authority/path?query#fragment`): authority, path (at least
/// `/`) and query. Split by hand rather than with the `url` crate, whose IDNA tables would add about 100 KB to
/// the wasm for no use: the Workers runtime hands us a URL it has already parsed and normalized.
pub fn split_url(url: &str) -> (&str, &str, Option<&str>) {
    let url = split_once_byte(url, b'#').map_or(url, |(before, _)| before);
    // Not `split_once("://")`: a `&str` pattern brings core's two-way string searcher (about 3 KB of wasm) into
    // every new isolate's first request, for a three-byte needle.
    let rest = url
        .as_bytes()
        .windows(3)
        .position(|w| w == b"://")
        .map_or(url, |at| &url[at + 3..]);
    let (authority, path_query) = match rest.bytes().position(|b| b == b'/' || b == b'?') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (path, query) = match split_once_byte(path_query, b'?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_query, None),
    };
    (authority, if path.is_empty() { "/" } else { path }, query)
}

/// The host a request names, normalized for KV keys (lowercase, no port, no trailing dot), or `None` when it is
/// not a plausible host name, in which case the request is treated as for an unknown host.
pub fn normalize_request_host(host: &str) -> Option<String> {
    // Almost every request names its host in lowercase, without a port, a trailing dot or whitespace: taken as it
    // is, with the rest out of line (a new isolate's first request then compiles only this check).
    if !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'_'
        })
        && host.as_bytes().last() != Some(&b'.')
    {
        return Some(host.to_owned());
    }
    normalize_other_host(host)
}

/// [`normalize_request_host`] for a host with a port, uppercase letters, a trailing dot, surrounding whitespace or
/// IPv6's brackets (or an implausible one).
#[inline(never)]
fn normalize_other_host(host: &str) -> Option<String> {
    // A header's surrounding whitespace is ASCII (HTTP's OWS).
    let host = ascii::trim(host);
    // A bracketed IPv6 literal has colons inside; only strip a port after the last `]`.
    let without_port = match rfind_byte(host, b':') {
        Some(colon) if find_byte(&host[colon..], b']').is_none() => {
            if !host[colon + 1..].bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            &host[..colon]
        }
        _ => host,
    };
    let host = ascii::trim_end_byte(without_port, b'.');
    let valid = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        // 45 characters: the longest textual IPv6 address (with an embedded IPv4 one). Unbounded, a visitor's
        // Referer could make a click event kilobytes long.
        !inner.is_empty()
            && inner.len() <= 45
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    };
    valid.then(|| ascii::lowercase(host))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_visit_line_gives_method_url_and_host() {
        assert_eq!(
            split_visit_line("GET\nhttps://s.example/abc?x=1\nhs.example"),
            Some(("GET", "https://s.example/abc?x=1", Some("s.example")))
        );
        // No Host header; an empty one.
        assert_eq!(
            split_visit_line("HEAD\nhttps://s.example/\n"),
            Some(("HEAD", "https://s.example/", None))
        );
        assert_eq!(
            split_visit_line("GET\nhttps://s.example/\nh"),
            Some(("GET", "https://s.example/", Some("")))
        );
        // A host that starts with "h" keeps it.
        assert_eq!(
            split_visit_line("GET\nhttps://hh.example/\nhhh.example"),
            Some(("GET", "https://hh.example/", Some("hh.example")))
        );
        // A line break inside the host (the runtime refuses one) stays in the host, which normalizing refuses.
        assert_eq!(
            split_visit_line("GET\nhttps://s.example/\nha\nb"),
            Some(("GET", "https://s.example/", Some("a\nb")))
        );
        assert_eq!(normalize_request_host("a\nb"), None);
        for bad in ["", "GET", "GET\nhttps://s.example/"] {
            assert_eq!(split_visit_line(bad), None, "{bad:?}");
        }
    }

    /// The first `signature` parameter as form_urlencoded reads it, decoding every query.
    fn decoded_signature(query: &str) -> Option<String> {
        form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "signature")
            .map(|(_, value)| value.into_owned())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A query read as it is when nothing in it is encoded gives what decoding it would, pairs empty, repeated,
        /// without a value or with several `=` included. (One with `%` or `+` is decoded by form_urlencoded, as
        /// the reference is: generated too, so that the choice between the two ways is tested.)
        #[test]
        fn the_signature_is_what_decoding_gives(
            pairs in prop::collection::vec(
                ("(signature|signatur|signature2|Signature|sig%6Eature|s\\+|)", "[A-Za-z0-9_=+%2BD-]{0,12}", any::<bool>()),
                0..5,
            ),
        ) {
            let query = pairs
                .iter()
                .map(|(name, value, with_value)| if *with_value { format!("{name}={value}") } else { name.clone() })
                .collect::<Vec<_>>()
                .join("&");
            prop_assert_eq!(signature(&query), decoded_signature(&query), "{}", query);
        }

        /// The common host's shortcut gives what the general normalization gives, for hosts the shortcut takes
        /// (lowercase names) and for those it leaves (ports, uppercase, dots, whitespace, brackets, lengths).
        #[test]
        fn a_plain_hosts_shortcut_agrees(host in "[ \\ta-zA-Z0-9._:\\[\\]-]{0,12}|[a-z.]{250,256}") {
            prop_assert_eq!(normalize_request_host(&host), normalize_other_host(&host), "{}", host);
        }
    }

    fn persistent(code: &str) -> Route {
        Route::Persistent { code: code.into() }
    }

    #[test]
    fn persistent_links() {
        assert_eq!(
            route("GET", "/Promo_2024-x", None),
            persistent("promo_2024-x")
        );
        assert_eq!(route("HEAD", "/abc", Some("utm=1")), persistent("abc"));
        assert_eq!(route("GET", "/a", None), persistent("a"));
    }

    #[test]
    fn not_links() {
        for path in [
            "/",
            "",
            "/favicon.ico",
            "/a/b",
            "/abc/",
            "/%61bc",
            "/e/",
            "/ab c",
        ] {
            assert_eq!(route("GET", path, None), Route::Fallback, "{path}");
        }
        let long = format!("/{}", "a".repeat(MAX_SHORT_CODE_LEN + 1));
        assert_eq!(route("GET", &long, None), Route::Fallback);
        let longest = format!("/{}", "a".repeat(MAX_SHORT_CODE_LEN));
        assert!(matches!(
            route("GET", &longest, None),
            Route::Persistent { .. }
        ));
    }

    #[test]
    fn dynamic_links() {
        let id = "0B7C6A1E-7F39-4C55-9A55-2D1C1F5E8A10";
        assert_eq!(
            route(
                "GET",
                &format!("/e/{id}"),
                Some("a=1&signature=AQ-_x%2Bz&signature=other")
            ),
            Route::Dynamic {
                group_id: id.to_ascii_lowercase(),
                token: Some("AQ-_x+z".into()),
            }
        );
        assert_eq!(
            route("HEAD", &format!("/e/{id}"), None),
            Route::Dynamic {
                group_id: id.to_ascii_lowercase(),
                token: None
            }
        );
        assert_eq!(
            route("GET", "/e/not-a-uuid!", Some("signature=x")),
            Route::Fallback
        );
        assert_eq!(
            route("GET", &format!("/e/{id}/x"), Some("signature=x")),
            Route::Fallback
        );
    }

    #[test]
    fn methods() {
        assert_eq!(route("POST", SYNC_PATH, None), Route::Sync);
        assert_eq!(route("GET", SYNC_PATH, None), Route::Fallback);
        assert_eq!(
            route("POST", "/Abc", None),
            Route::Unlock { code: "abc".into() }
        );
        assert_eq!(route("POST", "/e/x", None), Route::MethodNotAllowed);
        assert_eq!(route("POST", "/", None), Route::MethodNotAllowed);
        assert_eq!(route("PUT", SYNC_PATH, None), Route::MethodNotAllowed);
        assert_eq!(route("OPTIONS", "/", None), Route::MethodNotAllowed);
    }

    #[test]
    fn urls() {
        assert_eq!(
            split_url("https://go.example.com/abc?x=1#f"),
            ("go.example.com", "/abc", Some("x=1"))
        );
        assert_eq!(split_url("http://h:8787"), ("h:8787", "/", None));
        assert_eq!(
            split_url("http://h?signature=a/b"),
            ("h", "/", Some("signature=a/b"))
        );
        assert_eq!(split_url("http://h/e/g?"), ("h", "/e/g", Some("")));
    }

    #[test]
    fn hosts() {
        assert_eq!(
            normalize_request_host("Go.Example.COM").as_deref(),
            Some("go.example.com")
        );
        assert_eq!(
            normalize_request_host("go.example.com:8787").as_deref(),
            Some("go.example.com")
        );
        assert_eq!(
            normalize_request_host("go.example.com.").as_deref(),
            Some("go.example.com")
        );
        assert_eq!(normalize_request_host("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(normalize_request_host("[::1]").as_deref(), Some("[::1]"));
        assert_eq!(normalize_request_host(""), None);
        assert_eq!(normalize_request_host("a b"), None);
        assert_eq!(normalize_request_host("evil:1:link"), None);
        assert_eq!(normalize_request_host("evil:1:2"), None);
        assert_eq!(normalize_request_host("[::1"), None);
        let longest = "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]";
        assert_eq!(normalize_request_host(longest).as_deref(), Some(longest));
        let huge = format!("[{}]", ":".repeat(4000));
        assert_eq!(normalize_request_host(&huge), None, "bounded like a name");
    }
}
