//! The connector: a process in the command's view that makes the connections the supervisor
//! allows (forked twice removed from the command, so never its child), one worker per request,
//! each handing the connected socket back.

use super::*;

pub(super) fn send_plain(sock: RawFd, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `bytes` is valid for its length.
    let rc = unsafe { libc::send(sock, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Forks the connector twice removed, so that it is reparented to init (or the supervisor, its
/// subreaper) and never shows up as a child the command could wait for.
pub(super) fn start_connector(requests: RawFd) -> io::Result<()> {
    // SAFETY: the command's process is single-threaded (forked from single-threaded init or
    // supervisor); the children only call async-signal-safe code until they exit or loop.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: as above.
            match unsafe { libc::fork() } {
                0 => connector_main(requests),
                // SAFETY: _exit runs no destructors of the parent's state.
                _ => unsafe { libc::_exit(0) },
            }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for the intermediate child just forked.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            Ok(())
        }
    }
}

/// Request to the connector: id (u64), kind, then the address bytes; descriptors: the socket,
/// and for [`KIND_PINNED`] the O_PATH descriptor of the checked socket file.
pub(super) const KIND_ADDRESS: u8 = 0;
pub(super) const KIND_PINNED: u8 = 1;
pub(super) const HEADER: usize = 9;

/// The connector's end of the request channel, moved to this number at its start.
pub(super) const CHANNEL: RawFd = 3;

pub(super) fn connector_main(requests: RawFd) -> ! {
    // Nothing of the command's but the channel: not its terminal, not its pipes (a reader of
    // jail's output must see end of file when the command ends).
    // SAFETY: dup2/close_range/open only manage this process's descriptor table.
    unsafe {
        libc::dup2(requests, CHANNEL);
        libc::syscall(libc::SYS_close_range, 0u32, 2u32, 0u32);
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
        for _ in 0..3 {
            libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        }
        // Jailed processes share its uid and domain: not dumpable keeps /proc/PID/mem closed.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // First message: a socket-diagnostics socket of the command's network namespace, with which
    // the supervisor tells the jail's listening sockets from the host's.
    let sent = match crate::linux::layers::unix_diag::open() {
        Ok(diag) => crate::sys::send_fd(CHANNEL, diag.as_raw_fd()),
        Err(_) => send_plain(CHANNEL, b"N"),
    };
    if sent.is_err() {
        // SAFETY: the supervisor is gone: nothing is left to do.
        unsafe { libc::_exit(0) };
    }
    let mut pool = Workers::default();
    loop {
        let Some((header, addr, fds)) = recv_request(CHANNEL) else {
            // SAFETY: the supervisor is gone: nothing is left to do.
            unsafe { libc::_exit(0) };
        };
        let job = Job { header, addr, fds };
        // A non-blocking socket's connect returns at once (EINPROGRESS at worst): made here.
        // A blocking one may wait for a slow TCP handshake, which must not hold up the next.
        if job.fds.first().is_some_and(non_blocking) {
            job.run();
        } else {
            pool.give(job);
        }
    }
}

/// One connect to make and answer.
pub(super) struct Job {
    header: [u8; HEADER],
    addr: Vec<u8>,
    fds: Vec<OwnedFd>,
}

impl Job {
    fn run(self) {
        let errno = connect_for(self.header[8], &self.addr, &self.fds);
        let mut reply = self.header[..8].to_vec();
        reply.extend(errno.to_ne_bytes());
        let _ = send_plain(CHANNEL, &reply);
    }
}

/// Threads that make blocking connects, kept for the next one (a thread start costs more than
/// the connect); one more is started whenever none is idle, up to a bound.
#[derive(Default)]
pub(super) struct Workers {
    queue: Option<std::sync::mpsc::Sender<Job>>,
    receiver: Option<Arc<std::sync::Mutex<std::sync::mpsc::Receiver<Job>>>>,
    idle: Arc<std::sync::atomic::AtomicUsize>,
    started: usize,
}

pub(super) const MAX_WORKERS: usize = 64;

impl Workers {
    fn give(&mut self, job: Job) {
        use std::sync::atomic::Ordering;
        if self.queue.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            self.queue = Some(tx);
            self.receiver = Some(Arc::new(std::sync::Mutex::new(rx)));
        }
        if self.idle.load(Ordering::SeqCst) == 0 && self.started < MAX_WORKERS {
            let rx = Arc::clone(self.receiver.as_ref().expect("made above"));
            let idle = Arc::clone(&self.idle);
            let worker = move || {
                loop {
                    idle.fetch_add(1, Ordering::SeqCst);
                    let job = rx.lock().ok().and_then(|r| r.recv().ok());
                    idle.fetch_sub(1, Ordering::SeqCst);
                    match job {
                        Some(job) => job.run(),
                        None => return,
                    }
                }
            };
            if std::thread::Builder::new().spawn(worker).is_ok() {
                self.started += 1;
            } else if self.started == 0 {
                // No thread at all (a process limit): made here, so that it is still answered.
                return job.run();
            }
        }
        let queue = self.queue.as_ref().expect("made above");
        if let Err(std::sync::mpsc::SendError(job)) = queue.send(job) {
            job.run();
        }
    }
}

pub(super) fn non_blocking(fd: &OwnedFd) -> bool {
    // SAFETY: F_GETFL only reads the file status flags.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

pub(super) fn recv_request(sock: RawFd) -> Option<([u8; HEADER], Vec<u8>, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut buf = [0u8; HEADER + 128];
    let mut iov = [io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let msg = loop {
        match recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.ok()?,
        }
    };
    let n = msg.bytes;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(list) = cmsg {
            // SAFETY: the kernel just installed these descriptors for us.
            fds.extend(
                list.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if n < HEADER {
        return None;
    }
    let mut header = [0u8; HEADER];
    header.copy_from_slice(&buf[..HEADER]);
    Some((header, buf[HEADER..n].to_vec(), fds))
}

/// The connect itself, in the jail's domain; returns 0 or the errno.
pub(super) fn connect_for(kind: u8, addr: &[u8], fds: &[OwnedFd]) -> i32 {
    let Some(sock) = fds.first() else {
        return libc::EBADF;
    };
    let pinned;
    let addr = if kind == KIND_PINNED {
        let Some(file) = fds.get(1) else {
            return libc::EBADF;
        };
        pinned = sockaddr_un(format!("/proc/self/fd/{}", file.as_raw_fd()).as_bytes());
        pinned.as_slice()
    } else {
        addr
    };
    // SAFETY: `addr` is valid for its length; connect only reads it.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        0
    } else {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }
}

pub(super) fn sockaddr_un(path: &[u8]) -> Vec<u8> {
    let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    out.extend_from_slice(path);
    out.push(0);
    out
}
