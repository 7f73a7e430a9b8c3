// For tests/injected_secrets.rs: HTTP/2 requests the way Node's http2 client makes them through
// a proxy: a CONNECT of its own to HTTPS_PROXY, TLS over that socket offering ALPN h2 alone,
// then one session with every PATH as a stream of its own, all started at once (concurrent
// streams on one connection). Each sends x-api-key: $K and authorization: Bearer $K. Prints the
// protocol ALPN settled on and each response body; on failure "failed WHERE: CODE", exit 3.
// Usage: node_h2.js HOST PORT PATH...
const net = require("net");
const tls = require("tls");
const http2 = require("http2");
const [host, port, ...paths] = process.argv.slice(2);
const proxy = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
function fail(where, e) {
  console.log(`failed ${where}: ${(e && (e.code || e.message)) || e}`);
  process.exit(3);
}
const sock = net.connect(Number(proxy.port), proxy.hostname, () => {
  sock.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
});
sock.on("error", (e) => fail("proxy", e));
let head = "";
function onData(chunk) {
  head += chunk.toString("latin1");
  if (!head.includes("\r\n\r\n")) return;
  sock.removeListener("data", onData);
  if (!/^HTTP\/1\.[01] 200/.test(head)) fail("connect", head.split("\r\n")[0]);
  const t = tls.connect({ socket: sock, servername: host, ALPNProtocols: ["h2"] });
  t.on("error", (e) => fail("tls", e));
  t.on("secureConnect", () => {
    console.log("alpn=" + t.alpnProtocol);
    const session = http2.connect(`https://${host}:${port}`, { createConnection: () => t });
    session.on("error", (e) => fail("session", e));
    let left = paths.length;
    for (const path of paths) {
      const req = session.request({
        ":path": path,
        "x-api-key": process.env.K,
        authorization: "Bearer " + process.env.K,
      });
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("error", (e) => fail("stream", e));
      req.on("end", () => {
        console.log(body);
        if (--left === 0) session.close();
      });
      req.end();
    }
  });
}
sock.on("data", onData);
