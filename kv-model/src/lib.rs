//! Shortlink's edge read model: the Workers KV keys and their JSON records.
//!
//! The origin's publisher writes these records and the edge worker reads them, so both use this one
//! definition. Every value is a JSON object carrying `"v": 1` ([`V1`]). A value with another `v`, or one that does
//! not parse, must be treated by readers as missing: deserializing it here fails, and the worker then falls back
//! instead of answering with an error.
//!
//! | key | record |
//! |---|---|
//! | [`link_key`]`(host, short_code)` = `link:<host>:<short_code>` | [`LinkRecord`] |
//! | [`group_key`]`(group_id)` = `group:<group_id>` | [`GroupRecord`] |
//! | [`domain_key`]`(host)` = `domain:<host>` | [`DomainRecord`] |
//! | [`BLOCKLIST_KEY`] = `blocklist` | [`BlocklistRecord`] |
//! | [`salt_key`]`(day)` = `salt:<day>` | [`SaltRecord`] (unique visitors: [`visitor`]) |
//!
//! Fields added later within version 1 must be optional: readers ignore fields they do not know, so the origin
//! can publish a new field before every worker understands it.
//!
//! ```
//! use kv_model::{LinkRecord, link_key};
//!
//! assert_eq!(link_key("Go.Example.com", "Promo"), "link:go.example.com:promo");
//! let record = LinkRecord::new("https://example.org/", "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10", true);
//! assert_eq!(record.long_url, "https://example.org/");
//! ```
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

mod click;
mod object;
mod short_code;
pub mod visitor;

pub use object::ObjectOnly;
use object::{object_or_default, optional_object};

pub use click::{
    ClickBatch, ClickEvent, Device, MAX_FACT_CHARS, MAX_USER_AGENT_BYTES, truncate_bytes,
    truncate_chars,
};
pub use link_rules::Rule;
pub use visitor::{SaltRecord, is_visitor_hash, salt_key};

pub use short_code::{
    GENERATED_ALPHABET, GENERATED_LEN, SHORT_CODE_MAX_LEN, SHORT_CODE_MIN_LEN, ShortCode,
    ShortCodeError, is_short_code_byte,
};

/// The KV key of the blocked destination domain list.
pub const BLOCKLIST_KEY: &str = "blocklist";

/// Interstitial length used when a group's `monetization` object omits `interstitial_seconds`.
pub const DEFAULT_INTERSTITIAL_SECONDS: u32 = 5;

/// `link:<host>:<short_code>`, with host and short code lowercased (short codes are stored lowercase, and
/// visitors' paths are matched case-insensitively).
#[inline] // each a call of `key` with its parts: a function of its own would be one more for the edge to compile
pub fn link_key(host: &str, short_code: &str) -> String {
    key(&["link:", host, ":", short_code])
}

/// `group:<group_id>`, with the id lowercased (UUIDs are compared case-insensitively).
#[inline]
pub fn group_key(group_id: &str) -> String {
    key(&["group:", group_id])
}

/// `domain:<host>`, with the host lowercased.
#[inline]
pub fn domain_key(host: &str) -> String {
    key(&["domain:", host])
}

/// The parts joined and lowercased (ASCII). Not `format!`: the worker builds keys on a new isolate's first
/// request, and the formatting machinery is code V8 would compile for it.
fn key(parts: &[&str]) -> String {
    let mut key = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        key.push_str(part);
    }
    key.make_ascii_lowercase();
    key
}

/// The record format version, always serialized as `1`. Deserializing any other value fails, which is how an
/// unknown version ends up treated as a missing record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V1;

impl Serialize for V1 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(1)
    }
}

impl<'de> Deserialize<'de> for V1 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VersionVisitor;

        impl Visitor<'_> for VersionVisitor {
            type Value = V1;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("record version 1")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<V1, E> {
                if v == 1 {
                    Ok(V1)
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<V1, E> {
                if v == 1 {
                    Ok(V1)
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
        }

        deserializer.deserialize_u64(VersionVisitor)
    }
}

/// `null` reads as the default, so that `"access": null` means the same as leaving `access` out.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A field's value parsed by a function of its own rather than inside the record's parse. For the fields most
/// records lack (rules, a preview card): V8 compiles a wasm function whole on its first call, so a new edge isolate's
/// first visit to a plain link would otherwise compile these parsers with the record's (BENCHMARKS.md, issue 28).
#[inline(never)]
fn apart<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer)
}

/// A persistent link, at `link:<host>:<short_code>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// Format version.
    pub v: V1,
    /// The destination (`https://…`, validated by the origin when the link was created).
    pub long_url: String,
    /// The group the link belongs to; its settings apply to the link when `group:<group_id>` exists.
    pub group_id: String,
    /// `false`: the link is paused and visitors go to the domain's fallback.
    pub is_active: bool,
    /// From this instant (UNIX milliseconds) visitors go to the domain's fallback; `None`: never.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "apart"
    )]
    pub expires_at: Option<i64>,
    /// Whether the visitor's query string is appended to the destination (absent: `true`).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub forward_query: bool,
    /// Smart-link rules, in order: the first whose conditions all hold for the visitor decides the destination,
    /// else [`LinkRecord::long_url`]. The link's `ios_url` and `android_url` come first, compiled into `os` rules,
    /// so the worker reads one list.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "apart"
    )]
    pub rules: Vec<Rule>,
    /// The hash of the link's password (`pbkdf2-sha256$…`, [`link_rules::PasswordHash`]); `None`: no password.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "apart"
    )]
    pub password_hash: Option<String>,
    /// Where visitors go once the link has expired (its `expires_at` passed, or its click limit was reached,
    /// which the origin publishes as an `expires_at` of 0); `None`: the domain's fallback.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "apart"
    )]
    pub expired_url: Option<String>,
    /// The redirect's status: 301, 307 or 308; `None`: 302.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "apart"
    )]
    pub redirect_status: Option<u16>,
    /// The card link-preview crawlers get instead of the redirect; `None`: they get the redirect.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "apart"
    )]
    pub preview: Option<Preview>,
    /// A copy of the settings of the link's group (`group:<group_id>`'s `settings`) as they were when the record
    /// was published: what the link's first visit on a new isolate needs, so that visit costs one round of KV
    /// reads (this record and the blocklist) rather than two. The publisher writes the link's record again
    /// whenever its group's settings change. Absent (a record published before this field): the reader reads
    /// the group's record first, as it always can.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_object"
    )]
    pub group_settings: Option<GroupSettings>,
    /// The origin's word that none of the destinations this record names (`long_url`, each rule's `to`,
    /// `expired_url`, and its preview card's `image`), nor a parent domain of one, was on the blocklist when the record was published, and that it
    /// publishes the record again, without this word, in the same transaction that blocks one of them. A new
    /// isolate may then redirect the link's first visit before it has read the blocklist (one KV key in that
    /// visit's round instead of two); every later visit checks the blocklist as before. Absent or `false` (a
    /// record published before the field, or one with a destination blocked since): the blocklist is read first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub vouched: bool,
}

fn yes() -> bool {
    true
}

// serde's skip_serializing_if passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_true(b: &bool) -> bool {
    *b
}

#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

impl LinkRecord {
    /// A version-1 link record that never expires and forwards the visitor's query.
    pub fn new(long_url: impl Into<String>, group_id: impl Into<String>, is_active: bool) -> Self {
        LinkRecord {
            v: V1,
            long_url: long_url.into(),
            group_id: group_id.into(),
            is_active,
            expires_at: None,
            forward_query: true,
            rules: Vec::new(),
            password_hash: None,
            expired_url: None,
            redirect_status: None,
            preview: None,
            group_settings: None,
            vouched: false,
        }
    }

    /// Whether the link has expired at `now_ms` (UNIX milliseconds).
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|at| now_ms >= at)
    }
}

/// The origin's answer to the worker's KV-miss lookup (`GET /internal/v1/links/{host}/{code}`): the link
/// record's fields, plus the record of the link's group, so a link whose group has not reached KV either still
/// gets the group's rules. A worker that predates `group` reads the answer as a [`LinkRecord`] and ignores it.
///
/// The link is a [`LinkRecord`] (flattened on the wire), not a copy of its field list: one place says what a link
/// record is. No derived `Deserialize`: serde's `flatten` buffers every field through its generic `Content` type,
/// code the worker's wasm would carry for one rare answer. A reader parses the body twice instead, as a
/// [`LinkRecord`] (which skips `group`) and for its `group` (the worker's `origin::lookup_answer`), in its own crate:
/// a generic parse instantiated here would be a second copy, in the wasm, of the one the worker already has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedLink {
    /// The link's record, without `group_settings` (the answer carries the whole group instead).
    #[serde(flatten)]
    pub record: LinkRecord,
    /// The group's key and settings, as the publisher writes them to `group:<group_id>`, without the hosts that
    /// record names (the worker keeps this copy for the link's rules only); absent from an older origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupRecord>,
}

impl ResolvedLink {
    /// The answer for `link` in the group `group`.
    pub fn new(link: LinkRecord, group: Option<GroupRecord>) -> Self {
        ResolvedLink {
            record: LinkRecord {
                group_settings: None,
                ..link
            },
            group,
        }
    }

    /// The link's own record, as it goes to `link:<host>:<short_code>` (with its group's settings when the
    /// answer has the group).
    pub fn link(&self) -> LinkRecord {
        LinkRecord {
            group_settings: self.group.as_ref().map(|g| g.settings.clone()),
            ..self.record.clone()
        }
    }
}

/// A link's preview card, for link-preview crawlers (`og:*` and `twitter:card` tags). Each field is optional;
/// the origin publishes the card only when at least one is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// `og:title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `og:description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `og:image`: an `https://` URL checked as a destination is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A group, at `group:<group_id>`. Deleting the group deletes the key, and its dynamic links stop working.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// Format version.
    pub v: V1,
    /// The group key, base64url (32 bytes), as shown on the dashboard.
    pub key: String,
    /// The group's rules; every field is optional and `{}` (or `null`, or leaving it out) means none.
    #[serde(default, deserialize_with = "object_or_default")]
    pub settings: GroupSettings,
    /// The hosts of the enabled custom domains of the group's account, when it has at most [`MAX_ENABLED_HOSTS`]
    /// (else none: left out). A dynamic link of the group on a host named here is served without reading the
    /// domain's record ([`enabled_host`]).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub enabled_hosts: Vec<String>,
}

impl GroupRecord {
    /// A version-1 group record that names no host.
    pub fn new(key: impl Into<String>, settings: GroupSettings) -> Self {
        GroupRecord {
            v: V1,
            key: key.into(),
            settings,
            enabled_hosts: Vec::new(),
        }
    }
}

/// A group's settings: access rules, monetization and analytics (DESIGN.md, "Group settings").
///
/// Written without the fields (and the access rules' fields) that hold their defaults, which an absent field reads
/// as: a plain group's settings are `{}`. Every link record carries a copy ([`LinkRecord::group_settings`]), and a
/// new edge isolate's first visit parses it before its redirect: the long form (141 bytes of empty lists,
/// `false` and `null`) made that visit compile the parsers of every field, 8.4 KB of wasm more than `{}`
/// (BENCHMARKS.md, issue 28). Readers take both forms alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSettings {
    /// Who may follow the group's links.
    #[serde(
        default,
        deserialize_with = "object_or_default",
        skip_serializing_if = "AccessRules::is_open"
    )]
    pub access: AccessRules,
    /// The interstitial shown before the destination; `None` (absent or `null`) means no monetization.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_object"
    )]
    pub monetization: Option<Monetization>,
    /// Click analytics.
    #[serde(
        default,
        deserialize_with = "object_or_default",
        skip_serializing_if = "Analytics::is_off"
    )]
    pub analytics: Analytics,
}

/// Country and bot rules. A visitor they block is redirected to [`AccessRules::fallback_url`], else to the
/// domain's fallback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRules {
    /// ISO 3166-1 alpha-2 codes. When non-empty, only visitors from these countries pass (a visitor whose country
    /// is unknown does not).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allow_countries: Vec<String>,
    /// ISO 3166-1 alpha-2 codes whose visitors are blocked.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub block_countries: Vec<String>,
    /// Whether bots (crawlers, link-preview fetchers, HTTP libraries, headless browsers) are blocked.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub block_bots: bool,
    /// Where blocked visitors go; `None` means the domain's fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_url: Option<String>,
}

impl AccessRules {
    /// No rule: every visitor passes (the default, which the settings' JSON leaves out).
    pub fn is_open(&self) -> bool {
        *self == AccessRules::default()
    }
}

/// The monetization flow: an interstitial page that counts down, then continues to the destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Monetization {
    /// Countdown length in seconds; `0` skips the page.
    #[serde(default = "default_interstitial_seconds")]
    pub interstitial_seconds: u32,
}

fn default_interstitial_seconds() -> u32 {
    DEFAULT_INTERSTITIAL_SECONDS
}

/// Click analytics settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analytics {
    /// Whether the edge reports a click event per visitor request.
    #[serde(default, deserialize_with = "null_as_default")]
    pub enabled: bool,
}

impl Analytics {
    /// Off (the default, which the settings' JSON leaves out).
    pub fn is_off(&self) -> bool {
        !self.enabled
    }
}

/// A domain, at `domain:<host>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainRecord {
    /// Format version.
    pub v: V1,
    /// Whether dynamic links (`/e/…`) are served on this domain. Persistent links keep redirecting while their
    /// link record exists, whatever this says: disabling a domain stops new links, it does not break old ones.
    pub enabled: bool,
    /// The domain's fallback URL; `None` means the worker's configured default.
    #[serde(default)]
    pub fallback_url: Option<String>,
}

impl DomainRecord {
    /// A version-1 domain record.
    pub fn new(enabled: bool, fallback_url: Option<String>) -> Self {
        DomainRecord {
            v: V1,
            enabled,
            fallback_url,
        }
    }
}

/// The blocked destination domains, at [`BLOCKLIST_KEY`]. A listed domain blocks itself and its subdomains.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlocklistRecord {
    /// Format version.
    pub v: V1,
    /// Blocked domains, e.g. `evil.example`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub domains: Vec<String>,
    /// The hosts of the enabled platform domains, when there are at most [`MAX_ENABLED_HOSTS`] (else none: left
    /// out). Not blocked domains: the one record every dynamic visit reads anyway carries them, so that a dynamic
    /// link on a platform domain is served without reading the domain's record ([`enabled_host`]).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub enabled_hosts: Vec<String>,
}

impl BlocklistRecord {
    /// A version-1 blocklist record that names no host.
    pub fn new(domains: Vec<String>) -> Self {
        BlocklistRecord {
            v: V1,
            domains,
            enabled_hosts: Vec::new(),
        }
    }
}

/// The most hosts a group's or the blocklist's record names as enabled ([`GroupRecord::enabled_hosts`],
/// [`BlocklistRecord::enabled_hosts`]); past it, the record names none. Those records are read on every dynamic
/// visit (the blocklist on every visit), so what they carry is bounded whatever the platform's size.
pub const MAX_ENABLED_HOSTS: usize = 64;

/// Whether a dynamic link on `host` is served, by what the records name: a group's or the blocklist's record that
/// names `host` says its domain is enabled, as its [`DomainRecord`] would (both are republished by every change of
/// a domain); a host neither names is the domain record's to say (another account's custom domain, a disabled
/// domain, one past [`MAX_ENABLED_HOSTS`]). `host` is normalized, as a key's host is ([`domain_key`]).
pub fn enabled_host(named: &[String], host: &str) -> bool {
    named.iter().any(|h| h == host)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::format;

    /// Reads an answer as the worker does: the record, then its `group`.
    fn resolved_from_json(body: &str) -> serde_json::Result<ResolvedLink> {
        #[derive(Deserialize)]
        struct Group {
            #[serde(default)]
            group: Option<GroupRecord>,
        }
        let record: LinkRecord = serde_json::from_str(body)?;
        let Group { group } = serde_json::from_str(body)?;
        Ok(ResolvedLink::new(record, group))
    }
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn keys_are_lowercase() {
        assert_eq!(
            link_key("GO.example.COM", "AbC-1"),
            "link:go.example.com:abc-1"
        );
        assert_eq!(
            group_key("0B7C6A1E-7F39-4C55-9A55-2D1C1F5E8A10"),
            "group:0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10"
        );
        assert_eq!(domain_key("Go.Example.com"), "domain:go.example.com");
    }

    #[test]
    fn link_round_trip() {
        let json = r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true}"#;
        let record: LinkRecord = serde_json::from_str(json).unwrap();
        assert_eq!(record, LinkRecord::new("https://a.example/x", "g", true));
        assert_eq!(serde_json::to_string(&record).unwrap(), json);
    }

    #[test]
    fn expiry_and_query_forwarding_are_optional() {
        let json = r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"expires_at":1700000000000,"forward_query":false}"#;
        let record: LinkRecord = serde_json::from_str(json).unwrap();
        assert_eq!(record.expires_at, Some(1_700_000_000_000));
        assert!(!record.forward_query);
        assert_eq!(serde_json::to_string(&record).unwrap(), json);
        assert!(!record.expired(1_699_999_999_999));
        assert!(record.expired(1_700_000_000_000));
        // Records written before these fields: never expire, forward the query.
        let old: LinkRecord = serde_json::from_str(
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true}"#,
        )
        .unwrap();
        assert!(old.forward_query && !old.expired(i64::MAX));
        let resolved = ResolvedLink::new(record.clone(), None);
        assert_eq!(resolved.link(), record);
        let again = resolved_from_json(&serde_json::to_string(&resolved).unwrap()).unwrap();
        assert_eq!(again.link(), record);
    }

    #[test]
    fn a_resolved_link_is_a_link_record_with_its_group() {
        let group = GroupRecord::new("k", GroupSettings::default());
        let resolved = ResolvedLink::new(
            LinkRecord::new("https://a.example/x", "g", true),
            Some(group.clone()),
        );
        let json = serde_json::to_string(&resolved).unwrap();
        assert_eq!(
            json,
            format!(
                r#"{{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"group":{}}}"#,
                serde_json::to_string(&group).unwrap()
            )
        );
        assert_eq!(resolved_from_json(&json).unwrap(), resolved);
        // Workers that predate `group` read the same answer as a link record (without its group's settings,
        // which the link record built from the answer carries).
        let old: LinkRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(old.group_settings, None);
        assert_eq!(resolved.link().group_settings, Some(group.settings.clone()));
        assert_eq!(
            old,
            LinkRecord {
                group_settings: None,
                ..resolved.link()
            }
        );
        // An origin that predates `group` answers a plain link record.
        let plain = r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":false}"#;
        let read = resolved_from_json(plain).unwrap();
        assert_eq!(read.group, None);
        assert!(!read.link().is_active);
        assert_eq!(read.link().group_id, "g");
    }

    #[test]
    fn a_link_record_may_carry_its_groups_settings() {
        let json = r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"group_settings":{"analytics":{"enabled":true}}}"#;
        let record: LinkRecord = serde_json::from_str(json).unwrap();
        let settings = record.group_settings.clone().unwrap();
        assert!(settings.analytics.enabled && settings.monetization.is_none());
        let again: LinkRecord =
            serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(again, record);
        // No rules is not no copy: `{}` is a group without rules, absence is a record without the copy.
        let none: LinkRecord = serde_json::from_str(
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"group_settings":{}}"#,
        )
        .unwrap();
        assert_eq!(none.group_settings, Some(GroupSettings::default()));
        let absent = LinkRecord::new("https://a.example/x", "g", true);
        assert!(
            !serde_json::to_string(&absent)
                .unwrap()
                .contains("group_settings")
        );
    }

    #[test]
    fn a_plain_link_record_is_unchanged_by_the_smart_link_fields() {
        // Records of links without any of the smart-link fields keep the worker's plain path and its kept answers;
        // a plain group's settings are written as `{}` (GroupSettings says why), and the long form they were
        // written in before reads the same.
        let plain = LinkRecord {
            expires_at: Some(1_700_000_000_000),
            group_settings: Some(GroupSettings::default()),
            ..LinkRecord::new("https://a.example/x", "g", true)
        };
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"expires_at":1700000000000,"group_settings":{}}"#
        );
        let long_form: LinkRecord = serde_json::from_str(
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"expires_at":1700000000000,"group_settings":{"access":{"allow_countries":[],"block_countries":[],"block_bots":false,"fallback_url":null},"monetization":null,"analytics":{"enabled":false}}}"#,
        )
        .unwrap();
        assert_eq!(long_form, plain);
        assert_eq!(
            serde_json::to_string(&LinkRecord::new("https://a.example/x", "g", true)).unwrap(),
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true}"#
        );
    }

    #[test]
    fn smart_link_fields_round_trip() {
        let json = r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true,"rules":[{"if":{"os":["ios"]},"to":"https://apps.example/"}],"password_hash":"pbkdf2-sha256$100000$c2FsdA==$aGFzaA==","expired_url":"https://a.example/over","redirect_status":301,"preview":{"title":"T","image":"https://a.example/i.png"}}"#;
        let record: LinkRecord = serde_json::from_str(json).unwrap();
        assert_eq!(record.rules.len(), 1);
        assert_eq!(record.rules[0].when.os, [link_rules::Os::Ios]);
        assert_eq!(record.redirect_status, Some(301));
        assert_eq!(
            record
                .preview
                .as_ref()
                .and_then(|p| p.description.as_deref()),
            None
        );
        assert_eq!(serde_json::to_string(&record).unwrap(), json);
        // The KV-miss answer carries them too, and gives them back.
        let resolved = ResolvedLink::new(record.clone(), None);
        let again = resolved_from_json(&serde_json::to_string(&resolved).unwrap()).unwrap();
        assert_eq!(again.link(), record);
    }

    #[test]
    fn other_versions_are_rejected() {
        for v in ["0", "2", "-1", "1.0", "\"1\"", "null"] {
            let json =
                format!(r#"{{"v":{v},"long_url":"https://a/","group_id":"g","is_active":true}}"#);
            assert!(
                serde_json::from_str::<LinkRecord>(&json).is_err(),
                "v = {v}"
            );
        }
        let missing = r#"{"long_url":"https://a/","group_id":"g","is_active":true}"#;
        assert!(serde_json::from_str::<LinkRecord>(missing).is_err());
    }

    #[test]
    fn full_group_settings() {
        let json = r#"{"v":1,"key":"k","settings":{
            "access":{"allow_countries":["US","DE"],"block_countries":["RU"],"block_bots":true,
                      "fallback_url":"https://example.com/blocked"},
            "monetization":{"interstitial_seconds":7},
            "analytics":{"enabled":true},
            "future_field":{"ignored":true}}}"#;
        let group: GroupRecord = serde_json::from_str(json).unwrap();
        let s = &group.settings;
        assert_eq!(s.access.allow_countries, vec!["US", "DE"]);
        assert_eq!(s.access.block_countries, vec!["RU"]);
        assert!(s.access.block_bots);
        assert_eq!(
            s.access.fallback_url.as_deref(),
            Some("https://example.com/blocked")
        );
        assert_eq!(
            s.monetization,
            Some(Monetization {
                interstitial_seconds: 7
            })
        );
        assert!(s.analytics.enabled);
        let again: GroupRecord =
            serde_json::from_str(&serde_json::to_string(&group).unwrap()).unwrap();
        assert_eq!(again, group);
    }

    #[test]
    fn settings_are_written_without_their_defaults() {
        let written = |json: &str| {
            let settings: GroupSettings = serde_json::from_str(json).unwrap();
            serde_json::to_string(&settings).unwrap()
        };
        assert_eq!(written("{}"), "{}");
        assert_eq!(
            written(r#"{"access":{"block_bots":true},"analytics":{"enabled":false}}"#),
            r#"{"access":{"block_bots":true}}"#
        );
        let every = r#"{"access":{"allow_countries":["US"],"block_countries":["RU"],"block_bots":true,"fallback_url":"https://f.example/"},"monetization":{"interstitial_seconds":0},"analytics":{"enabled":true}}"#;
        assert_eq!(written(every), every);
    }

    #[test]
    fn empty_and_null_settings_mean_none() {
        for settings in [
            r#","settings":{}"#,
            r#","settings":null"#,
            "",
            r#","settings":{"access":null,"monetization":null,"analytics":null}"#,
            r#","settings":{"access":{"allow_countries":null,"block_bots":null},"analytics":{}}"#,
        ] {
            let json = format!(r#"{{"v":1,"key":"k"{settings}}}"#);
            let group: GroupRecord = serde_json::from_str(&json).unwrap();
            assert_eq!(group.settings, GroupSettings::default(), "{json}");
        }
        let group: GroupRecord =
            serde_json::from_str(r#"{"v":1,"key":"k","settings":{"monetization":{}}}"#).unwrap();
        assert_eq!(
            group.settings.monetization,
            Some(Monetization {
                interstitial_seconds: DEFAULT_INTERSTITIAL_SECONDS
            })
        );
    }

    #[test]
    fn domain_and_blocklist() {
        let d: DomainRecord =
            serde_json::from_str(r#"{"v":1,"enabled":true,"fallback_url":null}"#).unwrap();
        assert_eq!(d, DomainRecord::new(true, None));
        let d: DomainRecord = serde_json::from_str(r#"{"v":1,"enabled":false}"#).unwrap();
        assert_eq!(d, DomainRecord::new(false, None));
        assert!(serde_json::from_str::<DomainRecord>(r#"{"v":1}"#).is_err());
        let b: BlocklistRecord =
            serde_json::from_str(r#"{"v":1,"domains":["evil.example"]}"#).unwrap();
        assert_eq!(b, BlocklistRecord::new(vec!["evil.example".to_string()]));
    }

    #[test]
    fn enabled_hosts_are_left_out_when_none_and_read_back() {
        let plain = BlocklistRecord::new(vec!["evil.example".into()]);
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"v":1,"domains":["evil.example"]}"#
        );
        let named = BlocklistRecord {
            enabled_hosts: vec!["sho.rt".into(), "go.example".into()],
            ..plain
        };
        let text = serde_json::to_string(&named).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"domains":["evil.example"],"enabled_hosts":["sho.rt","go.example"]}"#
        );
        assert_eq!(
            serde_json::from_str::<BlocklistRecord>(&text).unwrap(),
            named
        );
        let group = GroupRecord::new("k", GroupSettings::default());
        assert_eq!(
            serde_json::to_string(&group).unwrap(),
            r#"{"v":1,"key":"k","settings":{}}"#
        );
        let group = GroupRecord {
            enabled_hosts: vec!["links.acme.example".into()],
            ..group
        };
        let text = serde_json::to_string(&group).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"key":"k","settings":{},"enabled_hosts":["links.acme.example"]}"#
        );
        assert_eq!(serde_json::from_str::<GroupRecord>(&text).unwrap(), group);
        let null = r#"{"v":1,"key":"k","enabled_hosts":null}"#;
        assert!(
            serde_json::from_str::<GroupRecord>(null)
                .unwrap()
                .enabled_hosts
                .is_empty()
        );
    }

    #[test]
    fn a_host_is_enabled_only_where_named_exactly() {
        let named = ["sho.rt".to_string(), "go.example".to_string()];
        assert!(enabled_host(&named, "sho.rt"));
        assert!(enabled_host(&named, "go.example"));
        assert!(!enabled_host(&named, "a.sho.rt"));
        assert!(!enabled_host(&named, "sho.r"));
        assert!(!enabled_host(&[], "sho.rt"));
    }
}
