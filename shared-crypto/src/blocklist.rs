//! The blocked domain list: a listed domain blocks itself and its subdomains, nothing else.

use alloc::borrow::Cow;
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

/// A blocklist held as a sorted list of normalized domains, each once; a lookup costs one binary search per label of
/// the host.
///
/// A sorted `Vec` rather than a `BTreeSet`: the edge worker builds one from KV's record on a new isolate's first
/// visit to a dynamic link, and a B-tree's insertion (node splits and all) is several KB of wasm that visit would
/// compile first; the list the origin publishes is already in order, so building it here is a pass that checks the
/// order, with a sort only for a list that is not (BENCHMARKS.md, issue 28).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainBlocklist {
    /// Normalized, non-empty, strictly ascending by bytes.
    domains: Vec<String>,
}

impl DomainBlocklist {
    /// An empty blocklist.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a domain (normalized: ASCII whitespace trimmed, lowercased, trailing dots removed). Returns whether it
    /// was new; an empty domain is ignored and returns false. Moves the domains after it: to build a list, collect
    /// or extend, which puts it in order once.
    pub fn insert(&mut self, domain: &str) -> bool {
        let domain = normalize_host(crate::ascii::trim(domain));
        if domain.is_empty() {
            return false;
        }
        match self.position(&domain) {
            Ok(_) => false,
            Err(at) => {
                self.domains.insert(at, domain);
                true
            }
        }
    }

    /// Removes a domain (moving the domains after it). Returns whether it was listed.
    pub fn remove(&mut self, domain: &str) -> bool {
        match self.position(&normalize_host(crate::ascii::trim(domain))) {
            Ok(at) => {
                self.domains.remove(at);
                true
            }
            Err(_) => false,
        }
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

    /// Where `domain` (normalized) is, or where it would go.
    fn position(&self, domain: &str) -> Result<usize, usize> {
        self.domains.binary_search_by(|d| d.as_str().cmp(domain))
    }
}

/// Puts `domains` in order, each once: for a list that came in another order than the bytes' (the origin's
/// database may collate otherwise), out of line so that building an ordered one does not carry the sort.
#[cold]
#[inline(never)]
fn sort_and_dedup(domains: &mut Vec<String>) {
    domains.sort_unstable();
    domains.dedup();
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
            if self.position(suffix).is_ok() {
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
    /// The domains normalized and appended, then put in order once (not one insertion each, which would move the
    /// list's tail every time).
    fn extend<I: IntoIterator<Item = S>>(&mut self, iter: I) {
        let before = self.domains.len();
        for domain in iter {
            let domain = normalize_host(crate::ascii::trim(domain.as_ref()));
            if !domain.is_empty() {
                self.domains.push(domain);
            }
        }
        self.put_in_order(before);
    }
}

/// The list's domains, normalized where they are (each replaced by its normalized copy, an empty one dropped), then
/// put in order once: what collecting them gives, without building a second list. The edge worker makes a new
/// isolate's blocklist this way from the record it read, and a second list is a second vector's growth that its
/// first visit to a dynamic link would compile (edge-worker's BENCHMARKS.md, issue 28).
impl From<Vec<String>> for DomainBlocklist {
    fn from(mut domains: Vec<String>) -> Self {
        let mut kept = 0;
        for i in 0..domains.len() {
            let domain = normalize_host(crate::ascii::trim(&domains[i]));
            if !domain.is_empty() {
                domains[kept] = domain;
                kept += 1;
            }
        }
        domains.truncate(kept);
        let mut list = DomainBlocklist { domains };
        list.put_in_order(0);
        list
    }
}

impl DomainBlocklist {
    /// Puts the list in order, each domain once, after domains were appended from index `appended` on.
    fn put_in_order(&mut self, appended: usize) {
        // Already in order, each once, as the origin publishes it (the usual case): nothing to do. The check
        // starts at the last domain held before, so that appending to a list checks the seam too.
        let ordered = self.domains[appended.saturating_sub(1)..]
            .windows(2)
            .all(|pair| pair[0] < pair[1]);
        if !ordered {
            sort_and_dedup(&mut self.domains);
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
    fn a_list_of_domains_becomes_the_blocklist_its_collection_gives() {
        for domains in [
            vec!["b.example", "a.example"],
            vec!["Blocked.Example.NET.", "", "  ", "blocked.example.net"],
            vec![" Z.example ", "y.example.", "x.example", "y.example"],
            vec![],
            vec!["", " ."],
        ] {
            let owned: Vec<String> = domains.iter().map(|d| String::from(*d)).collect();
            let collected: DomainBlocklist = domains.iter().collect();
            assert_eq!(DomainBlocklist::from(owned), collected, "{domains:?}");
        }
        check(&DomainBlocklist::from(vec![String::from(
            " Blocked.Example.NET. ",
        )]));
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

    /// Whatever the order and repetitions of what it is built from, and however it is built (at once, in parts,
    /// one insertion at a time), the list holds each normalized domain once, in order, as a set would.
    #[test]
    fn any_order_builds_the_same_list() {
        let inputs: [&[&str]; 5] = [
            &["b.example", "a.example", "c.example"],
            &["a.example", "b.example", "c.example"],
            &[
                "c.example",
                "C.example.",
                "b.example",
                "a.example",
                " a.example ",
                "b.example",
            ],
            &["a.example", "a.example", "b.example", "", "c.example"],
            &["c.example", "b.example", "a.example"],
        ];
        for input in inputs {
            let at_once: DomainBlocklist = input.iter().collect();
            assert_eq!(
                at_once.iter().collect::<Vec<_>>(),
                ["a.example", "b.example", "c.example"],
                "{input:?}"
            );
            let mut in_parts: DomainBlocklist = input[..input.len() / 2].iter().collect();
            in_parts.extend(&input[input.len() / 2..]);
            assert_eq!(in_parts, at_once, "{input:?}");
            let mut one_by_one = DomainBlocklist::new();
            for domain in input {
                one_by_one.insert(domain);
            }
            assert_eq!(one_by_one, at_once, "{input:?}");
            check_lookups(&at_once);
        }
        // Appending something smaller than what is held is noticed at the seam.
        let mut list: DomainBlocklist = ["m.example"].into_iter().collect();
        list.extend(["b.example", "z.example"]);
        assert_eq!(
            list.iter().collect::<Vec<_>>(),
            ["b.example", "m.example", "z.example"]
        );
        assert!(!list.insert("B.example"));
        assert!(list.remove("m.example."));
        assert!(!list.remove("m.example"));
        assert_eq!(list.len(), 2);
    }

    fn check_lookups(list: &DomainBlocklist) {
        for host in ["a.example", "www.b.example", "C.EXAMPLE."] {
            assert!(list.is_blocked(host), "{host}");
        }
        for host in ["example", "d.example", "aa.example", "a.example.net"] {
            assert!(!list.is_blocked(host), "{host}");
        }
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
