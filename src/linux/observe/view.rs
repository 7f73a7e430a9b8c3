//! The facts `jail status` asks of the kernel about the calling process that no path can forge:
//! a process that can make a user and mount namespace of its own can put any file over any
//! path (`/dev/jail`, `/proc`, `/etc/passwd`), so these go through syscalls on descriptors the
//! kernel hands out for this process, never through a path.
//!
//! - Whether this process can create a user namespace now (tried in a forked child, which exits
//!   at once).
//! - Which user namespace owns each of this process's namespaces: a pidfd of ourselves gives
//!   each namespace (`PIDFD_GET_*_NAMESPACE`, Linux 6.11), `NS_GET_USERNS` its owner, which the
//!   kernel refuses (EPERM) when the owner is above our own user namespace.
//! - The network interfaces of this process's network namespace (a netlink link dump, through
//!   libc's `if_nameindex`).
//!
//! Only the syscalls live here; what they prove is decided in [`super::evidence`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `_IO(PIDFS_IOCTL_MAGIC, n)` of include/uapi/linux/pidfd.h (PIDFS_IOCTL_MAGIC is 0xFF).
const fn pidfd_ioctl(n: u64) -> u64 {
    (0xFF << 8) | n
}
const PIDFD_GET_IPC_NAMESPACE: u64 = pidfd_ioctl(2);
const PIDFD_GET_MNT_NAMESPACE: u64 = pidfd_ioctl(3);
const PIDFD_GET_NET_NAMESPACE: u64 = pidfd_ioctl(4);
const PIDFD_GET_PID_NAMESPACE: u64 = pidfd_ioctl(5);
const PIDFD_GET_USER_NAMESPACE: u64 = pidfd_ioctl(9);
/// `_IO(NSIO, 0x1)` of include/uapi/linux/nsfs.h (NSIO is 0xb7): the owning user namespace.
const NS_GET_USERNS: u64 = (0xb7 << 8) | 0x1;
/// fs/nsfs.c's superblock magic.
const NSFS_MAGIC: i64 = 0x6e73_6673;

/// A namespace of this process, as the kernel names it (`/proc/self/ns/NAME`).
pub const KINDS: &[&str] = &["user", "mnt", "pid", "ipc", "net"];

fn request(kind: &str) -> u64 {
    match kind {
        "user" => PIDFD_GET_USER_NAMESPACE,
        "mnt" => PIDFD_GET_MNT_NAMESPACE,
        "pid" => PIDFD_GET_PID_NAMESPACE,
        "ipc" => PIDFD_GET_IPC_NAMESPACE,
        "net" => PIDFD_GET_NET_NAMESPACE,
        _ => unreachable!("a namespace kind without an ioctl: {kind}"),
    }
}

/// Wraps a descriptor a syscall returned, or its errno.
fn owned(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

/// (st_dev, st_ino) of a descriptor: a namespace's identity.
fn identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
    Ok((st.st_dev, st.st_ino))
}

/// The descriptors of this process's namespaces, asked of the kernel by pidfd.
pub struct Namespaces {
    pidfd: Option<OwnedFd>,
}

impl Namespaces {
    /// A pidfd of this process (Linux 5.3); without one, [`Namespaces::open`] falls back to
    /// `/proc/self/ns`, which a view of the caller's making can cover.
    pub fn of_self() -> Namespaces {
        // SAFETY: pidfd_open of our own pid returns a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        Namespaces {
            pidfd: owned(rc).ok(),
        }
    }

    /// One namespace of this process; `by_path` says the pidfd ioctl was missing (a kernel
    /// before 6.11) and `/proc/self/ns` answered instead.
    pub fn open(&self, kind: &str) -> io::Result<(OwnedFd, bool)> {
        if let Some(pidfd) = &self.pidfd {
            // SAFETY: the PIDFD_GET_*_NAMESPACE ioctls take no argument and return a new
            // descriptor or -1.
            let rc = unsafe { libc::ioctl(pidfd.as_raw_fd(), request(kind) as _, 0) };
            match owned(rc as libc::c_long) {
                Ok(fd) => return Ok((fd, false)),
                Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        let f = std::fs::File::open(format!("/proc/self/ns/{kind}"))?;
        let fs = nix::sys::statfs::fstatfs(&f).map_err(io::Error::from)?;
        if fs.filesystem_type().0 as i64 != NSFS_MAGIC {
            return Err(io::Error::other(format!(
                "/proc/self/ns/{kind} is not a namespace"
            )));
        }
        Ok((OwnedFd::from(f), true))
    }

    /// The nsfs inode number of one namespace.
    pub fn inode(&self, kind: &str) -> io::Result<u64> {
        Ok(identity(&self.open(kind)?.0)?.1)
    }

    /// Whether the user namespace that owns `kind` is our own (`Ok(true)`) or one above it
    /// (`Ok(false)`: the kernel refuses NS_GET_USERNS for an owner outside our scope).
    pub fn owned_by_ours(&self, kind: &str) -> io::Result<bool> {
        let (user, _) = self.open("user")?;
        let (ns, _) = self.open(kind)?;
        // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor or -1.
        let rc = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS as _, 0) };
        match owned(rc as libc::c_long) {
            Ok(owner) => Ok(identity(&owner)? == identity(&user)?),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether any path answered instead of the pidfd.
    pub fn by_path(&self) -> bool {
        self.open("user").map(|(_, p)| p).unwrap_or(true)
    }
}

/// Whether this process can create a user namespace now: a forked child calls
/// unshare(CLONE_NEWUSER) and exits with 0, or with the errno it got.
pub fn can_create_user_namespace() -> io::Result<Result<(), i32>> {
    // SAFETY: the child only calls unshare and _exit (both async-signal-safe), so forking is
    // sound even if another thread held a lock; the parent waits for it below.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: unshare changes only this child's namespaces; _exit ends it without running
        // anything of the parent's (no destructor, no atexit handler, no stdio flush).
        unsafe {
            let rc = libc::unshare(libc::CLONE_NEWUSER);
            let errno = *libc::__errno_location();
            libc::_exit(if rc == 0 { 0 } else { errno.clamp(1, 255) });
        }
    }
    let mut status = 0;
    let mut stopped = false;
    loop {
        // WUNTRACED: a child another process stopped (SIGSTOP) is seen, killed and then
        // reaped, instead of being waited for without end.
        // SAFETY: waits for the child forked above, writing only `status`.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if rc == pid && libc::WIFSTOPPED(status) {
            stopped = true;
            // SAFETY: kill of our own child, not yet reaped (its pid cannot be reused).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            continue;
        }
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    if stopped {
        return Err(io::Error::other("the probe child was stopped"));
    }
    if !libc::WIFEXITED(status) {
        return Err(io::Error::other("the probe child did not exit"));
    }
    Ok(match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(errno),
    })
}

/// The names of the network interfaces of this process's network namespace.
pub fn interface_names() -> io::Result<Vec<String>> {
    // SAFETY: if_nameindex returns an array ending in an entry with index 0, or NULL; it is
    // read only up to that entry and freed once with if_freenameindex.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Err(io::Error::last_os_error());
        }
        let mut names = Vec::new();
        let mut p = list;
        while (*p).if_index != 0 {
            if !(*p).if_name.is_null() {
                let name = std::ffi::CStr::from_ptr((*p).if_name);
                names.push(name.to_string_lossy().into_owned());
            }
            p = p.add(1);
        }
        libc::if_freenameindex(list);
        Ok(names)
    }
}
