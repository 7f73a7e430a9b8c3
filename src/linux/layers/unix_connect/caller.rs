//! What the supervisor reads of the calling thread: its descriptors (through a pidfd), its
//! memory (the address it passed), a socket's domain and a path resolved in its view.

use super::*;

/// A pidfd for thread `tid` (the notification names the calling thread).
pub(super) fn pidfd_of(tid: libc::pid_t) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    let open = |pid: libc::pid_t, flags: libc::c_int| {
        // SAFETY: pidfd_open returns a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: a new descriptor, owned here.
            Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
        }
    };
    open(tid, PIDFD_THREAD).or_else(|_| {
        // Kernels before 6.9: the thread group's leader shares the descriptor table.
        let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
        let tgid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
        open(tgid, 0)
    })
}

pub(super) fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd returns a new descriptor (a duplicate of the target's) or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

pub(super) fn read_memory(pid: libc::pid_t, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: reads `len` bytes of the other process into `buf`, which has room for them.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n != len as isize {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

pub(super) fn socket_domain(sock: &OwnedFd) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int into `value`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

pub(super) fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat fills `st` on success.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful fstat.
    Ok(unsafe { st.assume_init() })
}

/// The file `path` names for process `pid`, resolved from its root: a relative path is joined to
/// its working directory as the process sees it (so `..` climbs as the kernel would, up to the
/// root); never above the root, never through a magic link.
pub(super) fn resolve_in_view(pid: libc::pid_t, path: &[u8]) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStringExt;
    let mut full = path.to_vec();
    let mut base = "root";
    if path.first() != Some(&b'/') {
        // Read from outside, the link shows the working directory within the process's own
        // root. A deleted one (or one outside the root) is resolved from the directory itself,
        // with `..` stopping there.
        match std::fs::read_link(format!("/proc/{pid}/cwd")).map(|p| p.into_os_string().into_vec())
        {
            Ok(cwd) if cwd.first() == Some(&b'/') && !cwd.ends_with(b" (deleted)") => {
                full = cwd;
                full.push(b'/');
                full.extend_from_slice(path);
            }
            _ => base = "cwd",
        }
    }
    let dir = crate::sys::open_path(std::path::Path::new(&format!("/proc/{pid}/{base}")))?;
    let c = std::ffi::CString::new(full).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    crate::sys::openat2_path(
        dir.as_raw_fd(),
        &c,
        libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
    )
}
