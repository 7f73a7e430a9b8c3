#!/usr/bin/env python3
"""A hostile command's requests on the connection jail's proxy intercepts for a secret's host
(tests/injected_secrets.rs): `secret_attack.py ATTACK HOST PORT` opens a CONNECT tunnel through
HTTPS_PROXY, speaks TLS trusting SSL_CERT_FILE (jail's bundle, the run CA included), sends the
requests named ATTACK with the placeholder in $K, and prints everything that comes back.

Attacks (each against a leniency tests/helpers/https_lenient.py models):
- trace: a TRACE with the placeholder in Authorization; the server echoes the request.
- chunk-ext-lf: a chunk-size line ended by a bare LF. The proxy read it as the line's end, a
  server that ends these lines at CRLF only reads the next bytes as a chunk extension, so the two
  disagree on where the body ends: the server takes a request hidden in the body for a real one,
  whose Content-Length swallows the next request the proxy puts the value into, and quotes it
  back."""
import os
import socket
import ssl
import sys
from urllib.parse import urlsplit

attack, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
placeholder = os.environ["K"].encode()
h = host.encode()


def head(line, *headers):
    return line + b"\r\nHost: " + h + b"\r\n" + b"".join(x + b"\r\n" for x in headers) + b"\r\n"


with_value = head(b"GET /three HTTP/1.1", b"Authorization: Bearer " + placeholder)
padding = head(b"GET /four HTTP/1.1", b"X-Pad: " + b"p" * 400)

if attack == "trace":
    stream = head(b"TRACE /trace HTTP/1.1", b"Authorization: Bearer " + placeholder)
elif attack == "chunk-ext-lf":
    # What the server reads as a request of its own, after the body it sees ends.
    swallow = 2 + 5 + len(with_value) + 200
    hidden = b"\r\n0\r\n\r\n" + head(b"POST /two HTTP/1.1", b"Content-Length: %d" % swallow)
    size = b"%x" % len(hidden)
    k = len(size) + 2
    data = b"y" * k + b"\r\n" + b"z" * (64 - k - 2)
    stream = (
        head(b"POST /one HTTP/1.1", b"Transfer-Encoding: chunked")
        + b"40;\n" + data + b"\r\n"
        + size + b"\r\n" + hidden + b"\r\n"
        + b"0\r\n\r\n"
        + with_value
        + padding
    )
else:
    sys.exit("unknown attack " + attack)

proxy = urlsplit(os.environ["HTTPS_PROXY"])
sock = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
sock.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (h, port, h, port))
reply = b""
while b"\r\n\r\n" not in reply:
    got = sock.recv(1)
    if not got:
        sys.exit("proxy closed: %r" % reply)
    reply += got
tls = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(
    sock, server_hostname=host
)
tls.sendall(stream)
tls.settimeout(5)
out = b""
try:
    while True:
        got = tls.recv(65536)
        if not got:
            break
        out += got
except (OSError, ssl.SSLError):
    pass
print(out.decode("latin-1"))
