//! What the proxy decides about each requested `host:port`, and its record of those decisions.
//!
//! The rules themselves are pure and live in [`crate::net::allow`]; [`route`] applies them to a
//! request in the order that keeps unlisted names from leaking. Port 0 is refused outright. A
//! name is checked against the allow list before it is resolved, and the addresses it resolves
//! to are checked again: loopback, private and link-local ones are dropped unless an
//! `allow-host` entry names them, and a name left with none is refused (DNS rebinding). An IP
//! literal passes only as an exact `allow-host` entry, address and port. Only then does the proxy
//! connect. The SOCKS5 and HTTP sides get back a [`Routed`] and turn it into their own replies:
//! refused (403, SOCKS reply 0x02) or failed (502, SOCKS reply 0x04). A listed name that does
//! not resolve is counted as a refusal but answered as a failure: the policy allowed it.
//!
//! Every request is logged and counted in [`Decisions`] as it is decided. A refusal is kept at
//! once; an allowed connection's entry waits in a [`Ticket`] until its relay ends, so that it
//! carries the bytes moved. The log is bounded, and refusals give way first, so a command that
//! floods the proxy with refused requests cannot push its real connections out of the report.

use std::collections::VecDeque;
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use super::Proxy;
use super::relay::connect_any;
use crate::net::decision::{Decision, Protocol};

/// Decisions kept for [`Decisions::snapshot`]; the counters go on past it.
const MAX_DECISIONS: usize = 10_000;

/// The proxy's record of decisions, shared with the supervisor.
///
/// The counters count every decision as it is made; an allowed connection's entry is added when
/// its relay ends (it carries the byte counts), so a snapshot taken while connections are open
/// lacks them. Only the latest entries are kept.
#[derive(Debug)]
pub struct Decisions {
    log: Mutex<VecDeque<Decision>>,
    capacity: usize,
    allowed: AtomicU64,
    refused: AtomicU64,
    dropped: AtomicU64,
}

impl Default for Decisions {
    fn default() -> Self {
        Self::new()
    }
}

impl Decisions {
    pub fn new() -> Self {
        Self::with_capacity(MAX_DECISIONS)
    }

    /// Keeps at most `capacity` entries (see `push` for which).
    pub fn with_capacity(capacity: usize) -> Self {
        Decisions {
            log: Mutex::new(VecDeque::new()),
            capacity,
            allowed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Requests allowed so far (including those whose connection then failed).
    pub fn allowed(&self) -> u64 {
        self.allowed.load(Ordering::Relaxed)
    }

    /// Requests refused so far (including names that did not resolve).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Entries forgotten because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The entries kept, oldest first.
    pub fn snapshot(&self) -> Vec<Decision> {
        self.lock().iter().cloned().collect()
    }

    fn count(&self, allowed: bool) {
        let counter = if allowed {
            &self.allowed
        } else {
            &self.refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// When the log is full, the oldest refusal makes room; with none left, the new entry is
    /// dropped. So a command that floods the proxy with refused requests cannot push the record
    /// of the connections it did make out of the report.
    fn push(&self, d: Decision) {
        let mut log = self.lock();
        if log.len() >= self.capacity {
            match log.iter().position(|e| !e.allowed) {
                Some(i) if self.capacity > 0 => {
                    log.remove(i);
                }
                _ => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        log.push_back(d);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Decision>> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep using it.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What became of a request.
pub(super) enum Routed {
    Connected {
        upstream: TcpStream,
        ticket: Ticket,
    },
    /// Refused by the allow list: 403, or SOCKS reply 0x02.
    Refused(String),
    /// Allowed (or at least not refused) but not reachable: 502, or SOCKS reply 0x04.
    Failed(String),
}

/// The pending record of an allowed connection; added to [`Decisions`] when dropped, so that a
/// connection that ends early is recorded too.
pub(super) struct Ticket {
    decisions: Arc<Decisions>,
    decision: Option<Decision>,
}

impl Ticket {
    /// The tunnel was intercepted: which secrets went into its requests, and why it failed
    /// if it did.
    pub(super) fn intercepted(&mut self, secrets: Vec<String>, failure: Option<String>) {
        if let Some(d) = self.decision.as_mut() {
            d.intercepted = true;
            d.secrets = secrets;
            if failure.is_some() {
                d.reason = failure;
            }
        }
    }

    pub(super) fn finish(mut self, up: u64, down: u64) {
        if let Some(d) = self.decision.as_mut() {
            d.bytes_up = up;
            d.bytes_down = down;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(d) = self.decision.take() {
            tracing::debug!(
                "net: closed {} {}: {} bytes up, {} down",
                d.protocol,
                target(&d.host, d.port),
                d.bytes_up,
                d.bytes_down
            );
            self.decisions.push(d);
        }
    }
}

/// Decides `host:port`, resolving a listed name with the proxy's resolver, and connects.
pub(super) fn route(proxy: &Proxy, protocol: Protocol, host: &str, port: u16) -> Routed {
    let shown = printable_host(host);
    let record = |allowed: bool, reason: Option<String>| Decision {
        unix_ms: unix_ms(),
        protocol,
        host: shown.clone(),
        port,
        allowed,
        reason,
        bytes_up: 0,
        bytes_down: 0,
        intercepted: false,
        secrets: Vec::new(),
    };
    let refuse = |reason: String, failed: bool| {
        tracing::warn!("net: refused {protocol} {}: {reason}", target(&shown, port));
        proxy.decisions.count(false);
        proxy.decisions.push(record(false, Some(reason.clone())));
        if failed {
            Routed::Failed(reason)
        } else {
            Routed::Refused(reason)
        }
    };
    if port == 0 {
        return refuse("port 0".into(), false);
    }
    let literal = host.parse::<IpAddr>().is_ok();
    let resolved = if literal {
        Vec::new()
    } else {
        // Checked before the lookup: an unlisted name must not reach a DNS server.
        let name = match proxy.allow.check_name(host) {
            Ok(name) => name,
            Err(r) => return refuse(r.reason, false),
        };
        match proxy.resolver.resolve(&name, port) {
            Ok(addrs) if !addrs.is_empty() => addrs,
            Ok(_) => return refuse("did not resolve".into(), true),
            Err(e) => return refuse(format!("did not resolve: {e}"), true),
        }
    };
    let addrs = match proxy.allow.decide(host, port, &resolved) {
        Ok(addrs) => addrs,
        Err(r) => return refuse(r.reason, false),
    };
    proxy.decisions.count(true);
    match connect_any(&addrs) {
        Ok((upstream, addr)) => {
            tracing::info!(
                "net: allowed {protocol} {} via {addr}",
                target(&shown, port)
            );
            Routed::Connected {
                upstream,
                ticket: Ticket {
                    decisions: Arc::clone(&proxy.decisions),
                    decision: Some(record(true, None)),
                },
            }
        }
        Err(e) => {
            let reason = format!("connect failed: {e}");
            tracing::warn!(
                "net: allowed {protocol} {} but {reason}",
                target(&shown, port)
            );
            proxy.decisions.push(record(true, Some(reason.clone())));
            Routed::Failed(reason)
        }
    }
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// A requested host as it may be logged and shown: lower case, printable ASCII, bounded.
pub(super) fn printable_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.chars()
        .take(255)
        .map(|c| {
            if c.is_ascii_graphic() {
                c.to_ascii_lowercase()
            } else {
                '?'
            }
        })
        .collect()
}

/// `host:port`, with IPv6 in brackets.
pub(super) fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::relay::CONNECT_TIMEOUT;
    use super::super::testing::*;
    use super::*;
    use std::net::TcpListener;
    use std::time::Instant;

    #[test]
    fn connect_to_unlisted_name_is_refused_without_lookup_or_connection() {
        let (echo, accepts) = echo_server();
        let h = start_proxy(&["echo.test"], &[echo], "other.test=127.0.0.1");
        let (mut c, reply) = connect_via(&h, &format!("other.test:{}", echo.port()));
        assert!(reply.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{reply}");
        assert!(reply.contains("Connection: close\r\n"));
        let body = read_all(&mut c);
        assert_eq!(
            body,
            format!(
                "jail: other.test:{} refused: name not on the allow list\n",
                echo.port()
            )
        );
        assert_eq!(h.lookups.load(Ordering::SeqCst), 0);
        assert_eq!(accepts.load(Ordering::SeqCst), 0);
        assert_eq!((h.decisions.allowed(), h.decisions.refused()), (0, 1));
        let d = &h.decisions.snapshot()[0];
        assert!(!d.allowed);
        assert_eq!(d.reason.as_deref(), Some("name not on the allow list"));
    }

    #[test]
    fn raw_ip_must_be_an_allowed_host() {
        let (echo, accepts) = echo_server();
        let h = start_proxy(&["*.test"], &[echo], "");
        // Same address, another port: refused.
        let other = format!("127.0.0.1:{}", echo.port().wrapping_add(1).max(1));
        let (mut c, reply) = connect_via(&h, &other);
        assert!(reply.starts_with("HTTP/1.1 403 "), "{reply}");
        assert!(read_all(&mut c).contains("raw IP address not on the allow list"));
        let (_c, reply) = connect_via(&h, "[::1]:443");
        assert!(reply.starts_with("HTTP/1.1 403 "), "{reply}");
        assert_eq!(accepts.load(Ordering::SeqCst), 0);
        // The exact allow-host entry: allowed.
        let (mut c, reply) = connect_via(&h, &echo.to_string());
        assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
        assert_echoed(&mut c, b"x");
        assert_eq!(h.decisions.refused(), 2);
        assert_eq!(h.decisions.allowed(), 1);
        assert_eq!(h.lookups.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn name_resolving_to_private_address_is_refused_before_connecting() {
        let h = start_proxy(
            &["*.test"],
            &[],
            "private.test=10.0.0.5,loop.test=127.0.0.1",
        );
        let started = Instant::now();
        for name in ["private.test", "loop.test"] {
            let (mut c, reply) = connect_via(&h, &format!("{name}:443"));
            assert!(reply.starts_with("HTTP/1.1 403 "), "{reply}");
            assert!(
                read_all(&mut c).contains("resolves only to addresses the proxy does not reach"),
                "{name}"
            );
        }
        // A connect attempt to 10.0.0.5 would have taken the connect timeout, or failed as 502.
        assert!(started.elapsed() < CONNECT_TIMEOUT);
        assert_eq!(h.decisions.refused(), 2);
        assert_eq!(h.lookups.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn unresolvable_listed_name_is_a_bad_gateway() {
        let h = start_proxy(&["*.test"], &[], "");
        let (mut c, reply) = connect_via(&h, "missing.test:443");
        assert!(reply.starts_with("HTTP/1.1 502 "), "{reply}");
        assert!(read_all(&mut c).contains("did not resolve"));
        assert_eq!(h.decisions.refused(), 1);
    }

    #[test]
    fn allowed_but_closed_port_is_a_bad_gateway() {
        // A port that was free a moment ago: nothing listens there.
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let h = start_proxy(&["closed.test"], &[closed], "closed.test=127.0.0.1");
        let (mut c, reply) = connect_via(&h, &format!("closed.test:{}", closed.port()));
        assert!(reply.starts_with("HTTP/1.1 502 "), "{reply}");
        assert!(read_all(&mut c).contains("connect failed"));
        assert_eq!((h.decisions.allowed(), h.decisions.refused()), (1, 0));
        let d = &h.decisions.snapshot()[0];
        assert!(
            d.allowed
                && d.reason
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("connect failed")
        );
    }

    #[test]
    fn decisions_are_bounded_but_counted() {
        let d = Decisions::with_capacity(3);
        for i in 0..10u16 {
            d.count(i % 2 == 0);
            d.push(Decision {
                unix_ms: 0,
                protocol: Protocol::Http,
                host: "a.test".into(),
                port: i,
                allowed: i % 2 == 0,
                reason: None,
                bytes_up: 0,
                bytes_down: 0,
                intercepted: false,
                secrets: Vec::new(),
            });
        }
        // Refusals make room for later entries; allowed ones are never pushed out.
        let kept: Vec<u16> = d.snapshot().iter().map(|d| d.port).collect();
        assert_eq!(kept, vec![0, 2, 4]);
        assert_eq!((d.allowed(), d.refused(), d.dropped()), (5, 5, 7));
        let none = Decisions::with_capacity(0);
        none.push(d.snapshot()[0].clone());
        assert!(none.snapshot().is_empty());
        assert_eq!(Decisions::new().capacity, MAX_DECISIONS);
    }
}
