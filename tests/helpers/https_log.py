#!/usr/bin/env python3
"""An HTTPS server on the host's loopback for tests/injected_secrets.rs: serves CERT/KEY, prints
its port on the first line of stdout, and appends one JSON line per request to LOG (the path,
every header as received, and the client's port, so a test can see which requests shared a
connection). It answers every request with 200 and the body "ok <path>", except:
- /slow...: waits a second before reading the body (the client's bytes pile up on the way), and
  logs the body's length instead of the body;
- GET /zeros/N: N zero bytes."""
import http.server
import json
import ssl
import sys
import threading
import time

cert, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.startswith("/slow"):
            time.sleep(1)
            got = 0
            while got < length:
                chunk = self.rfile.read(min(length - got, 1 << 20))
                if not chunk:
                    break
                got += len(chunk)
            body = f"{got} bytes"
        else:
            body = self.rfile.read(length).decode("latin-1") if length else ""
        entry = {
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body,
            "peer": self.client_address[1],
        }
        with lock, open(log, "a") as f:
            f.write(json.dumps(entry) + "\n")
        if self.command == "GET" and self.path.startswith("/zeros/"):
            out = bytes(int(self.path[len("/zeros/"):]))
        else:
            out = ("ok " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = answer

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
