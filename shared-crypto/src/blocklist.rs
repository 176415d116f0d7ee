//! The blocked domain list: a listed domain blocks itself and its subdomains, nothing else.

use alloc::borrow::Cow;
use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;

// Byte searches, not `str`'s with a `char` pattern: crate::ascii says why.
use crate::ascii::{find_byte, trim_end_byte};
use crate::host::normalize_host;

/// A set of blocked destination domains.
///
/// `is_blocked("a.b.example.net")` is true when `a.b.example.net`, `b.example.net`, `example.net` or `net` is
/// listed; `notexample.net` is never blocked by `example.net`. This crate calls it with a host already normalized
/// by [`normalize_host`](crate::normalize_host) (lowercase, no trailing dot, no port); the implementations here
/// also accept unnormalized input.
pub trait Blocklist {
    /// Whether `host` or one of its parent domains is blocked.
    fn is_blocked(&self, host: &str) -> bool;
}

/// A list of domains, scanned linearly and compared case-insensitively. Fine for a handful of entries; use
/// [`DomainBlocklist`] for thousands.
impl<S: AsRef<str>> Blocklist for [S] {
    fn is_blocked(&self, host: &str) -> bool {
        self.iter()
            .any(|domain| domain_covers(domain.as_ref(), host))
    }
}

impl<S: AsRef<str>, const N: usize> Blocklist for [S; N] {
    fn is_blocked(&self, host: &str) -> bool {
        self.as_slice().is_blocked(host)
    }
}

impl<S: AsRef<str>> Blocklist for Vec<S> {
    fn is_blocked(&self, host: &str) -> bool {
        self.as_slice().is_blocked(host)
    }
}

impl<T: Blocklist + ?Sized> Blocklist for &T {
    fn is_blocked(&self, host: &str) -> bool {
        (**self).is_blocked(host)
    }
}

/// Whether blocked `domain` covers `host` (equal, or `host` ends with `.domain`), ignoring ASCII case and trailing
/// dots. An empty entry covers nothing.
fn domain_covers(domain: &str, host: &str) -> bool {
    let domain = trim_end_byte(domain, b'.').as_bytes();
    let host = trim_end_byte(host, b'.').as_bytes();
    if domain.is_empty() || host.len() < domain.len() {
        return false;
    }
    let split = host.len() - domain.len();
    host[split..].eq_ignore_ascii_case(domain) && (split == 0 || host[split - 1] == b'.')
}

/// A blocklist held as a sorted set of normalized domains; a lookup costs one set probe per label of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainBlocklist {
    domains: BTreeSet<String>,
}

impl DomainBlocklist {
    /// An empty blocklist.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a domain (normalized: ASCII whitespace trimmed, lowercased, trailing dots removed). Returns whether it
    /// was new; an empty domain is ignored and returns false.
    pub fn insert(&mut self, domain: &str) -> bool {
        let domain = normalize_host(crate::ascii::trim(domain));
        !domain.is_empty() && self.domains.insert(domain)
    }

    /// Removes a domain. Returns whether it was listed.
    pub fn remove(&mut self, domain: &str) -> bool {
        self.domains
            .remove(&normalize_host(crate::ascii::trim(domain)))
    }

    /// Number of listed domains.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    /// Whether no domain is listed.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The listed domains, normalized, in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(String::as_str)
    }
}

impl Blocklist for DomainBlocklist {
    fn is_blocked(&self, host: &str) -> bool {
        if self.domains.is_empty() {
            return false;
        }
        let host: Cow<'_, str> =
            if host.ends_with('.') || host.bytes().any(|b| b.is_ascii_uppercase()) {
                Cow::Owned(normalize_host(host))
            } else {
                Cow::Borrowed(host)
            };
        let mut suffix: &str = &host;
        loop {
            if self.domains.contains(suffix) {
                return true;
            }
            match find_byte(suffix, b'.') {
                Some(dot) => suffix = &suffix[dot + 1..],
                None => return false,
            }
        }
    }
}

impl<S: AsRef<str>> FromIterator<S> for DomainBlocklist {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut list = DomainBlocklist::new();
        list.extend(iter);
        list
    }
}

impl<S: AsRef<str>> Extend<S> for DomainBlocklist {
    fn extend<I: IntoIterator<Item = S>>(&mut self, iter: I) {
        for domain in iter {
            self.insert(domain.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(list: &dyn Blocklist) {
        for host in [
            "blocked.example.net",
            "a.b.blocked.example.net",
            "BLOCKED.Example.Net",
            "blocked.example.net.",
        ] {
            assert!(list.is_blocked(host), "{host} should be blocked");
        }
        for host in [
            "notblocked.example.net",
            "example.net",
            "blocked.example.network",
            "net",
            "",
            ".",
        ] {
            assert!(!list.is_blocked(host), "{host} should not be blocked");
        }
    }

    #[test]
    fn slice_blocklist() {
        check(&["blocked.example.net"]);
        check(&&["Blocked.Example.Net."][..]);
        check(&vec![String::from("blocked.example.net"), String::new()]);
    }

    #[test]
    fn set_blocklist() {
        let list: DomainBlocklist = ["Blocked.Example.NET.", "", "  "].into_iter().collect();
        assert_eq!(list.len(), 1);
        check(&list);
    }

    #[test]
    fn empty_entries_block_nothing() {
        let list: &[&str] = &["", "."];
        assert!(!list.is_blocked("anything.example"));
        assert!(!DomainBlocklist::new().is_blocked("anything.example"));
    }

    #[test]
    fn many_domains() {
        let mut list: DomainBlocklist = (0..5000).map(|i| format!("spam{i}.example")).collect();
        assert!(list.is_blocked("www.spam4999.example"));
        assert!(!list.is_blocked("spam5000.example"));
        assert!(list.remove("SPAM4999.example"));
        assert!(!list.is_blocked("www.spam4999.example"));
    }
}
