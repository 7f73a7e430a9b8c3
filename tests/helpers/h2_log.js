// An HTTP/2 server on the host's loopback for tests/injected_secrets.rs, the counterpart of
// https_log.py: serves CERT/KEY (ALPN h2 only, or h2 and http/1.1 with MODE "both"), prints its
// port on the first line of stdout, and appends one JSON line per request to LOG: the method,
// the path, every header as received (pseudo-headers included), the HTTP version and the
// client's port (which requests shared a connection). Answers 200 with the body "ok <path>".
// Usage: node h2_log.js CERT KEY LOG [both]
const fs = require("fs");
const http2 = require("http2");
const [cert, key, log, mode] = process.argv.slice(2);
const server = http2.createSecureServer(
  { cert: fs.readFileSync(cert), key: fs.readFileSync(key), allowHTTP1: mode === "both" },
  (req, res) => {
    let body = "";
    req.on("data", (d) => (body += d.toString("latin1")));
    req.on("end", () => {
      const headers = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
      }
      const socket = req.httpVersion === "2.0" ? req.stream.session.socket : req.socket;
      const entry = {
        method: req.method,
        path: req.url,
        headers,
        body,
        peer: socket.remotePort,
        version: req.httpVersion,
      };
      fs.appendFileSync(log, JSON.stringify(entry) + "\n");
      const out = "ok " + req.url;
      res.writeHead(200, { "content-length": Buffer.byteLength(out) });
      res.end(out);
    });
  },
);
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
