//! listen() held to the bind ports (`--net connect=`/`bind=`, and `none` or the proxy's port
//! without a network namespace): the supervisor's answer to each listen() the notifying filter
//! sends it (unix_connect.rs takes the notification, the same listener as unix connects: the
//! kernel allows one per process).
//!
//! Kernel facts behind the shape:
//! - Landlock's `LANDLOCK_ACCESS_NET_BIND_TCP` is checked in the `socket_bind` hook only, and
//!   Landlock (ABI 7 and before) has no listen right. listen() on an unbound TCP socket binds an
//!   ephemeral port by itself (`inet_listen` → `inet_csk_get_port` with port 0), past that hook:
//!   a listener on a port no rule names, which any host client reaches.
//! - A bound socket keeps its port: a second bind() is EINVAL. An unbound socket shows port 0
//!   to getsockname(). So "bound to an allowed port" is read once, from the socket itself.
//! - An automatic bind (a connect that failed) can be released when the socket closes
//!   (`tcp_set_state(TCP_CLOSE)` puts a port not locked by bind()), so the socket could be
//!   unbound again by the time it listens: the port is read again after listen(), and a listener
//!   that ended up elsewhere is shut down (`shutdown` on a listener stops it) and refused.
//! - `SECCOMP_USER_NOTIF_FLAG_CONTINUE` would re-run the call on whatever the descriptor number
//!   names by then (another thread can dup2 an unbound socket over it): never used. listen() is
//!   made here, on the supervisor's duplicate of the checked socket (pidfd_getfd: the same open
//!   socket). listen() has no Landlock check to keep, so making it outside the jail's domain
//!   changes nothing else.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Whether a socket of `family`, bound to `port` (0: unbound), may listen with `ports` the
/// bindable TCP ports; the errno otherwise (EACCES, as Landlock answers a refused bind).
pub fn permits(family: i32, port: u16, ports: &[u16]) -> Result<(), i32> {
    if family != libc::AF_INET && family != libc::AF_INET6 {
        // A unix socket's address is a file (or an abstract name), judged where it is connected
        // to; other families have no listen() (or are refused at socket()).
        return Ok(());
    }
    if port != 0 && ports.contains(&port) {
        Ok(())
    } else {
        Err(libc::EACCES)
    }
}

/// The address family and bound port of `sock`, as getsockname() shows them.
fn bound(sock: &OwnedFd) -> io::Result<(i32, u16)> {
    // SAFETY: sockaddr_storage is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into `addr`.
    let rc = unsafe {
        libc::getsockname(
            sock.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let family = i32::from(addr.ss_family);
    // sin_port and sin6_port are both the two bytes after the family, in network order.
    let port = if family == libc::AF_INET || family == libc::AF_INET6 {
        // SAFETY: the storage is at least 4 bytes long and was filled by getsockname.
        let bytes = unsafe {
            std::slice::from_raw_parts((&addr as *const libc::sockaddr_storage).cast::<u8>(), 4)
        };
        u16::from_be_bytes([bytes[2], bytes[3]])
    } else {
        0
    };
    Ok((family, port))
}

/// Makes the listen() of the command on `sock` (the supervisor's duplicate of it) if it may;
/// returns 0 or the errno to answer.
pub fn listen_on(sock: &OwnedFd, backlog: i32, ports: &[u16]) -> i32 {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let (family, port) = match bound(sock) {
        Ok(b) => b,
        Err(e) => return errno(e),
    };
    if let Err(e) = permits(family, port, ports) {
        return e;
    }
    // SAFETY: listen on a descriptor this process owns.
    if unsafe { libc::listen(sock.as_raw_fd(), backlog) } < 0 {
        return errno(io::Error::last_os_error());
    }
    match bound(sock) {
        Ok((family, port)) if permits(family, port, ports).is_ok() => 0,
        _ => {
            // SAFETY: shutdown on a descriptor this process owns: stops the listener.
            unsafe { libc::shutdown(sock.as_raw_fd(), libc::SHUT_RDWR) };
            libc::EACCES
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    #[test]
    fn only_a_socket_bound_to_a_named_port_listens() {
        for family in [libc::AF_INET, libc::AF_INET6] {
            assert_eq!(permits(family, 8080, &[8080]), Ok(()));
            assert_eq!(permits(family, 8081, &[8080]), Err(libc::EACCES));
            // Unbound: listen() would take an ephemeral port of its own.
            assert_eq!(permits(family, 0, &[8080]), Err(libc::EACCES));
            assert_eq!(permits(family, 8080, &[]), Err(libc::EACCES));
        }
        assert_eq!(permits(libc::AF_UNIX, 0, &[]), Ok(()));
    }

    fn tcp_socket(family: i32) -> OwnedFd {
        // SAFETY: socket returns a new descriptor or -1.
        let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: just created, owned here.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    #[test]
    fn an_unbound_socket_is_refused_before_it_takes_a_port() {
        for family in [libc::AF_INET, libc::AF_INET6] {
            let sock = tcp_socket(family);
            assert_eq!(listen_on(&sock, 1, &[8080]), libc::EACCES);
            // Still unbound and not listening: the refusal came first.
            assert_eq!(bound(&sock).unwrap(), (family, 0));
        }
    }

    #[test]
    fn a_socket_bound_to_a_named_port_listens() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sock = OwnedFd::from(listener);
        assert_eq!(listen_on(&sock, 1, &[port]), 0);
        assert_eq!(listen_on(&sock, 1, &[port.wrapping_add(1)]), libc::EACCES);
    }
}
