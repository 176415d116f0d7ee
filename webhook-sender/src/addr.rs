//! Which endpoint URLs and addresses a webhook may be sent to (against SSRF).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use url::{Host, Url};

/// Longest endpoint URL accepted, in characters.
pub const MAX_URL_LEN: usize = 2048;

/// Why an endpoint URL is refused. Each message is safe to show the client who gave the URL: it names the rule, not
/// an address the server resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Longer than [`MAX_URL_LEN`] characters.
    #[error("url must be at most 2048 characters")]
    TooLong,
    /// Not an absolute URL.
    #[error("url must be an absolute URL")]
    Invalid,
    /// Not `https` (nor `http` where private targets are allowed).
    #[error("url must use https")]
    Scheme,
    /// Carries a user name or password.
    #[error("url must not contain a user name or password")]
    Userinfo,
    /// Has no host.
    #[error("url must have a host")]
    NoHost,
    /// Its host is, or resolves to, a loopback, private, link-local or otherwise non-public address.
    #[error(
        "url's host must not be a loopback, private, link-local or otherwise non-public address"
    )]
    NotPublic,
    /// Its host does not resolve.
    #[error("url's host does not resolve")]
    DoesNotResolve,
}

/// Checks an endpoint URL as given by a client: absolute, https (http also allowed only when `allow_private`), at
/// most 2048 chars, no userinfo, a host; and, unless `allow_private`, a host that is not an IP literal in a
/// non-public range (nor `localhost` or a name under `.localhost`, which always mean loopback). Err has a
/// client-safe message.
///
/// The URL is parsed the WHATWG way, so `https://0x7f.1/` or `https://2130706433/` are seen as `127.0.0.1`. A
/// host name is not resolved here: see [`resolve_public`] and [`crate::Sender`].
pub fn check_url(url: &str, allow_private: bool) -> Result<Url, UrlError> {
    if url.chars().count() > MAX_URL_LEN {
        return Err(UrlError::TooLong);
    }
    let parsed = Url::parse(url).map_err(|_| UrlError::Invalid)?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err(UrlError::Scheme),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlError::Userinfo);
    }
    let host = match parsed.host() {
        None => return Err(UrlError::NoHost),
        Some(Host::Domain("")) => return Err(UrlError::NoHost),
        Some(host) => host,
    };
    if !allow_private && !host_may_be_public(&host) {
        return Err(UrlError::NotPublic);
    }
    Ok(parsed)
}

/// False for IP literals outside public ranges and for the `localhost` names.
fn host_may_be_public(host: &Host<&str>) -> bool {
    match host {
        Host::Ipv4(ip) => is_public(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => is_public(IpAddr::V6(*ip)),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name != "localhost" && !name.ends_with(".localhost")
        }
    }
}

/// True for loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16 incl. metadata
/// 169.254.169.254, fe80::/10), CGNAT 100.64/10, unspecified, broadcast, multicast, documentation, benchmarking,
/// reserved, IPv4-mapped/compat forms of those, 6to4/NAT64 embedding them, etc.
///
/// Precisely, `false` for: IPv4 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.0.2/24,
/// 192.88.99/24, 192.168/16, 198.18/15, 198.51.100/24, 203.0.113/24, 224/4, 240/4 (with 255.255.255.255); IPv6
/// outside the global unicast 2000::/3 (so ::, ::1, 100::/64, 5f00::/16, fc00::/7, fe80::/10, fec0::/10, ff00::/8),
/// IPv4-compatible ::/96 (deprecated), 64:ff9b:1::/48, 2001::/23 (protocol assignments, with Teredo and
/// benchmarking), 2001:db8::/32 and 3fff::/20 (documentation); and for ::ffff:0:0/96, 64:ff9b::/96 and 2002::/16,
/// whatever the IPv4 address they carry is.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

/// IPv4 ranges that are not reachable public unicast (IANA special-purpose registry, conservatively).
const V4_NOT_PUBLIC: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),       // "this network", with the unspecified 0.0.0.0
    ([10, 0, 0, 0], 8),      // private
    ([100, 64, 0, 0], 10),   // shared address space (CGNAT)
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local, with cloud metadata 169.254.169.254
    ([172, 16, 0, 0], 12),   // private
    ([192, 0, 0, 0], 24),    // IETF protocol assignments
    ([192, 0, 2, 0], 24),    // documentation (TEST-NET-1)
    ([192, 88, 99, 0], 24),  // deprecated 6to4 relay anycast
    ([192, 168, 0, 0], 16),  // private
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // documentation (TEST-NET-2)
    ([203, 0, 113, 0], 24),  // documentation (TEST-NET-3)
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, with the broadcast 255.255.255.255
];

fn is_public_v4(ip: Ipv4Addr) -> bool {
    !V4_NOT_PUBLIC
        .iter()
        .any(|&(net, prefix)| in_v4(ip, net, prefix))
}

/// The IPv4 address in the low 32 bits.
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32)
}

const fn v6(segments: [u16; 8]) -> Ipv6Addr {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Addr::new(a, b, c, d, e, f, g, h)
}

/// IPv6 ranges inside 2000::/3 that are not reachable public unicast.
const V6_NOT_PUBLIC: &[(Ipv6Addr, u32)] = &[
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 23), // IETF protocol assignments: Teredo, benchmarking, ORCHID…
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]), 32), // documentation
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]), 20), // documentation (RFC 9637)
];

fn is_public_v6(ip: Ipv6Addr) -> bool {
    // ::ffff:a.b.c.d reaches a.b.c.d on a dual-stack socket.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // ::/96: unspecified, loopback, and the deprecated IPv4-compatible form; none is a real destination.
    if in_v6(ip, Ipv6Addr::UNSPECIFIED, 96) {
        return false;
    }
    // NAT64 (well-known prefix): the gateway forwards to the embedded IPv4 address.
    if in_v6(ip, v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), 96) {
        return is_public_v4(low_v4(ip));
    }
    // 6to4: the embedded IPv4 address is in bits 16..48.
    if in_v6(ip, v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16) {
        let [_, hi, lo, ..] = ip.segments();
        return is_public_v4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    }
    // Only global unicast is public (64:ff9b:1::/48, local-use NAT64, falls outside it too).
    if !in_v6(ip, v6([0x2000, 0, 0, 0, 0, 0, 0, 0]), 3) {
        return false;
    }
    !V6_NOT_PUBLIC
        .iter()
        .any(|&(net, prefix)| in_v6(ip, net, prefix))
}

/// Resolves the URL's host now (creation-time check): Err when it does not resolve or any address is not public
/// (unless allow_private).
///
/// An IP-literal host is not looked up. The port is the URL's, or its scheme's default. Delivery checks again at
/// connect time ([`crate::Sender`]), so a name that resolves differently later (DNS rebinding) still cannot reach a
/// private address.
pub async fn resolve_public(url: &Url, allow_private: bool) -> Result<Vec<SocketAddr>, UrlError> {
    let port = url.port_or_known_default().ok_or(UrlError::Invalid)?;
    let addrs: Vec<SocketAddr> = match url.host() {
        None => return Err(UrlError::NoHost),
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|_| UrlError::DoesNotResolve)?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(UrlError::DoesNotResolve);
    }
    if !allow_private && addrs.iter().any(|a| !is_public(a.ip())) {
        return Err(UrlError::NotPublic);
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_ipv4() {
        for s in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.0",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.0.1",
            "169.254.169.254",
            "169.254.255.255",
            "172.16.0.1",
            "172.20.10.10",
            "172.31.255.255",
            "192.0.0.1",
            "192.0.0.170",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.0.1",
            "192.168.255.255",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.254",
            "255.255.255.255",
        ] {
            assert!(!is_public(ip(s)), "{s} should not be public");
        }
    }

    #[test]
    fn public_ipv4() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.0.3.1",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "203.0.114.1",
            "223.255.255.255",
        ] {
            assert!(is_public(ip(s)), "{s} should be public");
        }
    }

    #[test]
    fn non_public_ipv6() {
        for s in [
            "::",
            "::1",
            // IPv4-compatible (deprecated), of private and public addresses alike
            "::127.0.0.1",
            "::10.0.0.1",
            "::8.8.8.8",
            // IPv4-mapped forms of non-public IPv4
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::ffff:100.64.0.1",
            "::ffff:192.168.1.1",
            "::ffff:0.0.0.0",
            "::ffff:255.255.255.255",
            // NAT64 embedding non-public IPv4, and local-use NAT64
            "64:ff9b::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b::169.254.169.254",
            "64:ff9b:1::1",
            "64:ff9b:1:ffff::8.8.8.8",
            // 6to4 embedding non-public IPv4
            "2002:7f00:1::",
            "2002:a00:1::1",
            "2002:a9fe:a9fe::1",
            "2002:c0a8:101::1",
            // discard-only, SRv6 SIDs, ULA, link-local, site-local, multicast
            "100::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456:789a::1",
            "fe80::1",
            "febf:ffff::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
            // protocol assignments: Teredo, benchmarking, ORCHIDv2
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:20::1",
            // documentation
            "2001:db8::1",
            "2001:db8:ffff::1",
            "3fff::1",
            "3fff:fff::1",
            // reserved, outside 2000::/3
            "4000::1",
            "8000::1",
            "e000::1",
        ] {
            assert!(!is_public(ip(s)), "{s} should not be public");
        }
    }

    #[test]
    fn public_ipv6() {
        for s in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
            "2001:200::1",
            "2001:db7:ffff::1",
            "2001:db9::1",
            "3fff:1000::1",
            "::ffff:8.8.8.8",
            "::ffff:1.1.1.1",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(s)), "{s} should be public");
        }
    }

    #[test]
    fn check_url_accepts() {
        let u = check_url("https://hooks.example.com/in?x=1", false).unwrap();
        assert_eq!(u.host_str(), Some("hooks.example.com"));
        assert!(check_url("https://8.8.8.8:8443/hook", false).is_ok());
        assert!(check_url("https://[2606:4700:4700::1111]/hook", false).is_ok());
        // With the operator flag: loopback, private ranges and plain http.
        assert!(check_url("http://127.0.0.1:9999/hook", true).is_ok());
        assert!(check_url("http://localhost:9999/hook", true).is_ok());
        assert!(check_url("https://10.0.0.1/hook", true).is_ok());
        assert!(check_url("http://[::1]:8080/", true).is_ok());
        // Exactly 2048 characters.
        let base = "https://example.com/";
        let url = format!("{base}{}", "a".repeat(MAX_URL_LEN - base.len()));
        assert!(check_url(&url, false).is_ok());
    }

    #[test]
    fn check_url_refusals() {
        let refused = |url: &str, allow: bool| check_url(url, allow).unwrap_err();
        assert_eq!(refused("", false), UrlError::Invalid);
        assert_eq!(refused("not a url", false), UrlError::Invalid);
        assert_eq!(refused("/relative/path", false), UrlError::Invalid);
        assert_eq!(refused("https://", false), UrlError::Invalid);
        assert_eq!(refused("http://example.com/", false), UrlError::Scheme);
        assert_eq!(refused("ftp://example.com/", false), UrlError::Scheme);
        assert_eq!(refused("ftp://example.com/", true), UrlError::Scheme);
        assert_eq!(refused("file:///etc/passwd", true), UrlError::Scheme);
        assert_eq!(refused("javascript:alert(1)", true), UrlError::Scheme);
        assert_eq!(
            refused("https://user@example.com/", false),
            UrlError::Userinfo
        );
        assert_eq!(
            refused("https://user:pw@example.com/", true),
            UrlError::Userinfo
        );
        assert_eq!(
            refused("https://:pw@example.com/", false),
            UrlError::Userinfo
        );
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(refused(&long, false), UrlError::TooLong);
        assert_eq!(refused(&long, true), UrlError::TooLong);
        for url in [
            "https://127.0.0.1/",
            "https://127.0.0.1:8443/hook",
            "https://10.0.0.1/",
            "https://10.200.3.4/",
            "https://172.16.0.1/",
            "https://192.168.1.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://255.255.255.255/",
            "https://[::1]/",
            "https://[::]/",
            "https://[fe80::1]/",
            "https://[fd00::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:169.254.169.254]/",
            "https://[64:ff9b::a00:1]/",
            "https://[2002:7f00:1::]/",
            // WHATWG forms of 127.0.0.1
            "https://2130706433/",
            "https://0x7f.1/",
            "https://0177.0.0.1/",
            "https://127.1/",
            // names that always mean loopback
            "https://localhost/",
            "https://LOCALHOST.:8443/",
            "https://api.localhost/",
        ] {
            assert_eq!(refused(url, false), UrlError::NotPublic, "{url}");
        }
    }

    #[test]
    fn messages_are_client_safe() {
        let msg = check_url("https://169.254.169.254/", false)
            .unwrap_err()
            .to_string();
        assert!(!msg.contains("169.254"), "{msg}");
        assert!(msg.starts_with("url"), "{msg}");
    }

    #[tokio::test]
    async fn resolve_public_refuses_localhost_and_private_literals() {
        let url = Url::parse("https://localhost:8443/").unwrap();
        assert_eq!(
            resolve_public(&url, false).await.unwrap_err(),
            UrlError::NotPublic
        );
        let allowed = resolve_public(&url, true).await.unwrap();
        assert!(
            allowed
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 8443)
        );

        let url = Url::parse("https://127.0.0.1/").unwrap();
        assert_eq!(
            resolve_public(&url, false).await.unwrap_err(),
            UrlError::NotPublic
        );
        let url = Url::parse("https://[::1]/").unwrap();
        assert_eq!(
            resolve_public(&url, false).await.unwrap_err(),
            UrlError::NotPublic
        );
        let url = Url::parse("http://10.1.2.3/").unwrap();
        assert_eq!(
            resolve_public(&url, true).await.unwrap(),
            vec!["10.1.2.3:80".parse::<SocketAddr>().unwrap()]
        );
    }

    #[tokio::test]
    async fn resolve_public_passes_public_literals_without_lookup() {
        let url = Url::parse("https://8.8.8.8/").unwrap();
        assert_eq!(
            resolve_public(&url, false).await.unwrap(),
            vec!["8.8.8.8:443".parse::<SocketAddr>().unwrap()]
        );
    }

    #[tokio::test]
    async fn resolve_public_reports_names_that_do_not_resolve() {
        // `.invalid` never resolves (RFC 6761).
        let url = Url::parse("https://no-such-host.invalid/").unwrap();
        assert_eq!(
            resolve_public(&url, false).await.unwrap_err(),
            UrlError::DoesNotResolve
        );
    }
}
