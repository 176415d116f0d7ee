//! The worker's log lines: one JSON object on one line for each failure the worker absorbs instead of showing it
//! to a visitor (a fallback, a click kept for later, a refused sync request). Plain Rust, so what a line says is
//! tested on the host; the shell writes it with `console.error`/`console.warn`, which Workers Logs stores
//! (`[observability]` in wrangler.toml) and `wrangler tail` shows.
//!
//! Every line is `{"event":"<name>", …fields}` with a fixed event name, so a query on `event` finds every
//! occurrence of one kind of failure:
//!
//! | event | fields | when |
//! |---|---|---|
//! | `origin_lookup_failed` | `host`, `short_code`, `failure`, `status`? | the KV-miss lookup got no usable answer (the visitor got the fallback) |
//! | `origin_clicks_failed` | `failure`, `status`?, `events`, `action` (`retry`/`drop`) | a click report was not taken |
//! | `kv_read_failed` | `key`, `error`, `suppressed` | a KV read failed (the last good copy served, or a fallback; nothing cached); at most one a minute per isolate, `suppressed` counting the failures left out since the previous line |
//! | `kv_write_failed` | `key`, `op` (`put`/`delete`), `via` (`write_back`/`sync`), `error` | a KV write failed |
//! | `kv_binding_missing` | `binding`, `via` | the `SHORTLINK_KV` binding is not configured |
//! | `sync_refused` | `status`, `reason` | the sync route answered 400 or 401 |
//! | `click_queue_send_failed` | `error`, `action` (`direct`/`drop`) | a click event could not be sent to the click queue |
//! | `queue_clicks_failed` | `failure`, `status`?, `events`, `action` (`retry`/`dead_letter`) | the queue consumer could not hand a batch to the origin |
//! | `dead_letter_send_failed` | `error`, `events` | refused events could not be sent to the dead-letter queue (retried instead) |
//!
//! `failure` is `status` (then `status` holds the HTTP status: `401` means the worker's `ORIGIN_SECRET` is not the
//! origin's `INTERNAL_API_SECRET`), `timeout`, `transport` (no HTTP answer), `invalid_body` (a `200` that is not a
//! version-1 record) or `request` (the runtime refused to build the request from `ORIGIN_URL`/`ORIGIN_SECRET`).
//!
//! **Never visitor data.** No line carries a visitor's IP address, User-Agent, Referer, country, cookies or the
//! request's URL or query: only what the operator's own records name (host, short code, KV key, group id), the
//! origin's status, and error texts of the platform (shortened to [`MAX_TEXT_CHARS`]). The constructors below
//! take no visitor input, so no caller can add any.

use crate::click_queue::BatchAction;
use crate::origin::Failure;

/// Longest error text or key in a line (characters); longer ones are cut and end with `…`. Lines stay small, and
/// an unexpected error text cannot flood the logs.
pub const MAX_TEXT_CHARS: usize = 200;

/// The shortest time between two lines of a failure that can repeat on every request ([`Throttle`]): a minute.
pub const THROTTLE_INTERVAL_MS: u64 = 60_000;

/// Lets one line of a kind through per [`THROTTLE_INTERVAL_MS`] and counts the others. A KV read failure is absorbed
/// (the last good copy of the record is served, or the visitor gets a fallback) and comes again on the next
/// request, since nothing is cached: when KV fails under load that was a line per request. One line a minute per
/// isolate, carrying how many were left out, says the same to the operator. The shell keeps one per kind of line
/// per isolate; the clock is a parameter, as in [`crate::cache`].
#[derive(Debug, Default)]
pub struct Throttle {
    /// When the next line may be written (UNIX ms); 0 before the first.
    next_at: u64,
    /// Failures left out since the last line written.
    suppressed: u64,
}

impl Throttle {
    /// A throttle that lets the first line through.
    pub const fn new() -> Self {
        Throttle {
            next_at: 0,
            suppressed: 0,
        }
    }

    /// A failure happened at `now_ms`: `Some(n)` to write its line now, `n` being how many were left out since
    /// the previous one; `None` to leave it out (it is counted).
    pub fn admit(&mut self, now_ms: u64) -> Option<u64> {
        if now_ms < self.next_at {
            self.suppressed = self.suppressed.saturating_add(1);
            return None;
        }
        self.next_at = now_ms.saturating_add(THROTTLE_INTERVAL_MS);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// The console method a line goes to (Workers Logs keeps it as the line's level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Refused requests: the caller's mistake, not the worker's.
    Warn,
    /// The worker could not do its job: the origin or KV failed, or the configuration is wrong.
    Error,
}

/// One log line: its level and its text (a JSON object, no newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Where it goes.
    pub level: Level,
    /// The JSON text.
    pub text: String,
}

/// A KV write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvWrite {
    /// `put`.
    Put,
    /// `delete`.
    Delete,
}

/// Who wrote to KV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A visit: the read of a record, or the write-back of a link the origin supplied on a KV miss.
    Visit,
    /// The sync route (the origin's publisher).
    Sync,
}

/// The KV-miss lookup of `short_code` on `host` got no usable answer: the visitor got the domain's fallback.
pub fn origin_lookup_failed(host: &str, short_code: &str, failure: Failure) -> Line {
    let mut fields = vec![
        ("host", Field::from(short(host))),
        ("short_code", Field::from(short(short_code))),
    ];
    fields.extend(failure_fields(failure));
    line(Level::Error, "origin_lookup_failed", fields)
}

/// The origin did not answer a protected link's attempt reservation: the visitor was told the password cannot be
/// checked right now (never let through unchecked). No password, address or cookie in the line.
pub fn origin_password_attempt_failed(host: &str, short_code: &str, failure: Failure) -> Line {
    let mut fields = vec![
        ("host", Field::from(short(host))),
        ("short_code", Field::from(short(short_code))),
    ];
    fields.extend(failure_fields(failure));
    line(Level::Error, "origin_password_attempt_failed", fields)
}

/// A protected link's stored password hash is not one this worker can read: nobody can open the link (its form
/// says the password cannot be checked), until the origin publishes a readable hash.
pub fn password_hash_unusable(host: &str, short_code: &str) -> Line {
    line(
        Level::Error,
        "password_hash_unusable",
        vec![
            ("host", Field::from(short(host))),
            ("short_code", Field::from(short(short_code))),
        ],
    )
}

/// A report of `events` click events was not taken: kept for the next flush (`retry`) or dropped for good
/// (`drop`, a 4xx such as 401: the same batch would be refused again).
pub fn origin_clicks_failed(failure: Failure, events: usize, retry: bool) -> Line {
    let mut fields = failure_fields(failure);
    fields.push(("events", Field::from(events)));
    fields.push(("action", Field::from(if retry { "retry" } else { "drop" })));
    line(Level::Error, "origin_clicks_failed", fields)
}

/// A KV read of `key` failed: the request used the isolate's last good copy of the record, or fell back, and
/// nothing was cached (the next request reads again). Written through a [`Throttle`]: `suppressed` is how many
/// failed reads of the isolate were not logged since the previous line (of any key).
pub fn kv_read_failed(key: &str, error: &str, suppressed: u64) -> Line {
    line(
        Level::Error,
        "kv_read_failed",
        vec![
            ("key", Field::from(short(key))),
            ("error", Field::from(short(error))),
            ("suppressed", Field::from(suppressed)),
        ],
    )
}

/// A KV write of `key` failed. A write-back is only an optimisation (the next miss asks the origin again); a sync
/// write failure answers 503 and the publisher retries the batch.
pub fn kv_write_failed(key: &str, op: KvWrite, via: Via, error: &str) -> Line {
    let op = match op {
        KvWrite::Put => "put",
        KvWrite::Delete => "delete",
    };
    let via = match via {
        Via::Visit => "write_back",
        Via::Sync => "sync",
    };
    line(
        Level::Error,
        "kv_write_failed",
        vec![
            ("key", Field::from(short(key))),
            ("op", Field::from(op)),
            ("via", Field::from(via)),
            ("error", Field::from(short(error))),
        ],
    )
}

/// The KV binding is missing from the Worker's configuration: every record reads as failed and every sync
/// request answers 503.
pub fn kv_binding_missing(binding: &str, via: Via) -> Line {
    let via = match via {
        Via::Visit => "visit",
        Via::Sync => "sync",
    };
    line(
        Level::Error,
        "kv_binding_missing",
        vec![("binding", Field::from(binding)), ("via", Field::from(via))],
    )
}

/// The sync route refused a request with `status` (400 or 401) for `reason` (the error code of its answer, or
/// for a 401 whether the token was missing or wrong; never the token).
pub fn sync_refused(status: u16, reason: &str) -> Line {
    line(
        Level::Warn,
        "sync_refused",
        vec![
            ("status", Field::from(status)),
            ("reason", Field::from(short(reason))),
        ],
    )
}

/// A click event could not be sent to the click queue: it went to the isolate's buffer for a direct report
/// (`direct`), or was lost (`drop`: the origin is not configured either).
pub fn click_queue_send_failed(error: &str, direct: bool) -> Line {
    line(
        Level::Error,
        "click_queue_send_failed",
        vec![
            ("error", Field::from(short(error))),
            (
                "action",
                Field::from(if direct { "direct" } else { "drop" }),
            ),
        ],
    )
}

/// The queue consumer could not hand a batch of `events` click events to the origin. `failure` is the origin's
/// (as for [`origin_clicks_failed`]), or `None` when the consumer has no origin configured (`no_origin`) or the
/// messages are not click events (`invalid_message`, sent to the dead-letter queue).
pub fn queue_clicks_failed(failure: Option<Failure>, events: usize, action: BatchAction) -> Line {
    let mut fields = match failure {
        Some(failure) => failure_fields(failure),
        None if action == BatchAction::DeadLetter => {
            vec![("failure", Field::from("invalid_message"))]
        }
        None => vec![("failure", Field::from("no_origin"))],
    };
    fields.push(("events", Field::from(events)));
    let action = match action {
        BatchAction::Ack => "ack",
        BatchAction::Retry => "retry",
        BatchAction::DeadLetter => "dead_letter",
    };
    fields.push(("action", Field::from(action)));
    line(Level::Error, "queue_clicks_failed", fields)
}

/// Refused click events could not be sent to the dead-letter queue (its binding is missing or the send failed):
/// they are retried instead, and Queues moves them to the consumer's dead-letter queue after `max_retries`.
pub fn dead_letter_send_failed(error: &str, events: usize) -> Line {
    line(
        Level::Error,
        "dead_letter_send_failed",
        vec![
            ("error", Field::from(short(error))),
            ("events", Field::from(events)),
        ],
    )
}

/// `failure` and, for an HTTP status, `status`.
fn failure_fields(failure: Failure) -> Vec<(&'static str, Field)> {
    match failure {
        Failure::Status(status) => vec![
            ("failure", Field::from("status")),
            ("status", Field::from(status)),
        ],
        Failure::InvalidBody => vec![("failure", Field::from("invalid_body"))],
        Failure::Timeout => vec![("failure", Field::from("timeout"))],
        Failure::Transport => vec![("failure", Field::from("transport"))],
        Failure::Request => vec![("failure", Field::from("request"))],
    }
}

/// `text`, cut to [`MAX_TEXT_CHARS`] characters.
fn short(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A field's value: a text or a count. Not `serde_json::Value`, whose serializer (with float formatting) and map
/// type would be in the wasm for these lines alone (BENCHMARKS.md, "Cold start").
enum Field {
    Text(String),
    Number(u64),
}

impl From<&str> for Field {
    fn from(text: &str) -> Self {
        Field::Text(text.to_owned())
    }
}

impl From<String> for Field {
    fn from(text: String) -> Self {
        Field::Text(text)
    }
}

impl From<u64> for Field {
    fn from(n: u64) -> Self {
        Field::Number(n)
    }
}

impl From<u16> for Field {
    fn from(n: u16) -> Self {
        Field::Number(n.into())
    }
}

impl From<usize> for Field {
    fn from(n: usize) -> Self {
        Field::Number(n as u64)
    }
}

/// `text` as a JSON string, escaped by serde_json's string serializer (which cannot fail on a `str`).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `{"event":…,<fields in order>}`: `event` first, so the lines read well in a terminal too. JSON string escaping
/// keeps it one line whatever the texts contain.
fn line(level: Level, event: &str, fields: Vec<(&str, Field)>) -> Line {
    let mut text = String::from("{\"event\":");
    text.push_str(&json_string(event));
    for (name, value) in fields {
        text.push(',');
        text.push_str(&json_string(name));
        text.push(':');
        match value {
            Field::Text(t) => text.push_str(&json_string(&t)),
            Field::Number(n) => text.push_str(&n.to_string()),
        }
    }
    text.push('}');
    Line { level, text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parsed(line: &Line) -> Value {
        assert!(!line.text.contains('\n'), "one line: {}", line.text);
        assert!(line.text.starts_with("{\"event\":"), "{}", line.text);
        serde_json::from_str(&line.text).expect("a JSON object")
    }

    #[test]
    fn origin_lookups() {
        let l = origin_lookup_failed("go.example.com", "abc", Failure::Status(401));
        assert_eq!(l.level, Level::Error);
        assert_eq!(
            l.text,
            r#"{"event":"origin_lookup_failed","host":"go.example.com","short_code":"abc","failure":"status","status":401}"#
        );
        for (failure, name) in [
            (Failure::Timeout, "timeout"),
            (Failure::Transport, "transport"),
            (Failure::InvalidBody, "invalid_body"),
            (Failure::Request, "request"),
        ] {
            let v = parsed(&origin_lookup_failed("h", "c", failure));
            assert_eq!(
                v,
                json!({"event": "origin_lookup_failed", "host": "h", "short_code": "c", "failure": name})
            );
        }
    }

    #[test]
    fn click_reports() {
        let v = parsed(&origin_clicks_failed(Failure::Status(401), 3, false));
        assert_eq!(
            v,
            json!({"event": "origin_clicks_failed", "failure": "status", "status": 401, "events": 3,
                   "action": "drop"})
        );
        let v = parsed(&origin_clicks_failed(Failure::Timeout, 1000, true));
        assert_eq!(
            v,
            json!({"event": "origin_clicks_failed", "failure": "timeout", "events": 1000, "action": "retry"})
        );
    }

    #[test]
    fn click_queue() {
        assert_eq!(
            parsed(&click_queue_send_failed("Queue send failed: 500", true)),
            json!({"event": "click_queue_send_failed", "error": "Queue send failed: 500", "action": "direct"})
        );
        assert_eq!(
            parsed(&click_queue_send_failed("x", false))["action"],
            "drop"
        );
        assert_eq!(
            parsed(&queue_clicks_failed(
                Some(Failure::Status(503)),
                100,
                BatchAction::Retry
            )),
            json!({"event": "queue_clicks_failed", "failure": "status", "status": 503, "events": 100,
                   "action": "retry"})
        );
        assert_eq!(
            parsed(&queue_clicks_failed(None, 2, BatchAction::Retry))["failure"],
            "no_origin"
        );
        assert_eq!(
            parsed(&queue_clicks_failed(None, 2, BatchAction::DeadLetter)),
            json!({"event": "queue_clicks_failed", "failure": "invalid_message", "events": 2,
                   "action": "dead_letter"})
        );
        assert_eq!(
            parsed(&dead_letter_send_failed("no binding CLICK_DEAD_LETTERS", 7)),
            json!({"event": "dead_letter_send_failed", "error": "no binding CLICK_DEAD_LETTERS", "events": 7})
        );
    }

    #[test]
    fn kv() {
        let v = parsed(&kv_read_failed("link:h:c", "KV GET failed: 503", 41));
        assert_eq!(
            v,
            json!({"event": "kv_read_failed", "key": "link:h:c", "error": "KV GET failed: 503",
                   "suppressed": 41})
        );
        let l = kv_write_failed("group:g", KvWrite::Delete, Via::Sync, "boom");
        assert_eq!(l.level, Level::Error);
        assert_eq!(
            parsed(&l),
            json!({"event": "kv_write_failed", "key": "group:g", "op": "delete", "via": "sync", "error": "boom"})
        );
        let v = parsed(&kv_write_failed("link:h:c", KvWrite::Put, Via::Visit, "x"));
        assert_eq!((&v["op"], &v["via"]), (&json!("put"), &json!("write_back")));
        assert_eq!(
            parsed(&kv_binding_missing("SHORTLINK_KV", Via::Visit)),
            json!({"event": "kv_binding_missing", "binding": "SHORTLINK_KV", "via": "visit"})
        );
    }

    /// A failure on every request of a busy isolate (one every 10 ms for five minutes) writes one line a minute,
    /// each counting the ones left out.
    #[test]
    fn repeated_failures_are_logged_once_a_minute() {
        let mut throttle = Throttle::new();
        let start = 1_800_000_000_000;
        let written: Vec<(u64, u64)> = (0..30_000u64)
            .map(|i| start + i * 10)
            .filter_map(|now| throttle.admit(now).map(|left_out| (now - start, left_out)))
            .collect();
        assert_eq!(
            written,
            [
                (0, 0),
                (60_000, 5_999),
                (120_000, 5_999),
                (180_000, 5_999),
                (240_000, 5_999)
            ]
        );
        // After a quiet spell the next failure is written at once, with what was left out before it.
        assert_eq!(throttle.admit(start + 400_000), Some(5_999));
        assert_eq!(throttle.admit(start + 400_001), None);
    }

    #[test]
    fn sync_refusals_are_warnings() {
        let l = sync_refused(401, "wrong_token");
        assert_eq!(l.level, Level::Warn);
        assert_eq!(
            parsed(&l),
            json!({"event": "sync_refused", "status": 401, "reason": "wrong_token"})
        );
    }

    #[test]
    fn texts_are_escaped_and_cut() {
        // Quotes, newlines and control characters stay inside one JSON string on one line.
        let v = parsed(&kv_read_failed("k", "a \"quoted\"\nsecond line\u{1}", 0));
        assert_eq!(v["error"], "a \"quoted\"\nsecond line\u{1}");
        let long = "é".repeat(MAX_TEXT_CHARS + 50);
        let v = parsed(&kv_read_failed(&long, &long, 0));
        let cut = format!("{}…", "é".repeat(MAX_TEXT_CHARS));
        assert_eq!(v["key"], cut.as_str());
        assert_eq!(v["error"], cut.as_str());
        assert_eq!(short("exactly"), "exactly");
        assert_eq!(
            short(&"x".repeat(MAX_TEXT_CHARS)),
            "x".repeat(MAX_TEXT_CHARS)
        );
    }
}
