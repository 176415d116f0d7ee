//! The hosts that the group's and the blocklist's records name as enabled domains (issue 28): a dynamic link's visit
//! is decided from its group, the blocklist and its domain's record, and when either of the first two names the
//! host, the domain's record need not be read. A new isolate's first visit to a dynamic link then reads two KV keys
//! in its round instead of three (BENCHMARKS.md, "Cold start").
//!
//! The origin publishes the names ([`kv_model::GroupRecord::enabled_hosts`]: its account's custom domains;
//! [`kv_model::BlocklistRecord::enabled_hosts`]: the platform's) and republishes both with every change of a
//! domain, so a name is as current as the domain's own record would be. A record names at most
//! [`kv_model::MAX_ENABLED_HOSTS`] hosts: a host neither names (another account's custom domain, which serves any
//! group's dynamic links; a disabled domain; one past the bound) is the domain record's to decide, as before.

use kv_model::{BlocklistRecord, DomainRecord, V1};
use shared_crypto::{Blocklist, DomainBlocklist};

use crate::decision::Group;

/// The blocklist's record as the isolate holds it: the blocked domains (what every check reads) and the enabled
/// platform domains' hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlocklistEntry {
    /// The blocked destination domains.
    list: DomainBlocklist,
    /// The record's [`BlocklistRecord::enabled_hosts`].
    enabled_hosts: Vec<String>,
}

impl From<BlocklistRecord> for BlocklistEntry {
    /// The record's lists, moved rather than copied (`DomainBlocklist::from` checks the order in place).
    fn from(record: BlocklistRecord) -> Self {
        BlocklistEntry {
            list: DomainBlocklist::from(record.domains),
            enabled_hosts: record.enabled_hosts,
        }
    }
}

impl Blocklist for BlocklistEntry {
    #[inline]
    fn is_blocked(&self, host: &str) -> bool {
        self.list.is_blocked(host)
    }
}

impl BlocklistEntry {
    /// Whether the record names `host` as an enabled platform domain.
    pub fn names_host(&self, host: &str) -> bool {
        kv_model::enabled_host(&self.enabled_hosts, host)
    }
}

/// What [`served_domain`] stands in for the record of a named host: enabled, no fallback URL of its own. Only a
/// redirect is decided from it: a fallback's URL is the domain record's, and the fast path leaves every fallback
/// to the full path, which reads that record.
static NAMED: DomainRecord = DomainRecord {
    v: V1,
    enabled: true,
    fallback_url: None,
};

/// The domain record a dynamic link's visit on `host` is decided with: `held`, the isolate's own fresh copy of it
/// (`Some(None)`: its absence), whatever it says, as the word on its host; else, when `group`'s or `blocklist`'s
/// record names `host`, an enabled domain ([`NAMED`]); else `None`, and the domain's record is to be read. A fresh
/// record wins over the names, though both are as fresh: the full path decides from the record, and the fast path
/// then gives the same answer.
pub fn served_domain<'a>(
    held: Option<Option<&'a DomainRecord>>,
    group: &Group,
    blocklist: &BlocklistEntry,
    host: &str,
) -> Option<Option<&'a DomainRecord>> {
    match held {
        Some(record) => Some(record),
        None if group.names_host(host) || blocklist.names_host(host) => Some(Some(&NAMED)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_model::{GroupRecord, GroupSettings};
    use shared_crypto::GroupKey;

    fn group(hosts: &[&str]) -> Group {
        let record = GroupRecord {
            enabled_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..GroupRecord::new(
                GroupKey::from_bytes([7; 32]).to_base64url(),
                GroupSettings::default(),
            )
        };
        Group::from_record(record).expect("a valid key")
    }

    fn blocklist(blocked: &[&str], hosts: &[&str]) -> BlocklistEntry {
        BlocklistEntry::from(BlocklistRecord {
            enabled_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..BlocklistRecord::new(blocked.iter().map(|d| d.to_string()).collect())
        })
    }

    #[test]
    fn a_named_host_is_an_enabled_domain_without_a_fallback_of_its_own() {
        let custom = group(&["links.acme.example"]);
        let platform = blocklist(&["evil.example"], &["sho.rt"]);
        for host in ["links.acme.example", "sho.rt"] {
            let domain = served_domain(None, &custom, &platform, host);
            assert_eq!(domain, Some(Some(&DomainRecord::new(true, None))), "{host}");
        }
        // Neither names it: the domain's record decides (another account's custom domain, a disabled one).
        for host in ["other.example", "a.sho.rt", "sho.r", "evil.example"] {
            assert_eq!(
                served_domain(None, &custom, &platform, host),
                None,
                "{host}"
            );
        }
        assert_eq!(
            served_domain(None, &group(&[]), &BlocklistEntry::default(), "sho.rt"),
            None
        );
    }

    #[test]
    fn a_held_record_is_the_word_on_its_host() {
        let named = group(&["links.acme.example"]);
        let list = blocklist(&[], &["sho.rt"]);
        let disabled = DomainRecord::new(false, Some("https://f.example/".into()));
        for host in ["links.acme.example", "sho.rt"] {
            assert_eq!(
                served_domain(Some(Some(&disabled)), &named, &list, host),
                Some(Some(&disabled))
            );
            // A cached absence too: the link falls back.
            assert_eq!(served_domain(Some(None), &named, &list, host), Some(None));
        }
        let enabled = DomainRecord::new(true, None);
        assert_eq!(
            served_domain(Some(Some(&enabled)), &group(&[]), &list, "x.example"),
            Some(Some(&enabled))
        );
    }

    #[test]
    fn the_entry_blocks_what_its_list_blocks() {
        let entry = blocklist(&["evil.example"], &["sho.rt"]);
        assert!(entry.is_blocked("a.evil.example"));
        assert!(!entry.is_blocked("sho.rt"));
        assert!(entry.names_host("sho.rt"));
        assert!(!entry.names_host("evil.example"));
    }
}
