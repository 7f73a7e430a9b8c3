//! What the proxy lets through: pure decisions over names, addresses and ports, so that every
//! rule can be tested without a socket.
//!
//! Names are matched against the allow list *before* anything is resolved (a lookup of an
//! unlisted name would already leak it to a DNS server), and the addresses a listed name resolves
//! to are checked again: a public name that resolves to 127.0.0.1 or 10.x must not become a way
//! into the host's own services or the local network (DNS rebinding).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::spec::{NetPolicy, NetSpecError, normalize_domain};

const RAW_IP: &str = "raw IP address not on the allow list";
const NOT_LISTED: &str = "name not on the allow list";
const INVALID_NAME: &str = "invalid host name";
const UNRESOLVED: &str = "did not resolve";
/// The start of the refusal of a name whose every address is special ([`only_special`]).
const ONLY_SPECIAL: &str = "resolves only to addresses the proxy does not reach for a name";

/// One entry of `allow=`: an exact name, or `*.parent` for every name below `parent` (at any
/// depth, but not `parent` itself, which has to be listed on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainPattern {
    Exact(String),
    /// Holds the parent, without the `*.`.
    Subdomains(String),
}

impl DomainPattern {
    /// Parses `api.anthropic.com` or `*.npmjs.org` (case-insensitive, final dot ignored).
    pub fn parse(pattern: &str) -> Result<DomainPattern, &'static str> {
        let norm = normalize_domain(pattern, true)?;
        Ok(match norm.strip_prefix("*.") {
            Some(parent) => DomainPattern::Subdomains(parent.to_string()),
            None => DomainPattern::Exact(norm),
        })
    }

    /// Whether `host` is covered, ignoring case and a final dot.
    pub fn matches(&self, host: &str) -> bool {
        let h = host.strip_suffix('.').unwrap_or(host).as_bytes();
        match self {
            DomainPattern::Exact(name) => h.eq_ignore_ascii_case(name.as_bytes()),
            DomainPattern::Subdomains(parent) => {
                let p = parent.as_bytes();
                // At least one character and a dot before the parent: "evilexample.com" is not
                // below "example.com", and neither is ".example.com".
                if h.len() < p.len() + 2 {
                    return false;
                }
                let dot = h.len() - p.len() - 1;
                h[dot + 1..].eq_ignore_ascii_case(p) && h[dot] == b'.' && h[dot - 1] != b'.'
            }
        }
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainPattern::Exact(n) => f.write_str(n),
            DomainPattern::Subdomains(p) => write!(f, "*.{p}"),
        }
    }
}

/// Why the proxy refused a destination; the reason is shown to the client and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
}

impl Refusal {
    fn new(reason: &str) -> Self {
        Refusal {
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

/// True for addresses the proxy must not reach on behalf of a name: everything that is not a
/// globally routed unicast address, so the host itself, its LAN, cloud metadata services
/// (169.254.169.254) and the provider's shared address space. IPv6 forms that carry an IPv4
/// address (mapped, compatible, NAT64, 6to4) are judged by the address they carry.
pub fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network", including 0.0.0.0
        || a == 10
        || a == 127
        || a >= 224 // multicast 224/4, reserved 240/4, broadcast
        || (a == 100 && (64..128).contains(&b)) // CGNAT shared space
        || (a == 169 && b == 254) // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation (TEST-NET-1)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
}

fn special_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let s = ip.segments();
    let low_v4 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    match bits >> 32 {
        // ::/96: unspecified, loopback and the deprecated IPv4-compatible form; nothing public
        // legitimately resolves to it.
        0 => return true,
        // ::ffff:0:0/96 (mapped) and ::ffff:0:0:0/96 (SIIT translated) reach the IPv4 address.
        0xffff | 0xffff_0000 => return special_v4(low_v4),
        _ => {}
    }
    // NAT64 well-known prefix 64:ff9b::/96 reaches the embedded IPv4 address.
    if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return special_v4(low_v4);
    }
    // 6to4 2002::/16 carries the IPv4 address in the next 32 bits.
    if s[0] == 0x2002 {
        return special_v4(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    // Only global unicast 2000::/3 is routed on the internet: this also covers ULA fc00::/7,
    // link-local fe80::/10, site-local fec0::/10, multicast ff00::/8, discard 100::/64 and the
    // local-use NAT64 prefix 64:ff9b:1::/48.
    if s[0] & 0xe000 != 0x2000 {
        return true;
    }
    // Teredo 2001::/32 tunnels to an IPv4 server we cannot judge; 2001:db8::/32 and 3fff::/20
    // are documentation.
    (s[0] == 0x2001 && (s[1] == 0 || s[1] == 0x0db8)) || (s[0] == 0x3fff && s[1] & 0xf000 == 0)
}

/// The range a special address lies in, by name (what [`is_special`] refuses it for).
pub fn special_range(ip: IpAddr) -> &'static str {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            match (a, b, c) {
                (0, _, _) => "\"this network\" 0.0.0.0/8",
                (10, _, _) => "private 10.0.0.0/8",
                (127, _, _) => "loopback 127.0.0.0/8",
                (100, 64..=127, _) => "shared address space (CGNAT) 100.64.0.0/10",
                (169, 254, _) => "link-local 169.254.0.0/16 (cloud metadata)",
                (172, 16..=31, _) => "private 172.16.0.0/12",
                (192, 168, _) => "private 192.168.0.0/16",
                (192, 0, 0) => "IETF protocol assignments 192.0.0.0/24",
                (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation (TEST-NET)",
                (198, 18..=19, _) => "benchmarking 198.18.0.0/15",
                (224..=239, _, _) => "multicast 224.0.0.0/4",
                (240..=255, _, _) => "reserved 240.0.0.0/4",
                _ => "a range the proxy keeps to allow-host=",
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() {
                "loopback ::1"
            } else if v6.is_unspecified() {
                "unspecified ::"
            } else if s[0] & 0xfe00 == 0xfc00 {
                "unique local fc00::/7"
            } else if s[0] & 0xffc0 == 0xfe80 {
                "link-local fe80::/10"
            } else if s[0] & 0xff00 == 0xff00 {
                "multicast ff00::/8"
            } else if s[0] == 0x0064 && s[1] == 0xff9b || s[0] == 0x2002 {
                "an IPv6 form of a special IPv4 address (NAT64, 6to4)"
            } else if s[0] == 0x2001 && s[1] == 0x0db8 || s[0] == 0x3fff {
                "documentation 2001:db8::/32"
            } else if s[0] == 0x2001 && s[1] == 0 {
                "Teredo 2001::/32"
            } else {
                "outside global unicast 2000::/3"
            }
        }
    }
}

/// The refusal of a name whose every address is special: which range the first lies in, and
/// how to reach it on purpose.
fn only_special(first: IpAddr, port: u16) -> Refusal {
    let ip = first.to_canonical();
    let host = match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    };
    Refusal {
        reason: format!(
            "{ONLY_SPECIAL}: {ip} is {}; to reach it on purpose, name it: --net allow-host={host}",
            special_range(ip)
        ),
    }
}

/// The proxy's rules, built from [`NetPolicy::Proxy`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    patterns: Vec<DomainPattern>,
    hosts: Vec<SocketAddr>,
}

impl AllowList {
    /// From the `allow=` patterns and `allow-host=` addresses; the patterns are checked again
    /// because a policy may come from a file rather than from [`NetPolicy::parse`].
    pub fn new(allow: &[String], allow_hosts: &[SocketAddr]) -> Result<AllowList, NetSpecError> {
        let patterns = allow
            .iter()
            .map(|p| {
                DomainPattern::parse(p).map_err(|reason| NetSpecError::Invalid {
                    value: format!("allow={p}"),
                    reason: reason.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllowList {
            patterns,
            hosts: allow_hosts.to_vec(),
        })
    }

    /// The allow list of a proxy policy; `None` for the other modes, which run no proxy.
    pub fn from_policy(policy: &NetPolicy) -> Result<Option<AllowList>, NetSpecError> {
        match policy {
            NetPolicy::Proxy { allow, allow_hosts } => AllowList::new(allow, allow_hosts).map(Some),
            _ => Ok(None),
        }
    }

    /// Checks a name before it is resolved, and returns it as it should be looked up (lower
    /// case, no final dot). Names that are not well-formed are refused here, which also keeps
    /// numeric forms like "127.1" away from getaddrinfo.
    pub fn check_name(&self, host: &str) -> Result<String, Refusal> {
        let name = normalize_domain(host, false).map_err(|_| Refusal::new(INVALID_NAME))?;
        if self.patterns.iter().any(|p| p.matches(&name)) {
            Ok(name)
        } else {
            Err(Refusal::new(NOT_LISTED))
        }
    }

    /// Decides a request for `host:port`, where `resolved` is what the proxy's resolver returned
    /// for a name (ignored for an IP literal). Returns the addresses to try, in order.
    pub fn decide(
        &self,
        host: &str,
        port: u16,
        resolved: &[SocketAddr],
    ) -> Result<Vec<SocketAddr>, Refusal> {
        let literal = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return if self.host_allowed(ip, port) {
                Ok(vec![SocketAddr::new(ip.to_canonical(), port)])
            } else {
                Err(Refusal::new(RAW_IP))
            };
        }
        self.check_name(host)?;
        if resolved.is_empty() {
            return Err(Refusal::new(UNRESOLVED));
        }
        let mut out: Vec<SocketAddr> = Vec::new();
        for addr in resolved {
            let ip = addr.ip();
            if is_special(ip) && !self.host_allowed(ip, port) {
                continue;
            }
            // Mapped IPv6 becomes plain IPv4, so that the connect works on hosts without IPv6.
            let mut a = match ip.to_canonical() {
                IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), port),
                IpAddr::V6(_) => *addr,
            };
            a.set_port(port);
            if !out.contains(&a) {
                out.push(a);
            }
        }
        if out.is_empty() {
            Err(only_special(resolved[0].ip(), port))
        } else {
            Ok(out)
        }
    }

    /// Whether `ip:port` is one of the `allow-host=` entries; an IPv4-mapped form counts as the
    /// IPv4 address it stands for.
    fn host_allowed(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        self.hosts
            .iter()
            .any(|h| h.port() == port && h.ip().to_canonical() == ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn list(allow: &[&str], hosts: &[&str]) -> AllowList {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let hosts: Vec<SocketAddr> = hosts.iter().map(|s| sa(s)).collect();
        AllowList::new(&allow, &hosts).unwrap()
    }

    fn refused(r: Result<Vec<SocketAddr>, Refusal>) -> String {
        r.expect_err("should be refused").reason
    }

    #[test]
    fn exact_patterns() {
        let p = DomainPattern::parse("API.Anthropic.com.").unwrap();
        assert_eq!(p, DomainPattern::Exact("api.anthropic.com".into()));
        assert!(p.matches("api.anthropic.com"));
        assert!(p.matches("API.ANTHROPIC.COM"));
        assert!(p.matches("api.anthropic.com."));
        assert!(!p.matches("api.anthropic.com.."));
        assert!(!p.matches("x.api.anthropic.com"));
        assert!(!p.matches("anthropic.com"));
        assert!(!p.matches("api.anthropic.co"));
        assert!(!p.matches(""));
        assert_eq!(p.to_string(), "api.anthropic.com");
    }

    #[test]
    fn wildcard_patterns() {
        let p = DomainPattern::parse("*.Example.com").unwrap();
        assert_eq!(p, DomainPattern::Subdomains("example.com".into()));
        assert!(p.matches("a.example.com"));
        assert!(p.matches("a.b.c.EXAMPLE.com."));
        assert!(!p.matches("example.com"));
        assert!(!p.matches("example.com."));
        assert!(!p.matches("evilexample.com"));
        assert!(!p.matches(".example.com"));
        assert!(!p.matches("a..example.com"));
        assert!(!p.matches("example.com.evil.org"));
        assert!(!p.matches("aexample.com"));
        assert!(!p.matches("ü.example.co"));
        assert_eq!(p.to_string(), "*.example.com");
        assert!(DomainPattern::parse("*").is_err());
        assert!(DomainPattern::parse("a.*.com").is_err());
    }

    #[test]
    fn special_v4_ranges() {
        for s in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.5",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(is_special(ip(s)), "{s} should be special");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "169.253.0.1",
            "11.0.0.1",
            "223.255.255.255",
        ] {
            assert!(!is_special(ip(s)), "{s} should be public");
        }
    }

    #[test]
    fn special_v6_ranges() {
        for s in [
            "::",
            "::1",
            "::127.0.0.1",
            "::8.8.8.8",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2002:c0a8:0101::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "2001:db8::1",
            "2001::1",
            "3fff::1",
            "4000::1",
        ] {
            assert!(is_special(ip(s)), "{s} should be special");
        }
        for s in [
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
            "2001:4860::8888",
            "3fff:1000::1",
        ] {
            assert!(!is_special(ip(s)), "{s} should be public");
        }
    }

    #[test]
    fn raw_ip_needs_exact_allow_host() {
        let l = list(&["a.test"], &["127.0.0.1:8080", "[::1]:9000"]);
        assert_eq!(
            l.decide("127.0.0.1", 8080, &[]).unwrap(),
            vec![sa("127.0.0.1:8080")]
        );
        assert_eq!(
            l.decide("[::1]", 9000, &[]).unwrap(),
            vec![sa("[::1]:9000")]
        );
        assert_eq!(l.decide("::1", 9000, &[]).unwrap(), vec![sa("[::1]:9000")]);
        // The mapped form is the same destination, and is connected to as IPv4.
        assert_eq!(
            l.decide("::ffff:127.0.0.1", 8080, &[]).unwrap(),
            vec![sa("127.0.0.1:8080")]
        );
        assert_eq!(refused(l.decide("127.0.0.1", 8081, &[])), RAW_IP);
        assert_eq!(refused(l.decide("127.0.0.2", 8080, &[])), RAW_IP);
        assert_eq!(refused(l.decide("8.8.8.8", 443, &[])), RAW_IP);
        assert_eq!(refused(l.decide("::1", 8080, &[])), RAW_IP);
        // An IP literal is never judged by the resolved list.
        assert_eq!(
            refused(l.decide("8.8.8.8", 443, &[sa("8.8.8.8:443")])),
            RAW_IP
        );
    }

    #[test]
    fn names_must_be_listed() {
        let l = list(&["api.anthropic.com", "*.example.com"], &[]);
        let public = [sa("1.2.3.4:443")];
        assert!(l.decide("api.anthropic.com", 443, &public).is_ok());
        assert!(l.decide("API.Anthropic.COM.", 443, &public).is_ok());
        assert!(l.decide("deep.sub.example.com", 443, &public).is_ok());
        assert_eq!(refused(l.decide("example.com", 443, &public)), NOT_LISTED);
        assert_eq!(
            refused(l.decide("evilexample.com", 443, &public)),
            NOT_LISTED
        );
        assert_eq!(refused(l.decide("anthropic.com", 443, &public)), NOT_LISTED);
        assert_eq!(
            refused(l.decide("a..example.com", 443, &public)),
            INVALID_NAME
        );
        assert_eq!(refused(l.decide("", 443, &public)), INVALID_NAME);
        assert_eq!(refused(l.decide("127.1", 443, &public)), INVALID_NAME);
        assert_eq!(
            refused(l.decide("a.example.com\r\nX: y", 443, &public)),
            INVALID_NAME
        );
        assert_eq!(l.check_name("A.Example.com.").unwrap(), "a.example.com");
        assert!(l.check_name("example.com").is_err());
    }

    #[test]
    fn resolved_addresses_are_filtered() {
        let l = list(&["*.test"], &["127.0.0.1:8080"]);
        assert_eq!(refused(l.decide("a.test", 80, &[])), UNRESOLVED);
        // The refusal names the range the address is in, and the way to reach it on purpose.
        assert_eq!(
            refused(l.decide("a.test", 80, &[sa("10.0.0.5:80")])),
            format!(
                "{ONLY_SPECIAL}: 10.0.0.5 is private 10.0.0.0/8; to reach it on purpose, name \
                 it: --net allow-host=10.0.0.5:80"
            )
        );
        assert_eq!(
            refused(l.decide("a.test", 80, &[sa("[::ffff:127.0.0.1]:80"), sa("[::1]:80")])),
            format!(
                "{ONLY_SPECIAL}: 127.0.0.1 is loopback 127.0.0.0/8; to reach it on purpose, \
                 name it: --net allow-host=127.0.0.1:80"
            )
        );
        for (addr, range) in [
            ("198.18.0.1", "benchmarking 198.18.0.0/15"),
            ("100.64.1.1", "shared address space (CGNAT) 100.64.0.0/10"),
            (
                "169.254.169.254",
                "link-local 169.254.0.0/16 (cloud metadata)",
            ),
            ("fd00::1", "unique local fc00::/7"),
            ("239.1.1.1", "multicast 224.0.0.0/4"),
        ] {
            assert_eq!(special_range(ip(addr)), range, "{addr}");
        }
        // Loopback on the allow-host port is allowed, on another port it is not.
        assert_eq!(
            l.decide("a.test", 8080, &[sa("127.0.0.1:8080")]).unwrap(),
            vec![sa("127.0.0.1:8080")]
        );
        assert!(
            refused(l.decide("a.test", 8081, &[sa("127.0.0.1:8081")]))
                .ends_with("allow-host=127.0.0.1:8081")
        );
        // Special addresses are dropped, public ones kept in order, duplicates removed.
        assert_eq!(
            l.decide(
                "a.test",
                443,
                &[
                    sa("10.0.0.5:443"),
                    sa("1.2.3.4:443"),
                    sa("[2606:4700::1111]:443"),
                    sa("[::ffff:1.2.3.4]:443"),
                    sa("169.254.169.254:443"),
                ]
            )
            .unwrap(),
            vec![sa("1.2.3.4:443"), sa("[2606:4700::1111]:443")]
        );
        // The requested port is the one used, whatever the resolver put in.
        assert_eq!(
            l.decide("a.test", 443, &[sa("1.2.3.4:1")]).unwrap(),
            vec![sa("1.2.3.4:443")]
        );
    }

    #[test]
    fn building_from_policies() {
        let p =
            NetPolicy::parse(&["allow=a.test".into(), "allow-host=127.0.0.1:1".into()]).unwrap();
        let l = AllowList::from_policy(&p).unwrap().unwrap();
        assert!(l.decide("a.test", 1, &[sa("127.0.0.1:1")]).is_ok());
        assert_eq!(AllowList::from_policy(&NetPolicy::None).unwrap(), None);
        assert_eq!(AllowList::from_policy(&NetPolicy::Host).unwrap(), None);
        // A policy read back from a file is checked again.
        let bad = NetPolicy::Proxy {
            allow: vec!["*".into()],
            allow_hosts: vec![],
        };
        assert!(
            AllowList::from_policy(&bad)
                .unwrap_err()
                .to_string()
                .starts_with("--net allow=*:")
        );
        // An empty list refuses everything.
        let empty = AllowList::default();
        assert_eq!(
            refused(empty.decide("a.test", 1, &[sa("1.2.3.4:1")])),
            NOT_LISTED
        );
        assert_eq!(refused(empty.decide("1.2.3.4", 1, &[])), RAW_IP);
    }
}
