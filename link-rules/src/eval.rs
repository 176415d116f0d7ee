//! Evaluating rules against a visitor: plain functions of (rules, visitor facts, now), no allocation.

use crate::{ANY_VALUE, Conditions, Device, Os, Rule};

/// What the edge knows about one visitor request, as the rules read it.
#[derive(Debug, Clone, Copy)]
pub struct Visitor<'a> {
    /// ISO 3166-1 alpha-2 code (any case), when known.
    pub country: Option<&'a str>,
    /// Kind of device, when recognised.
    pub device: Option<Device>,
    /// Operating system, when recognised (an unrecognised one is [`Os::Other`] if the caller says so).
    pub os: Option<Os>,
    /// Primary subtag of the visitor's first language preference ([`primary_language`]).
    pub language: Option<&'a str>,
    /// The request's query parameters, decoded, in order.
    pub query: &'a [(&'a str, &'a str)],
    /// Now, UNIX milliseconds.
    pub now_ms: i64,
}

impl Visitor<'_> {
    /// A visitor about whom nothing is known, at `now_ms`.
    pub fn at(now_ms: i64) -> Self {
        Visitor {
            country: None,
            device: None,
            os: None,
            language: None,
            query: &[],
            now_ms,
        }
    }
}

/// The first rule whose conditions all hold for `visitor`, in order; `None`: the link's own destination.
pub fn first_match<'r>(rules: &'r [Rule], visitor: &Visitor<'_>) -> Option<&'r Rule> {
    rules.iter().find(|r| r.when.hold(visitor))
}

impl Conditions {
    /// Whether every set condition holds for `visitor`. A condition on a fact the visitor lacks (no country,
    /// an unrecognised device) does not hold. No conditions at all hold for everyone.
    pub fn hold(&self, v: &Visitor<'_>) -> bool {
        let listed = |list: &[alloc::string::String], value: Option<&str>| {
            list.is_empty() || value.is_some_and(|x| list.iter().any(|c| c.eq_ignore_ascii_case(x)))
        };
        listed(&self.country, v.country)
            && listed(&self.language, v.language)
            && (self.device.is_empty() || v.device.is_some_and(|d| self.device.contains(&d)))
            && (self.os.is_empty() || v.os.is_some_and(|o| self.os.contains(&o)))
            && self.after.is_none_or(|t| v.now_ms >= t)
            && self.before.is_none_or(|t| v.now_ms < t)
            && self.query.iter().all(|(name, want)| {
                v.query
                    .iter()
                    .any(|(k, value)| k == name && (want == ANY_VALUE || value == want))
            })
    }
}

/// The primary subtag (`de` of `de-CH`) of the first preference of an `Accept-Language` header: the entry with
/// the highest quality, the earliest of equals; `*`, entries with `q=0` and malformed entries are skipped.
pub fn primary_language(accept_language: &str) -> Option<&str> {
    let mut best: Option<(&str, u16)> = None;
    for entry in accept_language.split(',') {
        let mut parts = entry.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let primary = tag.split('-').next().unwrap_or_default();
        if primary.is_empty()
            || primary.len() > 8
            || !primary.bytes().all(|b| b.is_ascii_alphabetic())
        {
            continue;
        }
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1000), quality);
        let Some(q) = q.filter(|q| *q > 0) else {
            continue;
        };
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((primary, q));
        }
    }
    best.map(|(tag, _)| tag)
}

/// An RFC 9110 quality value (`1`, `0.8`, `0.125`) in thousandths; `None` when malformed.
fn quality(raw: &str) -> Option<u16> {
    let (whole, frac) = raw.split_once('.').unwrap_or((raw, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for i in 0..3 {
        let digit = frac.as_bytes().get(i).map_or(0, |b| u16::from(b - b'0'));
        thousandths = thousandths * 10 + digit;
    }
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn rule(when: Conditions, to: &str) -> Rule {
        Rule {
            when,
            to: to.into(),
        }
    }

    #[test]
    fn the_first_rule_that_holds_wins() {
        let rules = vec![
            rule(
                Conditions {
                    country: vec!["DE".into()],
                    device: vec![Device::Mobile],
                    ..Conditions::default()
                },
                "https://de-mobile/",
            ),
            rule(
                Conditions {
                    country: vec!["DE".into(), "AT".into()],
                    ..Conditions::default()
                },
                "https://dach/",
            ),
        ];
        let to = |v: Visitor<'_>| first_match(&rules, &v).map(|r| r.to.as_str());
        let de = Visitor {
            country: Some("de"),
            ..Visitor::at(0)
        };
        assert_eq!(to(de), Some("https://dach/"));
        assert_eq!(
            to(Visitor {
                device: Some(Device::Mobile),
                ..de
            }),
            Some("https://de-mobile/")
        );
        assert_eq!(to(Visitor::at(0)), None, "no country: no country rule");
        assert_eq!(
            to(Visitor {
                country: Some("FR"),
                ..Visitor::at(0)
            }),
            None
        );
    }

    #[test]
    fn time_windows_are_half_open() {
        let c = Conditions {
            after: Some(100),
            before: Some(200),
            ..Conditions::default()
        };
        assert!(!c.hold(&Visitor::at(99)));
        assert!(c.hold(&Visitor::at(100)));
        assert!(c.hold(&Visitor::at(199)));
        assert!(!c.hold(&Visitor::at(200)));
    }

    #[test]
    fn query_conditions() {
        let query = vec![
            (String::from("utm_source"), String::from("mail")),
            (String::from("ref"), String::from(ANY_VALUE)),
        ];
        let c = Conditions {
            query,
            ..Conditions::default()
        };
        let with = |q: &[(&str, &str)]| {
            c.hold(&Visitor {
                query: q,
                ..Visitor::at(0)
            })
        };
        assert!(with(&[("utm_source", "mail"), ("ref", "")]));
        assert!(with(&[
            ("ref", "x"),
            ("utm_source", "web"),
            ("utm_source", "mail")
        ]));
        assert!(!with(&[("utm_source", "mail")]), "ref must be present");
        assert!(
            !with(&[("utm_source", "Mail"), ("ref", "x")]),
            "values are exact"
        );
    }

    #[test]
    fn os_and_language() {
        let c = Conditions {
            os: vec![Os::Ios, Os::Macos],
            language: vec!["de".into()],
            ..Conditions::default()
        };
        let v = Visitor {
            os: Some(Os::Macos),
            language: primary_language("de-CH,de;q=0.9,en;q=0.8"),
            ..Visitor::at(0)
        };
        assert!(c.hold(&v));
        assert!(!c.hold(&Visitor {
            os: Some(Os::Android),
            ..v
        }));
        assert!(!c.hold(&Visitor { os: None, ..v }));
    }

    #[test]
    fn first_language_preference() {
        assert_eq!(primary_language("de-CH,de;q=0.9,en;q=0.8"), Some("de"));
        assert_eq!(primary_language("en;q=0.5, fr"), Some("fr"));
        assert_eq!(primary_language("*, pt-BR;q=0.9"), Some("pt"));
        assert_eq!(primary_language("en;q=0, es;q=0.1"), Some("es"));
        assert_eq!(primary_language("en;q=0.7, es;q=0.7"), Some("en"));
        assert_eq!(
            primary_language("en;q=2, es;q=0.1"),
            Some("es"),
            "a bad q is skipped"
        );
        assert_eq!(primary_language(""), None);
        assert_eq!(primary_language("1234, --"), None);
        assert_eq!(quality("0.125"), Some(125));
        assert_eq!(quality("1.000"), Some(1000));
        assert_eq!(quality("1.5"), None);
        assert_eq!(quality("0.1234"), None);
    }
}
