//! Group settings (DESIGN.md "Group settings"): access rules, monetization, analytics; stored and published as JSON.

use super::{LongUrl, ValidationError};
use serde::{Deserialize, Serialize};

/// Most entries in a country list (there are 249 ISO 3166-1 codes).
const MAX_COUNTRIES: usize = 250;

/// Longest interstitial we allow: a countdown visitors will still sit through.
const MAX_INTERSTITIAL_SECONDS: u32 = 60;

/// A group's settings (DESIGN.md "Group settings"); the edge applies them to every visitor.
/// Unknown fields are refused, so a typo does not silently turn a rule off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSettings {
    /// Who may follow the group's links.
    #[serde(default)]
    pub access: Access,
    /// The interstitial flow, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monetization: Option<Monetization>,
    /// Click analytics.
    #[serde(default)]
    pub analytics: Analytics,
}

/// Access rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// When non-empty, only these ISO 3166-1 alpha-2 countries get through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_countries: Vec<String>,
    /// These countries never get through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_countries: Vec<String>,
    /// Send detected bots to the fallback.
    #[serde(default)]
    pub block_bots: bool,
    /// Where blocked visitors go; the domain's fallback when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_url: Option<String>,
}

/// Monetization: an interstitial page with a countdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Monetization {
    /// Seconds before the page continues to the destination.
    pub interstitial_seconds: u32,
}

/// Analytics switch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Analytics {
    /// Record one click event per visitor request.
    #[serde(default)]
    pub enabled: bool,
}

impl GroupSettings {
    /// Parses and checks settings JSON; country codes are normalised to uppercase.
    pub fn parse(json: &str) -> Result<Self, ValidationError> {
        let invalid =
            |e: serde_json::Error| ValidationError::new(format!("invalid group settings: {e}"));
        let value: serde_json::Value = serde_json::from_str(json).map_err(invalid)?;
        // serde would also read a struct from an array; settings are an object, nothing else.
        if !value.is_object() {
            return Err(ValidationError::new("group settings must be a JSON object"));
        }
        // serde_path_to_error, so a wrong type deep inside names its field ("access.block_bots: invalid type").
        let mut s: Self = serde_path_to_error::deserialize(value).map_err(|e| {
            ValidationError::new(format!(
                "invalid group settings: {}: {}",
                e.path(),
                e.inner()
            ))
        })?;
        for (field, list) in [
            ("access.allow_countries", &mut s.access.allow_countries),
            ("access.block_countries", &mut s.access.block_countries),
        ] {
            if list.len() > MAX_COUNTRIES {
                return Err(ValidationError::new(format!(
                    "invalid group settings: {field} has more than {MAX_COUNTRIES} entries"
                )));
            }
            for code in list.iter_mut() {
                if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return Err(ValidationError::new(format!(
                        "invalid group settings: {field}: {code:?} is not an ISO 3166-1 alpha-2 country code"
                    )));
                }
                code.make_ascii_uppercase();
            }
        }
        if let Some(url) = &s.access.fallback_url {
            LongUrl::parse(url).map_err(|e| {
                ValidationError::new(format!("invalid group settings: access.fallback_url: {e}"))
            })?;
        }
        if let Some(m) = &s.monetization {
            if m.interstitial_seconds > MAX_INTERSTITIAL_SECONDS {
                return Err(ValidationError::new(format!(
                    "invalid group settings: monetization.interstitial_seconds must be at most {MAX_INTERSTITIAL_SECONDS}"
                )));
            }
        }
        Ok(s)
    }

    /// The canonical JSON stored and published.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_example() {
        let s = GroupSettings::parse(
            r#"{"access":{"allow_countries":["us","DE"],"block_countries":["RU"],"block_bots":true,
                "fallback_url":"https://example.com/blocked"},
                "monetization":{"interstitial_seconds":5},"analytics":{"enabled":true}}"#,
        )
        .unwrap();
        assert_eq!(s.access.allow_countries, ["US", "DE"]);
        assert!(s.analytics.enabled);
        assert_eq!(GroupSettings::parse(&s.to_json()).unwrap(), s);
        assert_eq!(
            GroupSettings::parse("{}").unwrap(),
            GroupSettings::default()
        );
    }

    #[test]
    fn rejects_bad_settings() {
        for bad in [
            "[]",
            r#"{"acess":{}}"#,
            r#"{"access":{"allow_countries":["USA"]}}"#,
            r#"{"access":{"fallback_url":"http://x.com"}}"#,
            r#"{"monetization":{"interstitial_seconds":600}}"#,
            r#"{"monetization":{"interstitial_seconds":-1}}"#,
        ] {
            assert!(GroupSettings::parse(bad).is_err(), "{bad}");
        }
    }
}
