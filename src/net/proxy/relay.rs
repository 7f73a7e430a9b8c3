//! The byte side of a proxied connection, with no protocol in it: reading the client's request
//! within one deadline, connecting upstream, copying both directions until the exchange ends,
//! and closing after an error reply so that the reply survives.
//!
//! Socket facts behind the choices:
//!
//! - A socket's receive timeout (SO_RCVTIMEO) bounds one read, not an exchange: a client sending
//!   a byte now and then would never trip it. [`DeadlineRead`] sets it, before every read, to
//!   what is left of one deadline. The kernel reports the timeout as EAGAIN, which is turned into
//!   `TimedOut` here.
//! - TCP closes each direction on its own: shutdown(SHUT_WR) sends a FIN and leaves the other
//!   direction open. So [`relay`] passes the client's end of input on as a half close (a client
//!   may shut its sending side and still wait for the answer), while the destination's end ends
//!   the whole exchange. Shutting down a socket also wakes a thread blocked reading it, which is
//!   how one direction stops the other; a FIN is queued behind the data already written.
//! - Closing a socket whose receive queue still holds unread data makes Linux send a reset
//!   instead of a FIN, and a reset can make the peer's kernel discard a reply the client has not
//!   read yet. [`close_gracefully`] therefore shuts the sending side and reads for a while first.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// Time to connect upstream, over all the addresses a name resolved to.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Relay buffer per direction: large reads keep the per-byte cost near a plain copy.
const RELAY_BUF: usize = 256 * 1024;
/// Stack for a relay thread, which only copies through a heap buffer.
const PUMP_STACK: usize = 64 * 1024;
/// After an error reply, how much of what the client still sends is read and discarded, and for
/// how long: closing a socket with unread data sends a reset, which can destroy the reply before
/// the client reads it.
const DRAIN_LIMIT: usize = 256 * 1024;
const DRAIN_TIMEOUT: Duration = Duration::from_millis(500);

/// Reads with one deadline for a whole exchange, however the client paces its bytes.
pub(super) struct DeadlineRead<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl<'a> DeadlineRead<'a> {
    pub(super) fn new(stream: &'a TcpStream, deadline: Instant) -> Self {
        DeadlineRead { stream, deadline }
    }
}

impl Read for DeadlineRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        match self.stream.read(buf) {
            // A socket timeout shows up as EAGAIN.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::ErrorKind::TimedOut.into()),
            other => other,
        }
    }
}

/// Tries the addresses in order within one overall timeout.
pub(super) fn connect_any(addrs: &[SocketAddr]) -> io::Result<(TcpStream, SocketAddr)> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            last = io::ErrorKind::TimedOut.into();
            break;
        }
        match TcpStream::connect_timeout(addr, left) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok((s, *addr));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Relays both directions until the exchange ends; returns the bytes (up, down). The download
/// direction gets a thread of its own, the upload runs on the caller's; both borrow the two
/// sockets, so no descriptor is duplicated.
pub(super) fn relay(client: &TcpStream, upstream: &TcpStream) -> (u64, u64) {
    let _ = client.set_read_timeout(None);
    let _ = client.set_write_timeout(None);
    thread::scope(|scope| {
        let down = thread::Builder::new()
            .name("jail-net-relay".into())
            .stack_size(PUMP_STACK)
            .spawn_scoped(scope, || pump(upstream, client, true));
        let down = match down {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!("net proxy: cannot start a relay thread: {e}");
                let _ = client.shutdown(Shutdown::Both);
                let _ = upstream.shutdown(Shutdown::Both);
                return (0, 0);
            }
        };
        let up = pump(client, upstream, false);
        let down = down.join().unwrap_or(0);
        (up, down)
    })
}

/// How one direction of a relay ended.
enum End {
    /// The sender closed its side.
    Eof,
    /// A read or a write failed.
    Failed,
}

/// Copies `from` to `to` and returns the byte count. An error ends both directions. The
/// client's end of input is passed on as a half close, so that a client that shuts down its
/// sending side still gets the answer; the destination's end (`ends_both`) ends the exchange, as
/// nothing more can come back and a client that keeps its side open would otherwise hold the
/// connection forever.
///
/// A plain read/write loop through a large buffer: on loopback it measured faster than
/// splice(2) through a pipe, and it needs no unsafe code.
fn pump(mut from: &TcpStream, mut to: &TcpStream, ends_both: bool) -> u64 {
    let mut buf = vec![0u8; RELAY_BUF];
    let mut total = 0u64;
    let end = loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break End::Eof,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break End::Failed,
        };
        let Some(chunk) = buf.get(..n) else {
            break End::Failed;
        };
        if to.write_all(chunk).is_err() {
            break End::Failed;
        }
        total += n as u64;
    };
    match end {
        End::Eof if !ends_both => {
            let _ = to.shutdown(Shutdown::Write);
        }
        _ => {
            // Wakes the other direction, which may be blocked reading. Data already written is
            // still delivered: shutdown queues the FIN behind it.
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
    total
}

/// Sends nothing more, and reads (and discards) what the client still sends for a short while,
/// so that the reply is not destroyed by a reset when the socket closes.
pub(super) fn close_gracefully(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + DRAIN_TIMEOUT;
    let mut reader = DeadlineRead::new(stream, until);
    let mut buf = [0u8; 4096];
    let mut total = 0;
    while total < DRAIN_LIMIT {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::net::TcpListener;

    /// A connected pair of loopback sockets.
    fn socket_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_read_timeout(Some(PATIENCE)).unwrap();
        b.set_read_timeout(Some(PATIENCE)).unwrap();
        (a, b)
    }

    #[test]
    fn pump_moves_everything_and_passes_the_end_on() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        for ends_both in [false, true] {
            let (mut src, from) = socket_pair();
            let (to, mut dst) = socket_pair();
            let sent = data.clone();
            let writer = thread::spawn(move || {
                src.write_all(&sent).unwrap();
                src.shutdown(Shutdown::Write).unwrap();
                // Half closed: the other direction still works, unless the pump ended both.
                let mut rest = Vec::new();
                let _ = src.read_to_end(&mut rest);
                src
            });
            let reader = thread::spawn(move || {
                let mut got = Vec::new();
                dst.read_to_end(&mut got).unwrap();
                got
            });
            assert_eq!(pump(&from, &to, ends_both), data.len() as u64);
            assert!(reader.join().unwrap() == data);
            if !ends_both {
                // `from` was not shut down: the client still hears from us.
                (&from).write_all(b"late").unwrap();
                from.shutdown(Shutdown::Write).unwrap();
            }
            drop(writer.join().unwrap());
        }
    }

    /// Throughput through the proxy against a direct connection, on loopback. Not run by
    /// default (timing-dependent): cargo test --release net::proxy -- --ignored --nocapture
    #[test]
    #[ignore]
    fn relay_throughput() {
        const TOTAL: usize = 2 << 30;
        let source = TcpListener::bind("127.0.0.1:0").unwrap();
        let src = source.local_addr().unwrap();
        thread::spawn(move || {
            let block = vec![7u8; 1 << 20];
            for conn in source.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut left = TOTAL;
                while left > 0 {
                    let n = left.min(block.len());
                    if conn.write_all(&block[..n]).is_err() {
                        break;
                    }
                    left -= n;
                }
            }
        });
        let sink = |mut s: TcpStream| {
            let start = Instant::now();
            let mut buf = vec![0u8; 1 << 20];
            let mut n = 0;
            while let Ok(k) = s.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k;
            }
            assert_eq!(n, TOTAL);
            TOTAL as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64()
        };
        let h = start_proxy(&["src.test"], &[src], "src.test=127.0.0.1");
        for _ in 0..3 {
            let direct = sink(TcpStream::connect(src).unwrap());
            let (c, reply) = connect_via(&h, &format!("src.test:{}", src.port()));
            assert!(reply.contains(" 200 "));
            let proxied = sink(c);
            println!(
                "direct {direct:.0} MiB/s, proxied {proxied:.0} MiB/s, ratio {:.2}",
                proxied / direct
            );
        }
    }
}
