#!/usr/bin/env python3
"""An HTTPS server on the host's loopback for tests/injected_secrets.rs: serves CERT/KEY, prints
its port on the first line of stdout, and appends one JSON line per request to LOG (the path,
every header as received, and the client's port, so a test can see which requests shared a
connection). It answers every request with 200 and the body "ok <path>"."""
import http.server
import json
import ssl
import sys
import threading

cert, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
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
        out = ("ok " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
