//! Smart-link rules: which destination a visitor of a persistent link gets, decided from facts about the
//! visitor (country, device, operating system, language, query, time).
//!
//! The origin validates a link's rules (store/src/domain/smart_link.rs), stores them in this form and publishes
//! them in the link's KV record (`kv_model::LinkRecord::rules`); the edge worker evaluates them with
//! [`first_match`]. One definition, so the two cannot drift. The crate depends on serde alone and allocates
//! nothing while evaluating: it is compiled into the worker, whose wasm size is its cold-start time.
//!
//! ```
//! use link_rules::{Conditions, Os, Rule, Visitor, first_match};
//!
//! let rules = vec![Rule {
//!     when: Conditions { os: vec![Os::Ios], ..Conditions::default() },
//!     to: "https://apps.apple.com/app/id1".into(),
//! }];
//! let iphone = Visitor { os: Some(Os::Ios), ..Visitor::at(0) };
//! assert_eq!(first_match(&rules, &iphone).map(|r| r.to.as_str()), Some("https://apps.apple.com/app/id1"));
//! assert!(first_match(&rules, &Visitor::at(0)).is_none());
//! ```
#![no_std]

extern crate alloc;

mod eval;
mod password;
mod user_agent;

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

pub use eval::{Visitor, first_match, primary_language};
pub use password::{MAX_ITERATIONS, PASSWORD_HASH_SCHEME, PasswordHash};
pub use user_agent::os_of;

/// Most rules a link may have (its `ios_url` and `android_url` come on top, as two more leading rules).
pub const MAX_RULES: usize = 20;
/// Most entries in a condition's list (`country`, `language`).
pub const MAX_LIST_ITEMS: usize = 50;
/// Most keys in a `query` condition.
pub const MAX_QUERY_KEYS: usize = 10;
/// Longest `query` key or value, in characters.
pub const MAX_QUERY_CHARS: usize = 100;
/// A `query` value that any value of the parameter matches (the parameter must be present).
pub const ANY_VALUE: &str = "*";

/// One rule: when every condition of [`Rule::when`] holds, the visitor goes to [`Rule::to`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The conditions, all of which must hold (`"if"` in JSON).
    #[serde(rename = "if")]
    pub when: Conditions,
    /// The destination (`https://`, checked by the origin as a link's `long_url` is).
    pub to: String,
}

/// A rule's conditions. An empty list (or map, or `None`) is no condition; the origin refuses a rule without
/// any. Every list is "one of": the visitor's value must be in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    /// ISO 3166-1 alpha-2 codes, uppercase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub country: Vec<String>,
    /// Kinds of device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device: Vec<Device>,
    /// Operating systems.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<Os>,
    /// Primary language subtags (`de`, `pt`), lowercase, matched against the visitor's first preference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub language: Vec<String>,
    /// Query parameters the visitor's URL must carry, `[name, value]` pairs (value [`ANY_VALUE`]: any value),
    /// names unique. Pairs rather than a JSON object, which would need a map type: a B-tree's code costs the
    /// worker's wasm kilobytes, and a list of at most [`MAX_QUERY_KEYS`] needs no index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<(String, String)>,
    /// From this instant on (UNIX milliseconds, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Until this instant (UNIX milliseconds, exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
}

impl Conditions {
    /// True when no condition is set (such a rule would match everyone; the origin refuses it).
    pub fn is_empty(&self) -> bool {
        self.country.is_empty()
            && self.device.is_empty()
            && self.os.is_empty()
            && self.language.is_empty()
            && self.query.is_empty()
            && self.after.is_none()
            && self.before.is_none()
    }
}

/// A kind of device, as the worker reads it from the User-Agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// Phones.
    Mobile,
    /// Tablets.
    Tablet,
    /// Desktop and laptop browsers.
    Desktop,
}

impl Device {
    /// Every kind, in documentation order.
    pub const ALL: [Device; 3] = [Device::Mobile, Device::Tablet, Device::Desktop];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Desktop => "desktop",
        }
    }

    /// The kind named `name` (exactly as [`Device::as_str`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == name)
    }
}

/// An operating system, as the worker reads it from the User-Agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// iOS and iPadOS.
    Ios,
    /// Android.
    Android,
    /// Windows.
    Windows,
    /// macOS.
    Macos,
    /// Linux (not Android).
    Linux,
    /// Anything else, or unknown.
    Other,
}

impl Os {
    /// Every system, in documentation order.
    pub const ALL: [Os; 6] = [
        Os::Ios,
        Os::Android,
        Os::Windows,
        Os::Macos,
        Os::Linux,
        Os::Other,
    ];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Ios => "ios",
            Os::Android => "android",
            Os::Windows => "windows",
            Os::Macos => "macos",
            Os::Linux => "linux",
            Os::Other => "other",
        }
    }

    /// The system named `name` (exactly as [`Os::as_str`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::vec;

    #[test]
    fn the_json_form_leaves_out_what_is_not_set() {
        let rule = Rule {
            when: Conditions {
                country: vec!["DE".into()],
                after: Some(1_700_000_000_000),
                ..Conditions::default()
            },
            to: "https://a.example/".into(),
        };
        let json = serde_json::to_string(&rule).unwrap();
        assert_eq!(
            json,
            r#"{"if":{"country":["DE"],"after":1700000000000},"to":"https://a.example/"}"#
        );
        assert_eq!(serde_json::from_str::<Rule>(&json).unwrap(), rule);
    }

    #[test]
    fn every_condition_round_trips() {
        let json = r#"{"if":{"country":["DE","AT"],"device":["mobile","tablet"],"os":["ios","other"],"language":["de"],"query":[["utm","*"],["x","1"]],"after":1,"before":2},"to":"https://a.example/"}"#;
        let rule: Rule = serde_json::from_str(json).unwrap();
        assert_eq!(rule.when.device, [Device::Mobile, Device::Tablet]);
        assert_eq!(rule.when.os, [Os::Ios, Os::Other]);
        assert_eq!(serde_json::to_string(&rule).unwrap(), json);
        assert!(!rule.when.is_empty());
        assert!(Conditions::default().is_empty());
    }

    #[test]
    fn names_parse_back() {
        for d in Device::ALL {
            assert_eq!(Device::parse(d.as_str()), Some(d));
        }
        for o in Os::ALL {
            assert_eq!(Os::parse(o.as_str()), Some(o));
        }
        assert_eq!(Device::parse("Mobile"), None);
        assert_eq!(Os::parse("bsd"), None);
    }
}
