//! Unix-socket mediation: with AF_UNIX sockets allowed, every `connect()` of the command goes to
//! the supervisor (seccomp user notification), which lets a unix connect through only to a
//! socket on one of the jail's own filesystems (its private /tmp, /dev/shm, the tmpfs over hidden
//! paths), to one whose listener a process of the jail holds (unix_diag.rs), or to one named
//! with `--allow-socket`. Everything else is refused with EACCES. The same notifying filter
//! sends listen() when it is held to the bind ports (listen_check.rs decides and makes it): the
//! kernel allows one notifying filter per process.
//!
//! Kernel facts behind the shape:
//! - Landlock before ABI 9 has no right for a unix connect, a read-only mount does not stop it,
//!   and the filter cannot read the address (it is behind a pointer). A hide list never names
//!   every socket (a host tmux server, a Colima docker socket, gpg-agent under $GNUPGHOME).
//! - `SECCOMP_USER_NOTIF_FLAG_CONTINUE` re-runs the call with the process's own memory and
//!   descriptor table, which another thread can change after the check: it is never used. The
//!   connect is performed on a duplicate of the command's socket (pidfd_getfd: the same open
//!   file), to the socket inode that was checked, through `/proc/self/fd/N` of an O_PATH
//!   descriptor: no path is looked up twice, so nothing can be swapped in between.
//! - The filter cannot tell a unix socket from a TCP one either, so every connect is sent over;
//!   a connect the supervisor does itself would escape Landlock's TCP port rules and its
//!   abstract-socket scope (both judge the calling task). So the connect is made by the
//!   *connector*: a process forked by the command after Landlock and the main filter (same
//!   domain, same namespaces, same credentials) and before the notifying filter. The supervisor
//!   decides; the connector only connects.
//! - A datagram socket sends to any path with sendto() without connecting, and the filter cannot
//!   read that address either: unix datagram sockets (SOCK_DGRAM, and SOCK_RAW, which the kernel
//!   makes one) are refused by the main filter while sockets are mediated (seccomp.rs), and so
//!   is a nested Landlock domain, whose rules the connector would not carry.
//! - Addresses are resolved in the command's own view: `openat2(/proc/PID/root, path,
//!   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`, a relative path joined to the working directory
//!   as the process sees it, so absolute symlinks and `..` stay inside the jail's root and no
//!   /proc magic link leads into another process's view.
//!
//! Its parts: `connector` (the process that connects for the command) and `caller` (what the
//! supervisor reads of the calling thread).

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use serde::Serialize;

pub use super::unix_diag::SocketId;

mod caller;
mod connector;

use caller::*;
use connector::*;

/// What the supervisor lets a unix connect reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rules {
    /// Devices of the filesystems the jail mounted itself: mounted in its view and nowhere in the
    /// host's, so no host process has a socket there.
    pub own_filesystems: BTreeSet<u64>,
    /// The sockets named with `--allow-socket`, as the host showed them at the start.
    pub allowed: BTreeSet<SocketId>,
    /// Socket inodes the command was handed at the start (its stdio, `--keep-fd`): a host
    /// daemon's listener among them (socket activation) is never the jail's own.
    pub inherited: BTreeSet<u64>,
    /// Abstract addresses refused: neither Landlock's scope nor a network namespace of the
    /// jail's own confines them, and the connector would reach the host's.
    pub abstract_refused: bool,
}

impl Rules {
    /// Whether a connect may reach the file `mode`/`id`; the errno to answer otherwise.
    pub fn permits(&self, mode: u32, id: SocketId) -> Result<(), i32> {
        if mode & libc::S_IFMT != libc::S_IFSOCK {
            // What the kernel answers for a path that is not a socket.
            return Err(libc::ECONNREFUSED);
        }
        if self.allowed.contains(&id) || self.own_filesystems.contains(&id.dev) {
            Ok(())
        } else {
            Err(libc::EACCES)
        }
    }
}

/// The `st_dev` of every filesystem a mountinfo text lists (field 3, "major:minor").
fn mountinfo_devices(text: &str) -> BTreeSet<u64> {
    text.lines()
        .filter_map(|line| {
            let (major, minor) = line.split_whitespace().nth(2)?.split_once(':')?;
            Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
        })
        .collect()
}

/// The jail's own filesystems: those in its mount table that the host's does not have. A bind of
/// a host directory keeps the host filesystem's device, so it is never counted; a filesystem
/// whose files report another device than its mount (btrfs subvolumes) is never counted either.
pub fn own_filesystems(jail_mountinfo: &str, host_mountinfo: &str) -> BTreeSet<u64> {
    let host = mountinfo_devices(host_mountinfo);
    mountinfo_devices(jail_mountinfo)
        .into_iter()
        .filter(|d| !host.contains(d))
        .collect()
}

/// A unix socket address as the kernel reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum UnixAddress {
    /// Not AF_UNIX, too short, or no name: the kernel refuses it (or disconnects) without
    /// looking anything up.
    NoLookup,
    /// Abstract (leading NUL): judged by the namespaces and Landlock's scope, in the connector.
    Abstract,
    /// A filesystem path: up to the first NUL or the end.
    Path(Vec<u8>),
}

/// offsetof(struct sockaddr_un, sun_path).
const SUN_PATH_OFFSET: usize = 2;

pub fn parse_unix_address(addr: &[u8]) -> UnixAddress {
    if addr.len() <= SUN_PATH_OFFSET
        || u16::from_ne_bytes([addr[0], addr[1]]) != libc::AF_UNIX as u16
    {
        return UnixAddress::NoLookup;
    }
    let path = &addr[SUN_PATH_OFFSET..];
    if path[0] == 0 {
        return UnixAddress::Abstract;
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    UnixAddress::Path(path[..end].to_vec())
}

/// The descriptor number of a `/proc/self/fd/N` (or thread-self, or `/dev/fd/N`) path: the
/// command's own descriptor, which the supervisor fetches instead of resolving a magic link.
pub fn own_descriptor_path(path: &[u8]) -> Option<i32> {
    let text = std::str::from_utf8(path).ok()?;
    let n = ["/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"]
        .iter()
        .find_map(|p| text.strip_prefix(p))?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// What the notifying filter sends to the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notified {
    /// Every connect(): unix sockets allowed (the filter cannot tell them from TCP ones).
    pub connect: bool,
    /// Every listen(): held to the bind ports (listen_check.rs).
    pub listen: bool,
}

/// The second filter: the calls `notified` names, of the native architecture, go to the
/// supervisor; everything else passes to the main filter (which kills foreign architectures and
/// refuses the rest).
pub fn notify_filter(notified: Notified) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k, jt, jf| libc::sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    };
    let mut calls = Vec::new();
    if notified.connect {
        calls.push(libc::SYS_connect as u32);
    }
    if notified.listen {
        calls.push(libc::SYS_listen as u32);
    }
    let n = calls.len() as u8;
    // arch, [jump to ALLOW], nr, one test per call (a match jumps to NOTIF), ALLOW, NOTIF.
    let mut f = vec![
        stmt(LD_W_ABS, 4), // seccomp_data.arch
        jump(AUDIT_ARCH, 0, n + 1),
        stmt(LD_W_ABS, 0), // seccomp_data.nr
    ];
    for (i, nr) in calls.iter().enumerate() {
        // Past the remaining tests and ALLOW on a match; on to the next test otherwise.
        f.push(jump(*nr, n - i as u8, 0));
    }
    f.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    f.push(stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF));
    f
}

/// The descriptors of one mediated run: two socket pairs, made before the command is forked.
pub struct Channels {
    /// The command sends its listener over this (supervisor end, command end).
    pub listener: (OwnedFd, OwnedFd),
    /// Requests to the connector and its answers (supervisor end, connector end).
    pub requests: (OwnedFd, OwnedFd),
}

impl Channels {
    pub fn new() -> io::Result<Channels> {
        Ok(Channels {
            listener: seqpacket_pair()?,
            requests: seqpacket_pair()?,
        })
    }
}

fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into `fds` on success.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the command, after Landlock and the main filter: fork the connector (when connects are
/// notified), install the notifying filter and send its listener to the supervisor. EBUSY (the
/// kernel allows one listener per process, and one is there: an enclosing jail's, or a container
/// runtime's syscall interception, which cannot be told apart) stops the launch: nothing would
/// mediate.
pub fn arm(channels: &Channels, notified: Notified) -> Result<(), String> {
    // What the run loses without the filter, for the refusal's one line.
    let what = if notified.connect {
        "unix sockets: connects cannot be mediated; run without --allow-unix-sockets (or the \
         profile that allows them)"
    } else {
        "--net bind=: listen() cannot be held to the bind ports; run without bind= (every \
         listen is then refused)"
    };
    if notified.connect {
        start_connector(channels.requests.1.as_raw_fd())
            .map_err(|e| format!("unix sockets: starting the connector: {e}"))?;
    }
    let filter = notify_filter(notified);
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `filter`, alive for the call; the kernel copies the program.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    let channel = channels.listener.1.as_raw_fd();
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) {
            return Err(format!(
                "this process already has a notifying seccomp filter (an enclosing jail's, or a \
                 container runtime's): {what}"
            ));
        }
        return Err(format!(
            "installing the notifying seccomp filter: {e}: {what}"
        ));
    }
    // SAFETY: the kernel returned a new descriptor for the listener; owned here.
    let listener = unsafe { OwnedFd::from_raw_fd(rc as RawFd) };
    crate::sys::send_fd(channel, listener.as_raw_fd())
        .map_err(|e| format!("unix sockets: handing the listener over: {e}"))
}

/// linux/seccomp.h: the argument of SECCOMP_IOCTL_NOTIF_SET_FLAGS (a value, not a pointer).
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

/// The supervisor's side: receives the command's listener, then answers every connect and
/// listen() it sends.
pub struct Mediator {
    listener: Arc<OwnedFd>,
    /// The connector's channel, when connects are notified.
    requests: Option<Arc<OwnedFd>>,
    rules: Rules,
    /// The ports listen() is held to, when it is notified (listen_check.rs).
    listen_ports: Option<Vec<u16>>,
    /// The connector's socket-diagnostics socket (unix_diag.rs), when it could make one.
    diag: Option<OwnedFd>,
}

/// Receives the command's listener; `None` when the command closed its end without one: arming
/// failed, and the command leaves (exit 125) with the reason, before it runs anything.
pub fn receive_listener(channel: &OwnedFd) -> Result<Option<OwnedFd>, String> {
    match crate::sys::recv_fd(channel.as_raw_fd()) {
        Ok(Some(fd)) => Ok(Some(fd)),
        Ok(None) => Ok(None),
        Err(e) => Err(format!("receiving the unix-socket listener: {e}")),
    }
}

impl Mediator {
    /// Takes the connector's first message (its diagnostics socket) off `requests`, when there
    /// is a connector.
    pub fn new(
        listener: OwnedFd,
        requests: Option<OwnedFd>,
        rules: Rules,
        listen_ports: Option<Vec<u16>>,
    ) -> Mediator {
        let diag = requests
            .as_ref()
            .and_then(|r| crate::sys::recv_fd(r.as_raw_fd()).ok().flatten());
        // The caller waits for the answer: wake it on the answering CPU (6.6; a hint, refused
        // harmlessly by older kernels).
        // SAFETY: NOTIF_SET_FLAGS reads the flags value only.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        Mediator {
            listener: Arc::new(listener),
            requests: requests.map(Arc::new),
            rules,
            listen_ports,
            diag,
        }
    }

    /// Two threads: one takes notifications and forwards what passes, one relays the
    /// connector's answers. When either side goes away, every pending and later connect fails
    /// (a listener with no reader answers ENOSYS; a lost connector ECONNREFUSED).
    pub fn spawn(self) -> io::Result<()> {
        let Mediator {
            listener,
            requests,
            rules,
            listen_ports,
            diag,
        } = self;
        let outstanding: Arc<Outstanding> = Arc::new(std::sync::Mutex::new(Some(BTreeSet::new())));
        if let Some(requests) = &requests {
            let (l2, r2, o2) = (
                Arc::clone(&listener),
                Arc::clone(requests),
                Arc::clone(&outstanding),
            );
            std::thread::Builder::new()
                .name("jail-unix-replies".into())
                .spawn(move || relay_replies(&l2, &r2, &o2))?;
        }
        let served = Served {
            rules,
            listen_ports,
            diag,
        };
        std::thread::Builder::new()
            .name("jail-unix-connect".into())
            .spawn(move || serve(&listener, requests.as_deref(), &served, &outstanding))?;
        Ok(())
    }
}

/// The connects handed to the connector and not answered yet; `None` once the connector is gone
/// (every later connect is refused at once).
type Outstanding = std::sync::Mutex<Option<BTreeSet<u64>>>;

fn relay_replies(listener: &OwnedFd, requests: &OwnedFd, outstanding: &Outstanding) {
    let mut buf = [0u8; 12];
    loop {
        // SAFETY: reads at most 12 bytes into `buf`.
        let n = unsafe { libc::recv(requests.as_raw_fd(), buf.as_mut_ptr().cast(), 12, 0) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n != 12 {
            break;
        }
        let id = u64::from_ne_bytes(buf[..8].try_into().expect("8 bytes"));
        let errno = i32::from_ne_bytes(buf[8..].try_into().expect("4 bytes"));
        if let Some(set) = outstanding.lock().expect("not poisoned").as_mut() {
            set.remove(&id);
        }
        respond(listener, id, errno);
    }
    // The connector is gone (killed from inside, or the run is ending): what it held is refused.
    let pending = outstanding.lock().expect("not poisoned").take();
    for id in pending.into_iter().flatten() {
        respond(listener, id, libc::ECONNREFUSED);
    }
}

/// What the serving thread judges by.
struct Served {
    rules: Rules,
    listen_ports: Option<Vec<u16>>,
    diag: Option<OwnedFd>,
}

fn serve(
    listener: &OwnedFd,
    requests: Option<&OwnedFd>,
    served: &Served,
    outstanding: &Outstanding,
) {
    let Served {
        rules,
        listen_ports,
        diag,
    } = served;
    let diag = diag.as_ref();
    let mut reported = BTreeSet::new();
    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one descriptor.
        let rc = unsafe { libc::poll(&mut pfd, 1, -1) };
        if rc < 0 {
            continue;
        }
        if pfd.revents & libc::POLLIN == 0 {
            // POLLHUP: every process that could notify is gone.
            return;
        }
        // SAFETY: seccomp_notif is plain data; zeroed as the kernel requires.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV fills `req`.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut req,
            )
        };
        if rc < 0 {
            // ENOENT: the caller was interrupted before we read it.
            continue;
        }
        if req.data.nr == libc::SYS_listen as i32 {
            // Only sent when listen() is held to ports; anything else is refused, never made.
            let errno = match listen_ports {
                Some(ports) => listen_for(listener, &req, ports),
                None => libc::EACCES,
            };
            respond(listener, req.id, errno);
            continue;
        }
        let Some(requests) = requests else {
            // No connector: connects are not sent here; refused if one ever is.
            respond(listener, req.id, libc::ECONNREFUSED);
            continue;
        };
        match prepare(listener, &req, rules, diag) {
            Ok((kind, addr, fds)) => {
                let mut msg = req.id.to_ne_bytes().to_vec();
                msg.push(kind);
                msg.extend(addr);
                let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
                // Recorded before it is sent, so that the relay's answer always finds it.
                let live = outstanding
                    .lock()
                    .expect("not poisoned")
                    .as_mut()
                    .map(|set| set.insert(req.id))
                    .is_some();
                if !live || send_request(requests.as_raw_fd(), &msg, &raw).is_err() {
                    if let Some(set) = outstanding.lock().expect("not poisoned").as_mut() {
                        set.remove(&req.id);
                    }
                    respond(listener, req.id, libc::ECONNREFUSED);
                }
            }
            Err(Refusal::Errno(errno)) => respond(listener, req.id, errno),
            Err(Refusal::NotOurs(path)) => {
                // Said once per path: a connect that fails for this reason is otherwise a
                // mystery to the person running the agent.
                if reported.len() < 64 && reported.insert(path.clone()) {
                    crate::text::say(format!(
                        "jail: refused a unix connect to {}: not the jail's own socket \
                         (--allow-socket PATH lets one through)",
                        String::from_utf8_lossy(&path)
                    ));
                }
                respond(listener, req.id, libc::EACCES)
            }
        }
    }
}

fn send_request(sock: RawFd, msg: &[u8], fds: &[RawFd]) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let iov = [io::IoSlice::new(msg)];
    sendmsg::<()>(
        sock,
        &iov,
        &[ControlMessage::ScmRights(fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map(|_| ())
    .map_err(io::Error::from)
}

fn respond(listener: &OwnedFd, id: u64, errno: i32) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: NOTIF_SEND reads `resp`; ENOENT (the caller is gone) needs no handling.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &resp,
        )
    };
}

/// The command's listen(fd, backlog) of notification `req`, made on the supervisor's copy of
/// the socket if it is bound to one of `ports`; 0 or the errno.
fn listen_for(listener: &OwnedFd, req: &libc::seccomp_notif, ports: &[u16]) -> i32 {
    let fd = req.data.args[0] as i32;
    let backlog = req.data.args[1] as i32;
    let sock = pidfd_of(req.pid as libc::pid_t).and_then(|pidfd| {
        // The pid is the caller's only while the notification waits.
        still_valid(listener, req.id).map_err(io::Error::from_raw_os_error)?;
        pidfd_getfd(&pidfd, fd)
    });
    match sock {
        Ok(sock) => super::listen_check::listen_on(&sock, backlog, ports),
        Err(e) => errno_of(e),
    }
}

/// Whether notification `id` still waits (its process was not replaced since it was read).
fn still_valid(listener: &OwnedFd, id: u64) -> Result<(), i32> {
    // SAFETY: NOTIF_ID_VALID only reads the id.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id,
        )
    };
    if rc == 0 { Ok(()) } else { Err(libc::ENOENT) }
}

fn errno_of(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Why a connect is not handed to the connector.
enum Refusal {
    /// What the kernel would answer (a bad address, a missing path), or a vanished caller.
    Errno(i32),
    /// The rule: a socket that is not the jail's own and not allowed (EACCES), at this path.
    NotOurs(Vec<u8>),
}

impl From<i32> for Refusal {
    fn from(errno: i32) -> Refusal {
        Refusal::Errno(errno)
    }
}

/// sizeof(struct sockaddr_un): a unix address may not be longer (the kernel answers EINVAL).
const SOCKADDR_UN_LEN: usize = 110;

/// Checks one connect; returns what to hand the connector, or why not.
fn prepare(
    listener: &OwnedFd,
    req: &libc::seccomp_notif,
    rules: &Rules,
    diag: Option<&OwnedFd>,
) -> Result<(u8, Vec<u8>, Vec<OwnedFd>), Refusal> {
    let fd = req.data.args[0] as i32;
    let len = req.data.args[2] as u32 as i32;
    // As the kernel: an address longer than sockaddr_storage, or negative, is invalid.
    if !(0..=128).contains(&len) {
        return Err(libc::EINVAL.into());
    }
    let pid = req.pid as libc::pid_t;
    let pidfd = pidfd_of(pid).map_err(errno_of)?;
    still_valid(listener, req.id)?;
    let addr = read_memory(pid, req.data.args[1], len as usize).map_err(|_| libc::EFAULT)?;
    still_valid(listener, req.id)?;
    let sock = pidfd_getfd(&pidfd, fd).map_err(errno_of)?;
    if socket_domain(&sock).map_err(errno_of)? != libc::AF_UNIX {
        return Ok((KIND_ADDRESS, addr, vec![sock]));
    }
    let path = match parse_unix_address(&addr) {
        UnixAddress::Abstract if rules.abstract_refused => {
            let mut name = b"@".to_vec();
            name.extend_from_slice(&addr[SUN_PATH_OFFSET + 1..]);
            return Err(Refusal::NotOurs(name));
        }
        UnixAddress::NoLookup | UnixAddress::Abstract => {
            return Ok((KIND_ADDRESS, addr, vec![sock]));
        }
        UnixAddress::Path(_) if addr.len() > SOCKADDR_UN_LEN => return Err(libc::EINVAL.into()),
        UnixAddress::Path(p) => p,
    };
    let file = match own_descriptor_path(&path) {
        Some(n) => pidfd_getfd(&pidfd, n).map_err(|_| libc::ENOENT)?,
        None => resolve_in_view(pid, &path).map_err(errno_of)?,
    };
    still_valid(listener, req.id)?;
    let st = fstat(&file).map_err(errno_of)?;
    let id = SocketId {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    match rules.permits(st.st_mode, id) {
        Ok(()) => {}
        // Outside the jail's own filesystems, the jail's own daemon still passes: a process of
        // the jail holds the socket listening on that file.
        Err(libc::EACCES) if diag.is_some_and(|d| held_by_jail(d, id, &rules.inherited)) => {}
        Err(libc::EACCES) => return Err(Refusal::NotOurs(path)),
        Err(errno) => return Err(errno.into()),
    }
    Ok((KIND_PINNED, Vec::new(), vec![sock, file]))
}

/// Whether the socket listening on file `id` is held by a process of the jail (a descendant of
/// the supervisor). The pinned file makes this race-free: a listener that closes leaves the file
/// dead (ECONNREFUSED), and a new bind makes a new file.
fn held_by_jail(diag: &OwnedFd, id: SocketId, inherited: &BTreeSet<u64>) -> bool {
    match super::unix_diag::listeners(diag, id) {
        Ok(sockets) if sockets.iter().any(|s| inherited.contains(&u64::from(*s))) => false,
        Ok(sockets) if !sockets.is_empty() => {
            let jail = crate::sys::descendants(std::process::id() as i32);
            super::unix_diag::held_by(&jail, &sockets)
        }
        Ok(_) => false,
        Err(e) => {
            tracing::info!("socket diagnostics: {e}");
            false
        }
    }
}

/// Why a descriptor handed in with `--keep-fd` would lead around the rules, if it would: a unix
/// datagram socket sends to any path; an unconnected unix stream socket connects to any path
/// unless connects are mediated.
pub fn kept_descriptor_risk(fd: RawFd, mediated: bool) -> Option<&'static str> {
    let opt = |name| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one int into `value`; fails harmlessly on a non-socket.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    if opt(libc::SO_DOMAIN)? != libc::AF_UNIX {
        return None;
    }
    if opt(libc::SO_TYPE)? == libc::SOCK_DGRAM {
        return Some("a unix datagram socket sends to any socket path");
    }
    if mediated || opt(libc::SO_ACCEPTCONN) == Some(1) {
        return None;
    }
    // SAFETY: getpeername writes at most `len` bytes into `addr`.
    let connected = unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        libc::getpeername(fd, (&mut addr as *mut libc::sockaddr_un).cast(), &mut len) == 0
    };
    (!connected).then_some(
        "an unconnected unix socket connects to any socket path (pass a connected one, or allow \
         unix sockets, whose connects are mediated)",
    )
}

/// The socket inodes among `fds` (the low 32 bits, as socket diagnostics carry them).
pub fn socket_inodes(fds: &[RawFd]) -> BTreeSet<u64> {
    fds.iter()
        .filter_map(|&fd| {
            let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
            // SAFETY: fstat fills `st` on success; a closed descriptor fails harmlessly.
            let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
            // SAFETY: initialised by the successful fstat.
            let st = ok.then(|| unsafe { st.assume_init() })?;
            (st.st_mode & libc::S_IFMT == libc::S_IFSOCK).then_some(st.st_ino & 0xffff_ffff)
        })
        .collect()
}

/// Whether this kernel has what mediation needs: user notification (5.0), pidfd_getfd and
/// openat2 (5.6). Probed with calls that fail harmlessly: ENOSYS means missing.
pub fn available() -> Result<(), String> {
    let mut sizes = [0u16; 3];
    // SAFETY: GET_NOTIF_SIZES writes three u16 into `sizes`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            sizes.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err("no seccomp user notification (Linux 5.0)".into());
    }
    for (name, nr) in [
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        ("openat2", libc::SYS_openat2),
    ] {
        // SAFETY: invalid descriptors and null pointers: the call fails without effect.
        let rc = unsafe { libc::syscall(nr, -1, 0, 0, 0) };
        if rc < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            return Err(format!("no {name} (Linux 5.6)"));
        }
    }
    Ok(())
}

/// The identity of a `--allow-socket` path on the host, checked to be a socket, and the O_PATH
/// descriptor that holds that inode for the run.
pub fn allowed_socket(path: &std::path::Path) -> Result<(SocketId, OwnedFd), String> {
    let fd = crate::sys::open_path_nofollow(path).map_err(|e| e.to_string())?;
    let st = fstat(&fd).map_err(|e| e.to_string())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err("not a unix socket".into());
    }
    Ok((
        SocketId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        fd,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(path: &[u8]) -> Vec<u8> {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    #[test]
    fn addresses_parse_as_the_kernel_reads_them() {
        assert_eq!(
            parse_unix_address(&addr(b"/tmp/a.sock\0junk")),
            UnixAddress::Path(b"/tmp/a.sock".to_vec())
        );
        // No terminating NUL: the name runs to the end of the given length.
        assert_eq!(
            parse_unix_address(&addr(b"rel.sock")),
            UnixAddress::Path(b"rel.sock".to_vec())
        );
        assert_eq!(
            parse_unix_address(&addr(b"\0abstract")),
            UnixAddress::Abstract
        );
        assert_eq!(parse_unix_address(&addr(b"")), UnixAddress::NoLookup);
        let mut inet = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        inet.extend_from_slice(b"/tmp/a.sock");
        assert_eq!(parse_unix_address(&inet), UnixAddress::NoLookup);
        assert_eq!(parse_unix_address(&[1]), UnixAddress::NoLookup);
    }

    #[test]
    fn own_descriptor_paths_are_recognised_exactly() {
        assert_eq!(own_descriptor_path(b"/proc/self/fd/7"), Some(7));
        assert_eq!(own_descriptor_path(b"/proc/thread-self/fd/12"), Some(12));
        assert_eq!(own_descriptor_path(b"/dev/fd/3"), Some(3));
        assert_eq!(own_descriptor_path(b"/proc/self/fd/7/x"), None);
        assert_eq!(own_descriptor_path(b"/proc/self/fd/"), None);
        assert_eq!(own_descriptor_path(b"/proc/1/fd/7"), None);
    }

    #[test]
    fn own_filesystems_are_the_jails_mounts_the_host_lacks() {
        let host = "22 1 254:0 / / rw - ext4 /dev/vda rw\n\
                    30 22 0:25 / /tmp rw - tmpfs tmpfs rw\n";
        let jail = "100 99 254:0 / / ro - ext4 /dev/vda rw\n\
                    101 100 0:25 / /run/shared ro - tmpfs tmpfs rw\n\
                    102 100 0:61 / /tmp rw - tmpfs tmpfs rw\n\
                    103 100 0:62 / /dev rw - tmpfs tmpfs rw\n";
        let own = own_filesystems(jail, host);
        assert_eq!(
            own,
            [libc::makedev(0, 61), libc::makedev(0, 62)]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn only_sockets_on_own_filesystems_or_allowed_pass() {
        let rules = Rules {
            own_filesystems: [5].into_iter().collect(),
            allowed: [SocketId { dev: 9, ino: 42 }].into_iter().collect(),
            ..Rules::default()
        };
        let sock = libc::S_IFSOCK | 0o755;
        assert_eq!(rules.permits(sock, SocketId { dev: 5, ino: 1 }), Ok(()));
        assert_eq!(rules.permits(sock, SocketId { dev: 9, ino: 42 }), Ok(()));
        assert_eq!(
            rules.permits(sock, SocketId { dev: 9, ino: 43 }),
            Err(libc::EACCES)
        );
        assert_eq!(
            rules.permits(libc::S_IFREG | 0o644, SocketId { dev: 5, ino: 1 }),
            Err(libc::ECONNREFUSED)
        );
    }

    #[test]
    fn the_notifying_filter_sends_only_the_named_native_calls() {
        // Runs the program on one call, as the kernel would: the action it returns.
        fn run(f: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
            let mut pc = 0;
            let mut acc = 0;
            loop {
                let ins = f[pc];
                match ins.code {
                    0x20 => acc = if ins.k == 4 { arch } else { nr },
                    0x15 => {
                        let off = if acc == ins.k { ins.jt } else { ins.jf };
                        pc += off as usize;
                    }
                    0x06 => return ins.k,
                    c => panic!("unexpected instruction {c:#x}"),
                }
                pc += 1;
                assert!(pc < f.len(), "ran off the end");
            }
        }
        let (connect, listen, read) = (
            libc::SYS_connect as u32,
            libc::SYS_listen as u32,
            libc::SYS_read as u32,
        );
        let (notif, allow) = (libc::SECCOMP_RET_USER_NOTIF, libc::SECCOMP_RET_ALLOW);
        for (c, l) in [(true, false), (false, true), (true, true), (false, false)] {
            let f = notify_filter(Notified {
                connect: c,
                listen: l,
            });
            let want = |on: bool| if on { notif } else { allow };
            assert_eq!(run(&f, AUDIT_ARCH, connect), want(c), "{c} {l}");
            assert_eq!(run(&f, AUDIT_ARCH, listen), want(l), "{c} {l}");
            assert_eq!(run(&f, AUDIT_ARCH, read), allow);
            // A foreign architecture passes to the main filter, which kills it.
            assert_eq!(run(&f, 0x4000_0003, connect), allow);
            assert_eq!(run(&f, 0x4000_0003, listen), allow);
        }
    }
}
