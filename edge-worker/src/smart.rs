//! Smart links at the edge (issue 25): which destination a persistent link's rules give this visitor, with which
//! redirect status, and where an expired link sends visitors. Plain functions of the link record, the visitor
//! facts, the query and the clock; [`crate::decision::decide_persistent`] calls them in the order (the
//! link's own state, then the group's access rules — a blocked visitor never reaches a link rule — then the rules).
//!
//! The rules themselves are evaluated by `link-rules`, the crate the origin validates them with, so the two cannot
//! drift; the operating system comes from its small User-Agent table ([`link_rules::os_of`]), the device from the
//! analytics' ([`crate::visitor::device`]), so a rule on `device` and the statistics agree about a visitor.

use std::borrow::Cow;

use kv_model::{Device, LinkRecord};
use link_rules::{Rule, first_match, os_of, primary_language};

use crate::visitor::{Visitor, device};

/// Most query parameters a `query` condition looks at: the first ones of the visitor's URL. A URL is at most a
/// few KB, so this bounds the work of a hostile query, not a real one.
pub const MAX_QUERY_PAIRS: usize = 64;

/// Whether the link's decision looks at the visitor (its rules do, and its preview card, for crawlers). Such a
/// link's answer depends on more than the URL: the shell reads the visitor facts for it, and an answer kept for
/// the next request is kept under the facts the rules read ([`vary`]).
pub fn needs_visitor(link: &LinkRecord) -> bool {
    !link.rules.is_empty() || link.preview.is_some()
}

/// Whether the isolate's fast path may answer a live link, and keep its answer: not one with a password (the
/// visitor's cookie decides, through WebCrypto) or a preview card (crawlers get a page, not a redirect). Rules and
/// a redirect status are fine: the answer is a redirect decided from the link's record, the visitor facts
/// [`vary`] names and the clock (bounded by [`next_change`]).
pub fn fast_path_ok(link: &LinkRecord) -> bool {
    link.password_hash.is_none() && link.preview.is_none()
}

/// The User-Agent: a rule reads the device or the operating system.
pub const VARY_USER_AGENT: u32 = 1;
/// The country (`request.cf.country`, else `CF-IPCountry`).
pub const VARY_COUNTRY: u32 = 2;
/// The `Accept-Language` header.
pub const VARY_LANGUAGE: u32 = 4;

/// Which request facts besides the URL (which carries the query) the link's rules read, as `VARY_*` bits: the
/// entry module keys a kept answer by exactly these, so a visitor is never given the answer decided for another
/// (`edge-worker/js/entry.js`). 0 for a link without rules.
pub fn vary(link: &LinkRecord) -> u32 {
    link.rules.iter().fold(0, |bits, rule| {
        let w = &rule.when;
        let mut bits = bits;
        if !w.device.is_empty() || !w.os.is_empty() {
            bits |= VARY_USER_AGENT;
        }
        if !w.country.is_empty() {
            bits |= VARY_COUNTRY;
        }
        if !w.language.is_empty() {
            bits |= VARY_LANGUAGE;
        }
        bits
    })
}

/// The first instant after `now_ms` at which a rule's time window opens or closes (UNIX ms): until then the
/// rules' answer to the same request cannot change with the clock. `None` when no window is ahead.
pub fn next_change(link: &LinkRecord, now_ms: i64) -> Option<i64> {
    if link.rules.is_empty() {
        return None;
    }
    window_edge(link, now_ms)
}

/// [`next_change`] for a link with rules, out of line like [`chosen`]: a new isolate's first visit to a plain link
/// does not compile it (0.3 KB of wasm; BENCHMARKS.md, issue 28).
#[inline(never)]
fn window_edge(link: &LinkRecord, now_ms: i64) -> Option<i64> {
    link.rules
        .iter()
        .flat_map(|r| [r.when.after, r.when.before])
        .flatten()
        .filter(|at| *at > now_ms)
        .min()
}

/// The destination of the first rule whose every condition holds for the visitor, else the link's `long_url`.
/// `query` is the visitor's raw query string (without `?`), read only when a rule has a `query` condition.
pub fn destination<'a>(
    link: &'a LinkRecord,
    visitor: &Visitor,
    query: Option<&str>,
    now_ms: i64,
) -> &'a str {
    if link.rules.is_empty() {
        return &link.long_url;
    }
    chosen(link, visitor, query, now_ms)
}

/// [`destination`] for a link with rules. Kept out of line (as are the other rare parts of a decision): V8 compiles
/// each wasm function on its first call, so a function's rare branches are compiled with it by every new isolate's
/// first request, whether or not they run (BENCHMARKS.md, "Cold start").
#[inline(never)]
fn chosen<'a>(
    link: &'a LinkRecord,
    visitor: &Visitor,
    query: Option<&str>,
    now_ms: i64,
) -> &'a str {
    let pairs: Vec<(Cow<'_, str>, Cow<'_, str>)> = if reads_query(&link.rules) {
        query
            .map(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .take(MAX_QUERY_PAIRS)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (&**k, &**v)).collect();
    let ua = visitor.user_agent.as_str();
    let device = match device(ua) {
        Device::Mobile => Some(link_rules::Device::Mobile),
        Device::Tablet => Some(link_rules::Device::Tablet),
        Device::Desktop => Some(link_rules::Device::Desktop),
        Device::Other => None,
    };
    let facts = link_rules::Visitor {
        country: visitor.country.as_deref(),
        device,
        os: Some(os_of(ua)),
        language: primary_language(&visitor.accept_language),
        query: &pairs,
        now_ms,
    };
    first_match(&link.rules, &facts).map_or(&link.long_url, |r| &r.to)
}

/// Whether any rule has a `query` condition.
fn reads_query(rules: &[Rule]) -> bool {
    rules.iter().any(|r| !r.when.query.is_empty())
}

/// The redirect's status: the link's `redirect_status` when it is one of 301, 302, 307 and 308 (the origin allows
/// no other), else 302.
pub fn redirect_status(link: &LinkRecord) -> u16 {
    link.redirect_status
        .filter(|s| matches!(s, 301 | 302 | 307 | 308))
        .unwrap_or(302)
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_rules::{Conditions, Os};

    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36";
    const WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

    fn rule(when: Conditions, to: &str) -> Rule {
        Rule {
            when,
            to: to.into(),
        }
    }

    fn link(rules: Vec<Rule>) -> LinkRecord {
        let mut l = LinkRecord::new("https://default.example/", "g", true);
        l.rules = rules;
        l
    }

    fn visitor(ua: &str, country: Option<&str>, language: &str) -> Visitor {
        let mut v = Visitor::new(None, country, Some(ua), None, false);
        v.accept_language = language.into();
        v
    }

    #[test]
    fn the_first_rule_that_holds_decides() {
        let l = link(vec![
            rule(
                Conditions {
                    os: vec![Os::Ios],
                    ..Conditions::default()
                },
                "https://apps.apple.com/app",
            ),
            rule(
                Conditions {
                    os: vec![Os::Android],
                    ..Conditions::default()
                },
                "https://play.google.com/app",
            ),
            rule(
                Conditions {
                    country: vec!["DE".into()],
                    language: vec!["de".into()],
                    ..Conditions::default()
                },
                "https://de.example/",
            ),
            rule(
                Conditions {
                    query: vec![("ref".into(), "*".into())],
                    ..Conditions::default()
                },
                "https://ref.example/",
            ),
        ]);
        let at = |v: &Visitor, q: Option<&str>| destination(&l, v, q, 0).to_owned();
        assert_eq!(
            at(&visitor(IPHONE, Some("DE"), "de"), None),
            "https://apps.apple.com/app"
        );
        assert_eq!(
            at(&visitor(PIXEL, None, ""), None),
            "https://play.google.com/app"
        );
        assert_eq!(
            at(&visitor(WINDOWS, Some("DE"), "de-CH, en;q=0.8"), None),
            "https://de.example/"
        );
        // Both conditions of a rule must hold.
        assert_eq!(
            at(&visitor(WINDOWS, Some("DE"), "en, de;q=0.8"), None),
            "https://default.example/"
        );
        assert_eq!(
            at(&visitor(WINDOWS, Some("AT"), "de"), None),
            "https://default.example/"
        );
        // Query: decoded, any value; absent is no match.
        assert_eq!(
            at(&visitor(WINDOWS, None, ""), Some("a=1&r%65f=x")),
            "https://ref.example/"
        );
        assert_eq!(
            at(&visitor(WINDOWS, None, ""), Some("a=1")),
            "https://default.example/"
        );
        assert_eq!(
            at(&visitor(WINDOWS, None, ""), None),
            "https://default.example/"
        );
    }

    #[test]
    fn query_conditions_read_only_the_first_pairs() {
        let l = link(vec![rule(
            Conditions {
                query: vec![("late".into(), "1".into())],
                ..Conditions::default()
            },
            "https://late.example/",
        )]);
        let early = format!("{}late=1", "x=1&".repeat(MAX_QUERY_PAIRS - 1));
        let late = format!("{}late=1", "x=1&".repeat(MAX_QUERY_PAIRS));
        let v = visitor(WINDOWS, None, "");
        assert_eq!(
            destination(&l, &v, Some(&early), 0),
            "https://late.example/"
        );
        assert_eq!(
            destination(&l, &v, Some(&late), 0),
            "https://default.example/"
        );
    }

    #[test]
    fn time_windows() {
        let l = link(vec![rule(
            Conditions {
                after: Some(1_000),
                before: Some(2_000),
                ..Conditions::default()
            },
            "https://sale.example/",
        )]);
        let v = Visitor::default();
        assert_eq!(destination(&l, &v, None, 999), "https://default.example/");
        assert_eq!(destination(&l, &v, None, 1_000), "https://sale.example/");
        assert_eq!(destination(&l, &v, None, 1_999), "https://sale.example/");
        assert_eq!(destination(&l, &v, None, 2_000), "https://default.example/");
    }

    #[test]
    fn what_an_answer_varies_by_and_until_when() {
        let mut l = link(vec![
            rule(
                Conditions {
                    os: vec![Os::Ios],
                    ..Conditions::default()
                },
                "https://apps.apple.com/app",
            ),
            rule(
                Conditions {
                    query: vec![("ref".into(), "*".into())],
                    after: Some(1_000),
                    before: Some(3_000),
                    ..Conditions::default()
                },
                "https://ref.example/",
            ),
        ]);
        assert_eq!(vary(&l), VARY_USER_AGENT, "the query is in the URL");
        l.rules[1].when.country = vec!["DE".into()];
        l.rules[1].when.language = vec!["de".into()];
        assert_eq!(vary(&l), VARY_USER_AGENT | VARY_COUNTRY | VARY_LANGUAGE);
        l.rules[0].when = Conditions {
            device: vec![link_rules::Device::Mobile],
            ..Conditions::default()
        };
        assert_eq!(vary(&l) & VARY_USER_AGENT, VARY_USER_AGENT);
        assert_eq!(vary(&link(Vec::new())), 0);
        // The windows' edges still ahead bound the answer; an edge at `now` has passed.
        assert_eq!(next_change(&l, 0), Some(1_000));
        assert_eq!(next_change(&l, 1_000), Some(3_000));
        assert_eq!(next_change(&l, 3_000), None);
        assert_eq!(next_change(&link(Vec::new()), 0), None);
        // Passwords and cards keep a link off the fast path; rules and statuses do not.
        l.redirect_status = Some(301);
        assert!(fast_path_ok(&l));
        l.password_hash = Some("pbkdf2-sha256$1$AAAA$AAAA".into());
        assert!(!fast_path_ok(&l));
        l.password_hash = None;
        l.preview = Some(kv_model::Preview::default());
        assert!(!fast_path_ok(&l));
    }

    #[test]
    fn statuses() {
        let mut l = link(Vec::new());
        assert!(fast_path_ok(&l) && !needs_visitor(&l));
        assert_eq!(redirect_status(&l), 302);
        for s in [301, 302, 307, 308] {
            l.redirect_status = Some(s);
            assert_eq!(redirect_status(&l), s);
            assert!(fast_path_ok(&l), "a status keeps the fast path");
        }
        l.redirect_status = Some(200);
        assert_eq!(
            redirect_status(&l),
            302,
            "never a status the origin cannot have set"
        );
    }
}
