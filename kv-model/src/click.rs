//! The click report, the other contract between worker and origin: what the worker posts to the origin's
//! `POST /internal/v1/clicks` as `{"batch_id": "<uuid>", "events": […]}` ([`ClickBatch`]). One definition, so the
//! two cannot drift.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// The kind of device a visitor used, from the User-Agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// Phones.
    Mobile,
    /// Tablets (iPad, Android without `Mobile`, Kindle).
    Tablet,
    /// Windows, macOS, Linux and ChromeOS browsers.
    Desktop,
    /// Anything else (TVs, consoles, unknown), and any kind a newer worker names that this build does not know.
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

/// One counted visitor request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
            id: None,
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
