//! The client's address, as the origin's limits see it: the TCP peer, or what a proxy in front of the origin says,
//! trusting only as much of the header as the operator's proxies write.
//!
//! `X-Forwarded-For` is a list every hop appends to, and its left-most entries are whatever the client sent, so
//! the address is the N-th from the right, N being the number of proxies the operator runs in front of the origin
//! (`--trusted-proxy-hops`). Single-value headers a proxy overwrites (`CF-Connecting-IP`, `X-Real-IP`) are taken
//! whole. A value that is not an IP address, or a list shorter than the hops (the request did not pass through
//! every proxy), is ignored: the peer address is used. Limits count IPv6 clients per /64, the block one subscriber
//! line gets, so rotating through one's own addresses does not multiply a budget.

use http::HeaderMap;
use http::header::HeaderName;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// Proxies trusted in front of the origin, when the operator names a list header and no count.
pub const DEFAULT_TRUSTED_PROXY_HOPS: usize = 1;
/// More hops than any real deployment has; a bound on the work a long header can cause.
pub const MAX_TRUSTED_PROXY_HOPS: usize = 16;
/// Entries of a forwarded list looked at, at most (from the right); the rest of a longer list is not parsed.
const MAX_LIST_ENTRIES: usize = 64;

/// Why a rule could not be made from the configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    /// The header name is not a valid HTTP header name.
    #[error("not a valid header name: {0:?}")]
    HeaderName(String),
    /// The hop count is outside 1..=16.
    #[error("trusted proxy hops must be between 1 and {MAX_TRUSTED_PROXY_HOPS}, not {0}")]
    Hops(usize),
}

/// Where a request's client address is read from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientAddrRule {
    from: Option<Header>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    name: HeaderName,
    /// `Some(n)`: a list, the n-th entry from the right (1 = the last); None: a single value.
    list_hop: Option<usize>,
}

impl ClientAddrRule {
    /// The TCP peer: the origin is reached directly, with no proxy in front.
    pub fn peer() -> Self {
        Self { from: None }
    }

    /// A header set by the operator's proxy. `X-Forwarded-For` is read as a list, `trusted_hops` entries from the
    /// right; any other header (`CF-Connecting-IP`, `X-Real-IP`, …) as one address.
    pub fn header(name: &str, trusted_hops: usize) -> Result<Self, RuleError> {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| RuleError::HeaderName(name.to_owned()))?;
        if !(1..=MAX_TRUSTED_PROXY_HOPS).contains(&trusted_hops) {
            return Err(RuleError::Hops(trusted_hops));
        }
        let list_hop = (name == "x-forwarded-for").then_some(trusted_hops);
        Ok(Self {
            from: Some(Header { name, list_hop }),
        })
    }

    /// The header read, if any (for logs at start).
    pub fn header_name(&self) -> Option<&str> {
        self.from.as_ref().map(|h| h.name.as_str())
    }

    /// The client's address: from the header when it yields one, else `peer` (None only when neither does).
    pub fn resolve(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Option<IpAddr> {
        self.from
            .as_ref()
            .and_then(|h| h.read(headers))
            .or(peer)
            .map(unmap)
    }
}

impl Header {
    fn read(&self, headers: &HeaderMap) -> Option<IpAddr> {
        match self.list_hop {
            None => {
                // One value: a second header line would be a client's addition, so two lines are no answer.
                let mut values = headers.get_all(&self.name).iter();
                let value = values.next()?;
                if values.next().is_some() {
                    return None;
                }
                parse_addr(value.to_str().ok()?)
            }
            Some(hop) => {
                // Several header lines are one list, in order (RFC 9110 5.3); proxies append to the last.
                let lines: Vec<&str> = headers
                    .get_all(&self.name)
                    .iter()
                    .map(|v| v.to_str().ok())
                    .collect::<Option<_>>()?;
                let entry = lines
                    .iter()
                    .rev()
                    .flat_map(|line| line.rsplit(','))
                    .take(MAX_LIST_ENTRIES)
                    .nth(hop - 1)?;
                parse_addr(entry)
            }
        }
    }
}

/// An address as proxies write it: `203.0.113.7`, `2001:db8::1`, or with a port (`203.0.113.7:4711`,
/// `[2001:db8::1]:4711`).
fn parse_addr(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    if text.len() > 64 {
        return None;
    }
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// `::ffff:203.0.113.7` is the IPv4 client it stands for (a dual-stack socket reports IPv4 peers so).
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// What a limit counts a client by: an IPv4 address as it is, an IPv6 address by its /64.
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match unmap(ip) {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9));

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_peer_when_no_header_is_trusted() {
        let rule = ClientAddrRule::peer();
        let h = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("cf-connecting-ip", "1.2.3.4"),
        ]);
        assert_eq!(rule.resolve(&h, Some(PEER)), Some(PEER));
        assert_eq!(rule.resolve(&h, None), None);
    }

    #[test]
    fn forwarded_for_is_read_from_the_right_by_the_trusted_hops() {
        let one = ClientAddrRule::header("X-Forwarded-For", 1).unwrap();
        let two = ClientAddrRule::header("x-forwarded-for", 2).unwrap();
        // The client wrote 6.6.6.6 itself; nginx appended the address it saw.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.7")]);
        assert_eq!(one.resolve(&h, Some(PEER)), Some(ip("203.0.113.7")));
        assert_eq!(two.resolve(&h, Some(PEER)), Some(ip("6.6.6.6")));
        // Two header lines are one list.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.1, 203.0.113.7"),
        ]);
        assert_eq!(two.resolve(&h, Some(PEER)), Some(ip("198.51.100.1")));
        // Shorter than the hops: the request skipped a proxy, so the list says nothing trustworthy.
        let h = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(two.resolve(&h, Some(PEER)), Some(PEER));
    }

    #[test]
    fn rotating_the_left_of_the_list_changes_nothing() {
        let rule = ClientAddrRule::header("X-Forwarded-For", 1).unwrap();
        let a = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.7")]);
        let b = headers(&[("x-forwarded-for", "2.2.2.2,3.3.3.3 , 203.0.113.7")]);
        assert_eq!(rule.resolve(&a, Some(PEER)), rule.resolve(&b, Some(PEER)));
    }

    #[test]
    fn single_value_headers_are_taken_whole() {
        let rule = ClientAddrRule::header("CF-Connecting-IP", 1).unwrap();
        let h = headers(&[("cf-connecting-ip", " 2001:db8::7 ")]);
        assert_eq!(rule.resolve(&h, Some(PEER)), Some(ip("2001:db8::7")));
        // A list in a single-value header is not an address.
        let h = headers(&[("cf-connecting-ip", "1.2.3.4, 5.6.7.8")]);
        assert_eq!(rule.resolve(&h, Some(PEER)), Some(PEER));
        // Two lines: one of them was not the proxy's.
        let h = headers(&[
            ("cf-connecting-ip", "1.2.3.4"),
            ("cf-connecting-ip", "5.6.7.8"),
        ]);
        assert_eq!(rule.resolve(&h, Some(PEER)), Some(PEER));
    }

    #[test]
    fn what_is_not_an_address_is_ignored() {
        let rule = ClientAddrRule::header("X-Real-IP", 1).unwrap();
        for junk in ["unknown", "", "1.2.3", "<script>", "999.1.1.1"] {
            let mut h = HeaderMap::new();
            h.insert("x-real-ip", HeaderValue::from_str(junk).unwrap());
            assert_eq!(rule.resolve(&h, Some(PEER)), Some(PEER), "{junk:?}");
        }
        let long = "1".repeat(100);
        let mut h = HeaderMap::new();
        h.insert("x-real-ip", HeaderValue::from_str(&long).unwrap());
        assert_eq!(rule.resolve(&h, Some(PEER)), Some(PEER));
        // Missing header: the peer.
        assert_eq!(rule.resolve(&HeaderMap::new(), Some(PEER)), Some(PEER));
    }

    #[test]
    fn ports_and_mapped_addresses() {
        let rule = ClientAddrRule::header("X-Forwarded-For", 1).unwrap();
        let h = headers(&[("x-forwarded-for", "[2001:db8::1]:443")]);
        assert_eq!(rule.resolve(&h, None), Some(ip("2001:db8::1")));
        let h = headers(&[("x-forwarded-for", "203.0.113.7:5000")]);
        assert_eq!(rule.resolve(&h, None), Some(ip("203.0.113.7")));
        let h = headers(&[("x-forwarded-for", "::ffff:203.0.113.7")]);
        assert_eq!(rule.resolve(&h, None), Some(ip("203.0.113.7")));
        assert_eq!(
            ClientAddrRule::peer().resolve(&HeaderMap::new(), Some(ip("::ffff:10.0.0.9"))),
            Some(PEER)
        );
    }

    #[test]
    fn limits_count_ipv6_per_64() {
        assert_eq!(
            limit_key(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            limit_key(ip("2001:db8:1:2::1")),
            limit_key(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:2::1")),
            limit_key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(limit_key(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(limit_key(ip("::ffff:203.0.113.7")), ip("203.0.113.7"));
    }

    #[test]
    fn configuration_is_checked() {
        assert_eq!(
            ClientAddrRule::header("bad header", 1),
            Err(RuleError::HeaderName("bad header".to_owned()))
        );
        assert_eq!(
            ClientAddrRule::header("X-Forwarded-For", 0),
            Err(RuleError::Hops(0))
        );
        assert_eq!(
            ClientAddrRule::header("X-Forwarded-For", 17),
            Err(RuleError::Hops(17))
        );
        assert_eq!(
            ClientAddrRule::header("X-Real-IP", 3)
                .unwrap()
                .header_name(),
            Some("x-real-ip")
        );
    }
}
