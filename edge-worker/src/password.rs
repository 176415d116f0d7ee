//! Password-protected links (issue 25), the plain part: the cookie that remembers a right password, the form's
//! body, and the origin's throttle as the worker asks for it. The shell does the crypto (WebCrypto's PBKDF2 and
//! HMAC, `src/shell/password_io.rs`) and the calls; the page is [`crate::password_form`].
//!
//! The flow: a visitor the group lets through, without a valid cookie for the link, gets the form (never the
//! destination). Posting it reserves an attempt at the origin (10 wrong ones per link and address in 15 minutes,
//! counted there because no isolate sees every attempt), then derives the key with the hash's salt and iterations
//! and compares it in constant time. A right password gives the attempt back, sets the cookie and answers `303` to
//! the same URL, whose `GET` then redirects (and is the click counted); a wrong one shows the form again. The
//! password itself is only ever in the POST body: never in a URL, a log line or a click event.
//!
//! The cookie (`sl_pw`, `Path` the link's path, 24 hours, `HttpOnly; Secure; SameSite=Lax`) is
//! `<expiry, UNIX seconds>.<HMAC-SHA256, base64url>` over the link's host and code, the expiry and the stored
//! password hash: it opens that link only, until it expires or the password changes (a new hash). The HMAC key is
//! the worker's `ORIGIN_SECRET` (which the password flow needs anyway), every message starting with
//! [`COOKIE_LABEL`] so no other use of that secret can yield a valid cookie.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::origin::Failure;

/// The cookie's name. One name for every link: the browser sends each link's only to its path.
pub const COOKIE_NAME: &str = "sl_pw";

/// How long a right password is remembered on that browser for that link.
pub const COOKIE_MAX_AGE_SECONDS: u64 = 24 * 60 * 60;

/// The first line of every signed message: the cookie's purpose and version.
pub const COOKIE_LABEL: &str = "shortlink link-password cookie v1";

/// Longest form body read: `password=` and a 128-character password whose every character is percent-encoded
/// UTF-8 (4 bytes, 12 characters each) fit; anything longer is not a password the link can have.
pub const MAX_FORM_BYTES: usize = 2048;

/// Longest password looked at (the API's own bound); longer ones are wrong without being derived.
pub const MAX_PASSWORD_CHARS: usize = 128;

/// Cookies named [`COOKIE_NAME`] tried per request, at most: a browser sends one per matching path, a forged header
/// cannot make the worker compute many HMACs.
const MAX_COOKIES_TRIED: usize = 4;

/// Bytes of an HMAC-SHA256.
pub const MAC_BYTES: usize = 32;

/// The message a link's cookie signs: the label, the link (host and code as the worker normalised them), the expiry
/// and the stored hash, one per line (none of them can contain a newline: hosts and codes are checked by the
/// router, the hash by its format).
pub fn cookie_message(host: &str, code: &str, expires_s: u64, password_hash: &str) -> String {
    format!("{COOKIE_LABEL}\n{host}\n{code}\n{expires_s}\n{password_hash}")
}

/// A cookie worth checking: its expiry and its MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    /// When it expires (UNIX seconds).
    pub expires_s: u64,
    /// The MAC it carries.
    pub mac: [u8; MAC_BYTES],
}

/// The [`COOKIE_NAME`] cookies of a `Cookie` header that could be valid at `now_s`: well-formed, not expired, not
/// expiring further ahead than the worker ever sets. At most [`MAX_COOKIES_TRIED`].
pub fn presented(cookie_header: &str, now_s: u64) -> Vec<Presented> {
    cookie_header
        .split(';')
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE_NAME).then_some(value)
        })
        .filter_map(|value| {
            let (expires, mac) = value.split_once('.')?;
            let expires_s = expires
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| expires.parse::<u64>().ok())
                .flatten()
                .filter(|e| *e > now_s && *e <= now_s + COOKIE_MAX_AGE_SECONDS)?;
            // 43 characters: 32 bytes in unpadded base64url.
            if mac.len() != 43 {
                return None;
            }
            let mac: [u8; MAC_BYTES] = URL_SAFE_NO_PAD.decode(mac).ok()?.try_into().ok()?;
            Some(Presented { expires_s, mac })
        })
        .take(MAX_COOKIES_TRIED)
        .collect()
}

/// The `Set-Cookie` value remembering a right password: the link's `path` (as the visitor requested it: the
/// browser matches cookie paths case-sensitively), until `expires_s`.
pub fn set_cookie(path: &str, expires_s: u64, mac: &[u8]) -> String {
    format!(
        "{COOKIE_NAME}={expires_s}.{}; Path={path}; Max-Age={COOKIE_MAX_AGE_SECONDS}; HttpOnly; Secure; SameSite=Lax",
        URL_SAFE_NO_PAD.encode(mac)
    )
}

/// The password a form body (`application/x-www-form-urlencoded`) carries: its first `password` field, when it is
/// 1 to [`MAX_PASSWORD_CHARS`] characters. `None` for anything else (no field, empty, too long): wrong without
/// costing a derivation or an attempt.
pub fn form_password(body: &str) -> Option<String> {
    if body.len() > MAX_FORM_BYTES {
        return None;
    }
    form_urlencoded::parse(body.as_bytes())
        .find(|(name, _)| name == "password")
        .map(|(_, value)| value.into_owned())
        .filter(|p| !p.is_empty() && p.chars().count() <= MAX_PASSWORD_CHARS)
}

/// Whether a declared `Content-Length` lets the worker read the body: present and at most [`MAX_FORM_BYTES`].
/// Browsers always declare a form's length; a body that does not is not read at all.
pub fn readable_length(content_length: Option<&str>) -> bool {
    content_length
        .and_then(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|n| n <= MAX_FORM_BYTES)
}

/// What the origin's throttle said about one more attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Check the password; the attempt is counted, reserved at this instant (UNIX µs, to give it back).
    Go(i64),
    /// The visitor has had their attempts: seconds until the next.
    Throttled(u64),
    /// No usable answer (origin unset, down, slow, or refusing us): the password is not checked. Failing open would
    /// let anyone guess without limit while the origin is away.
    Unavailable(Option<Failure>),
}

/// The reservation body for the origin (`POST /internal/v1/password-attempts`), or the give-back's (with `at`).
pub fn attempt_body(host: &str, code: &str, address: &str, at: Option<i64>) -> String {
    // A struct rather than `json!`: a `serde_json::Value` would bring its map type into the wasm.
    #[derive(serde::Serialize)]
    struct Body<'a> {
        host: &'a str,
        code: &'a str,
        address: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        at: Option<i64>,
    }
    serde_json::to_string(&Body {
        host,
        code,
        address,
        at,
    })
    .unwrap_or_default()
}

/// Reads the origin's answer to a reservation: status and body, or why there was none.
pub fn attempt_answer(answer: Result<(u16, &str), Failure>) -> Attempt {
    #[derive(serde::Deserialize)]
    struct Answer {
        allowed: bool,
        at: Option<i64>,
        retry_after: Option<u64>,
    }
    match answer {
        Ok((200, body)) => match serde_json::from_str::<Answer>(body) {
            Ok(Answer {
                allowed: true,
                at: Some(at),
                ..
            }) => Attempt::Go(at),
            Ok(Answer {
                allowed: false,
                retry_after,
                ..
            }) => Attempt::Throttled(retry_after.unwrap_or(60).max(1)),
            _ => Attempt::Unavailable(Some(Failure::InvalidBody)),
        },
        Ok((status, _)) => Attempt::Unavailable(Some(Failure::Status(status))),
        Err(failure) => Attempt::Unavailable(Some(failure)),
    }
}

/// The visitor's address for the throttle: `CF-Connecting-IP` (Cloudflare sets it; local runs and tests send it),
/// when it looks like an address; else one shared placeholder, so visitors without it share one budget rather than
/// get none.
pub fn throttle_address(cf_connecting_ip: Option<&str>) -> String {
    cf_connecting_ip
        .map(str::trim)
        .filter(|a| {
            !a.is_empty()
                && a.len() <= 45
                && a.bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        })
        .unwrap_or("0.0.0.0")
        .to_owned()
}

/// What the isolate remembers of the origin's "wait" answers: at most this many bytes of (link, address) keys.
const WAITING_BUDGET_BYTES: usize = 64 * 1024;

thread_local! {
    /// Per link and visitor address, until when (UNIX ms) the origin said the visitor must wait: until then this
    /// isolate answers their posts itself, so a visitor hammering the form costs the origin one write per window
    /// rather than one per post. Bounded; a visitor evicted early is asked about at the origin again, which says
    /// the same.
    static WAITING: std::cell::RefCell<crate::bounded::BoundedMap> =
        std::cell::RefCell::new(crate::bounded::BoundedMap::new(WAITING_BUDGET_BYTES));
}

fn waiting_key(host: &str, code: &str, address: &str) -> String {
    format!("{host}/{code}|{address}")
}

/// Seconds the visitor at `address` must still wait before trying `host`/`code` again, as the origin last said.
pub fn waiting(host: &str, code: &str, address: &str, now_ms: u64) -> Option<u64> {
    WAITING.with(|w| {
        let until = *w.borrow().get::<u64>(&waiting_key(host, code, address))?;
        (until > now_ms).then(|| (until - now_ms).div_ceil(1000))
    })
}

/// Remembers that the origin told the visitor at `address` to wait `secs` before trying `host`/`code` again.
pub fn must_wait(host: &str, code: &str, address: &str, now_ms: u64, secs: u64) {
    WAITING.with(|w| {
        w.borrow_mut().insert(
            &waiting_key(host, code, address),
            now_ms.saturating_add(secs.saturating_mul(1000)),
            8,
        );
    });
}

/// Where a right password sends the visitor: the same path and query, now with the cookie (`303`, so the browser
/// follows with a `GET`).
pub fn after_unlock(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn cookie(expires_s: u64, mac: &[u8]) -> String {
        format!("{COOKIE_NAME}={expires_s}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    #[test]
    fn cookies_presented() {
        let mac = [7u8; MAC_BYTES];
        let good = cookie(NOW + 60, &mac);
        assert_eq!(
            presented(&format!("a=b; {good}; c=d"), NOW),
            [Presented {
                expires_s: NOW + 60,
                mac
            }]
        );
        for bad in [
            cookie(NOW, &mac),                              // expired this second
            cookie(NOW + COOKIE_MAX_AGE_SECONDS + 1, &mac), // further ahead than ever set
            cookie(NOW + 60, &[7u8; 16]),                   // short MAC
            format!(
                "{COOKIE_NAME}=+{}.{}",
                NOW + 60,
                URL_SAFE_NO_PAD.encode(mac)
            ),
            format!("{COOKIE_NAME}={}", NOW + 60),
            format!("sl_pwx={}", &good[COOKIE_NAME.len() + 1..]),
            format!("{COOKIE_NAME}={}.{}", NOW + 60, "*".repeat(43)),
        ] {
            assert!(presented(&bad, NOW).is_empty(), "{bad}");
        }
        let many = vec![good.clone(); 10].join("; ");
        assert_eq!(presented(&many, NOW).len(), MAX_COOKIES_TRIED);
    }

    #[test]
    fn the_cookie_names_the_link_and_the_hash() {
        let m = cookie_message("go.example", "abc", NOW, "pbkdf2-sha256$1$s$h");
        assert_eq!(
            m,
            "shortlink link-password cookie v1\ngo.example\nabc\n1800000000\npbkdf2-sha256$1$s$h"
        );
        assert_ne!(
            m,
            cookie_message("go.example", "abd", NOW, "pbkdf2-sha256$1$s$h")
        );
        assert_ne!(
            m,
            cookie_message("go.example", "abc", NOW, "pbkdf2-sha256$1$s$i")
        );
        let set = set_cookie("/Abc", NOW + 10, &[0u8; MAC_BYTES]);
        assert_eq!(
            set,
            format!(
                "sl_pw={}.{}; Path=/Abc; Max-Age=86400; HttpOnly; Secure; SameSite=Lax",
                NOW + 10,
                "A".repeat(43)
            )
        );
        // What the worker sets, it reads back.
        let value = set.split(';').next().unwrap();
        assert_eq!(presented(value, NOW).len(), 1);
    }

    #[test]
    fn form_bodies() {
        assert_eq!(
            form_password("password=open+sesame%21").as_deref(),
            Some("open sesame!")
        );
        assert_eq!(
            form_password("x=1&password=%C3%A9t%C3%A9&password=other").as_deref(),
            Some("été")
        );
        let longest = "é".repeat(MAX_PASSWORD_CHARS);
        let encoded: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("password", &longest)
            .finish();
        assert!(encoded.len() <= MAX_FORM_BYTES, "{}", encoded.len());
        assert_eq!(form_password(&encoded), Some(longest));
        for bad in [
            String::new(),
            "password=".into(),
            "pass=x".into(),
            format!("password={}", "a".repeat(MAX_PASSWORD_CHARS + 1)),
            format!("password=a&x={}", "a".repeat(MAX_FORM_BYTES)),
        ] {
            assert_eq!(form_password(&bad), None, "{bad}");
        }
        assert!(readable_length(Some("24")));
        assert!(readable_length(Some(&MAX_FORM_BYTES.to_string())));
        assert!(!readable_length(Some(&(MAX_FORM_BYTES + 1).to_string())));
        assert!(!readable_length(None));
        assert!(!readable_length(Some("-1")));
    }

    #[test]
    fn attempts() {
        assert_eq!(
            attempt_answer(Ok((200, r#"{"allowed":true,"at":1700000000000001}"#))),
            Attempt::Go(1_700_000_000_000_001)
        );
        assert_eq!(
            attempt_answer(Ok((200, r#"{"allowed":false,"retry_after":120}"#))),
            Attempt::Throttled(120)
        );
        for (answer, failure) in [
            (Ok((200, "{}")), Failure::InvalidBody),
            (Ok((200, r#"{"allowed":true}"#)), Failure::InvalidBody),
            (Ok((401, "")), Failure::Status(401)),
            (Ok((503, "")), Failure::Status(503)),
            (Err(Failure::Timeout), Failure::Timeout),
        ] {
            assert_eq!(
                attempt_answer(answer),
                Attempt::Unavailable(Some(failure)),
                "{answer:?}"
            );
        }
        let body: serde_json::Value =
            serde_json::from_str(&attempt_body("h", "c", "203.0.113.9", Some(5))).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"host": "h", "code": "c", "address": "203.0.113.9", "at": 5})
        );
        assert!(!attempt_body("h", "c", "::1", None).contains("\"at\""));
    }

    #[test]
    fn a_visitor_told_to_wait_waits_here() {
        assert_eq!(waiting("h", "c", "192.0.2.1", 1_000), None);
        must_wait("h", "c", "192.0.2.1", 1_000, 90);
        assert_eq!(waiting("h", "c", "192.0.2.1", 1_000), Some(90));
        assert_eq!(waiting("h", "c", "192.0.2.1", 90_500), Some(1));
        assert_eq!(waiting("h", "c", "192.0.2.1", 91_000), None, "over");
        assert_eq!(
            waiting("h", "c", "192.0.2.2", 1_000),
            None,
            "another address"
        );
        assert_eq!(waiting("h", "d", "192.0.2.1", 1_000), None, "another link");
    }

    #[test]
    fn addresses_and_locations() {
        assert_eq!(throttle_address(Some(" 203.0.113.9 ")), "203.0.113.9");
        assert_eq!(throttle_address(Some("2001:db8::1")), "2001:db8::1");
        for bad in [None, Some(""), Some("x\"y"), Some(&*"1".repeat(46))] {
            assert_eq!(throttle_address(bad), "0.0.0.0", "{bad:?}");
        }
        assert_eq!(after_unlock("/abc", Some("a=1")), "/abc?a=1");
        assert_eq!(after_unlock("/abc", Some("")), "/abc");
        assert_eq!(after_unlock("/abc", None), "/abc");
    }
}
