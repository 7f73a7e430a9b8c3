//! The stream and its reader: [`open`] binds the audit multicast socket before the child
//! starts, [`AuditStream::start`] reads and parses the records on a thread of its own into the
//! collector, and [`AuditReader::finish`] drains what is still in flight and returns the denials.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::collector::Collector;
use super::netlink::{audit_status, netlink_messages, netlink_socket, recv_now, set_rcvbuf};
use super::records::{
    AUDIT_EOE, AUDIT_LANDLOCK_ACCESS, AUDIT_LANDLOCK_DOMAIN, AUDIT_SYSCALL, parse_record,
};
use super::{Denial, Denials, Unavailable};

/// Told of each denial the run's reader keeps, as it is kept (the live event stream).
pub type DenialListener = Arc<dyn Fn(&Denial) + Send + Sync>;

const AUDIT_NLGRP_READLOG: u32 = 1;
/// After `finish`, reading stops once nothing arrived for this long...
const QUIET: Duration = Duration::from_millis(100);
/// ...or this long after `finish`, whichever comes first.
const DRAIN_MAX: Duration = Duration::from_millis(160);
/// Longest wait of the reader for the socket, so that a stop request is seen quickly.
const POLL_MS: libc::c_int = 20;
/// Messages read in one go before checking for a stop request again.
const BATCH: usize = 256;

/// The audit multicast socket, bound before the child starts so no record is missed; records
/// queue in its buffer until [`AuditStream::start`].
#[derive(Debug)]
pub struct AuditStream {
    fd: OwnedFd,
    /// The kernel's count of records it dropped (`lost`), when it could be read.
    lost_at_open: Option<u32>,
}

/// Opens the audit record stream, or says why it cannot be had. `landlock_abi` is the kernel's
/// Landlock ABI (`sys::landlock_abi()`).
pub fn open(landlock_abi: u32) -> Result<AuditStream, Unavailable> {
    let no = |s: String| Err(Unavailable(s));
    if landlock_abi < 7 {
        return no(format!(
            "kernel has no Landlock audit (Landlock ABI {landlock_abi} < 7, needs Linux 6.15)"
        ));
    }
    let status = audit_status(Duration::from_secs(1));
    match &status {
        Ok(s) if s.enabled == 0 => return no("kernel audit is disabled (auditctl -e 1)".into()),
        Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => {
            return no("kernel built without audit (CONFIG_AUDIT)".into());
        }
        // EPERM without CAP_AUDIT_CONTROL, ECONNREFUSED in a user namespace: cannot tell; the
        // bind below decides.
        Ok(_) | Err(_) => {}
    }
    let fd = netlink_socket().map_err(|e| Unavailable(format!("audit netlink socket: {e}")))?;
    set_rcvbuf(&fd);
    // SAFETY: a zeroed sockaddr_nl is valid; the fields are set below.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = 1 << (AUDIT_NLGRP_READLOG - 1);
    // SAFETY: `addr` is a valid sockaddr_nl of the size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EPERM) => {
                no("reading audit records needs CAP_AUDIT_READ (run as root)".into())
            }
            _ => no(format!("audit netlink bind: {e}")),
        };
    }
    if let (Ok(own), Ok(init)) = (
        std::fs::read_link("/proc/self/ns/net"),
        std::fs::read_link("/proc/1/ns/net"),
    ) {
        if own != init {
            return no("audit records are only sent to the initial network namespace".into());
        }
    }
    Ok(AuditStream {
        fd,
        lost_at_open: status.ok().map(|s| s.lost),
    })
}

impl AsFd for AuditStream {
    /// For closing it in children that do not exec (it is close-on-exec).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

struct Shared {
    collector: Mutex<Collector>,
    stop: Mutex<Option<Instant>>,
    abandon: AtomicBool,
}

/// The running reader of one run's records.
pub struct AuditReader {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    lost_at_open: Option<u32>,
}

impl AuditStream {
    /// Starts a background thread that reads and parses records until `finish`. Call it after
    /// forking the child, so the child is forked from a single-threaded process.
    pub fn start(self, listener: Option<DenialListener>) -> AuditReader {
        let shared = Arc::new(Shared {
            collector: Mutex::new(Collector::default()),
            stop: Mutex::new(None),
            abandon: AtomicBool::new(false),
        });
        let for_thread = Arc::clone(&shared);
        let (fd, lost_at_open) = (self.fd, self.lost_at_open);
        let thread = std::thread::Builder::new()
            .name("jail-audit".into())
            .spawn(move || read_loop(&fd, &for_thread, listener));
        match thread {
            Ok(handle) => AuditReader {
                shared,
                thread: Some(handle),
                lost_at_open,
            },
            Err(e) => {
                tracing::warn!("audit reader thread: {e}");
                lock(&shared.collector).lost();
                AuditReader {
                    shared,
                    thread: None,
                    lost_at_open,
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AuditReader {
    /// Tells the reader the host pid of the process that calls `landlock_restrict_self` for this
    /// run (the sandboxed command's own process, before it execs); only domains created by that
    /// pid (and their denials) are kept, so concurrent jails do not mix. May be called after
    /// records arrived (they wait), and more than once (each pid is added).
    pub fn set_creator(&self, pid: i32) {
        lock(&self.shared.collector).set_creator(pid);
    }

    /// Stops reading once nothing arrived for 100 ms (records still in flight), at most ~200 ms
    /// from now, and returns the denials.
    pub fn finish(mut self) -> Denials {
        *lock(&self.shared.stop) = Some(Instant::now());
        if let Some(handle) = self.thread.take() {
            if handle.join().is_err() {
                lock(&self.shared.collector).lost();
            }
        }
        let mut out = std::mem::take(&mut *lock(&self.shared.collector)).finish();
        // The kernel drops records itself when its queue is full (backlog limit, 64 by default,
        // easily reached without auditd, where every record is also printed to the kernel log).
        // The counter is the machine's, so this may also flag records of others.
        if let Some(before) = self.lost_at_open {
            match audit_status(Duration::from_millis(20)) {
                Ok(now) if now.lost == before => {}
                _ => out.dropped_records = true,
            }
        }
        out
    }
}

impl Drop for AuditReader {
    fn drop(&mut self) {
        // Not finished (an error path): let the thread end at its next wake-up, unjoined.
        self.shared.abandon.store(true, Ordering::Relaxed);
    }
}

fn read_loop(fd: &OwnedFd, shared: &Shared, listener: Option<DenialListener>) {
    let mut buf = vec![0u8; 1 << 16];
    let mut last_record: Option<Instant> = None;
    // Denials already handed to the listener.
    let mut told = 0;
    let mut tell = |collector: &Mutex<Collector>| {
        if let Some(listen) = &listener {
            let fresh: Vec<Denial> = lock(collector).kept()[told..].to_vec();
            told += fresh.len();
            fresh.iter().for_each(|d| listen(d));
        }
    };
    loop {
        tell(&shared.collector);
        let now = Instant::now();
        if shared.abandon.load(Ordering::Relaxed) {
            return;
        }
        if let Some(stop) = *lock(&shared.stop) {
            let quiet_since = last_record.map_or(stop, |t| t.max(stop));
            if now >= quiet_since + QUIET || now >= stop + DRAIN_MAX {
                return;
            }
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        if rc <= 0 {
            lock(&shared.collector).expire(Instant::now());
            tell(&shared.collector);
            continue;
        }
        // A bounded batch, so that a flood of records cannot keep the stop check from running.
        for _ in 0..BATCH {
            let n = recv_now(fd, &mut buf);
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    Some(libc::ENOBUFS) => {
                        lock(&shared.collector).lost();
                        continue;
                    }
                    _ => {
                        lock(&shared.collector).lost();
                        // A broken socket: nothing more will come.
                        return;
                    }
                }
            }
            let now = Instant::now();
            last_record = Some(now);
            let mut collector = lock(&shared.collector);
            for (kind, text) in netlink_messages(&buf[..n as usize]) {
                if !matches!(
                    kind,
                    AUDIT_LANDLOCK_ACCESS | AUDIT_LANDLOCK_DOMAIN | AUDIT_SYSCALL | AUDIT_EOE
                ) {
                    continue;
                }
                if let Some(record) = parse_record(kind, &String::from_utf8_lossy(text)) {
                    collector.feed(record, now);
                }
            }
        }
        lock(&shared.collector).expire(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_says_why_not() {
        let err = open(6).unwrap_err();
        assert!(err.0.contains("ABI 6 < 7"), "{err}");
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let err = open(7).unwrap_err();
            assert_eq!(
                err.0,
                "reading audit records needs CAP_AUDIT_READ (run as root)"
            );
        }
    }

    /// End to end, when this machine can: root, audit enabled, Landlock ABI 7. A child enforces a
    /// ruleset forbidding every write, with LOG_NEW_EXEC_ON, and execs a shell that writes; a
    /// second, unrelated child does the same and must not be reported.
    #[test]
    fn reports_a_denial_end_to_end() {
        use landlock::{
            ABI, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
        };
        use std::ffi::CString;

        let abi = crate::sys::landlock_abi();
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: reading audit records needs root");
            return;
        }
        let stream = match open(abi) {
            Ok(s) => s,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let dir = std::env::temp_dir().join(format!("jail audit {}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!("echo x > '{}/f'", dir.display());
        let argv: Vec<CString> = ["sh", "-c", &script]
            .iter()
            .map(|a| CString::new(*a).unwrap())
            .collect();
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let sh = CString::new("/bin/sh").unwrap();

        let spawn = || -> libc::pid_t {
            // Everything that allocates happens before fork (the test harness is threaded).
            let ruleset = Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_write(ABI::V7))
                .unwrap()
                .create()
                .unwrap()
                .log_new_exec(true)
                .unwrap();
            // SAFETY: the child only restricts itself and execs (or _exits).
            match unsafe { libc::fork() } {
                0 => {
                    if ruleset.restrict_self().is_ok() {
                        // SAFETY: valid NUL-terminated program and argv.
                        unsafe { libc::execv(sh.as_ptr(), argv_ptrs.as_ptr()) };
                    }
                    // SAFETY: leaving the forked child without running the parent's destructors.
                    unsafe { libc::_exit(127) }
                }
                pid => {
                    assert!(pid > 0, "fork failed");
                    pid
                }
            }
        };
        let wait = |pid: libc::pid_t| {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            status
        };

        let ours = spawn();
        let other = spawn();
        let reader = stream.start(None);
        reader.set_creator(ours);
        assert_ne!(wait(ours), 0, "the write should have failed");
        wait(other);
        let finishing = Instant::now();
        let out = reader.finish();
        assert!(
            finishing.elapsed() < Duration::from_millis(300),
            "finish was slow"
        );
        let _ = std::fs::remove_dir(&dir);

        assert!(out.total >= 1, "{out:?}");
        let denial = &out.denials[0];
        assert_eq!(denial.operation, "fs.make_reg");
        assert_eq!(denial.path.as_deref(), dir.to_str());
        assert_eq!(denial.comm.as_deref(), Some("sh"));
        assert_eq!(denial.pid, Some(ours));
        assert!(
            out.denials.iter().all(|d| d.pid == Some(ours)),
            "the other child's denial leaked in: {out:?}"
        );
    }
}
