//! An intercepted tunnel: for a host a secret belongs to, the proxy answers the command's TLS
//! itself (with the run CA's certificate for that host), opens its own verified TLS to the real
//! server, and passes the requests through [`Requests`], which puts the secrets' values in.
//! Responses pass back unchanged.
//!
//! One thread drives both TLS connections with poll(2): a rustls connection is one state
//! machine for both directions, so two threads would need a lock around each. Each side's
//! plaintext waits in a bounded queue, and a side is read only while the other has room, so a
//! slow server slows the command down instead of filling the supervisor's memory.

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rustls::{ClientConnection, Connection, ServerConnection};

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::decisions::Ticket;
use super::requests::{Refused, Requests};
use super::tls::{RunTls, server_name};
use crate::net::allow::DomainPattern;
use crate::net::secrets::Injection;

/// The secrets of a run and the TLS that carries them: what the proxy needs to intercept.
pub struct Interception {
    pub injection: Injection,
    tls: RunTls,
    /// Per secret, the connections it was put into a request on.
    used: Mutex<BTreeMap<String, u64>>,
}

impl Interception {
    /// Makes the run's CA, constrained to the secrets' hosts.
    pub fn new(injection: Injection) -> Result<Interception, String> {
        let hosts: Vec<DomainPattern> = injection
            .secrets
            .iter()
            .flat_map(|s| s.hosts().iter().cloned())
            .collect();
        Ok(Interception {
            tls: RunTls::new(&hosts)?,
            injection,
            used: Mutex::new(BTreeMap::new()),
        })
    }

    /// The run CA's certificate (PEM), for the command's trust bundle.
    pub fn ca_pem(&self) -> &str {
        &self.tls.ca_pem
    }

    /// Per secret name, the connections it was put into a request on.
    pub fn used(&self) -> BTreeMap<String, u64> {
        self.used.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Serves an allowed tunnel to `host:port` that a secret belongs to, and records it.
    pub(super) fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        target: (&str, u16),
        early: &[u8],
        deadline: Instant,
        mut ticket: Ticket,
    ) {
        let outcome = serve(
            &self.tls,
            &self.injection,
            client,
            upstream,
            target,
            early,
            deadline,
        );
        {
            let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
            for name in &outcome.injected {
                *used.entry(name.clone()).or_default() += 1;
            }
        }
        ticket.intercepted(outcome.injected.into_iter().collect(), outcome.failure);
        ticket.finish(outcome.up, outcome.down);
    }
}

/// Plaintext waiting for the other side, per direction, before its sender is read again.
const QUEUE_LIMIT: usize = 256 * 1024;
/// Plaintext taken from a TLS side per wakeup, at most (and a record more).
const READ_CHUNK: usize = 64 * 1024;

/// What an intercepted tunnel did.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// Plaintext bytes sent to the server (heads as rewritten) and back to the command.
    pub up: u64,
    pub down: u64,
    /// The secrets put into a request.
    pub injected: BTreeSet<String>,
    /// Why the tunnel ended early, when it did (TLS failure, a refused request).
    pub failure: Option<String>,
}

/// Serves one intercepted tunnel to `host:port` until either end closes. `early` holds bytes
/// the command sent behind its CONNECT (the start of its TLS hello). The TLS handshake with
/// the command must finish by `deadline`.
fn serve(
    tls: &RunTls,
    injection: &Injection,
    client: &TcpStream,
    upstream: &TcpStream,
    (host, port): (&str, u16),
    early: &[u8],
    deadline: Instant,
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut requests = Requests::new(host, port, injection);
    let result = run(
        tls,
        &mut requests,
        client,
        upstream,
        host,
        early,
        deadline,
        &mut outcome,
    );
    outcome.injected = std::mem::take(&mut requests.injected);
    if let Err(why) = result {
        tracing::warn!("net: intercepted {host}:{port}: {why}");
        outcome.failure = Some(why);
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    outcome
}

/// One side: its socket, its TLS, the plaintext waiting to go into it, and whether it ended.
struct Side<'a> {
    sock: &'a TcpStream,
    tls: Connection,
    queue: Vec<u8>,
    /// It sent its last byte (close_notify or EOF).
    ended: bool,
    /// Our close has been queued (close_notify, then a write shutdown once flushed).
    closing: bool,
}

impl Side<'_> {
    /// Moves queued plaintext into the TLS connection, as much as it takes. The queue is cut
    /// once at the end: cutting it after each write would move the rest of it every time.
    fn push_queue(&mut self) -> io::Result<u64> {
        let mut moved = 0usize;
        let mut result = Ok(());
        while let Some(rest) = self.queue.get(moved..).filter(|r| !r.is_empty()) {
            match self.tls.writer().write(rest) {
                Ok(0) => break,
                Ok(n) => moved += n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.queue.drain(..moved);
        result.map(|()| moved as u64)
    }

    /// Moves queued plaintext into TLS and TLS onto the wire, again and again while the socket
    /// takes it all. One pass is not enough: TLS takes 64 KiB of plaintext at a time, and a
    /// queue left behind with nothing pending in TLS would ask poll for no POLLOUT, while its
    /// sender is not read (its queue is full): the tunnel would wait for nothing, forever.
    fn send(&mut self) -> io::Result<u64> {
        let mut moved = 0u64;
        loop {
            let pending = self.tls.wants_write();
            let n = self.push_queue()?;
            moved += n;
            self.flush()?;
            // Done when the queue is in, or when the socket is full (POLLOUT wakes us). TLS that
            // took nothing with nothing to send is handshaking: its progress wakes us (POLLIN).
            if self.queue.is_empty() || self.tls.wants_write() || (n == 0 && !pending) {
                return Ok(moved);
            }
        }
    }

    /// Writes what TLS has to send, until the socket would block. A peer that has ended may
    /// have closed its socket for good: what it would not take is no failure.
    fn flush(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if self.ended => {
                    self.queue.clear();
                    self.closing = true;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        if self.closing && self.queue.is_empty() {
            let _ = self.sock.shutdown(Shutdown::Write);
        }
        Ok(())
    }

    /// Reads from the socket into TLS and appends the plaintext that came out to `plain`
    /// (nothing when none yet); sets `ended` at the peer's end. rustls reads at most 4 KiB from
    /// the socket at a time (a record is up to 16 KiB), so this reads on until the socket is
    /// empty or [`READ_CHUNK`] bytes came out: one poll per 4 KiB costs more than the reads.
    fn receive(&mut self, plain: &mut Vec<u8>) -> Result<(), String> {
        let start = plain.len();
        loop {
            let mut eof = false;
            let mut empty = false;
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => empty = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
            let state = self.tls.process_new_packets().map_err(|e| e.to_string());
            // Plaintext that arrived before an error or the end is still delivered. It is
            // copied straight out of rustls's buffer (no buffer of our own to fill first).
            let mut reader = self.tls.reader();
            loop {
                match reader.fill_buf() {
                    Ok([]) => {
                        self.ended = true;
                        break;
                    }
                    Ok(chunk) => {
                        let n = chunk.len();
                        plain.extend_from_slice(chunk);
                        reader.consume(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The TCP end came without close_notify: a truncation the peer may not
                    // have meant, but the end all the same.
                    Err(_) => {
                        self.ended = true;
                        break;
                    }
                }
            }
            state?;
            if eof {
                self.ended = true;
            }
            if self.ended || empty || plain.len() - start >= READ_CHUNK {
                return Ok(());
            }
        }
    }

    fn close(&mut self) {
        if !self.closing {
            self.closing = true;
            self.tls.send_close_notify();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    tls: &RunTls,
    requests: &mut Requests<'_>,
    client: &TcpStream,
    upstream: &TcpStream,
    host: &str,
    early: &[u8],
    deadline: Instant,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let server_side = ServerConnection::new(tls.server_config(host)?).map_err(|e| e.to_string())?;
    let client_side = ClientConnection::new(tls.client_config()?, server_name(host)?)
        .map_err(|e| e.to_string())?;
    let (server_side, client_side) = (
        Connection::Server(server_side),
        Connection::Client(client_side),
    );
    let mut cmd = Side {
        sock: client,
        tls: server_side,
        queue: Vec::new(),
        ended: false,
        closing: false,
    };
    let mut srv = Side {
        sock: upstream,
        tls: client_side,
        queue: Vec::new(),
        ended: false,
        closing: false,
    };
    for s in [client, upstream] {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    if !early.is_empty() {
        cmd.tls
            .read_tls(&mut &early[..])
            .map_err(|e| e.to_string())?;
    }
    let mut plain = Vec::new();
    let mut process_cmd =
        |cmd: &mut Side<'_>, srv: &mut Side<'_>, plain: &mut Vec<u8>| -> Result<(), String> {
            plain.clear();
            cmd.receive(plain)
                .map_err(|e| format!("TLS with the command: {e}"))?;
            if let Err(Refused { status, reason }) = requests.feed(plain, &mut srv.queue) {
                let body = format!("jail: {reason}\n");
                cmd.queue.extend_from_slice(
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
                srv.queue.clear();
                return Err(format!("refused a request: {reason}"));
            }
            Ok(())
        };
    let mut failure: Option<String> = None;
    loop {
        // Plaintext into TLS, TLS onto the wire.
        outcome.up += srv.send().map_err(|e| e.to_string())?;
        outcome.down += cmd.send().map_err(|e| e.to_string())?;
        // A side is closed once what it is owed has gone into its TLS: close_notify goes
        // after the data.
        if (cmd.ended || failure.is_some()) && srv.queue.is_empty() {
            srv.close();
        }
        if (srv.ended || failure.is_some()) && cmd.queue.is_empty() {
            cmd.close();
        }
        cmd.flush().map_err(|e| e.to_string())?;
        srv.flush().map_err(|e| e.to_string())?;
        // Done: the server ended (nothing more can come back) and the command has it all, or
        // a failure was answered.
        if (srv.ended || failure.is_some()) && cmd.closing && !cmd.tls.wants_write() {
            return failure.map_or(Ok(()), Err);
        }
        if cmd.ended && srv.ended {
            return Ok(());
        }
        if cmd.tls.is_handshaking() && Instant::now() >= deadline {
            return Err("TLS handshake with the command not done in time".into());
        }
        let want = |side_ended: bool, tls_wants_read: bool, other_queue: usize, wants_write| {
            let mut f = PollFlags::empty();
            if !side_ended && tls_wants_read && other_queue < QUEUE_LIMIT {
                f |= PollFlags::POLLIN;
            }
            if wants_write {
                f |= PollFlags::POLLOUT;
            }
            f
        };
        let cmd_events = want(
            cmd.ended || failure.is_some(),
            cmd.tls.wants_read(),
            srv.queue.len(),
            cmd.tls.wants_write(),
        );
        let srv_events = want(
            srv.ended || failure.is_some(),
            srv.tls.wants_read(),
            cmd.queue.len(),
            srv.tls.wants_write(),
        );
        let timeout = if cmd.tls.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
        } else {
            PollTimeout::NONE
        };
        let mut fds = [
            PollFd::new(client.as_fd(), cmd_events),
            PollFd::new(upstream.as_fd(), srv_events),
        ];
        if cmd_events.is_empty() && srv_events.is_empty() {
            // Nothing to wait for: both sides are stuck (each waits on the other's queue,
            // which cannot drain). End rather than spin.
            return Err("stalled".into());
        }
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        let ready = |fd: &PollFd<'_>| {
            fd.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        let (cmd_ready, srv_ready) = (ready(&fds[0]), ready(&fds[1]));
        if cmd_ready && cmd_events.contains(PollFlags::POLLIN) {
            if let Err(e) = process_cmd(&mut cmd, &mut srv, &mut plain) {
                failure = Some(e);
            }
        }
        if srv_ready && srv_events.contains(PollFlags::POLLIN) {
            let before = cmd.queue.len();
            if let Err(e) = srv.receive(&mut cmd.queue) {
                let why = format!("TLS with {host}: {e}");
                if cmd.queue.len() == before && outcome.down == 0 {
                    // Nothing came back yet: tell the command why, in HTTP, over its TLS.
                    let body = format!("jail: {why}\n");
                    cmd.queue.extend_from_slice(
                        format!(
                            "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; \
                             charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n\
                             {body}",
                            body.len()
                        )
                        .as_bytes(),
                    );
                }
                srv.ended = true;
                failure = Some(why);
            }
        }
    }
}
