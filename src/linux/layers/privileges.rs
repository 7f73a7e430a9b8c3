//! Privileges layer: no_new_privs, every capability set emptied, inherited descriptors closed,
//! and a new session when no terminal is in use (so nothing can reach a controlling terminal).

use crate::error::JailError;

fn err(step: &str, e: impl std::fmt::Display) -> JailError {
    JailError::layer("privileges", step, e)
}

/// No execve from here on can gain privileges (setuid bits, file capabilities). Landlock and
/// seccomp both require it for an unprivileged caller.
pub fn set_no_new_privs() -> Result<(), JailError> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| err("no_new_privs", e))
}

/// Empties the bounding, ambient, inheritable, effective and permitted sets. The bounding set goes
/// first: dropping from it needs CAP_SETPCAP in the effective set. With an empty bounding set even
/// uid 0 gains nothing at execve.
pub fn drop_all_capabilities() -> Result<(), JailError> {
    use caps::CapSet;
    caps::clear(None, CapSet::Ambient).map_err(|e| err("clear ambient capabilities", e))?;
    // Without CAP_SETPCAP (an unprivileged user outside any user namespace) the bounding set
    // cannot shrink, and need not: no_new_privs already keeps execve from granting anything.
    let can_drop =
        caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    for cap in caps::all().into_iter().filter(|_| can_drop) {
        match caps::drop(None, CapSet::Bounding, cap) {
            Ok(()) => {}
            // A capability this kernel does not know is not in the bounding set either.
            Err(_) if !caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) => {}
            Err(e) => return Err(err(&format!("drop {cap} from the bounding set"), e)),
        }
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(|e| err(&format!("clear {set:?} capabilities"), e))?;
    }
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec, except those in `keep`: an inherited
/// descriptor keeps the rights it was opened with, whatever Landlock says about its path.
pub fn close_inherited_fds(keep: &[i32]) -> Result<(), JailError> {
    let mut keep: Vec<u32> = keep.iter().map(|&k| k as u32).collect();
    keep.sort_unstable();
    let mut first = 3u32;
    for k in keep {
        if k > first {
            crate::sys::cloexec_range(first, k - 1).map_err(|e| err("close_range", e))?;
        }
        if k >= first {
            clear_cloexec(k as i32)?;
            first = k + 1;
        }
    }
    crate::sys::cloexec_range(first, u32::MAX).map_err(|e| err("close_range", e))
}

fn clear_cloexec(fd: i32) -> Result<(), JailError> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    // SAFETY: the descriptor number was checked to be open by the caller (`--keep-fd`); it is
    // only borrowed for this call.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::empty()))
        .map(|_| ())
        .map_err(|e| err(&format!("--keep-fd {fd}"), e))
}

/// Whether descriptor `fd` is open.
pub fn fd_is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD only reads descriptor flags.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Core dumps off and `/proc/PID/mem`, ptrace and friends closed to same-uid processes.
pub fn set_not_dumpable() -> Result<(), JailError> {
    nix::sys::prctl::set_dumpable(false).map_err(|e| err("PR_SET_DUMPABLE", e))
}

/// With no terminal on stdin, stdout or stderr, the command gets a new session and so no
/// controlling terminal: it cannot open /dev/tty to inject keystrokes into the user's shell. With
/// one, it gets at least a process group of its own (unless it already leads one): kill(0, …) must
/// not reach the processes that started jail, whose group crosses any pid namespace.
pub fn own_session_or_group() -> Result<(), JailError> {
    let any_tty = (0..3).any(|fd| {
        // SAFETY: isatty only queries the descriptor.
        unsafe { libc::isatty(fd) == 1 }
    });
    if !any_tty {
        nix::unistd::setsid().map_err(|e| err("setsid", e))?;
        return Ok(());
    }
    let me = nix::unistd::getpid();
    if nix::unistd::getpgrp() != me && nix::unistd::getsid(None).ok() != Some(me) {
        // Leading a group is enough when init already made one for us (namespace mode).
        let init_group = nix::unistd::getpgrp().as_raw() == 1;
        if !init_group {
            nix::unistd::setpgid(me, me).map_err(|e| err("setpgid", e))?;
        }
    }
    Ok(())
}

/// Descriptors the command inherits open for reading on a file or directory (`jail … < file`)
/// still point at the host's writable mount, where fchmod, futimens and fsetxattr work whatever
/// the view says. Each is reopened by its path inside the view, at the same offset, when that
/// finds the same inode; one opened for writing was handed over by the user and is left as is.
pub fn reopen_read_only_files_in_view(fds: &[i32]) -> Result<(), JailError> {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::fs::MetadataExt;
    for &fd in fds {
        // SAFETY: F_GETFL only reads the descriptor's flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || flags & libc::O_ACCMODE != libc::O_RDONLY {
            continue;
        }
        // SAFETY: the descriptor is open (F_GETFL succeeded) and only borrowed here.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(file) = borrowed.try_clone_to_owned().map(std::fs::File::from) else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !(meta.is_file() || meta.is_dir()) {
            continue;
        }
        let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
            replace_unreachable(fd, &file, meta.is_dir())?;
            continue;
        };
        let mut open_flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        if meta.is_dir() {
            open_flags |= libc::O_DIRECTORY;
        }
        let Ok(cpath) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        // SAFETY: a valid C string; the descriptor is owned below.
        let new = unsafe { libc::open(cpath.as_ptr(), open_flags) };
        if new < 0 {
            // Hidden, private (/tmp) or deleted in the view: hand over a copy instead.
            replace_unreachable(fd, &file, meta.is_dir())?;
            continue;
        }
        // SAFETY: `new` was just returned by open.
        let reopened = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(new) };
        let same = reopened
            .metadata()
            .map(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
            .unwrap_or(false);
        if !same {
            replace_unreachable(fd, &file, meta.is_dir())?;
            continue;
        }
        // SAFETY: lseek on open descriptors; dup3 replaces `fd` atomically (without CLOEXEC).
        unsafe {
            let offset = libc::lseek(fd, 0, libc::SEEK_CUR);
            if offset > 0 {
                libc::lseek(reopened.as_raw_fd(), offset, libc::SEEK_SET);
            }
            if libc::dup3(reopened.as_raw_fd(), fd, 0) < 0 {
                return Err(err(
                    &format!("reopen descriptor {fd} in the view"),
                    std::io::Error::last_os_error(),
                ));
            }
        }
    }
    Ok(())
}

/// Largest file handed over as a copy when it cannot be reopened in the view.
const COPY_LIMIT: u64 = 256 << 20;

/// Replaces descriptor `fd` (a read-only file or directory the view does not show) by something
/// that cannot reach the host's inode: the rest of a file's content in a sealed memfd, or
/// /dev/null for a directory.
fn replace_unreachable(fd: i32, file: &std::fs::File, is_dir: bool) -> Result<(), JailError> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let replacement: std::fs::File = if is_dir {
        std::fs::File::open("/dev/null").map_err(|e| err("open /dev/null", e))?
    } else {
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size > COPY_LIMIT {
            return Err(err(
                &format!("descriptor {fd}"),
                format!(
                    "a {size}-byte file outside the jail's view is open on it; pass it through a \
                     pipe (cat file | jail …) instead"
                ),
            ));
        }
        let memfd = nix::sys::memfd::memfd_create(
            "jail-input",
            nix::sys::memfd::MFdFlags::MFD_ALLOW_SEALING | nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
        )
        .map_err(|e| err("memfd_create", e))?;
        let mut copy = std::fs::File::from(memfd);
        let mut src = file;
        let mut buf = Vec::new();
        src.read_to_end(&mut buf)
            .map_err(|e| err(&format!("read descriptor {fd}"), e))?;
        copy.write_all(&buf).map_err(|e| err("write memfd", e))?;
        // SAFETY: lseek on an owned descriptor.
        unsafe { libc::lseek(copy.as_raw_fd(), 0, libc::SEEK_SET) };
        let seals =
            libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
        // SAFETY: F_ADD_SEALS on an owned memfd.
        unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) };
        copy
    };
    // SAFETY: dup3 replaces `fd` atomically with the replacement (without CLOEXEC).
    if unsafe { libc::dup3(replacement.as_raw_fd(), fd, 0) } < 0 {
        return Err(err(
            &format!("replace descriptor {fd}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}
