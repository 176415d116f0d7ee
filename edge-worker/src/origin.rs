//! The origin's internal API as the worker uses it (`/internal/v1/…`, `Authorization: Bearer <ORIGIN_SECRET>`):
//! the KV-miss lookup of a link and the click reports. Plain Rust: URLs, and what an answer means; the shell does
//! the HTTP calls.
//!
//! - `GET {ORIGIN_URL}/internal/v1/links/{host}/{code}` → `200` a [`ResolvedLink`] (the link record and its
//!   group's record), `404` unknown.
//! - `POST {ORIGIN_URL}/internal/v1/clicks` with `{"events":[…]}` → `200 {"stored":n}`.
//! - `POST {ORIGIN_URL}/internal/v1/password-attempts` (and `…/give-back`): a protected link's throttle
//!   ([`crate::password`]).

use kv_model::{GroupRecord, LinkRecord, ResolvedLink};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// How long a visitor may wait for the origin on a KV miss before getting the fallback. Short: the origin is only
/// asked about links created seconds ago, and a slow origin must not make unknown codes slow.
pub const LOOKUP_TIMEOUT_MS: u64 = 2_000;

/// How long a click report may take. It runs after the response (`wait_until`), so nobody waits on it.
pub const CLICKS_TIMEOUT_MS: u64 = 5_000;

/// KV expiry (seconds) of a link record the worker writes after a KV miss. The publisher writes the same key
/// without expiry; if this provisional copy ever lands after a newer published value (a race between the two
/// writers), it expires and the next miss asks the origin again, so a stale record cannot stick. 60 s is the
/// shortest expiry KV accepts.
pub const FALLBACK_RECORD_TTL_SECONDS: u64 = 60;

/// Where the origin is and the secret it expects. Both must be set for the worker to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    base: String,
    secret: String,
}

impl Origin {
    /// The origin from the `ORIGIN_URL` variable and `ORIGIN_SECRET` secret; `None` (no calls to the origin) when
    /// either is unset or empty, or the URL is not `http(s)://…`.
    pub fn from_vars(url: Option<&str>, secret: Option<&str>) -> Option<Origin> {
        let url = url.map(str::trim).filter(|u| !u.is_empty())?;
        let secret = secret.map(str::trim).filter(|s| !s.is_empty())?;
        let lower = url.to_ascii_lowercase();
        let scheme_len = ["https://", "http://"]
            .iter()
            .find(|p| lower.starts_with(**p))?
            .len();
        let base = url.trim_end_matches('/');
        (base.len() > scheme_len).then(|| Origin {
            base: base.to_owned(),
            secret: secret.to_owned(),
        })
    }

    /// The lookup URL of the link `code` on `host` (both as the worker normalised them).
    pub fn link_url(&self, host: &str, code: &str) -> String {
        format!(
            "{}/internal/v1/links/{}/{}",
            self.base,
            encode_segment(host),
            encode_segment(code)
        )
    }

    /// The click report URL.
    pub fn clicks_url(&self) -> String {
        format!("{}/internal/v1/clicks", self.base)
    }

    /// The password-attempt reservation URL (`crate::password`).
    pub fn password_attempts_url(&self) -> String {
        format!("{}/internal/v1/password-attempts", self.base)
    }

    /// The URL giving a reserved password attempt back.
    pub fn give_back_url(&self) -> String {
        format!("{}/internal/v1/password-attempts/give-back", self.base)
    }

    /// The secret, as the key of the password cookies' HMAC (`crate::password`).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The `Authorization` header value.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.secret)
    }
}

/// Everything but RFC 3986's unreserved characters (`ALPHA DIGIT - . _ ~`) is percent-encoded in a path segment.
/// Hosts and codes are already restricted to safe characters by the router; an IPv6 host's brackets and colons
/// are the exception this covers.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// Why a call to the origin gave no usable answer. The visitor gets the fallback (or the click waits for the next
/// flush) either way; this is what the worker's log line says ([`crate::log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// An HTTP status the call does not expect (e.g. `401`: the worker's `ORIGIN_SECRET` is not the origin's
    /// `INTERNAL_API_SECRET`; `5xx`: the origin is failing).
    Status(u16),
    /// A `200` whose body is not a version-1 record.
    InvalidBody,
    /// No answer within the call's timeout (the request was aborted).
    Timeout,
    /// No HTTP answer at all: connection refused or reset, DNS, a body that could not be read.
    Transport,
    /// The request could not even be made: an `ORIGIN_URL` or `ORIGIN_SECRET` the runtime does not accept in a URL
    /// or header.
    Request,
}

/// What the origin said about a link the worker missed in KV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The link exists: serve this record (and write it to KV). Boxed: with the smart-link fields the record is
    /// far larger than the other answers.
    Found(Box<ResolvedLink>),
    /// The origin does not know the link: the domain's fallback.
    NotFound,
    /// Any other answer (5xx, 401, a body that is not a version-1 record), a timeout or no connection: the
    /// domain's fallback, as if the link were unknown. Never an error page; the shell logs why.
    Failed(Failure),
}

/// Reads the origin's answer to a link lookup: status and body, or why there was none ([`Failure::Timeout`],
/// [`Failure::Transport`]).
pub fn lookup_answer(answer: Result<(u16, &str), Failure>) -> Lookup {
    match answer {
        Ok((200, body)) => resolved(body).map_or(Lookup::Failed(Failure::InvalidBody), |r| {
            Lookup::Found(Box::new(r))
        }),
        Ok((404, _)) => Lookup::NotFound,
        Ok((status, _)) => Lookup::Failed(Failure::Status(status)),
        Err(failure) => Lookup::Failed(failure),
    }
}

/// The origin's answer read as its link record (whose parser skips `group`), then for its `group` (this one
/// skipping the rest): the record's parser is the one KV reads use already, so the answer adds no second copy of
/// it to the wasm. Two passes over a few hundred bytes, on a KV miss only.
fn resolved(body: &str) -> serde_json::Result<ResolvedLink> {
    #[derive(serde::Deserialize)]
    struct Group {
        #[serde(default)]
        group: Option<GroupRecord>,
    }
    let record: LinkRecord = crate::json_record::parse(body)?;
    let Group { group } = crate::json_record::parse(body)?;
    Ok(ResolvedLink::new(record, group))
}

/// A link's group in the origin's answer, for a link whose group KV does not have: `Ok(Some(record))`; `Ok(None)`
/// when the origin has none (a `404`, or an answer without a group: the link redirects without rules, as when KV
/// has none); `Err` when the origin failed (timeout, 5xx, no connection, a body that is not a record), which is not
/// an absence: the isolate's last good copy of the group, else the fallback, never a redirect past its rules.
pub fn link_group(lookup: Lookup) -> Result<Option<GroupRecord>, Failure> {
    match lookup {
        Lookup::Found(resolved) => Ok(resolved.group),
        Lookup::NotFound => Ok(None),
        Lookup::Failed(failure) => Err(failure),
    }
}

/// What to do with a batch of click events after posting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The origin took it.
    Delivered,
    /// The origin refused it for good (4xx other than 408/429): retrying the same batch cannot help, so drop it.
    Rejected(Failure),
    /// 5xx, 408, 429, timeout or no connection: keep the events for the next flush.
    Retry(Failure),
}

/// Reads the origin's answer to a click report: its status, or why there was none.
pub fn clicks_answer(status: Result<u16, Failure>) -> Delivery {
    match status {
        Ok(s) if (200..300).contains(&s) => Delivery::Delivered,
        Ok(s @ (408 | 429)) => Delivery::Retry(Failure::Status(s)),
        Ok(s) if (400..500).contains(&s) => Delivery::Rejected(Failure::Status(s)),
        Ok(s) => Delivery::Retry(Failure::Status(s)),
        Err(failure) => Delivery::Retry(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_model::LinkRecord;

    #[test]
    fn configuration() {
        let o = Origin::from_vars(Some(" http://127.0.0.1:8080/ "), Some("s3cret")).unwrap();
        assert_eq!(
            o.link_url("go.example.com", "abc"),
            "http://127.0.0.1:8080/internal/v1/links/go.example.com/abc"
        );
        assert_eq!(o.clicks_url(), "http://127.0.0.1:8080/internal/v1/clicks");
        assert_eq!(o.authorization(), "Bearer s3cret");
        assert_eq!(
            o.password_attempts_url(),
            "http://127.0.0.1:8080/internal/v1/password-attempts"
        );
        assert_eq!(
            o.give_back_url(),
            "http://127.0.0.1:8080/internal/v1/password-attempts/give-back"
        );
        let sub = Origin::from_vars(Some("https://origin.example/api//"), Some("s")).unwrap();
        assert_eq!(
            sub.clicks_url(),
            "https://origin.example/api/internal/v1/clicks"
        );
        for (url, secret) in [
            (None, Some("s")),
            (Some("http://o"), None),
            (Some(""), Some("s")),
            (Some("http://o"), Some(" ")),
            (Some("ftp://o"), Some("s")),
            (Some("o.example"), Some("s")),
            (Some("https://"), Some("s")),
        ] {
            assert_eq!(Origin::from_vars(url, secret), None, "{url:?} {secret:?}");
        }
    }

    #[test]
    fn segments_are_encoded() {
        let o = Origin::from_vars(Some("http://o"), Some("s")).unwrap();
        assert_eq!(
            o.link_url("[::1]", "a_b-c"),
            "http://o/internal/v1/links/%5B%3A%3A1%5D/a_b-c"
        );
        assert_eq!(
            o.link_url("h.example", "x~y z/é"),
            "http://o/internal/v1/links/h.example/x~y%20z%2F%C3%A9"
        );
    }

    #[test]
    fn lookups() {
        let body =
            r#"{"v":1,"long_url":"https://d.example/","group_id":"g","is_active":true,"new":1}"#;
        let link = LinkRecord::new("https://d.example/", "g", true);
        assert_eq!(
            lookup_answer(Ok((200, body))),
            Lookup::Found(Box::new(ResolvedLink::new(link.clone(), None)))
        );
        let with_group = r#"{"v":1,"long_url":"https://d.example/","group_id":"g","is_active":true,
            "group":{"v":1,"key":"k","settings":{"analytics":{"enabled":true}}}}"#;
        let Lookup::Found(resolved) = lookup_answer(Ok((200, with_group))) else {
            panic!("a link with its group is found");
        };
        // The link record made from the answer carries its group's settings, as a published one does.
        let link_record = resolved.link();
        assert!(
            link_record
                .group_settings
                .as_ref()
                .is_some_and(|s| s.analytics.enabled)
        );
        assert_eq!(
            LinkRecord {
                group_settings: None,
                ..link_record
            },
            link
        );
        let group = resolved.group.expect("the group");
        assert_eq!(group.key, "k");
        assert!(group.settings.analytics.enabled);
        assert_eq!(lookup_answer(Ok((404, "{}"))), Lookup::NotFound);
        let v2 = r#"{"v":2,"long_url":"https://d/","group_id":"g","is_active":true}"#;
        for (answer, failure) in [
            (Err(Failure::Timeout), Failure::Timeout),
            (Err(Failure::Transport), Failure::Transport),
            (Ok((200, "not json")), Failure::InvalidBody),
            (Ok((200, v2)), Failure::InvalidBody),
            (Ok((401, "")), Failure::Status(401)),
            (Ok((500, body)), Failure::Status(500)),
            (Ok((503, "")), Failure::Status(503)),
        ] {
            assert_eq!(lookup_answer(answer), Lookup::Failed(failure), "{answer:?}");
        }
    }

    #[test]
    fn a_link_group_from_the_origin() {
        let with_group = r#"{"v":1,"long_url":"https://d.example/","group_id":"g","is_active":true,
            "group":{"v":1,"key":"k","settings":{}}}"#;
        let group = link_group(lookup_answer(Ok((200, with_group))));
        assert_eq!(group.map(|g| g.map(|g| g.key)), Ok(Some("k".into())));
        let without = r#"{"v":1,"long_url":"https://d.example/","group_id":"g","is_active":true}"#;
        // The origin has no group for it: no rules, as when KV has none.
        assert_eq!(link_group(lookup_answer(Ok((200, without)))), Ok(None));
        assert_eq!(link_group(lookup_answer(Ok((404, "")))), Ok(None));
        // A failure is not an absence: the caller uses the last good copy, else the fallback.
        for (answer, failure) in [
            (Err(Failure::Timeout), Failure::Timeout),
            (Err(Failure::Transport), Failure::Transport),
            (Ok((503, "")), Failure::Status(503)),
            (Ok((500, without)), Failure::Status(500)),
            (Ok((200, "<html>")), Failure::InvalidBody),
        ] {
            assert_eq!(
                link_group(lookup_answer(answer)),
                Err(failure),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn deliveries() {
        assert_eq!(clicks_answer(Ok(200)), Delivery::Delivered);
        for s in [400, 401, 413] {
            assert_eq!(clicks_answer(Ok(s)), Delivery::Rejected(Failure::Status(s)));
        }
        for s in [408, 429, 500, 503] {
            assert_eq!(clicks_answer(Ok(s)), Delivery::Retry(Failure::Status(s)));
        }
        for f in [Failure::Timeout, Failure::Transport, Failure::Request] {
            assert_eq!(clicks_answer(Err(f)), Delivery::Retry(f));
        }
    }
}
