//! The SOCKS5 side of the proxy (RFC 1928): `CONNECT` only, without authentication.
//!
//! The exchange, in the RFC's field names:
//!
//! ```text
//! client: VER=5 NMETHODS METHODS...             server: VER=5 METHOD (0x00: none, 0xff: refused)
//! client: VER=5 CMD RSV ATYP DST.ADDR DST.PORT  server: VER=5 REP RSV ATYP BND.ADDR BND.PORT
//! ```
//!
//! ATYP is 0x01 (4-byte IPv4), 0x03 (a length byte, then a name: `socks5h://` clients send
//! names unresolved, which is what the proxy wants) or 0x04 (16-byte IPv6). Every field has a
//! size the format bounds (at most 255 methods, a name of at most 255 bytes), so each read goes
//! into a fixed array and a client's lengths never size an allocation.
//!
//! Only "no authentication" is offered: who may talk to the proxy is settled before the first
//! byte (the listener is in the command's network namespace, or on the host's loopback for the
//! command's user alone). BIND and UDP ASSOCIATE get reply 0x07: the proxy opens outgoing TCP
//! connections and nothing else. A refusal is 0x02 ("not allowed by ruleset"), an allowed
//! destination that cannot be reached 0x04 ("host unreachable").

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Instant;

use super::Proxy;
use super::decisions::{Routed, route};
use super::relay::{DeadlineRead, close_gracefully, relay};
use crate::net::decision::Protocol;

pub(super) const SOCKS_VERSION: u8 = 0x05;
const SOCKS_NO_AUTH: u8 = 0x00;
const SOCKS_NO_METHOD: u8 = 0xff;
const SOCKS_CMD_CONNECT: u8 = 0x01;
const SOCKS_OK: u8 = 0x00;
const SOCKS_GENERAL_FAILURE: u8 = 0x01;
const SOCKS_NOT_ALLOWED: u8 = 0x02;
const SOCKS_HOST_UNREACHABLE: u8 = 0x04;
const SOCKS_BAD_COMMAND: u8 = 0x07;
const SOCKS_BAD_ADDRESS_TYPE: u8 = 0x08;

/// Serves one SOCKS5 client until its exchange ends. The first byte of the greeting (VER) has
/// been read already, to tell the protocol; the whole handshake must arrive by `deadline`.
pub(super) fn serve(proxy: &Proxy, client: TcpStream, deadline: Instant) {
    let mut r = DeadlineRead::new(&client, deadline);
    let mut count = [0u8; 1];
    if r.read_exact(&mut count).is_err() {
        return;
    }
    let mut methods = [0u8; 255];
    let Some(methods) = methods.get_mut(..usize::from(count[0])) else {
        return;
    };
    if r.read_exact(methods).is_err() {
        return;
    }
    if !methods.contains(&SOCKS_NO_AUTH) {
        let _ = (&client).write_all(&[SOCKS_VERSION, SOCKS_NO_METHOD]);
        close_gracefully(&client);
        return;
    }
    if (&client)
        .write_all(&[SOCKS_VERSION, SOCKS_NO_AUTH])
        .is_err()
    {
        return;
    }
    // VER CMD RSV ATYP
    let mut head = [0u8; 4];
    if r.read_exact(&mut head).is_err() {
        return;
    }
    let [version, command, _, address_type] = head;
    if version != SOCKS_VERSION {
        return socks_fail(&client, SOCKS_GENERAL_FAILURE);
    }
    if command != SOCKS_CMD_CONNECT {
        return socks_fail(&client, SOCKS_BAD_COMMAND);
    }
    let host = match address_type {
        0x01 => {
            let mut a = [0u8; 4];
            if r.read_exact(&mut a).is_err() {
                return;
            }
            Ipv4Addr::from(a).to_string()
        }
        0x03 => {
            let mut len = [0u8; 1];
            let mut name = [0u8; 255];
            if r.read_exact(&mut len).is_err() {
                return;
            }
            let Some(name) = name.get_mut(..usize::from(len[0])) else {
                return;
            };
            if r.read_exact(name).is_err() {
                return;
            }
            // Anything that is not a plain name is refused by the allow list as invalid.
            String::from_utf8_lossy(name).into_owned()
        }
        0x04 => {
            let mut a = [0u8; 16];
            if r.read_exact(&mut a).is_err() {
                return;
            }
            Ipv6Addr::from(a).to_string()
        }
        _ => return socks_fail(&client, SOCKS_BAD_ADDRESS_TYPE),
    };
    let mut port = [0u8; 2];
    if r.read_exact(&mut port).is_err() {
        return;
    }
    let port = u16::from_be_bytes(port);
    match route(proxy, Protocol::Socks5, &host, port) {
        Routed::Refused(_) => socks_fail(&client, SOCKS_NOT_ALLOWED),
        Routed::Failed(_) => socks_fail(&client, SOCKS_HOST_UNREACHABLE),
        Routed::Connected { upstream, ticket } => {
            let reply = socks_reply(SOCKS_OK, upstream.local_addr().ok());
            if (&client).write_all(&reply).is_err() {
                return;
            }
            if let Some(interception) = proxy.intercepting(&host) {
                interception.tunnel(&client, &upstream, (&host, port), &[], deadline, ticket);
                return;
            }
            let (up, down) = relay(&client, &upstream);
            ticket.finish(up, down);
        }
    }
}

fn socks_fail(client: &TcpStream, code: u8) {
    let _ = (&*client).write_all(&socks_reply(code, None));
    close_gracefully(client);
}

/// VER REP RSV ATYP BND.ADDR BND.PORT; failures carry 0.0.0.0:0.
fn socks_reply(code: u8, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![SOCKS_VERSION, code, 0x00];
    match bound {
        Some(SocketAddr::V6(a)) => {
            out.push(0x04);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        Some(SocketAddr::V4(a)) => {
            out.push(0x01);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        None => out.extend_from_slice(&[0x01, 0, 0, 0, 0, 0, 0]),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::sync::atomic::Ordering;

    /// A SOCKS5 CONNECT step by step: the greeting (no authentication), its reply, then the
    /// request for `address` (its ATYP byte and the address) and `port`; returns the reply.
    fn socks_request(c: &mut TcpStream, address: &[u8], port: u16) -> [u8; 10] {
        c.write_all(&[5, 1, 0]).unwrap();
        let mut method = [0u8; 2];
        c.read_exact(&mut method).unwrap();
        assert_eq!(method, [5, 0]);
        let mut req = vec![5, 1, 0];
        req.extend_from_slice(address);
        req.extend_from_slice(&port.to_be_bytes());
        c.write_all(&req).unwrap();
        let mut reply = [0u8; 10];
        c.read_exact(&mut reply).unwrap();
        reply
    }

    fn socks_connect(c: &mut TcpStream, name: &str, port: u16) -> [u8; 10] {
        let mut address = vec![3, name.len() as u8];
        address.extend_from_slice(name.as_bytes());
        socks_request(c, &address, port)
    }

    /// Sends the greeting and `request` at once on a connection of its own, and returns the
    /// method reply and the first 10 bytes after it.
    fn socks_pipelined(h: &Harness, request: &[u8]) -> [u8; 12] {
        let mut c = client(h);
        c.write_all(&[5, 1, 0]).unwrap();
        c.write_all(request).unwrap();
        let mut reply = [0u8; 12];
        c.read_exact(&mut reply).unwrap();
        reply
    }

    #[test]
    fn socks5_domain_connect_allowed() {
        let (echo, _) = echo_server();
        let h = start_proxy(&["*.test"], &[echo], "echo.sub.test=127.0.0.1");
        let mut c = client(&h);
        let reply = socks_connect(&mut c, "echo.sub.test", echo.port());
        assert_eq!(&reply[..4], &[5, 0, 0, 1]);
        assert_echoed(&mut c, b"ping");
        drop(c);
        let d = &first_decision(&h);
        assert_eq!(
            (d.protocol, d.allowed, d.bytes_up, d.bytes_down),
            (Protocol::Socks5, true, 4, 4)
        );
    }

    #[test]
    fn socks5_refusals() {
        // Each client is dropped when done: an unclosed one holds its slot for a moment.
        let (echo, accepts) = echo_server();
        let h = start_proxy(
            &["echo.test"],
            &[],
            "echo.test=127.0.0.1,priv.test=10.0.0.5",
        );
        assert_eq!(
            socks_connect(&mut client(&h), "evil.test", 443)[1],
            SOCKS_NOT_ALLOWED
        );
        // Listed, but loopback is not an allowed host.
        assert_eq!(
            socks_connect(&mut client(&h), "echo.test", echo.port())[1],
            SOCKS_NOT_ALLOWED
        );
        // An IPv4 address (ATYP 1) not on the list.
        assert_eq!(
            socks_request(&mut client(&h), &[1, 127, 0, 0, 1], echo.port())[1],
            SOCKS_NOT_ALLOWED
        );
        // An IPv6 address (ATYP 4).
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&80u16.to_be_bytes());
        assert_eq!(socks_pipelined(&h, &v6)[3], SOCKS_NOT_ALLOWED);
        // Not resolvable: host unreachable.
        let h2 = start_proxy(&["*.test"], &[], "");
        assert_eq!(
            socks_connect(&mut client(&h2), "gone.test", 1)[1],
            SOCKS_HOST_UNREACHABLE
        );
        // BIND is not supported.
        let reply = socks_pipelined(&h, &[5, 2, 0, 1, 127, 0, 0, 1, 0, 80]);
        assert_eq!(&reply[2..4], &[5, SOCKS_BAD_COMMAND]);
        // Unknown address type.
        assert_eq!(
            socks_pipelined(&h, &[5, 1, 0, 9])[3],
            SOCKS_BAD_ADDRESS_TYPE
        );
        // Only username/password offered: no acceptable method.
        let mut c = client(&h);
        c.write_all(&[5, 1, 2]).unwrap();
        let mut reply = [0u8; 2];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(reply, [5, SOCKS_NO_METHOD]);
        drop(c);
        // Non-UTF-8 and empty names are refused as invalid.
        for name in [&b"\xff\xfe.test"[..], b""] {
            let mut request = vec![5, 1, 0, 3, name.len() as u8];
            request.extend_from_slice(name);
            request.extend_from_slice(&[0, 80]);
            assert_eq!(socks_pipelined(&h, &request)[3], SOCKS_NOT_ALLOWED);
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 0);
        assert_eq!(h.decisions.allowed(), 0);
        assert_eq!(h.decisions.refused(), 6);
        assert_eq!(h.lookups.load(Ordering::SeqCst), 1);
        assert!(h.decisions.snapshot().iter().any(|d| d.host == "??.test"));
    }
}
