//! Name resolution as the proxy does it, on behalf of the sandboxed command.
//!
//! The command is not meant to resolve names itself: the proxy environment (`socks5h://`,
//! `CONNECT host:port`, absolute-form HTTP) hands them to the proxy unresolved, and in its own
//! network namespace the command has no route to a DNS server. So names are looked up here,
//! outside the sandbox, and only once the allow list has accepted them (see `decisions`): an
//! unlisted name never reaches a DNS server, as a lookup is itself a message out (DNS tunnels
//! carry data in the names they ask for).
//!
//! [`SystemResolver`] is the host's getaddrinfo(3), which blocks: it runs on the connection's
//! own thread, whose stack is sized for it. [`StaticResolver`] is a fixed table for tests
//! (`JAIL_TEST_HOSTS` in test builds), which never falls back to real DNS.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// Name resolution for the proxy: every address `host` has, with `port`. An empty list is
/// treated as a failed lookup.
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The host's resolver (getaddrinfo, through `std::net::ToSocketAddrs`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// A fixed table of names, for tests: a name not in the table fails with `NotFound`, and nothing
/// ever falls back to real DNS.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an address for `name` (several addresses per name are kept in order).
    pub fn insert(&mut self, name: &str, ip: IpAddr) {
        let entry = self.names.entry(normalize_name(name)).or_default();
        if !entry.contains(&ip) {
            entry.push(ip);
        }
    }

    /// Parses `a.test=127.0.0.1,b.test=10.0.0.5,c.test=::1`; repeat a name for more addresses.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut out = StaticResolver::new();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, ip) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}': expected NAME=IP"))?;
            let (name, ip) = (name.trim(), ip.trim());
            if name.is_empty() {
                return Err(format!("'{item}': empty name"));
            }
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| format!("'{item}': '{ip}' is not an IP address"))?;
            out.insert(name, ip);
        }
        Ok(out)
    }
}

impl Resolve for StaticResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.names.get(&normalize_name(host)) {
            Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "name not in the static resolver",
            )),
        }
    }
}

fn normalize_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn static_resolver() {
        let r = StaticResolver::parse("a.test=127.0.0.1, b.test=10.0.0.5,c.test=::1,A.test=::2")
            .unwrap();
        assert_eq!(
            r.resolve("a.test.", 80).unwrap(),
            vec![sa("127.0.0.1:80"), sa("[::2]:80")]
        );
        assert_eq!(r.resolve("C.TEST", 1).unwrap(), vec![sa("[::1]:1")]);
        assert_eq!(
            r.resolve("localhost", 80).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(StaticResolver::parse("").unwrap().names.is_empty());
        assert!(StaticResolver::parse("a.test").is_err());
        assert!(StaticResolver::parse("=1.2.3.4").is_err());
        assert!(StaticResolver::parse("a.test=example.com").is_err());
    }
}
