// A loopback HTTPS server for bench/secrets.sh, fast enough not to be what is measured: one
// https.Server per certificate (argv: CERT KEY pairs), each on a port the kernel picks, the
// ports printed on one line. Keep-alive on, no logging.
//   GET /small        a 1-byte body
//   GET /key          the request's x-api-key header, as received (what the proxy put in)
//   GET /bytes/N      N zero bytes, written from one reused 1 MiB buffer as the socket drains
//   PUT|POST /upload  reads the body, answers with its length
'use strict';
const fs = require('fs');
const https = require('https');

const CHUNK = Buffer.alloc(1 << 20);

function handle(req, res) {
    if (req.url === '/small') {
        res.writeHead(200, { 'Content-Length': '1' });
        res.end('x');
        return;
    }
    if (req.url === '/key') {
        const body = `${req.headers['x-api-key'] || ''}\n`;
        res.writeHead(200, { 'Content-Length': String(Buffer.byteLength(body)) });
        res.end(body);
        return;
    }
    const m = /^\/bytes\/(\d+)$/.exec(req.url);
    if (m && req.method === 'GET') {
        let left = Number(m[1]);
        res.writeHead(200, { 'Content-Length': String(left), 'Content-Type': 'application/octet-stream' });
        const pump = () => {
            while (left > 0) {
                const n = Math.min(left, CHUNK.length);
                left -= n;
                if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
                    res.once('drain', pump);
                    return;
                }
            }
            res.end();
        };
        pump();
        return;
    }
    if (req.url === '/upload' && (req.method === 'PUT' || req.method === 'POST')) {
        let got = 0;
        req.on('data', (c) => { got += c.length; });
        req.on('end', () => {
            const body = `${got}\n`;
            res.writeHead(200, { 'Content-Length': String(body.length) });
            res.end(body);
        });
        return;
    }
    res.writeHead(404, { 'Content-Length': '0' });
    res.end();
}

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2 !== 0) {
    console.error('usage: https-server.js CERT KEY [CERT KEY ...]');
    process.exit(2);
}
const ports = [];
let pending = args.length / 2;
for (let i = 0; i < args.length; i += 2) {
    const server = https.createServer(
        { cert: fs.readFileSync(args[i]), key: fs.readFileSync(args[i + 1]) },
        handle,
    );
    server.keepAliveTimeout = 60000;
    server.listen(0, '127.0.0.1', () => {
        ports[i / 2] = server.address().port;
        if (--pending === 0) console.log(ports.join(' '));
    });
}
