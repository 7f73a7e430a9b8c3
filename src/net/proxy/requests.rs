//! The requests a command sends on an intercepted connection (HTTP/1.x over the TLS the proxy
//! terminates), read as a stream: each request head is checked and has the placeholders in its
//! credential headers replaced with the secrets' values; bodies pass through untouched, framed
//! by `Content-Length` or chunked coding so that the next head is found where the server will
//! find it.
//!
//! Each refusal is named for its attacker:
//! - A `Host` header naming another host than the one connected to (domain fronting: a CDN that
//!   serves the secret's host and the attacker's site on one address routes by `Host`, so the
//!   value would reach the attacker's origin). Refused, as is an absolute-form target
//!   (`GET https://evil.test/`) and a second `Host`.
//! - Ambiguous framing (`Content-Length` with `Transfer-Encoding`, two lengths, a coding other
//!   than chunked): the proxy and the server would disagree on where the next request starts,
//!   and a head the proxy took for body would reach the server unchecked (request smuggling).
//!   Refused, as are obsolete folded lines and control characters in a header, a
//!   `Transfer-Encoding` on an HTTP/1.0 request, and chunk lines a server could read otherwise
//!   (a bare LF, space around the size, control characters in an extension or a trailer).
//! - `TRACE` (and IIS's `TRACK`): the server answers with the request it received, so the value
//!   would come back to the command (RFC 9110 9.3.8 tells clients never to send credentials
//!   with it). Refused.
//! - A protocol switch (`Upgrade`, e.g. WebSocket) ends the rewriting: what follows is not
//!   HTTP/1.1 any more, so it passes unchanged, placeholders and all.
//! - The value goes into credential headers only ([`is_credential_header`]), never into the
//!   URL, the body or a header a server might echo back.

use std::collections::BTreeSet;

use super::http::find_head_end;
use crate::net::secrets::{Injection, is_credential_header};

/// Largest request head on an intercepted connection (API clients send long tokens and many
/// headers; still bounded).
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line.
const MAX_LINE: usize = 8 * 1024;

/// Why a request was not passed on: the status for the reply and a one-line reason.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refused {
    pub status: &'static str,
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> Refused {
    Refused {
        status: "400 Bad Request",
        reason: reason.into(),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Reading a request head.
    Head,
    /// So many body bytes still to pass.
    Body(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// So many bytes of chunk data, then the line that ends the chunk.
    ChunkData(u64),
    ChunkEnd,
    /// Trailer lines after the last chunk, until an empty one.
    Trailers,
    /// After a protocol switch: everything passes unchanged.
    Raw,
}

/// The request stream of one intercepted connection to `host:port`.
pub(super) struct Requests<'a> {
    host: &'a str,
    port: u16,
    injection: &'a Injection,
    state: State,
    /// Bytes of the current head or line not yet complete.
    partial: Vec<u8>,
    /// Names of the secrets put into a request so far.
    pub injected: BTreeSet<String>,
    /// Request heads passed on.
    pub requests: u64,
}

impl<'a> Requests<'a> {
    pub(super) fn new(host: &'a str, port: u16, injection: &'a Injection) -> Self {
        Requests {
            host,
            port,
            injection,
            state: State::Head,
            partial: Vec::new(),
            injected: BTreeSet::new(),
            requests: 0,
        }
    }

    /// Takes the next bytes from the command and appends what goes to the server to `out`.
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        while !input.is_empty() {
            match self.state {
                State::Raw => {
                    out.extend_from_slice(input);
                    return Ok(());
                }
                State::Body(left) | State::ChunkData(left) => {
                    let n = input.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let (now, rest) = input.split_at(n);
                    out.extend_from_slice(now);
                    input = rest;
                    let left = left - n as u64;
                    self.state = match (&self.state, left) {
                        (State::Body(_), 0) => State::Head,
                        (State::Body(_), l) => State::Body(l),
                        (_, 0) => State::ChunkEnd,
                        (_, l) => State::ChunkData(l),
                    };
                }
                State::Head => {
                    let scanned = self.partial.len().saturating_sub(2);
                    let before = self.partial.len();
                    self.partial.extend_from_slice(input);
                    let Some(end) = find_head_end(&self.partial, scanned) else {
                        if self.partial.len() > MAX_HEAD {
                            return Err(Refused {
                                status: "431 Request Header Fields Too Large",
                                reason: "request head larger than 64 KiB".into(),
                            });
                        }
                        return Ok(());
                    };
                    let head = std::mem::take(&mut self.partial);
                    input = input.get(end - before..).unwrap_or_default();
                    let head = head.get(..end).unwrap_or_default();
                    self.state = self.head(head, out)?;
                }
                State::ChunkSize | State::ChunkEnd | State::Trailers => {
                    let Some(nl) = input.iter().position(|b| *b == b'\n') else {
                        self.partial.extend_from_slice(input);
                        if self.partial.len() > MAX_LINE {
                            return Err(bad("chunk line longer than 8 KiB"));
                        }
                        return Ok(());
                    };
                    let (now, rest) = input.split_at(nl + 1);
                    input = rest;
                    self.partial.extend_from_slice(now);
                    let line = std::mem::take(&mut self.partial);
                    // CRLF only: a server that ends these lines at CRLF alone would read a bare
                    // LF as part of the line (a chunk extension, a trailer), find the body's
                    // end elsewhere, and take a head the proxy filled in for body.
                    let Some(text) = line.strip_suffix(b"\r\n") else {
                        return Err(bad("chunk line not ended by CRLF"));
                    };
                    self.state = match self.state {
                        State::ChunkSize => match chunk_size(text)? {
                            0 => State::Trailers,
                            n => State::ChunkData(n),
                        },
                        State::ChunkEnd if text.is_empty() => State::ChunkSize,
                        State::ChunkEnd => return Err(bad("chunk data longer than its size")),
                        _ if text.is_empty() => State::Head,
                        _ => {
                            header_line(text).map_err(|e| bad(format!("trailer: {}", e.reason)))?;
                            State::Trailers
                        }
                    };
                    out.extend_from_slice(&line);
                }
            }
        }
        Ok(())
    }

    /// Checks one request head, writes it out with the secrets put in, and says what follows.
    fn head(&mut self, head: &[u8], out: &mut Vec<u8>) -> Result<State, Refused> {
        let mut lines = head
            .split(|b| *b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let request_line = lines.next().unwrap_or_default();
        let RequestLine {
            method,
            target,
            version,
        } = request_line_parts(request_line)?;
        if method.eq_ignore_ascii_case(b"CONNECT") {
            return Err(bad("CONNECT inside a tunnel"));
        }
        if let Some(reason) = echoing_method(method) {
            return Err(Refused {
                status: "403 Forbidden",
                reason,
            });
        }
        if !(target.starts_with(b"/") || (target == b"*" && method == b"OPTIONS")) {
            return Err(Refused {
                status: "403 Forbidden",
                reason: format!(
                    "only origin-form targets (/path) go to {} on this connection",
                    self.host
                ),
            });
        }
        let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
        for line in lines.take_while(|l| !l.is_empty()) {
            headers.push(header_line(line)?);
        }
        let named = |n: &'static str| {
            headers
                .iter()
                .filter(move |(k, _)| k.eq_ignore_ascii_case(n.as_bytes()))
                .map(|(_, v)| *v)
        };
        let hosts: Vec<&[u8]> = named("host").collect();
        self.check_host(&hosts, version)?;
        let lengths: Vec<&[u8]> = named("content-length").collect();
        let codings: Vec<&[u8]> = named("transfer-encoding").collect();
        let upgrade = named("upgrade").next().is_some()
            && named("connection").any(|v| {
                v.split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
            });
        // HTTP/1.0 has no transfer codings: a server may frame such a request by its length
        // alone and read the chunks as requests of their own (RFC 9112 6.1 calls the framing
        // faulty).
        if version == b"HTTP/1.0" && !codings.is_empty() {
            return Err(bad("Transfer-Encoding in an HTTP/1.0 request"));
        }
        let next = match (lengths.as_slice(), codings.as_slice()) {
            ([], []) => State::Head,
            ([], [coding]) if coding.trim_ascii().eq_ignore_ascii_case(b"chunked") => {
                State::ChunkSize
            }
            ([], _) => return Err(bad("Transfer-Encoding other than a single 'chunked'")),
            (_, []) => match content_length(&lengths)? {
                0 => State::Head,
                n => State::Body(n),
            },
            _ => return Err(bad("both Content-Length and Transfer-Encoding")),
        };
        out.extend_from_slice(request_line);
        out.extend_from_slice(b"\r\n");
        if hosts.is_empty() {
            out.extend_from_slice(format!("Host: {}\r\n", self.host).as_bytes());
        }
        for (name, value) in headers {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            let replaced = is_credential_header(name)
                .then(|| self.injection.replace(self.host, value))
                .flatten();
            match replaced {
                Some((v, used)) => {
                    out.extend_from_slice(&v);
                    self.injected.extend(used.into_iter().map(str::to_string));
                }
                None => out.extend_from_slice(value),
            }
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        self.requests += 1;
        Ok(if upgrade { State::Raw } else { next })
    }

    /// The request names this connection's host once (HTTP/1.1 must; HTTP/1.0 may name none):
    /// a secret for one host must not go to another the same server also answers for.
    fn check_host(&self, hosts: &[&[u8]], version: &[u8]) -> Result<(), Refused> {
        match hosts {
            [] if version == b"HTTP/1.0" => Ok(()),
            [] => Err(bad("HTTP/1.1 request without Host")),
            [one] if self.names_this_host(one) => Ok(()),
            [one] => Err(Refused {
                status: "403 Forbidden",
                reason: format!(
                    "Host {} is not {}, the host this connection and its secret are for",
                    crate::text::printable(&String::from_utf8_lossy(one)),
                    self.host
                ),
            }),
            _ => Err(bad("more than one Host header")),
        }
    }

    /// `Host` names the connected host, and the connected port if it names one.
    fn names_this_host(&self, value: &[u8]) -> bool {
        names_host(value, self.host, self.port)
    }
}

/// Why a method is never sent with a secret in it, on HTTP/1 and HTTP/2 alike: TRACE asks the
/// server to send back the request as it got it (RFC 9110 9.3.8), the value put into it
/// included; TRACK is IIS's name for the same. Case-blind: a lenient server takes `trace` for
/// TRACE.
pub(super) fn echoing_method(method: &[u8]) -> Option<String> {
    (method.eq_ignore_ascii_case(b"TRACE") || method.eq_ignore_ascii_case(b"TRACK")).then(|| {
        format!(
            "{} is answered with the request itself, the secret's value included",
            String::from_utf8_lossy(method)
        )
    })
}

/// A `Host` (or HTTP/2 `:authority`) value names `host`, and `port` if it names a port.
pub(super) fn names_host(value: &[u8], host: &str, port: u16) -> bool {
    let v = value.trim_ascii();
    let v = std::str::from_utf8(v).unwrap_or("");
    let (name, named_port) = match v.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') => (n, Some(p)),
        _ => (v, None),
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case(host) && named_port.is_none_or(|p| p.parse::<u16>() == Ok(port))
}

/// A request line's method, target and version, each as sent.
struct RequestLine<'a> {
    method: &'a [u8],
    target: &'a [u8],
    version: &'a [u8],
}

fn request_line_parts(line: &[u8]) -> Result<RequestLine<'_>, Refused> {
    if !line.iter().all(|b| (0x21..0x7f).contains(b) || *b == b' ') {
        return Err(bad("request line is not printable ASCII"));
    }
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("request line is not METHOD TARGET HTTP/1.x"));
    };
    if method.is_empty() || !method.iter().copied().all(is_token_byte) {
        return Err(bad("invalid method"));
    }
    if version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        return Err(bad("not HTTP/1.0 or HTTP/1.1"));
    }
    Ok(RequestLine {
        method,
        target,
        version,
    })
}

fn header_line(line: &[u8]) -> Result<(&[u8], &[u8]), Refused> {
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err(bad("folded header line"));
    }
    let colon = line
        .iter()
        .position(|b| *b == b':')
        .ok_or_else(|| bad("header line without ':'"))?;
    let (name, value) = line.split_at(colon);
    if name.is_empty() || !name.iter().copied().all(is_token_byte) {
        return Err(bad("invalid header name"));
    }
    let value = value.get(1..).unwrap_or_default().trim_ascii();
    if value.iter().any(|b| *b == b'\r' || *b == 0) {
        return Err(bad("control character in a header"));
    }
    Ok((name, value))
}

fn content_length(values: &[&[u8]]) -> Result<u64, Refused> {
    let mut found: Option<u64> = None;
    for v in values {
        let v = v.trim_ascii();
        if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
            return Err(bad("invalid Content-Length"));
        }
        let n: u64 = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("invalid Content-Length"))?;
        if found.is_some_and(|f| f != n) {
            return Err(bad("two different Content-Length values"));
        }
        found = Some(n);
    }
    Ok(found.unwrap_or(0))
}

/// `1*HEXDIG [ ";" extension ]`, nothing else: no space around the size (parsers differ on
/// whether `5 ` or ` 5` is 5, an error, or 0), and an extension of visible characters, spaces
/// and tabs only (one with a CR or a control character is read differently by each server).
fn chunk_size(line: &[u8]) -> Result<u64, Refused> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let (size, rest) = line.split_at(digits);
    if size.is_empty() || size.len() > 15 {
        return Err(bad("invalid chunk size"));
    }
    let extension_ok = rest.is_empty()
        || (rest.starts_with(b";")
            && rest
                .iter()
                .all(|b| (0x21..0x7f).contains(b) || *b == b' ' || *b == b'\t'));
    if !extension_ok {
        return Err(bad("invalid chunk size or extension"));
    }
    u64::from_str_radix(std::str::from_utf8(size).unwrap_or("x"), 16)
        .map_err(|_| bad("invalid chunk size"))
}

/// RFC 9110 token characters (methods, header names).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injection() -> Injection {
        crate::net::secrets::test_injection(&[
            ("KEY", "api.a.test", "PH-KEY", b"REAL"),
            ("OTHER", "b.test", "PH-OTHER", b"NOPE"),
        ])
    }

    /// Feeds `input` in pieces of every size from 1 to 7 bytes and checks they all agree.
    fn run(input: &[u8]) -> Result<Vec<u8>, Refused> {
        let inj = injection();
        let mut whole = Requests::new("api.a.test", 443, &inj);
        let mut expected = Vec::new();
        let result = whole.feed(input, &mut expected);
        for piece in 1..8 {
            let mut r = Requests::new("api.a.test", 443, &inj);
            let mut out = Vec::new();
            let mut res = Ok(());
            for chunk in input.chunks(piece) {
                res = r.feed(chunk, &mut out);
                if res.is_err() {
                    break;
                }
            }
            assert_eq!(res.is_ok(), result.is_ok(), "piece {piece}");
            if result.is_ok() {
                assert_eq!(out, expected, "piece {piece}");
            }
        }
        result.map(|()| expected)
    }

    #[test]
    fn credential_headers_get_the_value_bodies_and_other_headers_do_not() {
        let got = run(
            b"POST /v1 HTTP/1.1\r\nHost: api.a.test\r\nx-api-key: PH-KEY\r\n\
              User-Agent: PH-KEY\r\nAuthorization: Bearer PH-OTHER\r\nContent-Length: 6\r\n\r\n\
              PH-KEYGET /PH-KEY HTTP/1.1\nHost: API.A.TEST:443\nAuthorization:Bearer PH-KEY\n\n",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "POST /v1 HTTP/1.1\r\nHost: api.a.test\r\nx-api-key: REAL\r\nUser-Agent: PH-KEY\r\n\
             Authorization: Bearer PH-OTHER\r\nContent-Length: 6\r\n\r\nPH-KEY\
             GET /PH-KEY HTTP/1.1\r\nHost: API.A.TEST:443\r\nAuthorization: Bearer REAL\r\n\r\n"
        );
    }

    #[test]
    fn chunked_bodies_are_framed_and_the_next_head_is_rewritten() {
        let input = b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n\
            6\r\nx-api-\r\n8;ext=1\r\nkey: PH-\r\n0\r\nTrailer-Authorization: PH-KEY\r\n\r\n\
            GET / HTTP/1.1\r\nHost: api.a.test\r\nx-api-key: PH-KEY\r\n\r\n";
        let out = String::from_utf8(run(input).unwrap()).unwrap();
        assert!(
            out.contains("6\r\nx-api-\r\n8;ext=1\r\nkey: PH-\r\n0\r\n"),
            "{out}"
        );
        assert!(
            out.contains("Trailer-Authorization: PH-KEY\r\n\r\nGET"),
            "{out}"
        );
        assert!(out.ends_with("x-api-key: REAL\r\n\r\n"), "{out}");
        let inj = injection();
        let mut r = Requests::new("api.a.test", 443, &inj);
        r.feed(input, &mut Vec::new()).unwrap();
        assert_eq!((r.requests, r.injected.len()), (2, 1));
    }

    #[test]
    fn after_an_upgrade_nothing_is_rewritten() {
        let out = run(
            b"GET /ws HTTP/1.1\r\nHost: api.a.test\r\nConnection: keep-alive, Upgrade\r\n\
              Upgrade: websocket\r\nAuthorization: PH-KEY\r\n\r\n\
              GET / HTTP/1.1\r\nHost: api.a.test\r\nAuthorization: PH-KEY\r\n\r\n",
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.matches("REAL").count(), 1, "{out}");
        assert!(out.ends_with("Authorization: PH-KEY\r\n\r\n"));
    }

    #[test]
    fn fronting_smuggling_and_malformed_heads_are_refused() {
        for (input, status, says) in [
            (&b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"[..], "403", "is not api.a.test"),
            (b"GET / HTTP/1.1\r\nHost: api.a.test.evil.test\r\n\r\n", "403", "is not"),
            (b"GET / HTTP/1.1\r\nHost: api.a.test:8443\r\n\r\n", "403", "is not"),
            (b"GET https://evil.test/ HTTP/1.1\r\nHost: api.a.test\r\n\r\n", "403", "origin-form"),
            (b"GET / HTTP/1.1\r\nHost: api.a.test\r\nHost: evil.test\r\n\r\n", "400", "more than one"),
            (b"GET / HTTP/1.1\r\n\r\n", "400", "without Host"),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400",
                "both",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                "400",
                "two different",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                "400",
                "other than",
            ),
            (b"POST / HTTP/1.1\r\nHost: api.a.test\r\nContent-Length: -1\r\n\r\n", "400", "Content-Length"),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "400",
                "chunk size",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
                "400",
                "longer than its size",
            ),
            (b"GET / HTTP/1.1\r\nHost: api.a.test\r\n folded\r\n\r\n", "400", "folded"),
            (
                b"POST / HTTP/1.0\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400",
                "HTTP/1.0",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n40;\nx",
                "400",
                "CRLF",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\n",
                "400",
                "CRLF",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n",
                "400",
                "CRLF",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\n",
                "400",
                "chunk size",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\n",
                "400",
                "chunk size",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;a\rb\r\n",
                "400",
                "extension",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: api.a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded\r\n",
                "400",
                "trailer",
            ),
            (b"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n", "400", "CONNECT"),
            (b"TRACE / HTTP/1.1\r\nHost: api.a.test\r\nAuthorization: PH-KEY\r\n\r\n", "403", "TRACE"),
            (b"track / HTTP/1.1\r\nHost: api.a.test\r\n\r\n", "403", "track"),
            (b"GET / HTTP/2\r\nHost: api.a.test\r\n\r\n", "400", "HTTP/1"),
            (b"GET / HTTP/1.1\r\nX\x01: y\r\n\r\n", "400", "header name"),
        ] {
            let err = run(input).unwrap_err();
            assert!(
                err.status.starts_with(status) && err.reason.contains(says),
                "{:?}: {err:?}",
                String::from_utf8_lossy(input)
            );
        }
        assert!(
            run(b"GET / HTTP/1.0\r\n\r\n")
                .unwrap()
                .starts_with(b"GET / HTTP/1.0\r\nHost: api.a.test\r\n\r\n")
        );
        assert!(run(b"OPTIONS * HTTP/1.1\r\nHost: api.a.test.\r\n\r\n").is_ok());
        let huge = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; 70_000]].concat();
        assert!(run(&huge).unwrap_err().status.starts_with("431"));
    }

    #[test]
    fn garbage_never_panics() {
        let inj = injection();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet = b"GET / HTTP/1.1\r\nHost: api.a.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n0123456789abcdef;PH-KEY:\x00";
        for _ in 0..20_000 {
            let mut r = Requests::new("api.a.test", 443, &inj);
            let mut out = Vec::new();
            for _ in 0..(next() % 6) {
                let len = (next() % 60) as usize;
                let bytes: Vec<u8> = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                if r.feed(&bytes, &mut out).is_err() {
                    break;
                }
            }
        }
    }
}
