//! The requests a command sends on an intercepted connection that negotiated HTTP/2 (ALPN `h2`),
//! read as a stream of frames: each header block (HEADERS and its CONTINUATIONs) is decoded,
//! checked, given the secrets' values in its credential headers, encoded again and framed anew;
//! every other frame passes byte for byte. The server's frames go back untouched: the HPACK
//! state in that direction is between the server and the command.
//!
//! Why the header blocks are encoded again, not patched: HPACK (RFC 7541) compresses a block
//! against a table both ends keep, so a value cannot be swapped in place. The proxy keeps a
//! decoder in step with the command's encoder and writes every field as a literal that the
//! server's table never stores ("without indexing"): the proxy→server direction carries no
//! state of its own, and a value put in is sent "never indexed" (§7.1.3), so no intermediary
//! after the proxy keeps it in a table either.
//!
//! Each refusal is named for its attacker, as in [`super::requests`]:
//! - `:authority` or `host` naming another host than the one connected to (domain fronting), a
//!   second `:authority`, or neither: refused. So is a `:path` that is not origin-form.
//! - `CONNECT`, and the extended CONNECT of RFC 8441 (`:protocol`, WebSocket over HTTP/2): what
//!   follows on such a stream is not HTTP any more. Refused, as is any unknown pseudo-header.
//! - A header block over 64 KiB, encoded or decoded, or a dynamic table over 64 KiB: refused,
//!   so a command cannot make the proxy hold more (an HPACK "bomb" of small indexed fields that
//!   each expand to a large entry is bounded by the decoded size).
//! - Anything the proxy cannot follow (a bad preface, a frame inside a header block, HPACK it
//!   cannot decode): refused; the connection ends with GOAWAY, nothing half-rewritten goes on.
//! - Trailers (a second header block on a stream) are re-encoded but get no value, as HTTP/1.1
//!   trailers do not.

use std::collections::BTreeSet;

use loona_hpack::Decoder;

use super::requests::names_host;
use crate::net::secrets::{Injection, is_credential_header};

/// What a client sends first on an HTTP/2 connection (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
/// The largest frame the proxy writes: every HTTP/2 peer takes 16384 (the initial
/// SETTINGS_MAX_FRAME_SIZE, which a peer may only raise), so the server's SETTINGS need not be
/// watched.
const MAX_FRAME_OUT: usize = 16_384;
/// The largest header block (all its fragments, padding included) the proxy holds.
const MAX_BLOCK: usize = 64 * 1024;
/// The largest decoded header list (name + value + 32 per field, as SETTINGS_MAX_HEADER_LIST_SIZE
/// counts it).
const MAX_LIST: usize = 64 * 1024;
/// The largest dynamic table the command's encoder may use. It may use what the server
/// advertised (the server's SETTINGS pass through); 4096 is the default and what common
/// clients use. Larger: refused, not followed.
const MAX_TABLE: usize = 64 * 1024;

const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// GOAWAY error codes (RFC 9113 §7).
pub(super) const PROTOCOL_ERROR: u32 = 0x1;
pub(super) const INTERNAL_ERROR: u32 = 0x2;
const COMPRESSION_ERROR: u32 = 0x9;
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// Why the request stream was not passed on: the GOAWAY error code and a one-line reason.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refused {
    pub code: u32,
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> Refused {
    Refused {
        code: PROTOCOL_ERROR,
        reason: reason.into(),
    }
}

/// A frame's 9-byte header, as sent and as read.
#[derive(Clone, Copy, Debug)]
struct Head {
    raw: [u8; FRAME_HEADER],
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl Head {
    fn parse(raw: [u8; FRAME_HEADER]) -> Head {
        let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = raw;
        Head {
            raw,
            len: usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2),
            kind,
            flags,
            // The top bit is reserved and ignored on receipt (§4.1).
            stream: u32::from_be_bytes([s0 & 0x7f, s1, s2, s3]),
        }
    }
}

#[derive(Debug)]
enum State {
    /// Reading the client preface.
    Preface,
    /// Reading a frame header.
    Header,
    /// So many payload bytes of a frame that passes unchanged.
    Pass(usize),
    /// Reading the payload of a HEADERS or CONTINUATION frame.
    Payload(Head),
}

/// A header block being gathered from HEADERS and CONTINUATION frames.
struct Block {
    stream: u32,
    end_stream: bool,
    /// The PRIORITY fields of the HEADERS frame (stream dependency and weight), kept.
    priority: Option<[u8; 5]>,
    fragments: Vec<u8>,
}

/// The HTTP/2 request stream of one intercepted connection to `host:port`.
pub(super) struct H2Requests<'a> {
    host: &'a str,
    port: u16,
    injection: &'a Injection,
    state: State,
    /// Bytes of the preface, a frame header or a header frame's payload not yet complete.
    partial: Vec<u8>,
    block: Option<Block>,
    decoder: Decoder<'static>,
    /// The highest stream a request was passed on for: a header block on it or below is
    /// trailers (client streams only grow, §5.1.1).
    pub last_stream: u32,
    /// Names of the secrets put into a request so far.
    pub injected: BTreeSet<String>,
    /// Requests passed on.
    pub requests: u64,
}

impl<'a> H2Requests<'a> {
    pub(super) fn new(host: &'a str, port: u16, injection: &'a Injection) -> Self {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(MAX_TABLE);
        H2Requests {
            host,
            port,
            injection,
            state: State::Preface,
            partial: Vec::new(),
            block: None,
            decoder,
            last_stream: 0,
            injected: BTreeSet::new(),
            requests: 0,
        }
    }

    /// Takes the next bytes from the command and appends what goes to the server to `out`.
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        while !input.is_empty() {
            match self.state {
                State::Pass(left) => {
                    let n = input.len().min(left);
                    let (now, rest) = input.split_at(n);
                    out.extend_from_slice(now);
                    input = rest;
                    self.state = match left - n {
                        0 => State::Header,
                        l => State::Pass(l),
                    };
                }
                State::Preface => {
                    let (now, rest) = take(&mut self.partial, input, PREFACE.len());
                    input = rest;
                    if !PREFACE.starts_with(&self.partial) {
                        return Err(bad("not the HTTP/2 client preface"));
                    }
                    if now {
                        out.extend_from_slice(PREFACE);
                        self.partial.clear();
                        self.state = State::Header;
                    }
                }
                State::Header => {
                    let (now, rest) = take(&mut self.partial, input, FRAME_HEADER);
                    input = rest;
                    if now {
                        let mut raw = [0u8; FRAME_HEADER];
                        raw.copy_from_slice(&self.partial);
                        self.partial.clear();
                        self.frame(Head::parse(raw), out)?;
                    }
                }
                State::Payload(head) => {
                    let (now, rest) = take(&mut self.partial, input, head.len);
                    input = rest;
                    if now {
                        let payload = std::mem::take(&mut self.partial);
                        self.state = State::Header;
                        self.payload(head, &payload, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A frame header has arrived: say how its payload is read.
    fn frame(&mut self, head: Head, out: &mut Vec<u8>) -> Result<(), Refused> {
        if let Some(block) = &self.block {
            // §6.10: a header block is contiguous; anything else in it is a connection error.
            if head.kind != CONTINUATION || head.stream != block.stream {
                return Err(bad("a frame inside a header block"));
            }
        }
        match head.kind {
            HEADERS | CONTINUATION => {
                if head.kind == CONTINUATION && self.block.is_none() {
                    return Err(bad("CONTINUATION without a header block"));
                }
                if head.stream % 2 == 0 {
                    return Err(bad("header block on a stream a client cannot open"));
                }
                let so_far = self.block.as_ref().map_or(0, |b| b.fragments.len());
                if so_far + head.len > MAX_BLOCK {
                    return Err(Refused {
                        code: ENHANCE_YOUR_CALM,
                        reason: "header block larger than 64 KiB".into(),
                    });
                }
                self.state = State::Payload(head);
                if head.len == 0 {
                    self.state = State::Header;
                    self.payload(head, &[], out)?;
                }
            }
            PUSH_PROMISE => return Err(bad("PUSH_PROMISE from a client")),
            _ => {
                out.extend_from_slice(&head.raw);
                self.state = match head.len {
                    0 => State::Header,
                    n => State::Pass(n),
                };
            }
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION payload has arrived.
    fn payload(&mut self, head: Head, payload: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        if head.kind == HEADERS {
            let mut data = payload;
            if head.flags & PADDED != 0 {
                let (&pad, rest) = data
                    .split_first()
                    .ok_or_else(|| bad("PADDED HEADERS without a pad length"))?;
                let keep = rest
                    .len()
                    .checked_sub(usize::from(pad))
                    .ok_or_else(|| bad("HEADERS padding longer than the frame"))?;
                data = rest.get(..keep).unwrap_or_default();
            }
            let priority = if head.flags & PRIORITY != 0 {
                let (fields, rest) = data
                    .split_first_chunk::<5>()
                    .ok_or_else(|| bad("HEADERS too short for its PRIORITY fields"))?;
                data = rest;
                Some(*fields)
            } else {
                None
            };
            self.block = Some(Block {
                stream: head.stream,
                end_stream: head.flags & END_STREAM != 0,
                priority,
                fragments: data.to_vec(),
            });
        } else if let Some(block) = &mut self.block {
            block.fragments.extend_from_slice(payload);
        }
        if head.flags & END_HEADERS != 0 {
            if let Some(block) = self.block.take() {
                self.finish(block, out)?;
            }
        }
        Ok(())
    }

    /// A whole header block: decode, check, put the values in, encode and frame it.
    fn finish(&mut self, block: Block, out: &mut Vec<u8>) -> Result<(), Refused> {
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut size = 0usize;
        self.decoder
            .decode_with_cb(&block.fragments, |name, value| {
                size = size.saturating_add(name.len() + value.len() + 32);
                if size <= MAX_LIST {
                    fields.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| Refused {
                code: COMPRESSION_ERROR,
                reason: format!("header block the proxy cannot decode (HPACK: {e})"),
            })?;
        if size > MAX_LIST {
            return Err(Refused {
                code: ENHANCE_YOUR_CALM,
                reason: "header list larger than 64 KiB".into(),
            });
        }
        let request = block.stream > self.last_stream;
        if request {
            self.check_request(&fields)?;
        } else if fields.iter().any(|(n, _)| n.starts_with(b":")) {
            return Err(bad("pseudo-header in trailers"));
        }
        let mut encoded = Vec::new();
        for (name, value) in &fields {
            if value.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
                return Err(bad("control character in a header"));
            }
            let credential = is_credential_header(name);
            let replaced = (request && credential)
                .then(|| self.injection.replace(self.host, value))
                .flatten();
            let value = match replaced {
                Some((v, used)) => {
                    self.injected.extend(used.into_iter().map(str::to_string));
                    v
                }
                None => value.clone(),
            };
            literal(&mut encoded, credential, name, &value);
        }
        if request {
            self.last_stream = block.stream;
            self.requests += 1;
        }
        write_block(out, &block, &encoded);
        Ok(())
    }

    /// A request's pseudo-headers: one method, scheme and path, and what it names is this host.
    fn check_request(&self, fields: &[(Vec<u8>, Vec<u8>)]) -> Result<(), Refused> {
        let (mut method, mut path, mut scheme, mut authority) = (None, None, None, None);
        let mut regular = false;
        let mut hosts = Vec::new();
        for (name, value) in fields {
            let slot = match name.as_slice() {
                b":method" => &mut method,
                b":path" => &mut path,
                b":scheme" => &mut scheme,
                b":authority" => &mut authority,
                n if n.starts_with(b":") => {
                    return Err(bad(format!(
                        "pseudo-header {} (only :method, :scheme, :path and :authority go \
                         through; extended CONNECT does not)",
                        crate::text::printable(&String::from_utf8_lossy(n))
                    )));
                }
                n => {
                    regular = true;
                    if n.eq_ignore_ascii_case(b"host") {
                        hosts.push(value.as_slice());
                    }
                    continue;
                }
            };
            // §8.3: pseudo-headers come first, each once.
            if regular || slot.is_some() {
                return Err(bad(format!(
                    "{} repeated or after a regular header",
                    String::from_utf8_lossy(name)
                )));
            }
            *slot = Some(value.as_slice());
        }
        let method = method.ok_or_else(|| bad("request without :method"))?;
        if method.eq_ignore_ascii_case(b"CONNECT") {
            return Err(bad("CONNECT inside a tunnel"));
        }
        if let Some(reason) = super::requests::echoing_method(method) {
            return Err(bad(reason));
        }
        if scheme.is_none() {
            return Err(bad("request without :scheme"));
        }
        let path = path.ok_or_else(|| bad("request without :path"))?;
        if !(path.starts_with(b"/") || (path == b"*" && method == b"OPTIONS")) {
            return Err(bad(format!(
                "only origin-form paths (/path) go to {} on this connection",
                self.host
            )));
        }
        if authority.is_none() && hosts.is_empty() {
            return Err(bad("request without :authority or host"));
        }
        for named in authority.into_iter().chain(hosts) {
            if !names_host(named, self.host, self.port) {
                return Err(bad(format!(
                    "authority {} is not {}, the host this connection and its secret are for",
                    crate::text::printable(&String::from_utf8_lossy(named)),
                    self.host
                )));
            }
        }
        Ok(())
    }
}

/// Moves bytes of `input` into `partial` until it holds `want`; says whether it does, and
/// returns the rest of `input`.
fn take<'i>(partial: &mut Vec<u8>, input: &'i [u8], want: usize) -> (bool, &'i [u8]) {
    let n = want.saturating_sub(partial.len()).min(input.len());
    let (now, rest) = input.split_at(n);
    partial.extend_from_slice(now);
    (partial.len() == want, rest)
}

/// An HPACK integer with an `prefix`-bit prefix, the first byte's other bits `first` (§5.1).
fn integer(out: &mut Vec<u8>, first: u8, prefix: u8, mut value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A field as a literal with a literal name, not added to the server's table; "never indexed"
/// for credentials (§6.2.2, §6.2.3). Strings raw, not Huffman-coded.
fn literal(out: &mut Vec<u8>, never_indexed: bool, name: &[u8], value: &[u8]) {
    out.push(if never_indexed { 0x10 } else { 0x00 });
    for s in [name, value] {
        integer(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[&[u8]]) {
    let len: usize = payload.iter().map(|p| p.len()).sum();
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    for p in payload {
        out.extend_from_slice(p);
    }
}

/// A re-encoded header block as HEADERS (its END_STREAM and PRIORITY kept, padding dropped)
/// and CONTINUATION frames of at most [`MAX_FRAME_OUT`].
fn write_block(out: &mut Vec<u8>, block: &Block, encoded: &[u8]) {
    let priority: &[u8] = block.priority.as_ref().map_or(&[], |p| p.as_slice());
    let (first, mut rest) = encoded.split_at(encoded.len().min(MAX_FRAME_OUT - priority.len()));
    let mut flags = 0;
    if block.end_stream {
        flags |= END_STREAM;
    }
    if block.priority.is_some() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    frame(out, HEADERS, flags, block.stream, &[priority, first]);
    while !rest.is_empty() {
        let (now, later) = rest.split_at(rest.len().min(MAX_FRAME_OUT));
        rest = later;
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        frame(out, CONTINUATION, flags, block.stream, &[now]);
    }
}

/// What the proxy says to the command when it ends an HTTP/2 connection: an empty SETTINGS
/// first when the server has sent nothing yet (a server's first frame must be SETTINGS,
/// §3.4), then GOAWAY naming the last stream passed on and the reason.
pub(super) fn goaway(first: bool, last_stream: u32, code: u32, reason: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if first {
        frame(&mut out, SETTINGS, 0, 0, &[]);
    }
    let mut debug = format!("jail: {reason}").into_bytes();
    debug.truncate(MAX_FRAME_OUT - 8);
    frame(
        &mut out,
        GOAWAY,
        0,
        0,
        &[
            &(last_stream & 0x7fff_ffff).to_be_bytes(),
            &code.to_be_bytes(),
            &debug,
        ],
    );
    out
}

/// Follows frame boundaries in the server's bytes (which pass unchanged), so that a GOAWAY of
/// the proxy's goes between two frames, never into one.
#[derive(Default)]
pub(super) struct Boundaries {
    header: Vec<u8>,
    left: usize,
    /// Bytes seen.
    pub seen: u64,
}

impl Boundaries {
    pub(super) fn advance(&mut self, mut bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = bytes.len().min(self.left);
                self.left -= n;
                bytes = bytes.get(n..).unwrap_or_default();
                continue;
            }
            let (now, rest) = take(&mut self.header, bytes, FRAME_HEADER);
            bytes = rest;
            if now {
                let mut raw = [0u8; FRAME_HEADER];
                raw.copy_from_slice(&self.header);
                self.header.clear();
                self.left = Head::parse(raw).len;
            }
        }
    }

    /// Between two frames.
    pub(super) fn at_boundary(&self) -> bool {
        self.left == 0 && self.header.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loona_hpack::Encoder;

    const DATA: u8 = 0x0;

    fn injection() -> Injection {
        crate::net::secrets::test_injection(&[
            ("KEY", "api.a.test", "PH-KEY", b"REAL"),
            ("EX", "www.example.com", "PH-EX", b"EXVAL"),
            ("OTHER", "b.test", "PH-OTHER", b"NOPE"),
        ])
    }

    fn headers_frame(out: &mut Vec<u8>, flags: u8, stream: u32, block: &[u8]) {
        frame(out, HEADERS, flags, stream, &[block]);
    }

    /// The client preface and an empty SETTINGS frame.
    fn start() -> Vec<u8> {
        let mut v = PREFACE.to_vec();
        frame(&mut v, SETTINGS, 0, 0, &[]);
        v
    }

    /// Feeds `input` whole and in pieces of every size from 1 to 13 bytes (and once split at
    /// every single offset), and checks they all agree.
    fn run_on(host: &str, input: &[u8]) -> Result<Vec<u8>, Refused> {
        let inj = injection();
        let mut whole = H2Requests::new(host, 443, &inj);
        let mut expected = Vec::new();
        let result = whole.feed(input, &mut expected);
        let check = |pieces: Vec<&[u8]>, what: &str| {
            let mut r = H2Requests::new(host, 443, &inj);
            let mut out = Vec::new();
            let mut res = Ok(());
            for chunk in pieces {
                res = r.feed(chunk, &mut out);
                if res.is_err() {
                    break;
                }
            }
            assert_eq!(res, result, "{what}");
            if result.is_ok() {
                assert_eq!(out, expected, "{what}");
            }
        };
        for piece in 1..14 {
            check(input.chunks(piece).collect(), &format!("pieces of {piece}"));
        }
        for at in 0..input.len() {
            let (a, b) = input.split_at(at);
            check(vec![a, b], &format!("split at {at}"));
        }
        result.map(|()| expected)
    }

    fn run(input: &[u8]) -> Result<Vec<u8>, Refused> {
        run_on("api.a.test", input)
    }

    /// A frame as written out: type, flags, stream, payload.
    type Frame = (u8, u8, u32, Vec<u8>);

    fn frames(mut bytes: &[u8]) -> Vec<Frame> {
        bytes = bytes.strip_prefix(PREFACE).unwrap();
        let mut all = Vec::new();
        while !bytes.is_empty() {
            let head = Head::parse(bytes[..9].try_into().unwrap());
            let payload = bytes[9..9 + head.len].to_vec();
            bytes = &bytes[9 + head.len..];
            all.push((head.kind, head.flags, head.stream, payload));
        }
        all
    }

    /// The header lists the server gets, per stream, decoded by a decoder of its own.
    fn requests(out: &[u8]) -> Vec<(u32, Vec<(String, String)>)> {
        let mut decoder = Decoder::new();
        let mut found = Vec::new();
        let mut block = Vec::new();
        for (kind, flags, stream, payload) in frames(out) {
            if kind == HEADERS || kind == CONTINUATION {
                let skip = if flags & PRIORITY != 0 { 5 } else { 0 };
                assert_eq!(flags & PADDED, 0);
                assert!(payload.len() <= MAX_FRAME_OUT);
                block.extend_from_slice(&payload[if kind == HEADERS { skip } else { 0 }..]);
                if flags & END_HEADERS != 0 {
                    let list = decoder.decode(&block).unwrap();
                    let list = list
                        .into_iter()
                        .map(|(n, v)| {
                            (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())
                        })
                        .collect();
                    found.push((stream, list));
                    block.clear();
                }
            }
        }
        found
    }

    fn get(host: &str, extra: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut h: Vec<(Vec<u8>, Vec<u8>)> = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/v1"),
            (":authority", host),
        ]
        .iter()
        .chain(extra)
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        h.shrink_to_fit();
        h
    }

    fn encode(enc: &mut Encoder<'_>, headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        enc.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
    }

    fn value<'x>(list: &'x [(String, String)], name: &str) -> Vec<&'x str> {
        list.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    #[test]
    fn credential_headers_get_the_value_on_every_stream_and_nothing_else_changes() {
        let mut enc = Encoder::new();
        let mut input = start();
        let first = get(
            "api.a.test",
            &[
                ("authorization", "Bearer PH-KEY"),
                ("user-agent", "PH-KEY"),
                ("x-api-key", "PH-OTHER"),
            ],
        );
        headers_frame(&mut input, END_HEADERS, 1, &encode(&mut enc, &first));
        // A DATA frame and a WINDOW_UPDATE pass byte for byte.
        frame(&mut input, DATA, END_STREAM, 1, &[b"x-api-key: PH-KEY"]);
        frame(&mut input, 0x8, 0, 0, &[&[0, 0, 1, 0]]);
        // The same headers again: now indexed from the dynamic table.
        headers_frame(
            &mut input,
            END_HEADERS | END_STREAM,
            3,
            &encode(&mut enc, &first),
        );
        let out = run(&input).unwrap();
        let got = requests(&out);
        assert_eq!(got.len(), 2);
        for (stream, list) in &got {
            assert_eq!(value(list, "authorization"), ["Bearer REAL"], "{stream}");
            assert_eq!(value(list, "user-agent"), ["PH-KEY"]);
            assert_eq!(value(list, "x-api-key"), ["PH-OTHER"]);
            assert_eq!(value(list, ":authority"), ["api.a.test"]);
        }
        let all = frames(&out);
        assert!(all.contains(&(DATA, END_STREAM, 1, b"x-api-key: PH-KEY".to_vec())));
        assert!(all.contains(&(0x8, 0, 0, vec![0, 0, 1, 0])));
        // The flags are kept; the value put in is never indexed, the rest are not indexed.
        assert_eq!(all[4].1, END_HEADERS | END_STREAM);
        let block = &all[1].3;
        let at = block
            .windows(b"authorization".len())
            .position(|w| w == b"authorization")
            .unwrap();
        assert_eq!(block[at - 2], 0x10);
        let inj = injection();
        let mut r = H2Requests::new("api.a.test", 443, &inj);
        r.feed(&input, &mut Vec::new()).unwrap();
        assert_eq!((r.requests, r.last_stream), (2, 3));
        assert_eq!(r.injected, ["KEY".to_string()].into());
    }

    #[test]
    fn rfc7541_huffman_and_dynamic_table_examples_decode_and_check() {
        // RFC 7541 C.4.1 to C.4.3: three requests with Huffman-coded strings, the later ones
        // indexing what the earlier added. Then a literal credential with an indexed name.
        let hex = |s: &str| -> Vec<u8> {
            let s: String = s.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let mut input = start();
        let c41 = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        let c42 = hex("8286 84be 5886 a8eb 1064 9cbf");
        let c43 = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        headers_frame(&mut input, END_HEADERS, 1, &c41);
        headers_frame(&mut input, END_HEADERS, 3, &c42);
        // authorization (static index 23) with a literal value, incremental indexing.
        let mut c43_auth = c43.clone();
        c43_auth.extend_from_slice(&[0x40 | 23, 5]);
        c43_auth.extend_from_slice(b"PH-EX");
        headers_frame(&mut input, END_HEADERS, 5, &c43_auth);
        // The entries added so far, indexed: authorization (62, the newest) and :authority
        // (65, the oldest).
        let mut again = hex("8287 85");
        again.extend([0x80 | 65, 0x80 | 62]);
        headers_frame(&mut input, END_HEADERS, 7, &again);
        let got = requests(&run_on("www.example.com", &input).unwrap());
        let lists: Vec<_> = got.iter().map(|(_, l)| l).collect();
        assert_eq!(value(lists[0], ":authority"), ["www.example.com"]);
        assert_eq!(value(lists[1], "cache-control"), ["no-cache"]);
        assert_eq!(value(lists[2], "custom-key"), ["custom-value"]);
        assert_eq!(value(lists[2], ":path"), ["/index.html"]);
        assert_eq!(value(lists[2], "authorization"), ["EXVAL"]);
        assert_eq!(value(lists[3], "authorization"), ["EXVAL"]);
        // The same stream to another host: the placeholder stays (and the authority is
        // refused there, being www.example.com).
        let refused = run_on("api.a.test", &input).unwrap_err();
        assert!(refused.reason.contains("is not api.a.test"), "{refused:?}");
    }

    #[test]
    fn table_size_updates_are_followed_and_bounded() {
        let mut input = start();
        let mut enc = Encoder::new();
        let h = get("api.a.test", &[("x-api-key", "PH-KEY")]);
        headers_frame(&mut input, END_HEADERS, 1, &encode(&mut enc, &h));
        // A size update to 0 empties the table: the next reference to an entry must fail,
        // as it would in the command's own encoder.
        let mut block = vec![0x20];
        block.extend(encode(&mut enc, &h));
        headers_frame(&mut input, END_HEADERS, 3, &block);
        let err = run(&input).unwrap_err();
        assert_eq!(err.code, COMPRESSION_ERROR, "{err:?}");
        // Size update to 8192 (allowed), then fields: followed.
        let mut input = start();
        let mut block = Vec::new();
        integer(&mut block, 0x20, 5, 8192);
        block.extend(encode(&mut Encoder::new(), &h));
        headers_frame(&mut input, END_HEADERS, 1, &block);
        let got = requests(&run(&input).unwrap());
        assert_eq!(value(&got[0].1, "x-api-key"), ["REAL"]);
        // Over the bound: refused.
        let mut input = start();
        let mut block = Vec::new();
        integer(&mut block, 0x20, 5, MAX_TABLE + 1);
        block.extend(encode(&mut Encoder::new(), &h));
        headers_frame(&mut input, END_HEADERS, 1, &block);
        assert_eq!(run(&input).unwrap_err().code, COMPRESSION_ERROR);
    }

    #[test]
    fn continuation_padding_and_priority_are_read_and_large_blocks_reframed() {
        let mut enc = Encoder::new();
        let long = "v".repeat(20_000);
        let h = get(
            "api.a.test",
            &[("x-long", long.as_str()), ("x-api-key", "PH-KEY")],
        );
        let block = encode(&mut enc, &h);
        // HEADERS (padded, with priority) + two CONTINUATIONs.
        let (a, rest) = block.split_at(10);
        let (b, c) = rest.split_at(rest.len() / 2);
        let mut input = start();
        let prio = [0x80, 0, 0, 0, 15];
        frame(
            &mut input,
            HEADERS,
            PADDED | PRIORITY | END_STREAM,
            1,
            &[&[3], &prio, a, &[0, 0, 0]],
        );
        frame(&mut input, CONTINUATION, 0, 1, &[b]);
        frame(&mut input, CONTINUATION, END_HEADERS, 1, &[c]);
        let out = run(&input).unwrap();
        let all = frames(&out);
        assert_eq!(all[1].0, HEADERS);
        assert_eq!(all[1].1, PRIORITY | END_STREAM);
        assert_eq!(all[1].3[..5], prio);
        assert_eq!(all[1].3.len(), MAX_FRAME_OUT);
        assert_eq!(all[2].0, CONTINUATION);
        assert_eq!(all.last().unwrap().1, END_HEADERS);
        let got = requests(&out);
        assert_eq!(value(&got[0].1, "x-api-key"), ["REAL"]);
        assert_eq!(value(&got[0].1, "x-long"), [long.as_str()]);
        // Padding longer than the frame; a frame in the middle of a header block.
        let mut input = start();
        frame(&mut input, HEADERS, PADDED | END_HEADERS, 1, &[&[9], b"ab"]);
        assert!(run(&input).unwrap_err().reason.contains("padding"));
        let mut input = start();
        frame(&mut input, HEADERS, 0, 1, &[a]);
        frame(&mut input, DATA, 0, 1, &[b"x"]);
        assert!(
            run(&input)
                .unwrap_err()
                .reason
                .contains("inside a header block")
        );
    }

    #[test]
    fn trailers_are_reencoded_without_values() {
        let mut enc = Encoder::new();
        let mut input = start();
        let h = get("api.a.test", &[("x-api-key", "PH-KEY")]);
        headers_frame(&mut input, END_HEADERS, 1, &encode(&mut enc, &h));
        frame(&mut input, DATA, 0, 1, &[b"body"]);
        let t = vec![(b"x-api-key".to_vec(), b"PH-KEY".to_vec())];
        headers_frame(
            &mut input,
            END_HEADERS | END_STREAM,
            1,
            &encode(&mut enc, &t),
        );
        let got = requests(&run(&input).unwrap());
        assert_eq!(value(&got[0].1, "x-api-key"), ["REAL"]);
        assert_eq!(got[1].1, [("x-api-key".into(), "PH-KEY".into())]);
        // Pseudo-headers in trailers: refused.
        let mut enc = Encoder::new();
        let mut input = start();
        headers_frame(&mut input, END_HEADERS, 1, &encode(&mut enc, &h));
        headers_frame(&mut input, END_HEADERS, 1, &encode(&mut enc, &h));
        assert!(run(&input).unwrap_err().reason.contains("trailers"));
    }

    #[test]
    fn fronting_connect_and_malformed_requests_are_refused() {
        let one = |h: Vec<(Vec<u8>, Vec<u8>)>| {
            let mut input = start();
            headers_frame(&mut input, END_HEADERS, 1, &encode(&mut Encoder::new(), &h));
            run(&input)
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(Vec<u8>, Vec<u8>)> {
            list.iter()
                .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect()
        };
        let base = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
        let with = |more: &[(&str, &str)]| {
            let mut l = pairs(&base);
            l.extend(pairs(more));
            l
        };
        for (h, says) in [
            (with(&[(":authority", "evil.test")]), "is not api.a.test"),
            (with(&[(":authority", "api.a.test.evil.test")]), "is not"),
            (with(&[(":authority", "api.a.test:8443")]), "is not"),
            (with(&[(":authority", "user@api.a.test")]), "is not"),
            (
                with(&[(":authority", "api.a.test"), ("host", "evil.test")]),
                "is not",
            ),
            (with(&[("host", "evil.test")]), "is not"),
            (
                with(&[(":authority", "api.a.test"), (":authority", "evil.test")]),
                "repeated",
            ),
            (with(&[]), "without :authority"),
            (
                with(&[("x-a", "b"), (":authority", "api.a.test")]),
                "after a regular",
            ),
            (
                pairs(&[(":method", "CONNECT"), (":authority", "evil.test:443")]),
                "CONNECT",
            ),
            (
                with(&[(":authority", "api.a.test"), (":protocol", "websocket")]),
                ":protocol",
            ),
            (
                pairs(&[
                    (":method", "trace"),
                    (":scheme", "https"),
                    (":path", "/"),
                    (":authority", "api.a.test"),
                ]),
                "answered with the request itself",
            ),
            (
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "https://evil.test/"),
                    (":authority", "api.a.test"),
                ]),
                "origin-form",
            ),
            (
                with(&[(":authority", "api.a.test"), ("x-api-key", "a\r\nb")]),
                "control character",
            ),
        ] {
            let err = one(h.clone()).unwrap_err();
            assert!(err.reason.contains(says), "{h:?}: {err:?}");
        }
        for fine in [
            with(&[(":authority", "API.A.TEST:443")]),
            with(&[("host", "api.a.test.")]),
            pairs(&[
                (":method", "OPTIONS"),
                (":scheme", "https"),
                (":path", "*"),
                (":authority", "api.a.test"),
            ]),
        ] {
            assert!(one(fine.clone()).is_ok(), "{fine:?}");
        }
        // The preface, stream numbers, PUSH_PROMISE, sizes.
        assert!(run(b"GET / HTTP/1.1\r\n\r\n").is_err());
        let mut input = start();
        headers_frame(&mut input, END_HEADERS, 2, &[0x82]);
        assert!(run(&input).unwrap_err().reason.contains("cannot open"));
        let mut input = start();
        frame(&mut input, PUSH_PROMISE, END_HEADERS, 1, &[&[0, 0, 0, 2]]);
        assert!(run(&input).is_err());
        let mut input = start();
        frame(&mut input, CONTINUATION, END_HEADERS, 1, &[&[0x82]]);
        assert!(run(&input).is_err());
        let mut input = start();
        input.extend_from_slice(&[0x01, 0x00, 0x01, HEADERS, 0, 0, 0, 0, 1]);
        assert_eq!(run(&input).unwrap_err().code, ENHANCE_YOUR_CALM);
        // A small block that decodes to a large list (one 4 KiB entry, indexed many times).
        let mut input = start();
        let mut block = pairs(&base);
        block.push((b":authority".to_vec(), b"api.a.test".to_vec()));
        let mut bytes = encode(&mut Encoder::new(), &block);
        bytes.push(0x40);
        integer(&mut bytes, 0, 7, 3);
        bytes.extend_from_slice(b"x-a");
        integer(&mut bytes, 0, 7, 3_900);
        bytes.extend(std::iter::repeat_n(b'v', 3_900));
        bytes.extend(std::iter::repeat_n(0x80 | 62, 20));
        headers_frame(&mut input, END_HEADERS, 1, &bytes);
        let inj = injection();
        let err = H2Requests::new("api.a.test", 443, &inj)
            .feed(&input, &mut Vec::new())
            .unwrap_err();
        assert_eq!(err.code, ENHANCE_YOUR_CALM, "{err:?}");
    }

    #[test]
    fn the_server_side_is_followed_frame_by_frame() {
        let mut bytes = Vec::new();
        frame(&mut bytes, SETTINGS, 0, 0, &[&[0, 5, 0, 0, 0x40, 0]]);
        frame(&mut bytes, DATA, 0, 1, &[b"hello"]);
        for at in 0..=bytes.len() {
            let mut b = Boundaries::default();
            b.advance(&bytes[..at]);
            assert_eq!(
                b.at_boundary(),
                at == 0 || at == 15 || at == bytes.len(),
                "{at}"
            );
            b.advance(&bytes[at..]);
            assert!(b.at_boundary());
        }
        let g = goaway(true, 5, PROTOCOL_ERROR, "no");
        assert_eq!(&g[..9], &[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);
        assert_eq!(
            &g[9..],
            &[
                0, 0, 16, GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, b'j', b'a', b'i', b'l',
                b':', b' ', b'n', b'o'
            ]
        );
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
        let mut enc = Encoder::new();
        let good = encode(&mut enc, &get("api.a.test", &[("x-api-key", "PH-KEY")]));
        for _ in 0..20_000 {
            let mut r = H2Requests::new("api.a.test", 443, &inj);
            let mut out = Vec::new();
            let mut input = start();
            for _ in 0..(next() % 4) {
                let kind = [HEADERS, CONTINUATION, DATA, 0x8][(next() % 4) as usize];
                let flags = (next() % 64) as u8;
                let mut payload = good.clone();
                for _ in 0..(next() % 4) {
                    let at = (next() as usize) % payload.len();
                    payload[at] = next() as u8;
                }
                payload.truncate((next() as usize) % (payload.len() + 1));
                frame(
                    &mut input,
                    kind,
                    flags,
                    1 + 2 * (next() % 3) as u32,
                    &[&payload],
                );
            }
            let _ = r.feed(&input, &mut out);
        }
    }
}
