//! Hostnames of link domains, validated and lowercased.

use super::ValidationError;

/// A DNS hostname as a link domain: lowercase ASCII labels of letters, digits and `-`,
/// at least two labels, at most 253 characters (IDNs come in as punycode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hostname(String);

impl Hostname {
    /// Validates and lowercases a hostname; a trailing dot is dropped.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let host = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
        let bad = || ValidationError::new(format!("{raw:?} is not a valid hostname"));
        if host.is_empty() || host.len() > 253 {
            return Err(bad());
        }
        let labels: Vec<&str> = host.split('.').collect();
        if labels.len() < 2 {
            return Err(bad());
        }
        for label in &labels {
            let ok = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !ok {
                return Err(bad());
            }
        }
        Ok(Self(host))
    }

    /// The lowercase hostname.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_normalises() {
        assert_eq!(Hostname::parse("Sho.RT.").unwrap().as_str(), "sho.rt");
        assert!(Hostname::parse("xn--bcher-kva.example").is_ok());
    }

    #[test]
    fn rejects_bad_hosts() {
        for bad in [
            "",
            "localhost",
            "a..b",
            "-a.b",
            "a-.b",
            "a_b.c",
            "a.b/c",
            "a b.c",
            "a.b:80",
        ] {
            assert!(Hostname::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Hostname::parse(&format!("{}.com", "a".repeat(64))).is_err());
    }
}

/// `a.b.example.com` → [`a.b.example.com`, `b.example.com`, `example.com`, `com`].
pub(crate) fn parent_domains(host: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = host;
    while !rest.is_empty() {
        out.push(rest);
        rest = rest.split_once('.').map(|(_, r)| r).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod parent_tests {
    #[test]
    fn parents() {
        assert_eq!(
            super::parent_domains("a.b.com"),
            ["a.b.com", "b.com", "com"]
        );
        assert!(super::parent_domains("").is_empty());
    }
}
