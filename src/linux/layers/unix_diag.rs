//! Whose is a listening unix socket? The kernel's socket diagnostics (NETLINK_SOCK_DIAG, unix
//! family, UDIAG_SHOW_VFS) give, for every bound socket of a network namespace, the inode and
//! device of its file; the socket is the jail's when a process of the jail holds it. This is how
//! mediation lets a connect through to the jail's own daemon outside its own filesystems (in a
//! writable project, or in the host's /tmp without the mount view), while a host daemon at the
//! same kind of place stays out of reach.
//!
//! The netlink socket is made by the connector, inside the command's network namespace, and
//! handed to the supervisor: diagnostics answer for the namespace the asking socket lives in.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A socket file's identity: the inode that a path resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct SocketId {
    pub dev: u64,
    pub ino: u64,
}

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 0x2;
const NLMSG_DONE: u16 = 0x3;
const UDIAG_SHOW_VFS: u32 = 0x2;
const UNIX_DIAG_VFS: u16 = 1;
const TCP_LISTEN: u32 = 10;
const NLMSG_HDRLEN: usize = 16;
/// struct unix_diag_msg: family, type, state, pad (u8 each), ino (u32), cookie (2 × u32).
const DIAG_MSG_LEN: usize = 16;

/// A NETLINK_SOCK_DIAG socket in the calling process's network namespace.
pub fn open() -> io::Result<OwnedFd> {
    // SAFETY: socket returns a new descriptor or -1.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The dump request: every listening unix socket, with its file's inode and device.
fn request() -> Vec<u8> {
    let mut body = Vec::new();
    body.push(libc::AF_UNIX as u8); // sdiag_family
    body.push(0); // sdiag_protocol
    body.extend(0u16.to_ne_bytes()); // pad
    body.extend((1u32 << TCP_LISTEN).to_ne_bytes()); // udiag_states
    body.extend(0u32.to_ne_bytes()); // udiag_ino
    body.extend(UDIAG_SHOW_VFS.to_ne_bytes()); // udiag_show
    body.extend(u32::MAX.to_ne_bytes()); // udiag_cookie: no cookie
    body.extend(u32::MAX.to_ne_bytes());
    let mut msg = Vec::new();
    msg.extend(((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    msg.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend((NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend(1u32.to_ne_bytes()); // seq
    msg.extend(0u32.to_ne_bytes()); // pid
    msg.extend(body);
    msg
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The device number in a diagnostics record is the kernel's own encoding (major << 20 |
/// minor); `st_dev` is userspace's.
fn kernel_dev_to_st_dev(dev: u32) -> u64 {
    libc::makedev(dev >> 20, dev & 0xf_ffff)
}

/// What one chunk of the dump says: the socket inodes whose file is `file`, and whether the
/// dump is finished.
fn parse(chunk: &[u8], file: SocketId, found: &mut Vec<u32>) -> io::Result<bool> {
    let u16_at = |b: &[u8], i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4"));
    let mut off = 0;
    while off + NLMSG_HDRLEN <= chunk.len() {
        let len = u32_at(chunk, off) as usize;
        let kind = u16_at(chunk, off + 4);
        if len < NLMSG_HDRLEN || off + len > chunk.len() {
            return Err(io::Error::other("malformed sock_diag reply"));
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => return Err(io::Error::other("sock_diag refused the dump")),
            SOCK_DIAG_BY_FAMILY if len >= NLMSG_HDRLEN + DIAG_MSG_LEN => {
                let msg = &chunk[off + NLMSG_HDRLEN..off + len];
                let inode = u32_at(msg, 4);
                let mut a = DIAG_MSG_LEN;
                while a + 4 <= msg.len() {
                    let alen = u16_at(msg, a) as usize;
                    let atype = u16_at(msg, a + 2);
                    if alen < 4 || a + alen > msg.len() {
                        break;
                    }
                    if atype == UNIX_DIAG_VFS && alen >= 12 {
                        let vfs_ino = u32_at(msg, a + 4);
                        let vfs_dev = u32_at(msg, a + 8);
                        // The record carries the low 32 bits of the file's inode number.
                        if u64::from(vfs_ino) == (file.ino & 0xffff_ffff)
                            && kernel_dev_to_st_dev(vfs_dev) == file.dev
                        {
                            found.push(inode);
                        }
                    }
                    a += align4(alen);
                }
            }
            _ => {}
        }
        off += align4(len);
    }
    Ok(false)
}

/// The socket inodes listening on the socket file `file` in the diagnostics socket's namespace.
pub fn listeners(diag: &OwnedFd, file: SocketId) -> io::Result<Vec<u32>> {
    let req = request();
    // SAFETY: sends `req`, valid for its length, to the kernel (a zeroed sockaddr_nl).
    let sent = unsafe {
        let mut to: libc::sockaddr_nl = std::mem::zeroed();
        to.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            diag.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: receives at most buf.len() bytes into `buf`.
        let n = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 || parse(&buf[..n as usize], file, &mut found)? {
            return Ok(found);
        }
    }
}

/// Whether a process in `pids` holds one of `sockets` (an fd that reads `socket:[INODE]`).
pub fn held_by(pids: &[i32], sockets: &[u32]) -> bool {
    let wanted: Vec<String> = sockets.iter().map(|i| format!("socket:[{i}]")).collect();
    pids.iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_link(e.path())
                    .map(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
                    .unwrap_or(false)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(inode: u32, vfs_ino: u32, vfs_dev: u32) -> Vec<u8> {
        let mut msg = vec![libc::AF_UNIX as u8, 1, TCP_LISTEN as u8, 0];
        msg.extend(inode.to_ne_bytes());
        msg.extend([0xff; 8]);
        msg.extend(12u16.to_ne_bytes());
        msg.extend(UNIX_DIAG_VFS.to_ne_bytes());
        msg.extend(vfs_ino.to_ne_bytes());
        msg.extend(vfs_dev.to_ne_bytes());
        let mut out = ((NLMSG_HDRLEN + msg.len()) as u32).to_ne_bytes().to_vec();
        out.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        out.extend([0; 10]);
        out.extend(msg);
        out
    }

    #[test]
    fn a_dump_names_the_listeners_of_one_file() {
        // Device 254:1 in the kernel's encoding.
        let dev = (254 << 20) | 1;
        let file = SocketId {
            dev: libc::makedev(254, 1),
            ino: 77,
        };
        let mut chunk = record(1000, 77, dev);
        chunk.extend(record(1001, 78, dev));
        chunk.extend(record(1002, 77, (8 << 20) | 1));
        let mut found = Vec::new();
        assert!(!parse(&chunk, file, &mut found).unwrap());
        assert_eq!(found, vec![1000]);
        let mut done = 16u32.to_ne_bytes().to_vec();
        done.extend(NLMSG_DONE.to_ne_bytes());
        done.extend([0; 10]);
        assert!(parse(&done, file, &mut found).unwrap());
    }

    #[test]
    fn the_request_asks_for_listening_sockets_with_their_files() {
        let r = request();
        assert_eq!(r.len(), NLMSG_HDRLEN + 24);
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), SOCK_DIAG_BY_FAMILY);
        assert_eq!(r[16], libc::AF_UNIX as u8);
    }
}
