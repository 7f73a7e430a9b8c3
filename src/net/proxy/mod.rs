//! The filtering proxy the supervisor runs for `--net allow=...`.
//!
//! It accepts on a listener that lives in the sandbox's network namespace (the supervisor, outside
//! the sandbox, holds it), and connects out from the host's network. The sandboxed command has no
//! other route, and it never resolves names itself: the proxy does, after the name has passed
//! the allow list, so that unlisted names do not even reach a DNS server. Without a network
//! namespace the listener is on the host's loopback, where any local user could reach it, and
//! only clients of the command's user are served ([`Proxy::only_uid`], read from the kernel's
//! socket table by [`crate::net::peer`]).
//!
//! Shape of one connection, and the module that does each step:
//!
//! ```text
//! accept loop (thread jail-net-proxy)     at most MAX_CONNECTIONS open, more are closed at once
//!  └─ connection thread (jail-net-conn)   the whole request within HEAD_TIMEOUT
//!       0x05      → socks5::serve ─┐
//!       otherwise → http::serve   ─┴→ decisions::route   allow list, resolve::Resolve, connect
//!                                      └→ relay::relay   upload here, download on jail-net-relay
//! ```
//!
//! One port speaks three protocols, told apart by the first byte: 0x05 is the SOCKS version that
//! opens a SOCKS5 greeting, and no HTTP request starts with it (a method is printable ASCII);
//! anything else is read as an HTTP/1.1 request head (`CONNECT host:port` or an absolute-form
//! `GET http://host/path`). Both protocols end in the same decision and the same relay; every
//! decision is logged and kept in [`Decisions`], which the run report reads at the end.
//!
//! Nothing a client sends may panic: the release build aborts on panic, which would take the
//! supervisor down with it. Parsing works on slices with checked access only, and every read of
//! a request is bounded in size and time: a client that never completes a request gives its slot
//! back within HEAD_TIMEOUT.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::allow::AllowList;
use relay::DeadlineRead;

mod decisions;
mod h2;
mod http;
mod intercept;
mod relay;
mod requests;
mod resolve;
mod socks5;
#[cfg(test)]
mod testing;
mod tls;

pub use decisions::Decisions;
pub use intercept::Interception;
pub use resolve::{Resolve, StaticResolver, SystemResolver};

/// Time a client has to send its whole request head; a slow client cannot hold a slot longer.
const HEAD_TIMEOUT: Duration = if cfg!(test) {
    // Short enough for the slow-client tests, long enough for a loaded machine.
    Duration::from_secs(3)
} else {
    Duration::from_secs(10)
};
/// Connections served at once; more are closed as soon as they are accepted.
const MAX_CONNECTIONS: usize = if cfg!(test) { 16 } else { 256 };
/// Stack for a connection thread (getaddrinfo and tracing run on it; buffers are on the heap).
const CONN_STACK: usize = 256 * 1024;
/// Minimum time between two warnings about the same accept problem, so a flood does not flood
/// the log too.
const WARN_EVERY: Duration = Duration::from_secs(5);

/// Everything the proxy needs; shared by all connection threads.
pub struct Proxy {
    pub allow: AllowList,
    pub resolver: Box<dyn Resolve>,
    pub decisions: Arc<Decisions>,
    /// Serve only clients whose socket this uid owns (the proxy listens on the host's loopback,
    /// where any local user could reach it); None inside the command's own network namespace.
    pub only_uid: std::sync::OnceLock<u32>,
    /// The run's secrets (`--secret`): tunnels to their hosts are intercepted to add them.
    pub interception: std::sync::OnceLock<Arc<Interception>>,
}

impl Proxy {
    pub fn new(allow: AllowList, resolver: Box<dyn Resolve>) -> Self {
        Proxy {
            allow,
            resolver,
            decisions: Arc::new(Decisions::new()),
            only_uid: std::sync::OnceLock::new(),
            interception: std::sync::OnceLock::new(),
        }
    }

    /// The interception for a tunnel to `host`, when a secret belongs to it.
    fn intercepting(&self, host: &str) -> Option<&Interception> {
        self.interception
            .get()
            .map(|i| &**i)
            .filter(|i| i.injection.intercepts(host))
    }
}

/// Serves `listener` on a thread of its own until the listener fails. The listener is switched
/// to blocking mode (one handed over from another process may not be).
pub fn spawn(listener: TcpListener, proxy: Arc<Proxy>) -> io::Result<JoinHandle<()>> {
    listener.set_nonblocking(false)?;
    thread::Builder::new()
        .name("jail-net-proxy".into())
        .spawn(move || accept_loop(&listener, &proxy))
}

/// Frees a connection slot when the connection's thread ends, however it ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, proxy: &Arc<Proxy>) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut last_warning: Option<Instant> = None;
    let mut warn_now = || {
        let due = last_warning.is_none_or(|t| t.elapsed() >= WARN_EVERY);
        if due {
            last_warning = Some(Instant::now());
        }
        due
    };
    loop {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if listener_broken(&e) => {
                tracing::error!("net proxy: stopped accepting: {e}");
                return;
            }
            Err(e) => {
                // Out of descriptors or memory: wait for connections to end. Anything else is
                // one connection's trouble (accept(2) reports pending network errors of the new
                // connection); a short pause keeps a repeating error from spinning.
                if is_resource_error(&e) {
                    if warn_now() {
                        tracing::warn!("net proxy: cannot accept: {e}");
                    }
                    thread::sleep(Duration::from_millis(100));
                } else if e.kind() != io::ErrorKind::Interrupted {
                    tracing::debug!("net proxy: accept: {e}");
                    thread::sleep(Duration::from_millis(1));
                }
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            if warn_now() {
                tracing::warn!(
                    "net proxy: {MAX_CONNECTIONS} connections open; closing new ones until some end"
                );
            }
            drop(client);
            continue;
        }
        let slot = Slot(Arc::clone(&active));
        let proxy = Arc::clone(proxy);
        let spawned = thread::Builder::new()
            .name("jail-net-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || {
                let _slot = slot;
                // Looked up here, not in the accept loop: reading the socket table for every
                // connection there would let a flood of them back the queue up.
                if let Some(&uid) = proxy.only_uid.get() {
                    let owner = match (client.local_addr(), client.peer_addr()) {
                        (Ok(local), Ok(peer)) => super::peer::loopback_peer_uid(local, peer),
                        _ => None,
                    };
                    if owner != Some(uid) {
                        tracing::warn!(
                            "net proxy: refused a client of another user ({})",
                            owner.map_or("uid unknown".into(), |u| format!("uid {u}"))
                        );
                        return;
                    }
                }
                handle(&proxy, client);
            });
        // On failure the closure, its slot and the client are dropped, which closes the client.
        if let Err(e) = spawned {
            if warn_now() {
                tracing::warn!("net proxy: cannot start a connection thread: {e}");
            }
        }
    }
}

/// Errors that mean the listener itself is unusable, so that accepting again cannot help.
fn listener_broken(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT)
    )
}

fn is_resource_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Serves one accepted client: reads the first byte, which tells the protocol, and hands the
/// connection to that protocol's side.
fn handle(proxy: &Proxy, client: TcpStream) {
    let _ = client.set_nodelay(true);
    // Replies before the relay are small, but a client that never reads must not hold us.
    let _ = client.set_write_timeout(Some(HEAD_TIMEOUT));
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut first = [0u8; 1];
    let mut reader = DeadlineRead::new(&client, deadline);
    if reader.read_exact(&mut first).is_err() {
        return;
    }
    if first[0] == socks5::SOCKS_VERSION {
        socks5::serve(proxy, client, deadline);
    } else {
        http::serve(proxy, client, first[0], deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use std::io::Write;
    use std::net::Shutdown;

    #[test]
    fn hostile_clients_do_not_break_the_proxy() {
        let (h, echo, _) = echo_proxy();
        // Truncated SOCKS greetings and requests, then the client goes away.
        for bytes in [
            &[5u8][..],
            &[5, 3, 0],
            &[5, 1, 0, 5],
            &[5, 1, 0, 5, 1, 0, 3, 200, b'a'],
            &[5, 0],
        ] {
            let mut c = client(&h);
            c.write_all(bytes).unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let _ = read_all(&mut c);
        }
        // Pseudo-random garbage (fixed seed), both with and without a blank line.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for i in 0..40 {
            let len = (next() % 600) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 2 == 0 {
                bytes.extend_from_slice(b"\r\n\r\n");
            }
            let mut c = client(&h);
            let _ = c.write_all(&bytes);
            let _ = c.shutdown(Shutdown::Write);
            let _ = read_all(&mut c);
        }
        // A head over 16 KiB.
        let mut c = client(&h);
        let huge = format!(
            "GET http://echo.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(20_000)
        );
        let _ = c.write_all(huge.as_bytes());
        assert!(read_all(&mut c).starts_with("HTTP/1.1 431 "));
        // Still serving.
        let (_c, reply) = connect_via(&h, &format!("echo.test:{}", echo.port()));
        assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
    }

    #[test]
    fn slow_clients_are_cut_off() {
        let h = start_proxy(&["echo.test"], &[], "");
        // Says nothing at all.
        let silent = client(&h);
        // Sends a byte now and then, never finishing the head.
        let mut dribble = client(&h);
        let started = Instant::now();
        let dribbler = thread::spawn(move || {
            for b in b"GET http://echo.test/ HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa" {
                if dribble.write_all(&[*b]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(200));
            }
            read_all(&mut dribble)
        });
        let mut silent = silent;
        let reply = read_all(&mut silent);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 408 "),
            "{reply}"
        );
        let reply = dribbler.join().unwrap();
        assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
        // The head timeout holds however the bytes are paced.
        assert!(started.elapsed() < HEAD_TIMEOUT + PATIENCE);
        assert_eq!(h.decisions.refused() + h.decisions.allowed(), 0);
    }

    #[test]
    fn connections_beyond_the_cap_are_closed() {
        let (h, echo, _) = echo_proxy();
        let target = format!("echo.test:{}", echo.port());
        let mut open = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let (c, reply) = connect_via(&h, &target);
            assert!(reply.starts_with("HTTP/1.1 200 "));
            open.push(c);
        }
        let mut extra = client(&h);
        let _ = extra.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(read_all(&mut extra), "");
        drop(open);
        // Slots come back as the relays end.
        wait_until("a free slot", || {
            let mut c = client(&h);
            let _ = c.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes());
            read_reply_head(&mut c).starts_with("HTTP/1.1 200 ")
        });
    }

    #[test]
    fn on_the_hosts_loopback_only_the_commands_user_is_served() {
        let proxy = Arc::new(Proxy::new(
            AllowList::new(&["a.test".to_string()], &[]).unwrap(),
            Box::new(StaticResolver::new()),
        ));
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        proxy.only_uid.set(me.wrapping_add(1)).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        spawn(listener, Arc::clone(&proxy)).unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.write_all(b"CONNECT a.test:1 HTTP/1.1\r\n\r\n");
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        assert!(
            buf.is_empty(),
            "another user's client was answered: {buf:?}"
        );
        assert_eq!(proxy.decisions.refused() + proxy.decisions.allowed(), 0);
    }
}
