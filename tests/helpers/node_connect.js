// For tests/injected_secrets.rs: an HTTPS request the way many Node clients make one through a
// proxy: a CONNECT of its own to HTTPS_PROXY, then tls.connect over that socket with Node's
// default trust (its built-in roots plus NODE_EXTRA_CA_CERTS). Usage: node_connect.js HOST PORT
// PATH; sends the header x-api-key: $K and prints the response body.
const net = require("net");
const tls = require("tls");
const [host, port, path] = process.argv.slice(2);
const proxy = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
const sock = net.connect(Number(proxy.port), proxy.hostname, () => {
  sock.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
});
let head = "";
function onData(chunk) {
  head += chunk.toString("latin1");
  if (!head.includes("\r\n\r\n")) return;
  sock.removeListener("data", onData);
  if (!/^HTTP\/1\.[01] 200/.test(head)) {
    console.error("CONNECT refused: " + head.split("\r\n")[0]);
    process.exit(2);
  }
  const t = tls.connect({ socket: sock, servername: host }, () => {
    t.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nx-api-key: ${process.env.K}\r\nConnection: close\r\n\r\n`);
  });
  let body = "";
  t.on("data", (d) => (body += d.toString()));
  t.on("end", () => {
    console.log(body.split("\r\n\r\n").slice(1).join("\r\n\r\n"));
  });
  t.on("error", (e) => {
    console.error("tls: " + e.code);
    process.exit(3);
  });
}
sock.on("data", onData);
sock.on("error", (e) => {
  console.error("proxy: " + e.message);
  process.exit(4);
});
