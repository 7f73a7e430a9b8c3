//! An intercepted tunnel: for a host a secret belongs to, the proxy answers the command's TLS
//! itself (with the run CA's certificate for that host), opens its own verified TLS to the real
//! server, and passes the requests through [`Requests`] (HTTP/1.x) or [`H2Requests`] (HTTP/2),
//! which put the secrets' values in. Responses pass back unchanged.
//!
//! The protocol is settled before the command's handshake ends: its hello is read first
//! (rustls' `Acceptor`), the server is offered what it offered among `h2` and `http/1.1`, and
//! once the server's handshake is done (its certificate verified) the command is offered
//! exactly what the server chose. A proxy that picked for each side alone could have the
//! command speak HTTP/2 to a server that speaks only HTTP/1.1. A server that fails its
//! handshake gets nothing; the command is told why in the protocol it offered.
//!
//! One thread drives both TLS connections with poll(2): a rustls connection is one state
//! machine for both directions, so two threads would need a lock around each. Each side's
//! plaintext waits in a bounded queue, and a side is read only while the other has room, so a
//! slow server slows the command down instead of filling the supervisor's memory.

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rustls::server::{Accepted, Acceptor};
use rustls::{ClientConnection, Connection};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::decisions::Ticket;
use super::h2::{self, Boundaries, H2Requests, INTERNAL_ERROR, goaway};
use super::requests::{Refused, Requests};
use super::tls::{ALPN_H2, ALPN_HTTP1, RunTls, server_name};
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
        let mut hosts: Vec<DomainPattern> = injection
            .secrets
            .iter()
            .flat_map(|s| s.hosts().iter().cloned())
            .collect();
        // Every secret's hosts left out by the network: the CA still names something, and
        // `.invalid` is a name no server can have (RFC 6761), so it can vouch for nothing.
        if hosts.is_empty() {
            hosts.push(DomainPattern::Exact("invalid".into()));
        }
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
/// Time for the server's TLS handshake and the rest of the command's, once its hello is in.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
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
/// the command sent behind its CONNECT (the start of its TLS hello), which must be in by
/// `deadline`; then both handshakes get [`HANDSHAKE_TIMEOUT`].
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
    let mut rewriter = None;
    let result = run(
        tls,
        injection,
        &mut rewriter,
        client,
        upstream,
        (host, port),
        early,
        deadline,
        &mut outcome,
    );
    outcome.injected = match rewriter {
        Some(Rewriter::Http1(r)) => r.injected,
        Some(Rewriter::H2(r, _)) => r.injected,
        None => BTreeSet::new(),
    };
    if let Err(why) = result {
        tracing::warn!("net: intercepted {host}:{port}: {why}");
        outcome.failure = Some(why);
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    outcome
}

/// The request rewriter for the protocol ALPN settled on; for HTTP/2 also where the server's
/// frames end, so that a GOAWAY of the proxy's never lands inside one.
enum Rewriter<'a> {
    Http1(Requests<'a>),
    H2(H2Requests<'a>, Boundaries),
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
            // Plaintext that arrived before an error or the end is still delivered.
            self.drain(plain);
            state?;
            if eof {
                self.ended = true;
            }
            if self.ended || empty || plain.len() - start >= READ_CHUNK {
                return Ok(());
            }
        }
    }

    /// Moves the plaintext TLS has decrypted into `plain`, straight out of rustls's buffer (no
    /// buffer of our own to fill first); sets `ended` at the peer's end.
    fn drain(&mut self, plain: &mut Vec<u8>) {
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
                // The TCP end came without close_notify: a truncation the peer may not have
                // meant, but the end all the same.
                Err(_) => {
                    self.ended = true;
                    break;
                }
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

/// The command's TLS hello, read by `deadline` (`early` first: what came behind its CONNECT).
fn read_hello(client: &TcpStream, early: &[u8], deadline: Instant) -> Result<Accepted, String> {
    let mut acceptor = Acceptor::default();
    let mut rest = early;
    while !rest.is_empty() {
        if acceptor.read_tls(&mut rest).map_err(|e| e.to_string())? == 0 {
            break;
        }
    }
    loop {
        match acceptor.accept() {
            Ok(Some(accepted)) => return Ok(accepted),
            Ok(None) => {}
            Err((e, mut alert)) => {
                let _ = alert.write_all(&mut &*client);
                return Err(format!("TLS with the command: {e}"));
            }
        }
        wait(
            client,
            PollFlags::POLLIN,
            deadline,
            "the command's TLS hello",
        )?;
        match acceptor.read_tls(&mut &*client) {
            Ok(0) => return Err("the command closed before its TLS hello".into()),
            Ok(_) => {}
            Err(e) if retry(&e) => {}
            Err(e) => return Err(format!("TLS with the command: {e}")),
        }
    }
}

/// The handshake with the real server, to the end, by `deadline`: its certificate verified, its
/// protocol chosen. Plaintext it sends right behind stays in `conn` for the relay.
fn handshake(
    conn: &mut ClientConnection,
    sock: &TcpStream,
    host: &str,
    deadline: Instant,
) -> Result<(), String> {
    let what = format!("the TLS handshake with {host}");
    while conn.is_handshaking() {
        let mut blocked = false;
        while conn.wants_write() {
            match conn.write_tls(&mut &*sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
        let mut events = PollFlags::POLLIN;
        if blocked {
            events |= PollFlags::POLLOUT;
        }
        if !wait(sock, events, deadline, &what)? {
            continue;
        }
        match conn.read_tls(&mut &*sock) {
            Ok(0) => return Err(format!("{host} closed during {what}")),
            Ok(_) => {}
            Err(e) if retry(&e) => continue,
            Err(e) => return Err(format!("{what}: {e}")),
        }
        if let Err(e) = conn.process_new_packets() {
            // The alert that says why goes to the server, best effort.
            let _ = conn.write_tls(&mut &*sock);
            return Err(format!("TLS with {host}: {e}"));
        }
    }
    Ok(())
}

/// Waits until `sock` is ready for `events` or `deadline` passes (an error naming `what`).
/// Says whether it is readable (or at its end).
fn wait(
    sock: &TcpStream,
    events: PollFlags,
    deadline: Instant,
    what: &str,
) -> Result<bool, String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{what} not done in time"));
        }
        let mut fds = [PollFd::new(sock.as_fd(), events)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => {}
            Ok(_) => {
                return Ok(fds[0].revents().is_some_and(|r| {
                    r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
                }));
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The protocols offered upstream for what the command offered: its own list, in its order,
/// less what the proxy cannot rewrite (HTTP/1.1 when it offered none: what it will speak).
fn upstream_alpn(offered: Option<Vec<Vec<u8>>>) -> Vec<Vec<u8>> {
    match offered {
        None => vec![ALPN_HTTP1.to_vec()],
        Some(list) => list
            .into_iter()
            .filter(|p| p == ALPN_HTTP1 || p == ALPN_H2)
            .collect(),
    }
}

/// The one protocol offered back to the command: what the server chose, so the command never
/// speaks a protocol the server does not. HTTP/1.1 when the server chose none (what a server
/// without ALPN speaks); a command that offered only HTTP/2 then fails its handshake
/// (`no_application_protocol`), cleanly, before anything is sent.
fn command_alpn(upstream: Option<&[u8]>) -> Vec<u8> {
    match upstream {
        Some(p) if p == ALPN_H2 => ALPN_H2.to_vec(),
        _ => ALPN_HTTP1.to_vec(),
    }
}

/// The refusal or failure the command is told, in the protocol it speaks.
fn http1_error(status: &str, why: &str) -> Vec<u8> {
    let body = format!("jail: {why}\n");
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[allow(clippy::too_many_arguments)]
fn run<'a>(
    tls: &RunTls,
    injection: &'a Injection,
    rewriter: &mut Option<Rewriter<'a>>,
    client: &TcpStream,
    upstream: &TcpStream,
    (host, port): (&'a str, u16),
    early: &[u8],
    deadline: Instant,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let (mut cmd, mut srv, mut failure, deadline) = handshakes(
        tls,
        injection,
        rewriter,
        client,
        upstream,
        (host, port),
        early,
        deadline,
    )?;
    let Some(rewriter) = rewriter.as_mut() else {
        return Err("no rewriter".into());
    };
    let mut plain = Vec::new();
    loop {
        // Plaintext into TLS, TLS onto the wire.
        outcome.up += srv.send().map_err(|e| e.to_string())?;
        outcome.down += cmd.send().map_err(|e| e.to_string())?;
        // A side is closed once what it is owed has gone into its TLS: close_notify goes
        // after the data (and, to the command, after its handshake: an alert before would
        // end the handshake with the answer still unsent).
        if (cmd.ended || failure.is_some()) && srv.queue.is_empty() {
            srv.close();
        }
        if (srv.ended || failure.is_some()) && cmd.queue.is_empty() && !cmd.tls.is_handshaking() {
            cmd.close();
        }
        cmd.flush().map_err(|e| e.to_string())?;
        srv.flush().map_err(|e| e.to_string())?;
        // Done: the server ended (nothing more can come back) and the command has it all, or
        // a failure was answered.
        if (srv.ended || failure.is_some()) && cmd.closing && !cmd.tls.wants_write() {
            return failure.map_or(Ok(()), Err);
        }
        if cmd.ended && (srv.ended || failure.is_some()) {
            return failure.map_or(Ok(()), Err);
        }
        if cmd.tls.is_handshaking() && Instant::now() >= deadline {
            return Err(
                failure.unwrap_or_else(|| "TLS handshake with the command not done in time".into())
            );
        }
        let (cmd_events, srv_events) = events(&cmd, &srv, failure.is_some());
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
            return Err(failure.unwrap_or_else(|| "stalled".into()));
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
            command_sent(&mut cmd, &mut srv, rewriter, &mut plain, &mut failure);
        }
        if srv_ready && srv_events.contains(PollFlags::POLLIN) {
            server_sent(
                &mut cmd,
                &mut srv,
                rewriter,
                host,
                outcome.down,
                &mut failure,
            );
        }
    }
}

/// Both TLS handshakes, ALPN settled between them, and the rewriter for the protocol chosen:
/// the two sides ready to relay, the failure the command is to be told (already queued for it)
/// if the server's handshake failed, and the deadline the command's handshake has from here.
#[allow(clippy::too_many_arguments)]
fn handshakes<'a, 's>(
    tls: &RunTls,
    injection: &'a Injection,
    rewriter: &mut Option<Rewriter<'a>>,
    client: &'s TcpStream,
    upstream: &'s TcpStream,
    (host, port): (&'a str, u16),
    early: &[u8],
    deadline: Instant,
) -> Result<(Side<'s>, Side<'s>, Option<String>, Instant), String> {
    for s in [client, upstream] {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    // ALPN: the command's hello first, then the server's choice among what the command
    // offered, then the command's handshake with that choice alone. Both handshakes within
    // the one deadline.
    let accepted = read_hello(client, early, deadline)?;
    // The server's handshake and the rest of the command's have their own time from here (the
    // command's deadline also covered its CONNECT, and the server may be far away).
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let offered: Option<Vec<Vec<u8>>> = accepted
        .client_hello()
        .alpn()
        .map(|list| list.map(<[u8]>::to_vec).collect());
    let offered_http1 = offered
        .as_ref()
        .is_none_or(|l| l.iter().any(|p| p == ALPN_HTTP1));
    let wanted = upstream_alpn(offered);
    let (upstream_result, server_tls) = connect_upstream(tls, upstream, host, wanted, deadline)?;
    let chosen = match (&upstream_result, &server_tls) {
        (Ok(()), Some(conn)) => command_alpn(conn.alpn_protocol()),
        // The server failed: the command is told why in the protocol it offered.
        (Err(_), _) if !offered_http1 => ALPN_H2.to_vec(),
        _ => ALPN_HTTP1.to_vec(),
    };
    let mut config = (*tls.server_config(host)?).clone();
    config.alpn_protocols = vec![chosen.clone()];
    let server_side = match accepted.into_connection(Arc::new(config)) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let _ = alert.write_all(&mut &*client);
            return Err(format!("TLS with the command: {e}"));
        }
    };
    let Some(client_side) = server_tls else {
        return Err("the command offered no protocol the proxy can rewrite".into());
    };
    let h2 = chosen == ALPN_H2;
    *rewriter = Some(if h2 {
        Rewriter::H2(
            H2Requests::new(host, port, injection),
            Boundaries::default(),
        )
    } else {
        Rewriter::Http1(Requests::new(host, port, injection))
    });
    let Some(rewriter) = rewriter.as_mut() else {
        return Err("no rewriter".into());
    };
    let mut cmd = Side {
        sock: client,
        tls: Connection::Server(server_side),
        queue: Vec::new(),
        ended: false,
        closing: false,
    };
    let mut srv = Side {
        sock: upstream,
        tls: Connection::Client(client_side),
        queue: Vec::new(),
        ended: false,
        closing: false,
    };
    let mut failure: Option<String> = None;
    if let Err(why) = upstream_result {
        // Nothing was sent upstream; the command learns why over its own TLS.
        cmd.queue = match rewriter {
            Rewriter::H2(..) => goaway(true, 0, INTERNAL_ERROR, &why),
            Rewriter::Http1(_) => http1_error("502 Bad Gateway", &why),
        };
        srv.ended = true;
        failure = Some(why);
    } else {
        // What the server sent right behind its handshake.
        let before = cmd.queue.len();
        srv.drain(&mut cmd.queue);
        if let Rewriter::H2(_, frames) = rewriter {
            frames.advance(cmd.queue.get(before..).unwrap_or_default());
        }
    }
    Ok((cmd, srv, failure, deadline))
}

/// The handshake with the server offering `wanted` (none when `wanted` is empty: nothing the
/// proxy can rewrite goes upstream): how it went, and the connection. A configuration error is
/// the outer error.
fn connect_upstream(
    tls: &RunTls,
    upstream: &TcpStream,
    host: &str,
    wanted: Vec<Vec<u8>>,
    deadline: Instant,
) -> Result<(Result<(), String>, Option<ClientConnection>), String> {
    let mut server_tls = None;
    let upstream_result = if wanted.is_empty() {
        // Nothing the proxy can rewrite: no connection upstream; the command's handshake
        // below fails with no_application_protocol.
        Ok(())
    } else {
        let mut config = (*tls.client_config()?).clone();
        config.alpn_protocols = wanted;
        let mut conn = ClientConnection::new(Arc::new(config), server_name(host)?)
            .map_err(|e| e.to_string())?;
        let result = handshake(&mut conn, upstream, host, deadline);
        server_tls = Some(conn);
        result
    };
    Ok((upstream_result, server_tls))
}

/// What to poll each side for: reading while its TLS wants to and the other side's queue has
/// room (not once it ended or, for the server, once the run failed), writing while its TLS has
/// bytes to send.
fn events(cmd: &Side<'_>, srv: &Side<'_>, failed: bool) -> (PollFlags, PollFlags) {
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
    // The command is still read after a failure while its handshake runs: the answer
    // can go out only once it is done.
    let cmd_events = want(
        cmd.ended || (failed && !cmd.tls.is_handshaking()),
        cmd.tls.wants_read(),
        srv.queue.len(),
        cmd.tls.wants_write(),
    );
    let srv_events = want(
        srv.ended || failed,
        srv.tls.wants_read(),
        cmd.queue.len(),
        srv.tls.wants_write(),
    );
    (cmd_events, srv_events)
}

/// Reads what the command sent and passes it through the rewriter; a failure (TLS, a refused
/// request) is kept in `failure`, and after one nothing more is passed on.
fn command_sent(
    cmd: &mut Side<'_>,
    srv: &mut Side<'_>,
    rewriter: &mut Rewriter<'_>,
    plain: &mut Vec<u8>,
    failure: &mut Option<String>,
) {
    plain.clear();
    let result = cmd
        .receive(plain)
        .map_err(|e| format!("TLS with the command: {e}"));
    let result = match result {
        Err(e) => {
            cmd.ended = true;
            Err(e)
        }
        // After a failure, what the command sends is not passed on.
        Ok(()) if failure.is_some() => Ok(()),
        Ok(()) => rewrite(rewriter, plain, &mut cmd.queue, &mut srv.queue),
    };
    if let Err(e) = result {
        failure.get_or_insert(e);
    }
}

/// Reads what the server sent into the command's queue; on a TLS failure the command is told
/// why where that cannot break what it already got (`down`: bytes it was sent so far).
fn server_sent(
    cmd: &mut Side<'_>,
    srv: &mut Side<'_>,
    rewriter: &mut Rewriter<'_>,
    host: &str,
    down: u64,
    failure: &mut Option<String>,
) {
    let before = cmd.queue.len();
    let result = srv.receive(&mut cmd.queue);
    if let Rewriter::H2(_, frames) = rewriter {
        frames.advance(cmd.queue.get(before..).unwrap_or_default());
    }
    if let Err(e) = result {
        let why = format!("TLS with {host}: {e}");
        // Tell the command why, over its TLS, where that cannot break what it got.
        match rewriter {
            Rewriter::H2(r, frames) if frames.at_boundary() => {
                let first = frames.seen == 0;
                cmd.queue
                    .extend(goaway(first, r.last_stream, INTERNAL_ERROR, &why));
            }
            Rewriter::Http1(_) if cmd.queue.len() == before && down == 0 => {
                cmd.queue.extend(http1_error("502 Bad Gateway", &why));
            }
            _ => {}
        }
        srv.ended = true;
        failure.get_or_insert(why);
    }
}

/// Passes the command's plaintext through its rewriter into the server's queue; a refusal is
/// answered to the command (and nothing of it, nor what waits, goes to the server).
fn rewrite(
    rewriter: &mut Rewriter<'_>,
    plain: &[u8],
    to_cmd: &mut Vec<u8>,
    to_srv: &mut Vec<u8>,
) -> Result<(), String> {
    let reason = match rewriter {
        Rewriter::Http1(r) => match r.feed(plain, to_srv) {
            Ok(()) => return Ok(()),
            Err(Refused { status, reason }) => {
                to_cmd.extend(http1_error(status, &reason));
                reason
            }
        },
        Rewriter::H2(r, frames) => match r.feed(plain, to_srv) {
            Ok(()) => return Ok(()),
            Err(h2::Refused { code, reason }) => {
                if frames.at_boundary() {
                    to_cmd.extend(goaway(frames.seen == 0, r.last_stream, code, &reason));
                }
                reason
            }
        },
    };
    to_srv.clear();
    Err(format!("refused a request: {reason}"))
}
