#!/usr/bin/env python3
"""An HTTPS server on the host's loopback for the attacks in tests/injected_secrets.rs: a model of
the lenient HTTP/1.1 servers real APIs sit behind, each leniency one a server in the wild has:

- TRACE is answered with the request it got, headers included (RFC 9110 9.3.8);
- an HTTP/1.0 request's body is framed by Content-Length alone: HTTP/1.0 has no transfer
  codings, so Transfer-Encoding is ignored (RFC 9112 6.1 calls that framing faulty);
- a chunk-size line ends at CRLF only, and its chunk extension may hold any byte but CR;
- every other request is answered with its path and its body quoted back, as an API's error
  message quotes the input it could not take.

Serves CERT/KEY, prints its port on the first line of stdout, and appends every byte it receives
to LOG, so that a test can see what reached it."""
import socket
import ssl
import sys
import threading

cert, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()


class Conn:
    def __init__(self, tls):
        self.tls = tls
        self.buf = b""

    def fill(self):
        data = self.tls.recv(65536)
        if not data:
            raise EOFError
        with lock, open(log, "ab") as f:
            f.write(data)
        self.buf += data

    def until(self, sep):
        while sep not in self.buf:
            self.fill()
        out, self.buf = self.buf.split(sep, 1)
        return out

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def chunked(conn):
    body = b""
    while True:
        line = conn.until(b"\r\n")
        digits = line.split(b";", 1)[0]
        size = int(digits, 16)
        if size == 0:
            while conn.until(b"\r\n"):
                pass
            return body
        body += conn.take(size)
        if conn.take(2) != b"\r\n":
            raise ValueError("chunk not ended by CRLF")


def serve(sock):
    try:
        conn = Conn(ssl_context.wrap_socket(sock, server_side=True))
        while True:
            head = conn.until(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, path, version = lines[0].split(b" ")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            if method == b"TRACE":
                out = head + b"\r\n\r\n"
            else:
                if version == b"HTTP/1.1" and headers.get(b"transfer-encoding") == b"chunked":
                    body = chunked(conn)
                else:
                    body = conn.take(int(headers.get(b"content-length", b"0")))
                out = b"got " + path + b" body=" + body
            conn.tls.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out
            )
    except (EOFError, OSError, ValueError):
        pass
    finally:
        sock.close()


ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ssl_context.load_cert_chain(cert, key)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
