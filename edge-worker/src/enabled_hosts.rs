//! The hosts that serve dynamic links, as the blocklist's record names them
//! ([`kv_model::BlocklistRecord::enabled_hosts`]): what lets a new isolate's first visit to a dynamic link decide
//! without the host's own `domain:<host>` record, reading two KV keys in its first round rather than three
//! (BENCHMARKS.md, issue 28).

/// The enabled hosts, searched by halves when sorted by bytes, as the origin publishes them; a list that is not
/// (written by hand) is searched from end to end rather than trusted. Not sorted here: a sort of strings is several
/// kilobytes of wasm, for a list no origin writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EnabledHosts {
    hosts: Vec<String>,
    sorted: bool,
}

impl EnabledHosts {
    /// The hosts of a record, in any order.
    pub fn new(hosts: Vec<String>) -> Self {
        let sorted = hosts.is_sorted();
        EnabledHosts { hosts, sorted }
    }

    /// Whether `host` (normalized, as KV's keys hold it) is an enabled domain's.
    pub fn serves(&self, host: &str) -> bool {
        if self.sorted {
            self.hosts
                .binary_search_by(|listed| listed.as_str().cmp(host))
                .is_ok()
        } else {
            self.hosts.iter().any(|listed| listed == host)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hosts(list: &[&str]) -> EnabledHosts {
        EnabledHosts::new(list.iter().map(|h| (*h).to_owned()).collect())
    }

    #[test]
    fn names_exactly_the_listed_hosts() {
        let listed = hosts(&["a-b.example", "a.example", "go.example"]);
        for host in ["a-b.example", "a.example", "go.example"] {
            assert!(listed.serves(host), "{host}");
        }
        // No suffix, prefix or subdomain of a listed host is one: a host is served by its own domain only.
        for host in [
            "",
            "example",
            "b.example",
            "x.go.example",
            "go.example.",
            "go.exampl",
            "GO.example",
        ] {
            assert!(!listed.serves(host), "{host}");
        }
        assert!(!EnabledHosts::default().serves("a.example"));
    }

    proptest! {
        /// In any order, with repeats: the same answer as a linear search.
        #[test]
        fn any_order_serves_as_a_linear_search(
            list in prop::collection::vec("[a-c.-]{0,4}", 0..12),
            host in "[a-c.-]{0,4}",
        ) {
            let enabled = EnabledHosts::new(list.clone());
            prop_assert_eq!(enabled.serves(&host), list.contains(&host));
        }
    }
}
