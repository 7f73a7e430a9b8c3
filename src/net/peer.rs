//! Who is on the other end of a loopback TCP connection: the owner of the client's socket, read
//! from the kernel's socket table (/proc/net/tcp and tcp6). jail's proxy on the host's loopback
//! (no network namespace) serves only processes of jail's own user; any local user could reach
//! the port otherwise, and their requests would be counted as the command's.

use std::net::{IpAddr, SocketAddr};

/// The uid owning the socket at `peer` connected to `local`, when the table names it. An IPv4
/// connection may come from a dual-stack IPv6 socket (the JVM's default), listed in tcp6 with
/// IPv4-mapped addresses.
pub fn loopback_peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let read = |file| std::fs::read_to_string(file).unwrap_or_default();
    match (local, peer) {
        (SocketAddr::V4(l), SocketAddr::V4(p)) => find_uid(&read("/proc/net/tcp"), local, peer)
            .or_else(|| {
                let mapped = |a: std::net::SocketAddrV4| {
                    SocketAddr::new(IpAddr::V6(a.ip().to_ipv6_mapped()), a.port())
                };
                find_uid(&read("/proc/net/tcp6"), mapped(l), mapped(p))
            }),
        _ => find_uid(&read("/proc/net/tcp6"), local, peer),
    }
}

/// The uid column of the row whose local address is `peer` and remote address is `local` (the
/// client's own view of the connection). A row with inode 0 is a socket no process holds any
/// more (closed, in FIN_WAIT2 or TIME_WAIT), listed with uid 0: it proves nothing.
fn find_uid(table: &str, local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let (want_local, want_remote) = (encode(peer), encode(local));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let matches = f.len() > 9
            && f[1].eq_ignore_ascii_case(&want_local)
            && f[2].eq_ignore_ascii_case(&want_remote)
            && f[9] != "0";
        matches.then(|| f[7].parse().ok()).flatten()
    })
}

/// An address as the table writes it: the address's 32-bit words in host byte order, hex, then
/// the port in hex.
fn encode(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        IpAddr::V6(v6) => v6
            .octets()
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect(),
    };
    format!("{ip}:{:04X}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uid_of_a_real_loopback_client_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        let uid = loopback_peer_uid(server.local_addr().unwrap(), peer);
        // SAFETY: geteuid cannot fail.
        assert_eq!(uid, Some(unsafe { libc::geteuid() }));
        drop(client);
    }

    #[test]
    fn a_dual_stack_client_is_found_in_tcp6() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
        let Ok(client) = std::net::TcpStream::connect(mapped) else {
            return; // no IPv6 on this machine
        };
        let (server, peer) = listener.accept().unwrap();
        let uid = loopback_peer_uid(server.local_addr().unwrap(), peer);
        // SAFETY: geteuid cannot fail.
        assert_eq!(uid, Some(unsafe { libc::geteuid() }));
        drop(client);
    }

    #[test]
    fn rows_are_matched_on_both_addresses_and_a_live_socket() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:D431 0100007F:0C38 01 00000000:00000000 00:00000000 00000000  65534        0 1 1\n   1: 0100007F:D432 0100007F:0C38 06 00000000:00000000 00:00000000 00000000      0        0 0 1\n";
        let local: SocketAddr = "127.0.0.1:3128".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(find_uid(table, local, peer), Some(65534));
            let other: SocketAddr = "127.0.0.1:54323".parse().unwrap();
            assert_eq!(find_uid(table, local, other), None);
            let closed: SocketAddr = "127.0.0.1:54322".parse().unwrap();
            assert_eq!(
                find_uid(table, local, closed),
                None,
                "a closed socket's uid 0"
            );
        }
    }
}
