//! Thin wrappers over the few raw syscalls that neither `nix` nor `libc` wrap for us. Every
//! `unsafe` block of the crate that is not in a layer's apply function lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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

/// An O_PATH descriptor for `path` reached without following any symlink on the way
/// (openat2's RESOLVE_NO_SYMLINKS): ELOOP if a component is one, ENOSYS before Linux 5.6.
pub fn open_path_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    openat2_path(libc::AT_FDCWD, &cstr(path)?, libc::RESOLVE_NO_SYMLINKS)
}

/// openat2(dir, path, O_PATH | O_CLOEXEC) with the `resolve` restrictions (RESOLVE_*).
pub fn openat2_path(dir: RawFd, path: &std::ffi::CStr, resolve: u64) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain data; zero is its "nothing asked" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: openat2 reads `path` and `how`, valid for the call; returns a new descriptor or -1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
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

/// A detached copy of the mount at `path` (open_tree with OPEN_TREE_CLONE), not followed
/// through a final symlink: changes to the namespace's tree (a recursive read-only) do not
/// reach it.
pub fn open_tree_clone(path: &Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_SYMLINK_NOFOLLOW as u32;
    // SAFETY: the path is a valid NUL-terminated string that lives for the call.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) })?;
    // SAFETY: open_tree returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A new tmpfs attached nowhere (fsopen, fsconfig, fsmount): reachable only through the
/// returned descriptor, and gone when the last reference to it is. `size` as tmpfs takes it.
pub fn detached_tmpfs(size: Option<&str>) -> io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
    const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;
    // SAFETY: the name is a NUL-terminated string that lives for the call.
    let fs = check(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) })?;
    // SAFETY: fsopen returned a new descriptor that nothing else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    let mut options = vec![("mode", "0700".to_string())];
    if let Some(size) = size {
        for kv in size.split(',') {
            if let Some((k, v)) = kv.split_once('=') {
                options.push((k, v.to_string()));
            }
        }
    }
    for (k, v) in options {
        let key = CString::new(k).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let value = CString::new(v).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: both strings are NUL-terminated and live for the call.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: no pointers are passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    // SAFETY: no pointers are passed.
    let m = check(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )
    })?;
    // SAFETY: fsmount returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(m as RawFd) })
}

/// mkdirat relative to a directory descriptor.
pub fn mkdir_at(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: the name is a NUL-terminated string that lives for the call.
    check(
        unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) } as libc::c_long,
    )
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

/// Marks every descriptor from `first` to `last` close-on-exec. The raw syscall, not libc's
/// wrapper: musl has none, and the static build must behave as the glibc one does.
pub fn cloexec_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    check(rc).map(drop)
}

/// Renames `from` to `to`, both in `dir`, failing with EEXIST rather than replacing `to`
/// (RENAME_NOREPLACE: the check and the rename are one step, so nothing planted between them is
/// overwritten). The raw syscall: musl wraps no renameat2, so neither does nix there.
pub fn rename_noreplace(
    dir: &impl std::os::fd::AsFd,
    from: &std::ffi::OsStr,
    to: &std::ffi::OsStr,
) -> io::Result<()> {
    let from = CString::new(from.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains a NUL byte"))?;
    let to = CString::new(to.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains a NUL byte"))?;
    let fd = dir.as_fd().as_raw_fd();
    // SAFETY: both names are NUL-terminated strings we own, the descriptor is borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            fd,
            from.as_ptr(),
            fd,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    check(rc).map(drop)
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

/// Whether `path` is jail's policy memfd (the policy file without the mount view): its link
/// reads `/memfd:jail-policy`, the name the supervisor gives it, and it is sealed against
/// writing. Any process can make such a memfd, so what it holds is advisory at best (see
/// `jail status`).
pub fn is_sealed_memfd(path: &str) -> bool {
    let named = std::fs::read_link(path)
        .map(|t| t.to_string_lossy().starts_with("/memfd:jail-policy"))
        .unwrap_or(false);
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: F_GET_SEALS only reads the seals of an open descriptor.
    let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
    named && seals >= 0 && seals & libc::F_SEAL_WRITE != 0
}

/// Writes `text` to `path` in one write call (proc files such as uid_map need that).
pub fn write_file(path: &str, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(text.as_bytes())
}

/// Brings the loopback interface of the current network namespace up (a new namespace starts
/// with `lo` down: even 127.0.0.1 is unreachable). Needs CAP_NET_ADMIN over the namespace.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned here alone.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the ifreq we own for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SIOCSIFFLAGS as _,
            &req,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends one descriptor over a unix socket (SCM_RIGHTS).
pub fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [fd];
    let iov = [std::io::IoSlice::new(b"F")];
    sendmsg::<()>(
        sock,
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`]; `None` when the peer closed without one.
pub fn recv_fd(sock: RawFd) -> io::Result<Option<OwnedFd>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    // Room for the credentials the kernel adds when SO_PASSCRED is set, too.
    let mut space = nix::cmsg_space!([RawFd; 1], libc::ucred);
    let msg = recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this descriptor in our table for us.
                return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
    }
    Ok(None)
}

/// Sends a credentials message naming process `pid` (SCM_CREDENTIALS). The receiver sees the pid
/// translated into its own pid namespace. Naming another process than oneself needs
/// CAP_SYS_ADMIN over one's pid namespace.
pub fn send_pid(sock: RawFd, pid: i32) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, UnixCredentials, sendmsg};
    // SAFETY: ucred is plain old data.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    cred.pid = pid;
    cred.uid = nix::unistd::geteuid().as_raw();
    cred.gid = nix::unistd::getegid().as_raw();
    let creds = UnixCredentials::from(cred);
    let iov = [std::io::IoSlice::new(b"P")];
    sendmsg::<()>(
        sock,
        &iov,
        &[ControlMessage::ScmCredentials(&creds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    Ok(())
}

/// Receives the pid of a [`send_pid`] message (SO_PASSCRED must be set on `sock`).
pub fn recv_pid(sock: RawFd) -> io::Result<Option<i32>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(libc::ucred);
    let msg = recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::empty())
        .map_err(io::Error::from)?;
    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmCredentials(c) = cmsg {
            return Ok(Some(c.pid()));
        }
    }
    Ok(None)
}

/// Every process below `root`, from the parent pids in /proc/*/stat (zombies included: they are
/// reaped, not killed).
pub fn descendants(root: i32) -> Vec<i32> {
    tree_below(root, &processes())
}

/// The processes below `root` in the process group `pgid`, from /proc/*/stat. A process forked
/// after the listing is not in it.
pub fn descendants_in_group(root: i32, pgid: i32) -> Vec<i32> {
    let all = processes();
    tree_below(root, &all)
        .into_iter()
        .filter(|p| all.iter().any(|s| s.pid == *p && s.pgrp == pgid))
        .collect()
}

/// The ids of one process, as its /proc/PID/stat shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatIds {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
}

/// The parent and process group in the text of /proc/PID/stat: `pid (comm) state ppid pgrp …`,
/// where comm may hold spaces and parentheses (the last ')' ends it).
pub fn stat_ids(pid: i32, stat: &str) -> Option<StatIds> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(StatIds { pid, ppid, pgrp })
}

/// Every process /proc lists now.
fn processes() -> Vec<StatIds> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        out.extend(stat_ids(pid, &stat));
    }
    out
}

/// The pids below `root` in `all`, following the parent links.
fn tree_below(root: i32, all: &[StatIds]) -> Vec<i32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for s in all {
            if s.ppid == p && !out.contains(&s.pid) {
                out.push(s.pid);
                frontier.push(s.pid);
            }
        }
    }
    out
}

/// Drops this process's mapped pages of its own program code (the executable's `r-xp`
/// mappings) from its page tables: they stay in the page cache, and the few a long-lived
/// process still runs come back on their first use as minor faults. A supervisor ran its
/// planning code once, before the clone; without this its resident set keeps every page of it
/// (a session's supervisor, static build: 6.3 MiB resident, 3.0 after this and nine execs; a
/// one-shot run's 4.4 → 2.0). A fault maps back the whole page-cache folio around it, so what
/// returns is more than the pages run. Only code: it is never written, so discarding it loses
/// nothing (a written private page, such as relocated data, would revert to the file's bytes).
pub fn release_program_code() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for line in maps.lines() {
        // "start-end perms offset dev inode path"
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let path = fields.nth(3);
        if perms != "r-xp" || path.is_none_or(|p| Path::new(p) != exe) {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        // SAFETY: the range is a mapping of this process's own executable, read-only and
        // executable, never written: MADV_DONTNEED only unmaps its pages, which fault back in
        // from the file unchanged.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ids_read_past_a_command_name_with_parentheses_and_spaces() {
        let stat = "42 (a) b (c) S 7 9 9 0 -1 4194560 0 0";
        assert_eq!(
            stat_ids(42, stat),
            Some(StatIds {
                pid: 42,
                ppid: 7,
                pgrp: 9
            })
        );
        assert_eq!(stat_ids(42, "42 (x"), None);
        assert_eq!(stat_ids(42, "42 (x) S"), None);
    }

    #[test]
    fn the_tree_below_a_process_follows_every_generation() {
        let s = |pid, ppid| StatIds { pid, ppid, pgrp: 0 };
        let all = [s(1, 0), s(2, 1), s(3, 2), s(4, 3), s(5, 9)];
        let mut below = tree_below(1, &all);
        below.sort();
        assert_eq!(below, [2, 3, 4]);
        assert!(tree_below(4, &all).is_empty());
    }
}
