//! What goes over a session's sockets: the control socket (a `jail exec`, `session stop` or
//! `session list` caller to the session's supervisor) and the exec socket (the supervisor to the
//! process inside that runs one command).
//!
//! A message is a kind byte, a length (u32, little endian) and that many bytes of body; the
//! first message of an exec carries the caller's stdin, stdout and stderr (SCM_RIGHTS) beside
//! its kind byte. Bodies are bounded ([`MAX_BODY`]): a caller cannot make the supervisor hold
//! more than that per connection.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// An exec request (caller → supervisor, then supervisor → inside), JSON body.
pub const EXEC: u8 = b'X';
/// Stop the session (caller → supervisor): the answer is the connection closing when the
/// session has ended; its outcome is then in the session's end file.
pub const STOP: u8 = b'S';
/// The session's description (caller → supervisor), answered with [`INFO`] and JSON.
pub const INFO: u8 = b'I';
/// A signal for the command's process group (caller → supervisor → inside), 4 bytes.
pub const SIGNAL: u8 = b'G';
/// The command's exit code (inside → supervisor → caller), 4 bytes: the kernel's status, 128+N
/// for a signal, 124 after the exec's timeout, 126/127 as a shell gives them.
pub const EXIT: u8 = b'C';
/// The request was refused (supervisor → caller): the body is the reason, one line.
pub const REFUSED: u8 = b'E';
/// The process inside is ready for commands (inside → supervisor, once).
pub const READY: u8 = b'R';

/// At most this many bytes of body per message: an argv and environment far past ARG_MAX.
pub const MAX_BODY: usize = 8 << 20;

/// An argument, a name, a value or a path: bytes, written as a JSON string when they are UTF-8
/// (as nearly every argument is: a fourth of the size of a list of numbers, so arguments as long
/// as a one-shot run takes fit under [`MAX_BODY`]) and as the list of bytes otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word(pub Vec<u8>);

impl std::ops::Deref for Word {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl Serialize for Word {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Word, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Bytes(Vec<u8>),
        }
        Ok(Word(match Either::deserialize(d)? {
            Either::Text(t) => t.into_bytes(),
            Either::Bytes(b) => b,
        }))
    }
}

/// One command for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// The program and its arguments, bytes as given.
    pub argv: Vec<Word>,
    /// Variables set for this command over the session's environment, `(name, value)`.
    pub env: Vec<(Word, Word)>,
    /// The working directory inside the session, relative to the session's own (or absolute).
    pub cwd: Option<Word>,
    /// Ended (SIGTERM, SIGKILL after the grace) after this many milliseconds: exit 124.
    pub timeout_ms: Option<u64>,
    /// The caller's umask: files the command creates get the caller's modes.
    pub umask: Option<u32>,
}

impl ExecRequest {
    pub fn new(argv: &[OsString]) -> ExecRequest {
        ExecRequest {
            argv: argv.iter().map(|a| Word(a.as_bytes().to_vec())).collect(),
            ..ExecRequest::default()
        }
    }

    pub fn argv(&self) -> Vec<OsString> {
        self.argv
            .iter()
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect()
    }

    pub fn cwd(&self) -> Option<PathBuf> {
        self.cwd
            .clone()
            .map(|c| PathBuf::from(OsString::from_vec(c.0)))
    }

    /// What the supervisor refuses before anything runs: no program, a NUL in a word, a name
    /// that is no variable name.
    pub fn check(&self) -> Result<(), String> {
        match self.argv.first() {
            None => return Err("no command given: jail exec NAME -- CMD [ARGS...]".into()),
            Some(p) if p.is_empty() => return Err("the command is empty".into()),
            _ => {}
        }
        let words = self.argv.iter().chain(self.env.iter().map(|(_, v)| v));
        if words.chain(self.cwd.iter()).any(|w| w.contains(&0)) {
            return Err("a NUL byte in the command, a value or --cwd".into());
        }
        for (name, _) in &self.env {
            let ok = !name.is_empty()
                && !name.contains(&b'=')
                && !name.contains(&0)
                && !name.first().is_some_and(u8::is_ascii_digit);
            if !ok {
                return Err(format!(
                    "--env {}: not a variable name",
                    crate::text::printable(&String::from_utf8_lossy(name))
                ));
            }
            // The session's own variables say where the command runs: `jail status` and the
            // notice read them, so a command of a session gets the session's.
            if crate::run_semantics::is_jail_var(std::ffi::OsStr::from_bytes(name)) {
                return Err(format!(
                    "--env {}: the JAIL variables are the session's own",
                    String::from_utf8_lossy(name)
                ));
            }
        }
        if self.timeout_ms == Some(0) {
            return Err("--timeout must be more than 0".into());
        }
        Ok(())
    }
}

/// Writes one message.
pub fn send(out: &mut impl Write, kind: u8, body: &[u8]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(5 + body.len());
    msg.push(kind);
    msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
    msg.extend_from_slice(body);
    out.write_all(&msg)
}

/// Reads one message; `None` at the end of the stream before a kind byte.
pub fn recv(input: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(head[1..].try_into().expect("4 bytes")) as usize;
    if len > MAX_BODY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message of {len} bytes (at most {MAX_BODY})"),
        ));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    Ok(Some((head[0], body)))
}

/// A 4-byte body (a signal, an exit code).
pub fn int_body(n: i32) -> [u8; 4] {
    n.to_le_bytes()
}

pub fn body_int(body: &[u8]) -> Option<i32> {
    Some(i32::from_le_bytes(body.try_into().ok()?))
}

/// Sends `kind` with `fds` attached (SCM_RIGHTS), as one datagram or the first bytes of a
/// stream.
pub fn send_with_fds(sock: RawFd, kind: u8, fds: &[RawFd]) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let kind = [kind];
    let iov = [io::IoSlice::new(&kind)];
    let cmsgs = [ControlMessage::ScmRights(fds)];
    let cmsgs = if fds.is_empty() { &[][..] } else { &cmsgs[..] };
    loop {
        match sendmsg::<()>(sock, &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other.map(drop).map_err(io::Error::from),
        }
    }
}

/// Receives one kind byte and up to `max` descriptors sent with it (close-on-exec); `None` at
/// the end of the stream.
pub fn recv_with_fds(sock: RawFd, max: usize) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut kind = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut kind)];
    let mut space = nix::cmsg_space!([RawFd; 8]);
    let msg = loop {
        match recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.map_err(io::Error::from)?,
        }
    };
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(got) = cmsg {
            // SAFETY: the kernel just installed these descriptors in our table for us.
            fds.extend(
                got.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let truncated = msg.flags.contains(MsgFlags::MSG_CTRUNC);
    if msg.bytes == 0 {
        return Ok(None);
    }
    if truncated || fds.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "more descriptors than the message takes",
        ));
    }
    Ok(Some((kind[0], fds)))
}

/// The uid and pid of the process at the other end of a unix socket, as the kernel recorded
/// them when it connected.
pub fn peer(sock: &impl AsRawFd) -> io::Result<(u32, i32)> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    // SAFETY: the descriptor is open for the call (borrowed from `sock`).
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(sock.as_raw_fd()) };
    let cred = getsockopt(&fd, PeerCredentials).map_err(io::Error::from)?;
    Ok((cred.uid(), cred.pid()))
}

/// How confined a process is, as the kernel shows it: its seccomp filters and no_new_privs.
/// A process inside a jail has at least one filter more than the context that started the jail,
/// and no_new_privs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confinement {
    pub filters: u32,
    pub no_new_privs: bool,
}

impl Confinement {
    pub fn of(pid: &str) -> Option<Confinement> {
        Confinement::in_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }

    /// From the text of a /proc/PID/status.
    fn in_status(status: &str) -> Option<Confinement> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        // Seccomp_filters since Linux 5.9; before, mode 2 counts as one filter.
        let filters = match field("Seccomp_filters:") {
            Some(n) => n.parse().ok()?,
            None => u32::from(field("Seccomp:")? == "2"),
        };
        Some(Confinement {
            filters,
            no_new_privs: field("NoNewPrivs:")? == "1",
        })
    }

    /// Whether `self` is more confined than `other`: then it runs inside something `other`
    /// does not.
    pub fn beyond(self, other: Confinement) -> bool {
        self.filters > other.filters || (self.no_new_privs && !other.no_new_privs)
    }
}

/// Whether the process at the other end of `sock` may be trusted as this user's own, outside any
/// sandbox this process is not in: the same uid, the same pid namespace (every jail with
/// namespaces runs its tree in a pid namespace of its own) and not more confined than this
/// process (a jail without namespaces still adds a seccomp filter and no_new_privs). Both ends
/// check: the supervisor its callers, a caller the supervisor it reached (a jailed process that
/// bound the socket's name first would be answering in its place).
pub fn check_peer(sock: &impl AsRawFd) -> Result<(), String> {
    let (uid, pid) = peer(sock).map_err(|e| format!("peer credentials: {e}"))?;
    // SAFETY: geteuid only queries.
    let me = unsafe { libc::geteuid() };
    if uid != me {
        return Err(format!("uid {uid} is not this user (uid {me})"));
    }
    // Pid 0: a process of a pid namespace this one cannot see (a sibling's).
    if pid <= 0 {
        return Err("a process in another pid namespace (inside a jail?)".into());
    }
    // /proc/PID/status, which a process that is not dumpable (a supervisor) still shows: its
    // NSpid has one pid per pid namespace below /proc's, so a process of a nested namespace has
    // more of them than this one.
    let pid = pid.to_string();
    // This process's own is read once: neither its pid namespace nor its filters go away.
    static OURS: std::sync::OnceLock<Option<Peer>> = std::sync::OnceLock::new();
    let (Some(theirs), Some(ours)) = (Peer::of(&pid), OURS.get_or_init(|| Peer::of("self"))) else {
        return Err(format!("process {pid} cannot be read in /proc"));
    };
    if theirs.pid_depth != ours.pid_depth {
        return Err("a process in another pid namespace (inside a jail?)".into());
    }
    if theirs.confinement.beyond(ours.confinement) {
        return Err(format!(
            "process {pid} is more confined than this one (inside a jail)"
        ));
    }
    Ok(())
}

/// What /proc/PID/status says of a process: how deep its pid namespace is, how confined it is.
#[derive(Clone, Copy)]
struct Peer {
    pid_depth: usize,
    confinement: Confinement,
}

impl Peer {
    fn of(pid: &str) -> Option<Peer> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
        Some(Peer {
            pid_depth: nspid.split_whitespace().count(),
            confinement: Confinement::in_status(&status)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_oversized_bodies_are_refused() {
        let mut buf = Vec::new();
        send(&mut buf, EXIT, &int_body(-3)).unwrap();
        send(&mut buf, REFUSED, b"no").unwrap();
        let mut r = &buf[..];
        let (k, b) = recv(&mut r).unwrap().unwrap();
        assert_eq!((k, body_int(&b)), (EXIT, Some(-3)));
        assert_eq!(recv(&mut r).unwrap().unwrap(), (REFUSED, b"no".to_vec()));
        assert!(recv(&mut r).unwrap().is_none());
        let mut big = vec![EXEC];
        big.extend_from_slice(&((MAX_BODY + 1) as u32).to_le_bytes());
        assert!(recv(&mut &big[..]).is_err());
        // A message cut short is an error, not a clean end.
        assert!(recv(&mut &buf[..3]).is_err());
    }

    #[test]
    fn words_are_strings_when_utf8_and_bytes_otherwise_and_read_back_the_same() {
        let mut req = ExecRequest::new(&["echo".into(), "héllo".into()]);
        req.argv.push(Word(b"\xff\x00x".to_vec()));
        req.cwd = Some(Word(b"sub dir".to_vec()));
        let text = serde_json::to_string(&req).unwrap();
        assert!(text.contains(r#"["echo","héllo",[255,0,120]]"#), "{text}");
        assert_eq!(serde_json::from_str::<ExecRequest>(&text).unwrap(), req);
    }

    #[test]
    fn more_filters_or_no_new_privs_is_more_confined() {
        let c = |filters, no_new_privs| Confinement {
            filters,
            no_new_privs,
        };
        assert!(c(1, true).beyond(c(0, false)));
        assert!(c(2, false).beyond(c(1, false)));
        assert!(c(0, true).beyond(c(0, false)));
        assert!(!c(1, true).beyond(c(1, true)));
        assert!(!c(0, false).beyond(c(1, true)));
        let me = Confinement::of("self").unwrap();
        assert!(!me.beyond(me));
    }

    #[test]
    fn requests_without_a_program_or_with_bad_names_are_refused() {
        let ok = ExecRequest::new(&["true".into()]);
        assert!(ok.check().is_ok());
        assert!(ExecRequest::default().check().is_err());
        let empty = ExecRequest::new(&["".into()]);
        assert!(empty.check().is_err());
        let nul = ExecRequest::new(&["a\0b".into()]);
        assert!(nul.check().is_err());
        for name in [&b"A=B"[..], b"", b"1X", b"JAIL_POLICY", b"JAIL"] {
            let mut r = ok.clone();
            r.env.push((Word(name.to_vec()), Word(b"v".to_vec())));
            assert!(r.check().is_err(), "{name:?}");
        }
        let mut t = ok.clone();
        t.timeout_ms = Some(0);
        assert!(t.check().is_err());
    }
}
