//! Thin wrappers over the few raw syscalls that neither `nix` nor `libc` wrap for us. Every
//! `unsafe` block of the crate that is not in a layer's apply function lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An O_PATH descriptor for `path`, following symlinks (what a Landlock rule binds to).
pub fn open_path(path: &Path) -> io::Result<OwnedFd> {
    open_with(path, libc::O_PATH | libc::O_CLOEXEC)
}

/// An O_PATH descriptor for `path` itself, never a symlink's target: a mount placed through it
/// lands exactly on what the policy named, even if a symlink was planted there.
pub fn open_path_nofollow(path: &Path) -> io::Result<OwnedFd> {
    open_with(path, libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW)
}

fn open_with(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: `c` is a valid NUL-terminated string; the returned descriptor is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `st_mode` of an open descriptor.
pub fn fstat_mode(fd: RawFd) -> io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a full `stat` into the buffer on success.
    let rc = unsafe { libc::fstat(fd, st.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so the buffer is initialised.
    Ok(unsafe { st.assume_init() }.st_mode)
}

/// mount_setattr(2) on the mount at `fd` (AT_EMPTY_PATH), optionally on the whole subtree.
pub fn mount_setattr(fd: RawFd, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: the empty path is a valid C string, `attr` lives for the call, and the size passed
    // is its size.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(|_| ())
}

/// clone(2) with namespace flags and no new stack: like fork(), the child continues here on a
/// copy of the parent's memory. Returns 0 in the child and the child's pid in the parent.
///
/// # Safety
/// The caller must be single-threaded, as for fork(): the child gets only the calling thread.
pub unsafe fn clone_with_namespaces(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: with a NULL stack, clone behaves like fork(); the remaining pointer arguments are
    // unused for these flags. The caller guarantees single-threadedness.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    check(rc).map(|pid| pid as libc::pid_t)
}

/// Marks every descriptor from `first` to `last` close-on-exec.
pub fn cloexec_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
    let rc = unsafe { libc::close_range(first, last, libc::CLOSE_RANGE_CLOEXEC as libc::c_int) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The Landlock ABI version of the running kernel, 0 when Landlock is absent or disabled.
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr, size 0 and the VERSION flag the call only returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 { 0 } else { rc as u32 }
}

/// Whether the kernel supports seccomp filters (mode 2).
pub fn seccomp_filters_supported() -> bool {
    // SAFETY: PR_GET_SECCOMP only reads the caller's seccomp mode.
    let rc = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // EINVAL means the kernel was built without seccomp; the action-available check below tells
    // whether filters (not just strict mode) exist.
    if rc < 0 {
        return false;
    }
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    rc == 0
}

/// Writes `text` to `path` in one write call (proc files such as uid_map need that).
pub fn write_file(path: &str, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(text.as_bytes())
}
