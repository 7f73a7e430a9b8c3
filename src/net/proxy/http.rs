//! The HTTP side of the proxy: HTTP/1.x proxy requests, in the two forms a proxy receives.
//!
//! - `CONNECT host:port` (RFC 9110 9.3.6, the authority form): answered with 200, after which the
//!   connection is a tunnel; HTTPS goes this way, so TLS stays end to end and the proxy sees
//!   only the name and port asked for.
//! - A request whose target is an absolute `http://` URL (RFC 9112 3.2.2, what clients send to a
//!   proxy for plain HTTP): the head is rewritten into what the origin server expects, the path
//!   alone on the request line and `Host` rebuilt from the URL, so the header always names the
//!   server actually connected to. The proxy's own headers (`Proxy-Authorization`,
//!   `Proxy-Connection`) and the connection's (`Connection`, `Keep-Alive`) are dropped, and
//!   `Connection: close` is added: the relay does not parse responses, so it cannot tell where
//!   one ends, and a second request on a kept-alive connection could name another host.
//!
//! The head is read up to its blank line, within [`MAX_HEAD`] and the client's deadline; a bare
//! LF ends a line as well as CRLF (RFC 9112 2.2 lets a recipient accept it). Folded header lines
//! (obsolete, RFC 9112 5.2) and anything that is not a plain request head are refused with 400,
//! a head that is too slow with 408 and one too large with 431; a refused destination gets 403
//! and an unreachable one 502. Each error is a one-line text body that names the reason, and
//! ends the connection. Bytes the client sent after the head (a request body, or a TLS hello
//! sent right behind `CONNECT`) are passed on before the relay starts.

use std::io::{self, Read, Write};
use std::net::{Ipv6Addr, TcpStream};
use std::time::Instant;

use super::Proxy;
use super::decisions::{Routed, printable_host, route, target};
use super::relay::{DeadlineRead, close_gracefully, relay};
use crate::net::decision::Protocol;

/// Largest request head (request line and headers); a larger one is answered with 431.
const MAX_HEAD: usize = 16 * 1024;

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum HttpRequest {
    /// `CONNECT host:port`: a tunnel.
    Connect { host: String, port: u16 },
    /// An absolute-form request, with the head rewritten for the origin server.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

enum HeadError {
    Closed,
    TimedOut,
    TooLarge,
}

/// Serves one HTTP client until its exchange ends. `first` is the byte already read to tell
/// the protocol; the rest of the head must arrive by `deadline`.
pub(super) fn serve(proxy: &Proxy, client: TcpStream, first: u8, deadline: Instant) {
    let (buf, end) = match read_head(&client, first, deadline) {
        Ok(found) => found,
        Err(HeadError::Closed) => return,
        Err(HeadError::TimedOut) => {
            return http_error(
                &client,
                "408 Request Timeout",
                "jail: request head not received in time\n",
            );
        }
        Err(HeadError::TooLarge) => {
            return http_error(
                &client,
                "431 Request Header Fields Too Large",
                "jail: request head larger than 16 KiB\n",
            );
        }
    };
    let (head, extra) = buf.split_at(end.min(buf.len()));
    let request = match parse_head(head) {
        Ok(r) => r,
        Err(why) => {
            tracing::debug!("net proxy: bad request: {why}");
            return http_error(
                &client,
                "400 Bad Request",
                &format!("jail: bad proxy request: {why}\n"),
            );
        }
    };
    let (protocol, host, port, forward) = match request {
        HttpRequest::Connect { host, port } => (Protocol::Connect, host, port, None),
        HttpRequest::Forward { host, port, head } => (Protocol::Http, host, port, Some(head)),
    };
    let shown = target(&printable_host(&host), port);
    match route(proxy, protocol, &host, port) {
        Routed::Refused(reason) => http_error(
            &client,
            "403 Forbidden",
            &format!("jail: {shown} refused: {reason}\n"),
        ),
        Routed::Failed(reason) => http_error(
            &client,
            "502 Bad Gateway",
            &format!("jail: {shown}: {reason}\n"),
        ),
        Routed::Connected {
            mut upstream,
            ticket,
        } => {
            if let (None, Some(interception)) = (&forward, proxy.intercepting(&host)) {
                if (&client)
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .is_ok()
                {
                    interception.tunnel(&client, &upstream, (&host, port), extra, deadline, ticket);
                }
                return;
            }
            let mut up = 0u64;
            let sent = match &forward {
                None => (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
                Some(h) => upstream.write_all(h).map(|()| up += h.len() as u64),
            };
            if sent.is_err() {
                return;
            }
            // Bytes the client sent after the head (a body, or a TLS hello after CONNECT).
            if !extra.is_empty() {
                if upstream.write_all(extra).is_err() {
                    return;
                }
                up += extra.len() as u64;
            }
            let (u, d) = relay(&client, &upstream);
            ticket.finish(up + u, d);
        }
    }
}

/// Reads until the blank line that ends a request head; returns the bytes read and where the
/// head ends (what follows belongs to the body or the tunnel).
fn read_head(
    client: &TcpStream,
    first: u8,
    deadline: Instant,
) -> Result<(Vec<u8>, usize), HeadError> {
    let mut reader = DeadlineRead::new(client, deadline);
    let mut buf = Vec::with_capacity(1024);
    buf.push(first);
    let mut chunk = [0u8; 4096];
    let mut scanned = 0;
    loop {
        if let Some(end) = find_head_end(&buf, scanned) {
            return Ok((buf, end));
        }
        // A match can start up to two bytes before the end of what was searched.
        scanned = buf.len().saturating_sub(2);
        let room = MAX_HEAD.saturating_sub(buf.len()).min(chunk.len());
        if room == 0 {
            return Err(HeadError::TooLarge);
        }
        let Some(into) = chunk.get_mut(..room) else {
            return Err(HeadError::TooLarge);
        };
        match reader.read(into) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => buf.extend_from_slice(into.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(HeadError::TimedOut),
            Err(_) => return Err(HeadError::Closed),
        }
    }
}

/// The index just past "\n\n" or "\n\r\n" (so "\r\n\r\n" too), searching from `from`.
pub(super) fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.min(buf.len());
    for (offset, _) in buf
        .get(start..)?
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
    {
        let i = start + offset;
        match (buf.get(i + 1), buf.get(i + 2)) {
            (Some(b'\n'), _) => return Some(i + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(i + 3),
            _ => {}
        }
    }
    None
}

fn http_error(client: &TcpStream, status: &str, body: &str) {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = (&*client).write_all(reply.as_bytes());
    close_gracefully(client);
}

/// Headers a proxy must not pass on: its own (credentials for *this* proxy), the connection's,
/// and Host, which is rebuilt from the URL so that it names the server actually connected to.
const DROPPED_HEADERS: [&str; 5] = [
    "host",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
];

/// Parses a request head (request line, headers, blank line).
fn parse_head(head: &[u8]) -> Result<HttpRequest, &'static str> {
    let mut lines = head
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let request_line = lines.next().ok_or("empty request")?;
    if !request_line.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Err("request line is not printable ASCII");
    }
    let request_line =
        std::str::from_utf8(request_line).map_err(|_| "request line is not ASCII")?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("request line is not METHOD URL HTTP/1.x");
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) {
        return Err("invalid method");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("not HTTP/1.0 or HTTP/1.1");
    }
    let mut headers: Vec<&[u8]> = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err("folded header line");
        }
        let colon = line
            .iter()
            .position(|b| *b == b':')
            .ok_or("header line without ':'")?;
        let name = line.get(..colon).unwrap_or_default();
        if name.is_empty() || !name.iter().copied().all(is_token_byte) {
            return Err("invalid header name");
        }
        if line.iter().any(|b| *b == b'\r' || *b == 0) {
            return Err("control character in a header");
        }
        headers.push(line);
    }

    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = parse_authority(uri, None)?;
        return Ok(HttpRequest::Connect { host, port });
    }
    let (host, port, path) = parse_absolute_url(uri)?;

    let mut out = Vec::with_capacity(head.len() + 64);
    out.extend_from_slice(format!("{method} {path} {version}\r\n").as_bytes());
    let host_header = match (host.contains(':'), port) {
        (true, 80) => format!("[{host}]"),
        (true, p) => format!("[{host}]:{p}"),
        (false, 80) => host.clone(),
        (false, p) => format!("{host}:{p}"),
    };
    out.extend_from_slice(format!("Host: {host_header}\r\n").as_bytes());
    for line in headers {
        let name = line.split(|b| *b == b':').next().unwrap_or_default();
        if DROPPED_HEADERS
            .iter()
            .any(|d| d.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    // One request per connection: the relay cannot tell where a response ends, and a second
    // request on a kept-alive connection could name another host.
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(HttpRequest::Forward {
        host,
        port,
        head: out,
    })
}

/// RFC 9110 token characters (methods, header names).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `http://host[:port]/path?query` into host, port (80 by default) and the origin-form target.
fn parse_absolute_url(uri: &str) -> Result<(String, u16, String), &'static str> {
    let scheme_end = uri.find("://");
    let scheme = scheme_end.and_then(|i| uri.get(..i));
    let rest = match scheme {
        Some(s) if s.eq_ignore_ascii_case("http") => uri.get(scheme_end.unwrap_or(0) + 3..),
        Some(s) if s.eq_ignore_ascii_case("https") => {
            return Err("https:// URLs go through CONNECT");
        }
        Some(_) => return Err("only http:// URLs and CONNECT are proxied"),
        None if uri.starts_with('/') || uri == "*" => {
            return Err("origin-form request; a proxy needs an absolute URL (http://host/path)");
        }
        None => return Err("not an absolute http:// URL"),
    }
    .unwrap_or_default();
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    if authority.contains('@') {
        return Err("credentials in the URL are not supported");
    }
    let (host, port) = parse_authority(authority, Some(80))?;
    // The fragment is the client's business, never sent.
    let tail = tail.split('#').next().unwrap_or_default();
    let path = if tail.starts_with('/') {
        tail.to_string()
    } else {
        format!("/{tail}")
    };
    Ok((host, port, path))
}

/// `host:port`, `[v6]:port`, or without the port when there is a default. The host comes back
/// in lower case and without brackets; whether it is acceptable is the allow list's call, but
/// characters that have no place in a host are refused here.
fn parse_authority(s: &str, default_port: Option<u16>) -> Result<(String, u16), &'static str> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("unclosed '[' in the host")?;
        if h.parse::<Ipv6Addr>().is_err() {
            return Err("invalid IPv6 address");
        }
        match after {
            "" => (h, None),
            a => (
                h,
                Some(a.strip_prefix(':').ok_or("unexpected text after ']'")?),
            ),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => return Err("IPv6 addresses must be in brackets"),
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => parse_port(p)?,
        None => default_port.ok_or("missing port")?,
    };
    if host.is_empty() {
        return Err("empty host");
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
    {
        return Err("invalid character in the host");
    }
    Ok((host.to_ascii_lowercase(), port))
}

fn parse_port(p: &str) -> Result<u16, &'static str> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid port");
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err("port not in 1-65535"),
        Ok(port) => Ok(port),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn connect_to_allowed_name_relays() {
        let (h, echo, accepts) = echo_proxy();
        let (mut c, reply) = connect_via(&h, &format!("Echo.Test.:{}", echo.port()));
        assert!(
            reply.starts_with("HTTP/1.1 200 Connection established\r\n"),
            "{reply}"
        );
        assert_echoed(&mut c, b"hello");
        drop(c);
        let d = &first_decision(&h);
        assert_eq!(
            (d.protocol, d.host.as_str(), d.port, d.allowed),
            (Protocol::Connect, "echo.test", echo.port(), true)
        );
        assert_eq!((d.bytes_up, d.bytes_down), (5, 5));
        assert_eq!(d.reason, None);
        assert_eq!((h.decisions.allowed(), h.decisions.refused()), (1, 0));
        assert_eq!(accepts.load(Ordering::SeqCst), 1);
        assert!(
            serde_json::to_string(d)
                .unwrap()
                .contains(r#""protocol":"connect""#)
        );
    }

    #[test]
    fn plain_http_request_is_rewritten_and_relayed() {
        let (web, requests) = http_server();
        let h = start_proxy(&["web.test"], &[web], "web.test=127.0.0.1");
        let mut c = client(&h);
        let port = web.port();
        c.write_all(
            format!(
                "GET http://WEB.test:{port}/path/x?q=1#frag HTTP/1.1\r\nHost: evil.example:{port}\r\n\
                 Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
                 User-Agent: test/1\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let reply = read_all(&mut c);
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.ends_with("\r\n\r\nok"), "{reply}");
        let got = String::from_utf8(requests.recv_timeout(PATIENCE).unwrap()).unwrap();
        assert_eq!(
            got,
            format!(
                "GET /path/x?q=1 HTTP/1.1\r\nHost: web.test:{port}\r\nUser-Agent: test/1\r\n\
                 Accept: */*\r\nConnection: close\r\n\r\n"
            )
        );
        let d = &first_decision(&h);
        assert_eq!((d.protocol, d.allowed), (Protocol::Http, true));
        assert_eq!(d.bytes_up, got.len() as u64);
        assert_eq!(d.bytes_down, reply.len() as u64);
    }

    #[test]
    fn plain_http_post_body_is_relayed() {
        let (web, requests) = http_server();
        let h = start_proxy(&["web.test"], &[web], "web.test=127.0.0.1");
        let mut c = client(&h);
        let body = "x".repeat(100_000);
        c.write_all(
            format!(
                "POST http://web.test:{}/upload HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                web.port(),
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
        let reply = read_all(&mut c);
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply:.40}");
        assert!(reply.ends_with(&body));
        let got = requests.recv_timeout(PATIENCE).unwrap();
        assert!(got.starts_with(b"POST /upload HTTP/1.1\r\n"));
        assert!(got.ends_with(body.as_bytes()));
    }

    #[test]
    fn plain_http_refusals_and_bad_requests() {
        let h = start_proxy(&["web.test"], &[], "");
        let cases = [
            ("GET http://other.test/ HTTP/1.1\r\n\r\n", "403 Forbidden"),
            (
                "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n",
                "400 Bad Request",
            ),
            ("GET https://web.test/ HTTP/1.1\r\n\r\n", "400 Bad Request"),
            (
                "GET http://user@web.test/ HTTP/1.1\r\n\r\n",
                "400 Bad Request",
            ),
            ("GET http://web.test/ HTTP/2\r\n\r\n", "400 Bad Request"),
            (
                "GET http://web.test/ HTTP/1.1\r\n folded\r\n\r\n",
                "400 Bad Request",
            ),
            (
                "GET http://web.test/ HTTP/1.1\r\nNoColon\r\n\r\n",
                "400 Bad Request",
            ),
            ("CONNECT web.test HTTP/1.1\r\n\r\n", "400 Bad Request"),
            ("CONNECT web.test:0 HTTP/1.1\r\n\r\n", "400 Bad Request"),
            ("CONNECT ::1:80 HTTP/1.1\r\n\r\n", "400 Bad Request"),
            ("hello\n\n", "400 Bad Request"),
        ];
        for (request, status) in cases {
            let mut c = client(&h);
            c.write_all(request.as_bytes()).unwrap();
            let reply = read_all(&mut c);
            assert!(
                reply.starts_with(&format!("HTTP/1.1 {status}\r\n")),
                "{request:?} -> {reply}"
            );
        }
        assert_eq!(h.decisions.refused(), 1);
        assert_eq!(h.lookups.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn head_parsing() {
        assert_eq!(
            parse_head(b"CONNECT Api.Example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(HttpRequest::Connect {
                host: "api.example.com".into(),
                port: 443
            })
        );
        assert_eq!(
            parse_head(b"CONNECT [::1]:8080 HTTP/1.0\n\n"),
            Ok(HttpRequest::Connect {
                host: "::1".into(),
                port: 8080
            })
        );
        let Ok(HttpRequest::Forward { host, port, head }) =
            parse_head(b"GET http://[::1]:81?x HTTP/1.1\r\nX-A: b\xe9\r\n\r\n")
        else {
            panic!("not forwarded")
        };
        assert_eq!((host.as_str(), port), ("::1", 81));
        assert_eq!(
            head,
            b"GET /?x HTTP/1.1\r\nHost: [::1]:81\r\nX-A: b\xe9\r\nConnection: close\r\n\r\n"
        );
        let Ok(HttpRequest::Forward { head, .. }) = parse_head(b"HEAD http://a.test HTTP/1.1\n\n")
        else {
            panic!("not forwarded")
        };
        assert!(head.starts_with(b"HEAD / HTTP/1.1\r\nHost: a.test\r\n"));
        for bad in [
            &b""[..],
            b"\r\n\r\n",
            b"GET  http://a.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1 x\r\n\r\n",
            b"G(T http://a.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a.test:99999/ HTTP/1.1\r\n\r\n",
            b"GET http://a.test:/ HTTP/1.1\r\n\r\n",
            b"GET http://[::1/ HTTP/1.1\r\n\r\n",
            b"GET http://[zz]/ HTTP/1.1\r\n\r\n",
            b"GET http://a\x01.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a%2e.test/ HTTP/1.1\r\n\r\n",
            b"GET http:///x HTTP/1.1\r\n\r\n",
            b"GET ftp://a.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nX : a\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\n: a\r\n\r\n",
        ] {
            assert!(
                parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn head_parsing_survives_garbage() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = b"GETCONNECThttp://[]:.@?#/ \r\n\t0123456789abc\x00\xff";
        for _ in 0..20_000 {
            let len = (next() % 80) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let _ = parse_head(&bytes);
            let from = (next() % 100) as usize;
            if let Some(end) = find_head_end(&bytes, from) {
                assert!(end <= bytes.len());
            }
        }
    }

    #[test]
    fn head_end_detection() {
        assert_eq!(find_head_end(b"a\r\n\r\nbody", 0), Some(5));
        assert_eq!(find_head_end(b"a\n\nbody", 0), Some(3));
        assert_eq!(find_head_end(b"a\r\n\r", 0), None);
        assert_eq!(find_head_end(b"a\r\n\r\n", 2), Some(5));
        assert_eq!(find_head_end(b"", 9), None);
    }
}
