//! The click report, the other contract between worker and origin: what the worker posts to the origin's
//! `POST /internal/v1/clicks` as `{"batch_id": "<uuid>", "events": […]}` ([`ClickBatch`]). One definition, so the
//! two cannot drift.
//!
//! Fields added later are optional with serde defaults, so events already in flight (in a queue, in an isolate's
//! buffer) from an older worker still parse, and an older origin ignores the fields it does not know.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::is_false;

/// Most bytes of the User-Agent an event carries (cut on a character boundary): enough for every browser and OS
/// token the origin looks for, and a bound on what a visitor can make the worker send.
pub const MAX_USER_AGENT_BYTES: usize = 256;

/// Most characters of a region, a city or a UTM value an event carries; the origin cuts longer ones too.
pub const MAX_FACT_CHARS: usize = 100;

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` characters.
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// The kind of device a visitor used, from the User-Agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// Phones.
    Mobile,
    /// Tablets (iPad, Android without `Mobile`, Kindle).
    Tablet,
    /// Windows, macOS, Linux and ChromeOS browsers.
    Desktop,
    /// Anything else (TVs, consoles, unknown), and any kind a newer worker names that this build does not know.
    #[default]
    #[serde(other)]
    Other,
}

impl Device {
    /// The stored and reported name.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Desktop => "desktop",
            Device::Other => "other",
        }
    }
}

/// One counted visitor request, or (with [`ClickEvent::bot`]) one the edge recognised as a bot and did not count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickEvent {
    /// The host the visitor used.
    pub host: String,
    /// The persistent link's code; `null` for a dynamic link (`/e/…`).
    #[serde(default)]
    pub short_code: Option<String>,
    /// The link's group, or the dynamic link's group from the path.
    pub group_id: String,
    /// UNIX milliseconds.
    pub at: i64,
    /// ISO country code, when known.
    #[serde(default)]
    pub country: Option<String>,
    /// Host of the `Referer`, when sent (never its path).
    #[serde(default)]
    pub referer_host: Option<String>,
    /// From the User-Agent.
    pub device: Device,
    /// A unique id of this click, when the sender has one (the worker's queue consumer gives each event its
    /// Queues message id): the origin counts an event whose id it has seen (within days) once, however events
    /// are grouped into reports — Queues regroups the messages of a batch it delivers again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The visitor's User-Agent, at most [`MAX_USER_AGENT_BYTES`]: the origin derives the browser and OS from it
    /// and never stores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ua: Option<String>,
    /// Cloudflare's `cf.region` (a name such as `Bavaria`), at most [`MAX_FACT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Cloudflare's `cf.city`, at most [`MAX_FACT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// The visited URL's `utm_source`, decoded, at most [`MAX_FACT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_source: Option<String>,
    /// The visited URL's `utm_medium`, decoded, at most [`MAX_FACT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_medium: Option<String>,
    /// The visited URL's `utm_campaign`, decoded, at most [`MAX_FACT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_campaign: Option<String>,
    /// A request the edge recognised as a bot or link preview and did not count: the origin counts it apart
    /// (`bots`), never in the clicks or their dimensions.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bot: bool,
    /// The visitor, hashed with the day's salt ([`crate::visitor`]): the origin counts the first click of each
    /// hash per link and day as a unique visitor. Absent when the worker had no salt or no address for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visitor: Option<String>,
}

/// The body of a click report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickBatch {
    /// A UUID chosen once per report and kept across its retries: the origin counts a report whose id it has
    /// seen (within days) only once. Absent (older workers): every delivery is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The events, oldest first.
    pub events: Vec<ClickEvent>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_unknown_devices_as_other() {
        let event = ClickEvent {
            host: "go.example.com".into(),
            short_code: None,
            group_id: "g".into(),
            at: 1,
            country: Some("DE".into()),
            referer_host: None,
            device: Device::Tablet,
            ..ClickEvent::default()
        };
        let text = serde_json::to_string(&ClickBatch {
            batch_id: None,
            events: alloc::vec![event.clone()],
        })
        .unwrap();
        assert!(!text.contains("batch_id"), "{text}");
        assert!(text.contains(r#""device":"tablet""#), "{text}");
        assert!(text.contains(r#""short_code":null"#), "{text}");
        let back: ClickBatch = serde_json::from_str(&text).unwrap();
        assert_eq!(back.events, [event]);
        let newer: ClickEvent = serde_json::from_str(
            r#"{"host":"h","group_id":"g","at":2,"device":"watch","extra":1}"#,
        )
        .unwrap();
        assert_eq!((newer.device, newer.short_code), (Device::Other, None));
        assert!(!text.contains("bot") && !text.contains("ua"), "{text}");
    }

    #[test]
    fn new_facts_are_optional_and_round_trip() {
        let old: ClickEvent =
            serde_json::from_str(r#"{"host":"h","group_id":"g","at":2,"device":"mobile"}"#)
                .unwrap();
        assert_eq!((old.ua, old.region, old.bot), (None, None, false));
        let event = ClickEvent {
            host: "h".into(),
            group_id: "g".into(),
            ua: Some("Mozilla/5.0".into()),
            region: Some("Bavaria".into()),
            city: Some("Munich".into()),
            utm_source: Some("mail".into()),
            utm_medium: Some("email".into()),
            utm_campaign: Some("fall".into()),
            bot: true,
            ..ClickEvent::default()
        };
        let text = serde_json::to_string(&event).unwrap();
        assert!(text.contains(r#""bot":true"#), "{text}");
        assert_eq!(serde_json::from_str::<ClickEvent>(&text).unwrap(), event);
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate_bytes("abc", 5), "abc");
        assert_eq!(truncate_bytes("aé", 2), "a");
        assert_eq!(truncate_bytes("aé", 3), "aé");
        assert_eq!(truncate_chars("München", 3), "Mün");
        assert_eq!(truncate_chars("ab", 3), "ab");
    }

    #[test]
    fn batch_id_is_optional() {
        let with: ClickBatch = serde_json::from_str(
            r#"{"batch_id":"0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10","events":[]}"#,
        )
        .unwrap();
        assert_eq!(
            with.batch_id.as_deref(),
            Some("0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10")
        );
        assert_eq!(
            serde_json::to_string(&with).unwrap(),
            r#"{"batch_id":"0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10","events":[]}"#
        );
        let without: ClickBatch = serde_json::from_str(r#"{"events":[]}"#).unwrap();
        assert_eq!(without.batch_id, None);
        let null: ClickBatch = serde_json::from_str(r#"{"batch_id":null,"events":[]}"#).unwrap();
        assert_eq!(null.batch_id, None);
    }
}
