//! Click analytics: which requests count, the event each one yields, and the per-isolate buffer the shell flushes
//! to the origin's `POST /internal/v1/clicks` after the response (`wait_until`).
//!
//! A request counts when its group has `analytics.enabled`, it is a `GET` (never a `HEAD`), the visitor is not a
//! bot, and it ends at the destination or the interstitial. Visitors blocked by access rules do not count: they
//! never reached the link, and counting them would let a country block inflate a link's figures. Link-preview
//! fetchers are bots, so neither their `HEAD` nor their `GET` counts.
//!
//! A bot's `GET` that would otherwise have counted is reported as a bot event (`"bot": true`, no visitor facts),
//! which the origin counts apart (`bots`), so users see what was filtered; its `HEAD` is not reported at all.
//!
//! Events are not held back waiting for more: each counted request starts a flush unless one is already in
//! flight in the isolate, and a flush keeps sending until the buffer is empty, so under load one request carries
//! many events and at rest a click reaches the origin within one round trip.

use std::collections::VecDeque;

pub use kv_model::{ClickBatch, ClickEvent, Device};
use kv_model::{MAX_FACT_CHARS, MAX_USER_AGENT_BYTES, truncate_bytes, truncate_chars};

use crate::decision::{Decision, Outcome};
use crate::route::normalize_request_host;
use crate::visitor::{Visitor, device};

/// Most events in one report (the origin's limit).
pub const MAX_BATCH: usize = 1000;

/// Most events an isolate keeps while the origin is unreachable; past this, the oldest are dropped, so an origin
/// outage costs some clicks rather than the isolate's memory.
pub const MAX_BUFFERED: usize = 5000;

/// A flush in flight longer than this is taken for dead (its request context was cancelled), so a stuck flag cannot
/// stop an isolate from reporting for good.
pub const STALE_FLUSH_MS: u64 = 60_000;

/// What a request reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// A click ([`click_event`]).
    Click,
    /// A bot the edge did not count ([`bot_event`]).
    Bot,
}

/// What a request reports, if anything: with analytics on, a `GET` that reached the destination or the
/// interstitial is a click, or a bot event when the visitor is a bot (blocked visitors and fallbacks report
/// nothing, bots blocked by `block_bots` included).
pub fn report(decision: &Decision, head: bool, visitor: &Visitor) -> Option<Report> {
    let reached = decision.analytics
        && !head
        && matches!(
            decision.outcome,
            Outcome::Destination(_) | Outcome::Interstitial { .. }
        );
    match (reached, visitor.is_bot()) {
        (false, _) => None,
        (true, false) => Some(Report::Click),
        (true, true) => Some(Report::Bot),
    }
}

/// Whether a request yields a click event: [`report`] says [`Report::Click`].
pub fn counts(decision: &Decision, head: bool, visitor: &Visitor) -> bool {
    report(decision, head, visitor) == Some(Report::Click)
}

/// The visited URL's `utm_source`, `utm_medium` and `utm_campaign` from its raw query (decoded; the first of
/// each wins; at most [`MAX_FACT_CHARS`] characters; an empty one is none).
pub fn utm(query: Option<&str>) -> [Option<String>; 3] {
    let mut found: [Option<String>; 3] = Default::default();
    for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let slot = match name.as_ref() {
            "utm_source" => 0,
            "utm_medium" => 1,
            "utm_campaign" => 2,
            _ => continue,
        };
        let value = truncate_chars(value.trim(), MAX_FACT_CHARS).trim_end();
        if found[slot].is_none() && !value.is_empty() {
            found[slot] = Some(value.to_owned());
        }
    }
    found
}

/// The host of a `Referer` header (lowercase, no port, no user info), or `None` when absent or not an absolute
/// `http(s)` URL. Only the host is kept: the referring page's path may carry personal data.
pub fn referer_host(referer: Option<&str>) -> Option<String> {
    let referer = referer?.trim();
    let lower = referer.get(..8)?.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &referer[8..]
    } else if lower.starts_with("http://") {
        &referer[7..]
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    normalize_request_host(host)
}

/// The event of a counted request (the report's shape is [`kv_model`]'s, shared with the origin). The
/// User-Agent goes along, cut to [`MAX_USER_AGENT_BYTES`], for the origin to tell the browser and OS (a table there
/// keeps the wasm small); `query` is the visited URL's raw query, for its UTM parameters.
pub fn click_event(
    host: &str,
    short_code: Option<&str>,
    group_id: &str,
    at_ms: u64,
    visitor: &Visitor,
    referer: Option<&str>,
    query: Option<&str>,
) -> ClickEvent {
    let [utm_source, utm_medium, utm_campaign] = utm(query);
    let ua = truncate_bytes(&visitor.user_agent, MAX_USER_AGENT_BYTES);
    ClickEvent {
        host: host.to_owned(),
        short_code: short_code.map(str::to_owned),
        group_id: group_id.to_owned(),
        at: i64::try_from(at_ms).unwrap_or(i64::MAX),
        country: visitor.country.clone(),
        referer_host: referer_host(referer),
        device: device(&visitor.user_agent),
        id: None,
        ua: (!ua.is_empty()).then(|| ua.to_owned()),
        region: visitor.region.clone(),
        city: visitor.city.clone(),
        utm_source,
        utm_medium,
        utm_campaign,
        bot: false,
        // Added after the response, by the shell, when the day's salt is at hand (crate::unique).
        visitor: None,
    }
}

/// The event of a bot's request that would have counted: where and when only (the origin counts it in `bots`,
/// nowhere else, so nothing more about the bot is sent).
pub fn bot_event(host: &str, short_code: Option<&str>, group_id: &str, at_ms: u64) -> ClickEvent {
    ClickEvent {
        host: host.to_owned(),
        short_code: short_code.map(str::to_owned),
        group_id: group_id.to_owned(),
        at: i64::try_from(at_ms).unwrap_or(i64::MAX),
        device: Device::Other,
        bot: true,
        ..ClickEvent::default()
    }
}

/// The report body: `{"batch_id": "<uuid>", "events": […]}`.
pub fn batch_body(batch: &ClickBatch) -> String {
    serde_json::to_string(batch).unwrap_or_default()
}

/// The isolate's click events not yet reported, the reports to send again, and whether a flush is in flight.
///
/// Every report gets a `batch_id` when it is first cut (from the `new_id` the shell passes: a random UUID), and a
/// report the origin could not take is kept whole, id and all, and sent first by the next flush: if the origin had
/// counted it and only its answer was lost (a timeout), it answers the repeat as a duplicate instead of counting
/// the clicks twice.
#[derive(Debug, Default)]
pub struct ClickBuffer {
    events: Vec<ClickEvent>,
    retries: VecDeque<ClickBatch>,
    flush_started_ms: Option<u64>,
}

impl ClickBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an event, dropping the oldest past [`MAX_BUFFERED`].
    pub fn push(&mut self, event: ClickEvent) {
        self.events.push(event);
        self.trim();
    }

    /// Events waiting, in reports to retry and not yet cut.
    pub fn len(&self) -> usize {
        self.retries.iter().map(|b| b.events.len()).sum::<usize>() + self.events.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first report of a new flush, or `None` when a flush is already in flight (it will send what is
    /// buffered now when its current request completes) or nothing waits.
    pub fn start_flush(
        &mut self,
        now_ms: u64,
        new_id: impl FnOnce() -> Option<String>,
    ) -> Option<ClickBatch> {
        if self
            .flush_started_ms
            .is_some_and(|t| now_ms.saturating_sub(t) < STALE_FLUSH_MS)
        {
            return None;
        }
        self.flush_started_ms = Some(now_ms);
        self.next_batch(now_ms, new_id)
    }

    /// After a report was delivered (or rejected for good): the next one (a report to retry first, as it was),
    /// or `None` and the flush ends.
    pub fn next_batch(
        &mut self,
        now_ms: u64,
        new_id: impl FnOnce() -> Option<String>,
    ) -> Option<ClickBatch> {
        if let Some(retry) = self.retries.pop_front() {
            self.flush_started_ms = Some(now_ms);
            return Some(retry);
        }
        if self.events.is_empty() {
            self.flush_started_ms = None;
            return None;
        }
        self.flush_started_ms = Some(now_ms);
        let n = self.events.len().min(MAX_BATCH);
        Some(ClickBatch {
            batch_id: new_id(),
            events: self.events.drain(..n).collect(),
        })
    }

    /// After a report could not be delivered: keeps it, with its id, to be sent first by the next flush (which
    /// the next counted request starts), and ends this flush.
    pub fn failed(&mut self, batch: ClickBatch) {
        self.retries.push_front(batch);
        self.trim();
        self.flush_started_ms = None;
    }

    /// Drops the oldest events past [`MAX_BUFFERED`]: from the reports to retry first (a report keeps its id
    /// while it loses events: if the origin had counted it, the repeat is still a duplicate), then from the events
    /// not yet cut.
    fn trim(&mut self) {
        let mut excess = self.len().saturating_sub(MAX_BUFFERED);
        while excess > 0 {
            let Some(oldest) = self.retries.front_mut() else {
                self.events.drain(..excess.min(self.events.len()));
                return;
            };
            let n = excess.min(oldest.events.len());
            oldest.events.drain(..n);
            excess -= n;
            if oldest.events.is_empty() {
                self.retries.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::FallbackReason;

    const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                          Chrome/126.0.0.0 Safari/537.36";
    const MAC: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                       Version/17.5 Safari/605.1.15";
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
                          (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/126.0.0.0 Mobile Safari/537.36";
    const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                        Version/16.6 Mobile/15E148 Safari/604.1";
    const GALAXY_TAB: &str = "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) \
                              Chrome/126.0.0.0 Safari/537.36";
    const LINUX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
    const TV: &str = "Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) \
                      SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36";

    fn human(ua: &str) -> Visitor {
        Visitor::new(None, Some("de"), Some(ua), None, false)
    }

    #[test]
    fn devices() {
        assert_eq!(device(CHROME), Device::Desktop);
        assert_eq!(device(MAC), Device::Desktop);
        assert_eq!(device(LINUX), Device::Desktop);
        assert_eq!(device(IPHONE), Device::Mobile);
        assert_eq!(device(PIXEL), Device::Mobile);
        assert_eq!(device(IPAD), Device::Tablet);
        assert_eq!(device(GALAXY_TAB), Device::Tablet);
        assert_eq!(device(TV), Device::Other);
        assert_eq!(device(""), Device::Other);
        assert_eq!(device("SomethingElse/1.0"), Device::Other);
    }

    fn decision(outcome: Outcome, analytics: bool) -> Decision {
        Decision {
            outcome,
            analytics,
            status: 302,
        }
    }

    #[test]
    fn what_counts() {
        let to = Outcome::Destination("https://d.example/".into());
        let page = Outcome::Interstitial {
            destination: "https://d.example/".into(),
            seconds: 5,
        };
        let blocked = Outcome::Blocked {
            access_fallback: None,
        };
        let fallback = Outcome::Fallback(FallbackReason::UnknownLink);
        let chrome = human(CHROME);
        assert!(counts(&decision(to.clone(), true), false, &chrome));
        assert!(counts(&decision(page, true), false, &chrome));
        assert!(
            !counts(&decision(to.clone(), false), false, &chrome),
            "analytics off"
        );
        assert!(!counts(&decision(to.clone(), true), true, &chrome), "HEAD");
        assert!(!counts(&decision(blocked, true), false, &chrome), "blocked");
        assert!(!counts(&decision(fallback, true), false, &chrome));
        for bot in [
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "facebookexternalhit/1.1",
            "curl/8.5.0",
            "",
        ] {
            assert!(
                !counts(&decision(to.clone(), true), false, &human(bot)),
                "{bot}"
            );
        }
        let scored = Visitor::new(None, None, Some(CHROME), Some(5.0), false);
        assert!(!counts(&decision(to, true), false, &scored));
    }

    #[test]
    fn referers() {
        assert_eq!(
            referer_host(Some("https://User:pw@News.Example.com:8443/a/b?q=1#x")).as_deref(),
            Some("news.example.com")
        );
        assert_eq!(referer_host(Some("http://t.co")).as_deref(), Some("t.co"));
        assert_eq!(
            referer_host(Some("https://t.co?x")).as_deref(),
            Some("t.co")
        );
        for bad in [
            None,
            Some(""),
            Some("android-app://com.x"),
            Some("https://"),
            Some("https://a b/"),
        ] {
            assert_eq!(referer_host(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn events_serialize_as_the_origin_takes_them() {
        let visitor = human(IPHONE).with_place(Some("Bavaria"), Some("Munich"));
        let e = click_event(
            "go.example.com",
            Some("abc"),
            "g1",
            1_700_000_000_123,
            &visitor,
            Some("https://news.example/x"),
            Some("utm_source=mail&utm_campaign=fall+sale&x=1"),
        );
        let dynamic = click_event("go.example.com", None, "g2", 5, &human(CHROME), None, None);
        let batch = ClickBatch {
            batch_id: Some("0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10".into()),
            events: vec![e, dynamic],
        };
        let body: serde_json::Value = serde_json::from_str(&batch_body(&batch)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"batch_id": "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10", "events": [
                {"host": "go.example.com", "short_code": "abc", "group_id": "g1", "at": 1_700_000_000_123u64,
                 "country": "DE", "referer_host": "news.example", "device": "mobile", "ua": IPHONE,
                 "region": "Bavaria", "city": "Munich", "utm_source": "mail", "utm_campaign": "fall sale"},
                {"host": "go.example.com", "short_code": null, "group_id": "g2", "at": 5,
                 "country": "DE", "referer_host": null, "device": "desktop", "ua": CHROME},
            ]})
        );
        let bot = bot_event("go.example.com", Some("abc"), "g1", 7);
        assert_eq!(
            serde_json::to_value(&bot).unwrap(),
            serde_json::json!({"host": "go.example.com", "short_code": "abc", "group_id": "g1", "at": 7,
                               "country": null, "referer_host": null, "device": "other", "bot": true})
        );
    }

    #[test]
    fn user_agent_is_cut_on_a_character_boundary() {
        let long = format!("{CHROME} {}", "é".repeat(200));
        let e = click_event("h", None, "g", 1, &human(&long), None, None);
        let ua = e.ua.unwrap();
        assert!(ua.len() <= MAX_USER_AGENT_BYTES && ua.len() >= MAX_USER_AGENT_BYTES - 1);
        assert!(long.starts_with(&ua));
    }

    #[test]
    fn utm_parameters() {
        assert_eq!(utm(None), [None, None, None]);
        assert_eq!(
            utm(Some(
                "utm_medium=e%2Dmail&utm_source=a&utm_source=b&utm_campaign="
            )),
            [Some("a".into()), Some("e-mail".into()), None]
        );
        let long = "x".repeat(150);
        assert_eq!(
            utm(Some(&format!("utm_campaign={long}")))[2].as_deref(),
            Some(&long[..100])
        );
    }

    #[test]
    fn bots_are_reported_apart() {
        let to = Outcome::Destination("https://d.example/".into());
        let slack = human("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)");
        assert_eq!(
            report(&decision(to.clone(), true), false, &slack),
            Some(Report::Bot)
        );
        assert_eq!(
            report(&decision(to.clone(), true), true, &slack),
            None,
            "HEAD"
        );
        assert_eq!(report(&decision(to.clone(), false), false, &slack), None);
        let blocked = Outcome::Blocked {
            access_fallback: None,
        };
        assert_eq!(report(&decision(blocked, true), false, &slack), None);
        assert_eq!(
            report(&decision(to, true), false, &human(CHROME)),
            Some(Report::Click)
        );
    }

    fn event(n: u64) -> ClickEvent {
        click_event("h", Some("c"), "g", n, &human(CHROME), None, None)
    }

    /// Ids "b1", "b2", … in the order batches are cut.
    struct Ids(u32);

    impl Ids {
        fn next(&mut self) -> impl FnOnce() -> Option<String> + '_ {
            || {
                self.0 += 1;
                Some(format!("b{}", self.0))
            }
        }
    }

    fn batch(id: &str, events: Vec<ClickEvent>) -> ClickBatch {
        ClickBatch {
            batch_id: Some(id.into()),
            events,
        }
    }

    #[test]
    fn one_flush_at_a_time_and_nothing_held_back() {
        let mut b = ClickBuffer::new();
        let mut ids = Ids(0);
        assert_eq!(b.start_flush(0, ids.next()), None, "nothing to send");
        b.push(event(1));
        let first = b.start_flush(10, ids.next()).unwrap();
        assert_eq!(
            first,
            batch("b1", vec![event(1)]),
            "a single event goes at once"
        );
        // Events arriving while a report is in flight ride on the same flush's next round.
        b.push(event(2));
        b.push(event(3));
        assert_eq!(b.start_flush(11, ids.next()), None);
        assert_eq!(
            b.next_batch(20, ids.next()).unwrap(),
            batch("b2", vec![event(2), event(3)])
        );
        assert_eq!(b.next_batch(30, ids.next()), None);
        // The flush is over: the next event starts a new one.
        b.push(event(4));
        assert_eq!(
            b.start_flush(40, ids.next()).unwrap(),
            batch("b3", vec![event(4)])
        );
    }

    #[test]
    fn a_failed_report_is_sent_again_first_with_its_id() {
        let mut b = ClickBuffer::new();
        let mut ids = Ids(0);
        b.push(event(1));
        let report = b.start_flush(0, ids.next()).unwrap();
        b.push(event(2));
        b.failed(report.clone());
        assert_eq!(b.len(), 2);
        assert_eq!(
            b.start_flush(1, ids.next()).unwrap(),
            report,
            "the same report, so the origin can tell a repeat"
        );
        assert_eq!(
            b.next_batch(2, ids.next()).unwrap(),
            batch("b2", vec![event(2)])
        );
        assert_eq!(b.next_batch(3, ids.next()), None);
    }

    #[test]
    fn bounded_batches_and_buffer() {
        let mut b = ClickBuffer::new();
        let mut ids = Ids(0);
        for n in 0..(MAX_BUFFERED as u64 + 10) {
            b.push(event(n));
        }
        assert_eq!(b.len(), MAX_BUFFERED);
        let first = b.start_flush(0, ids.next()).unwrap();
        assert_eq!(first.events.len(), MAX_BATCH);
        assert_eq!(first.events[0], event(10), "the oldest were dropped");
        b.failed(first);
        assert_eq!(b.len(), MAX_BUFFERED);
        // Past the bound, the oldest event of the report to retry goes; the report keeps its id.
        b.push(event(99_999));
        assert_eq!(b.len(), MAX_BUFFERED);
        let next = b.start_flush(1, ids.next()).unwrap();
        assert_eq!(next.batch_id.as_deref(), Some("b1"));
        assert_eq!(next.events.len(), MAX_BATCH - 1);
        assert_eq!(next.events[0], event(11));
    }

    #[test]
    fn a_stuck_flush_is_replaced() {
        let mut b = ClickBuffer::new();
        let mut ids = Ids(0);
        b.push(event(1));
        let _lost = b.start_flush(0, ids.next()).unwrap();
        b.push(event(2));
        assert_eq!(b.start_flush(STALE_FLUSH_MS - 1, ids.next()), None);
        assert_eq!(
            b.start_flush(STALE_FLUSH_MS, ids.next()).unwrap().events,
            vec![event(2)]
        );
    }
}
