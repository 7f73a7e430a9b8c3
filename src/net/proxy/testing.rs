//! What the proxy's unit tests share: a proxy on loopback whose resolver is a static table that
//! counts its lookups, local echo and HTTP servers to connect to, and client helpers.
//!
//! Every test runs its own proxy on a port of the kernel's choosing, so tests run in parallel
//! and no real resolver or outside server is ever asked.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use super::{Decisions, Proxy, Resolve, StaticResolver, spawn};
use crate::net::allow::AllowList;
use crate::net::decision::Decision;

/// Long enough for a loaded machine; only reached when something is broken.
pub(super) const PATIENCE: Duration = Duration::from_secs(30);

/// A resolver that counts lookups, to show that refused names never reach it.
struct Counting {
    inner: StaticResolver,
    lookups: Arc<AtomicUsize>,
}

impl Resolve for Counting {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        self.inner.resolve(host, port)
    }
}

pub(super) struct Harness {
    pub(super) addr: SocketAddr,
    pub(super) decisions: Arc<Decisions>,
    pub(super) lookups: Arc<AtomicUsize>,
}

pub(super) fn start_proxy(allow: &[&str], hosts: &[SocketAddr], names: &str) -> Harness {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    let lookups = Arc::new(AtomicUsize::new(0));
    let proxy = Arc::new(Proxy {
        allow: AllowList::new(&allow, hosts).unwrap(),
        resolver: Box::new(Counting {
            inner: StaticResolver::parse(names).unwrap(),
            lookups: Arc::clone(&lookups),
        }),
        decisions: Arc::new(Decisions::new()),
        only_uid: std::sync::OnceLock::new(),
        interception: std::sync::OnceLock::new(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let decisions = Arc::clone(&proxy.decisions);
    spawn(listener, proxy).unwrap();
    Harness {
        addr,
        decisions,
        lookups,
    }
}

/// An echo server that counts the connections it accepts.
pub(super) fn echo_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepts = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepts);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepts)
}

/// A proxy that allows `echo.test`, which resolves to a fresh [`echo_server`] that is also an
/// `allow-host` entry (a name resolving to loopback is refused otherwise); returns the proxy,
/// the server's address and its count of accepted connections.
pub(super) fn echo_proxy() -> (Harness, SocketAddr, Arc<AtomicUsize>) {
    let (echo, accepts) = echo_server();
    let h = start_proxy(&["echo.test"], &[echo], "echo.test=127.0.0.1");
    (h, echo, accepts)
}

/// An HTTP server for one request at a time: sends each request it receives (head and
/// Content-Length body) to the channel and answers with the body echoed (or "ok").
pub(super) fn http_server() -> (SocketAddr, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            conn.set_read_timeout(Some(PATIENCE)).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let end = loop {
                if let Some(end) = head_end(&got) {
                    break end;
                }
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break got.len(),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            };
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while got.len() < end + length {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let body = if length > 0 {
                got[end..].to_vec()
            } else {
                b"ok".to_vec()
            };
            let _ = tx.send(got);
            let _ = conn.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
            );
            let _ = conn.write_all(&body);
        }
    });
    (addr, rx)
}

pub(super) fn client(h: &Harness) -> TcpStream {
    let s = TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads a response head (through the blank line).
pub(super) fn read_reply_head(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while head_end(&got).is_none() {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

pub(super) fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `bytes` over a relayed connection to [`echo_server`] and checks that they come back.
pub(super) fn assert_echoed(c: &mut TcpStream, bytes: &[u8]) {
    c.write_all(bytes).unwrap();
    let mut back = vec![0u8; bytes.len()];
    c.read_exact(&mut back).unwrap();
    assert_eq!(back, bytes);
}

/// The first decision kept, once there is one: an allowed connection's entry is added only when
/// its relay ends, a moment after the client closed.
pub(super) fn first_decision(h: &Harness) -> Decision {
    wait_until("the decision", || !h.decisions.snapshot().is_empty());
    h.decisions.snapshot().remove(0)
}

/// Opens a connection to the proxy and asks it for a tunnel to `target` (HTTP CONNECT); returns
/// the connection and the reply head.
pub(super) fn connect_via(h: &Harness, target: &str) -> (TcpStream, String) {
    let mut s = client(h);
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .unwrap();
    let reply = read_reply_head(&mut s);
    (s, reply)
}

/// A pseudo-random sequence (xorshift64) from a fixed, non-zero `seed`: garbage that is the
/// same on every run, so a failure can be replayed.
pub(super) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// The index just past the first blank line ("\r\n\r\n"). The test servers see heads the proxy
/// wrote and the clients read replies it wrote, which always end so; the proxy's own, more
/// lenient search is what the HTTP tests test, so it is not used to test itself.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}
