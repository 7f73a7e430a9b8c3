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
            crate::linux::sys::cloexec_range(first, k - 1).map_err(|e| err("close_range", e))?;
        }
        if k >= first {
            clear_cloexec(k as i32)?;
            first = k + 1;
        }
    }
    crate::linux::sys::cloexec_range(first, u32::MAX).map_err(|e| err("close_range", e))
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

/// Core dumps off and /proc/<pid>/mem, ptrace and friends closed to same-uid processes.
pub fn set_not_dumpable() -> Result<(), JailError> {
    nix::sys::prctl::set_dumpable(false).map_err(|e| err("PR_SET_DUMPABLE", e))
}

/// With no terminal on stdin, stdout or stderr, the command gets a new session and so no
/// controlling terminal: it cannot open /dev/tty to inject keystrokes into the user's shell.
pub fn new_session_if_no_terminal() -> Result<bool, JailError> {
    let any_tty = (0..3).any(|fd| {
        // SAFETY: isatty only queries the descriptor.
        unsafe { libc::isatty(fd) == 1 }
    });
    if any_tty {
        return Ok(false);
    }
    nix::unistd::setsid().map_err(|e| err("setsid", e))?;
    Ok(true)
}
