//! The `NETLINK_AUDIT` plumbing: the socket, the messages of a datagram, and the requests to
//! the kernel (`AUDIT_GET` for the `enabled` and `lost` counters, `AUDIT_SET` for the tests).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

const AUDIT_GET: u16 = 1000;
#[cfg(any(test, feature = "test-hooks"))]
const AUDIT_SET: u16 = 1001;
#[cfg(any(test, feature = "test-hooks"))]
const AUDIT_STATUS_ENABLED: u32 = 1;
/// Receive buffer asked for, so that a burst of records is not lost (ENOBUFS).
const RCVBUF: libc::c_int = 8 << 20;

const NLMSG_HDRLEN: usize = size_of::<libc::nlmsghdr>();

/// The (type, payload) of each netlink message in a datagram.
pub(super) fn netlink_messages(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        let len = len.clamp(NLMSG_HDRLEN, data.len());
        out.push((kind, &data[NLMSG_HDRLEN..len]));
        let aligned = (len + 3) & !3;
        data = data.get(aligned..).unwrap_or_default();
    }
    out
}

pub(super) fn netlink_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A large receive buffer: SO_RCVBUFFORCE past rmem_max when allowed, else SO_RCVBUF (capped).
pub(super) fn set_rcvbuf(fd: &OwnedFd) {
    let size: libc::c_int = RCVBUF;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const size).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

/// Sends one request to the kernel (port 0) with NLM_F_ACK.
fn netlink_request(fd: RawFd, kind: u16, payload: &[u8]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + payload.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    msg.extend_from_slice(payload);
    // SAFETY: a zeroed sockaddr_nl (port 0, no groups) addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` and `kernel` are valid for the lengths given.
    let rc = unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&raw const kernel).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `kind` and waits up to `timeout` for its answer: the `audit_status` payload of an
/// AUDIT_GET reply when `want_status`, else only the ack.
fn netlink_call(
    kind: u16,
    payload: &[u8],
    want_status: bool,
    timeout: Duration,
) -> io::Result<Option<Vec<u8>>> {
    let fd = netlink_socket()?;
    let deadline = Instant::now() + timeout;
    netlink_request(fd.as_raw_fd(), kind, payload)?;
    let mut buf = vec![0u8; 8192];
    let mut acked = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from audit",
            ));
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int + 1) } <= 0 {
            continue;
        }
        let n = recv_now(&fd, &mut buf);
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) {
                continue;
            }
            return Err(e);
        }
        for (msg_kind, body) in netlink_messages(&buf[..n as usize]) {
            if msg_kind == libc::NLMSG_ERROR as u16 && body.len() >= 4 {
                let errno = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                acked = true;
            } else if want_status && msg_kind == AUDIT_GET {
                return Ok(Some(body.to_vec()));
            }
        }
        if acked && !want_status {
            return Ok(None);
        }
    }
}

pub(super) struct Status {
    /// 0 off, 1 on, 2 on and locked.
    pub(super) enabled: u32,
    /// Records the kernel dropped since boot.
    pub(super) lost: u32,
}

/// AUDIT_GET. Needs CAP_AUDIT_CONTROL.
pub(super) fn audit_status(timeout: Duration) -> io::Result<Status> {
    let status = netlink_call(AUDIT_GET, &[], true, timeout)?.unwrap_or_default();
    // struct audit_status { u32 mask, enabled, failure, pid, rate_limit, backlog_limit, lost, ... }
    let field = |i: usize| {
        status
            .get(i * 4..i * 4 + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short audit status"))
    };
    Ok(Status {
        enabled: field(1)?,
        lost: field(6)?,
    })
}

/// Turns kernel audit on or off (what `auditctl -e 1` / `-e 0` do), for test setups running as
/// root, and returns whether it was on before. This changes the whole machine: while it is on,
/// every Landlock denial that is logged, and with no auditd each record, also lands in the
/// kernel log; so the tests put back what they found (tests/common's `AuditOn`).
#[cfg(any(test, feature = "test-hooks"))]
pub fn set_enabled_for_tests(on: bool) -> io::Result<bool> {
    let timeout = Duration::from_secs(1);
    let was = audit_status(timeout)?.enabled != 0;
    if was == on {
        return Ok(was);
    }
    // struct audit_status: mask, enabled, then nine more u32 left at 0 (ignored without a mask).
    let mut status = [0u8; 11 * 4];
    status[0..4].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    status[4..8].copy_from_slice(&u32::from(on).to_ne_bytes());
    netlink_call(AUDIT_SET, &status, false, timeout)?;
    if (audit_status(timeout)?.enabled != 0) == on {
        Ok(was)
    } else {
        Err(io::Error::other(format!(
            "audit enabled is not {} after AUDIT_SET",
            u8::from(on)
        )))
    }
}

/// Whether kernel audit is on, for the tests that check they put it back.
#[cfg(any(test, feature = "test-hooks"))]
pub fn enabled_for_tests() -> io::Result<bool> {
    Ok(audit_status(Duration::from_secs(1))?.enabled != 0)
}

/// One datagram without waiting: its length, or -1 with errno set.
pub(super) fn recv_now(fd: &impl AsRawFd, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is writable for its whole length.
    unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_netlink_datagrams() {
        let mut data = Vec::new();
        for (kind, text) in [(1423u16, "abc"), (1320, "defgh")] {
            let len = NLMSG_HDRLEN + text.len();
            data.extend_from_slice(&(len as u32).to_ne_bytes());
            data.extend_from_slice(&kind.to_ne_bytes());
            data.extend_from_slice(&[0; 10]);
            data.extend_from_slice(text.as_bytes());
            data.resize((data.len() + 3) & !3, 0);
        }
        let got = netlink_messages(&data);
        assert_eq!(got, vec![(1423, &b"abc"[..]), (1320, &b"defgh"[..])]);
        // A length past the end is clamped, not trusted.
        data[0] = 0xff;
        assert_eq!(netlink_messages(&data[..20]).len(), 1);
    }
}
