// Peer: Node.js `http` server for suite http (one thread, libuv underneath, llhttp parsing,
// JavaScript callbacks on top).
//
//   node server.js --port N --mode hello|static --root DIR [--tls-cert FILE --tls-key FILE]
//
// Contract (READY line, stdin EOF): bench/http/README.md. http.createServer on 127.0.0.1:N
// (backlog 4096), keep-alive on (Node's default), TCP_NODELAY (Node's default for http).
// hello: writeHead(200, text/plain, Content-Length 6) and end('hello\n'). static: GET /4k.txt
// is read from DIR with fs.readFile per request (Node's idiom without a framework; the read
// runs on libuv's thread pool, whose threads' CPU time counts too) and sent with its length;
// any other path is 404. Node answers pipelined requests one at a time, in order.
//
// With --tls-cert and --tls-key (PEM files; suite http's https_keepalive row) the server is
// https.createServer with that certificate and key and Node's TLS defaults otherwise (TLS 1.2
// and 1.3, its default cipher list, the client's order of preference, session tickets), the
// same handlers and settings.
//
// With --upstream HOST:PORT (suite http's proxy_keepalive row) every request goes to
// http://HOST:PORT instead, the reverse proxy a Node user writes without a framework (what the
// http-proxy package does underneath): http.request with the method, the path and the headers
// (less the hop-by-hop Connection, X-Forwarded-For and X-Forwarded-Proto added), through an
// http.Agent with keepAlive and up to 64 sockets (the default Agent closes each upstream
// connection after its response); the request body piped up, the response's status, headers
// and body piped down; an upstream error is a 502.
'use strict';

const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');

function usage() {
  process.stderr.write(
      'usage: node server.js --port N --mode hello|static --root DIR ' +
      '[--tls-cert FILE --tls-key FILE] [--upstream HOST:PORT]\n');
  process.exit(2);
}

let port = -1;
let mode = '';
let root = '';
let tlsCert = '';
let tlsKey = '';
let upstream = '';
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index += 2) {
  if (index + 1 >= argv.length) usage();
  const value = argv[index + 1];
  if (argv[index] === '--port') port = Number(value);
  else if (argv[index] === '--mode') mode = value;
  else if (argv[index] === '--root') root = value;
  else if (argv[index] === '--tls-cert') tlsCert = value;
  else if (argv[index] === '--tls-key') tlsKey = value;
  else if (argv[index] === '--upstream') upstream = value;
  else usage();
}
if (!Number.isInteger(port) || port < 0 || port > 65535) usage();
if (mode !== 'hello' && mode !== 'static') usage();
if (mode === 'static' && root === '') usage();
if ((tlsCert === '') !== (tlsKey === '')) usage();

const hello = Buffer.from('hello\n');
const staticPath = path.join(root, '4k.txt');

function helloHandler(request, response) {
  response.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': hello.length});
  response.end(hello);
}

function staticHandler(request, response) {
  if (request.url !== '/4k.txt') {
    response.writeHead(404, {'Content-Type': 'text/plain', 'Content-Length': 10});
    response.end('not found\n');
    return;
  }
  fs.readFile(staticPath, (error, body) => {
    if (error) {
      response.writeHead(500, {'Content-Type': 'text/plain', 'Content-Length': 6});
      response.end('error\n');
      return;
    }
    response.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': body.length});
    response.end(body);
  });
}

function proxyHandler(agent, host, upstreamPort) {
  return (request, response) => {
    const headers = Object.assign({}, request.headers);
    delete headers.connection;
    const peer = request.socket.remoteAddress;
    headers['x-forwarded-for'] =
        headers['x-forwarded-for'] ? `${headers['x-forwarded-for']}, ${peer}` : peer;
    headers['x-forwarded-proto'] = 'http';
    const up = http.request(
        {agent, host, port: upstreamPort, method: request.method, path: request.url, headers},
        (answer) => {
          response.writeHead(answer.statusCode, answer.headers);
          answer.pipe(response);
        });
    up.on('error', () => {
      if (!response.headersSent) {
        response.writeHead(502, {'Content-Type': 'text/plain', 'Content-Length': 12});
        response.end('bad gateway\n');
      } else {
        response.destroy();
      }
    });
    request.pipe(up);
  };
}

let handler = mode === 'hello' ? helloHandler : staticHandler;
if (upstream !== '') {
  const separator = upstream.lastIndexOf(':');
  if (separator <= 0) usage();
  const agent = new http.Agent({keepAlive: true, maxSockets: 64, maxFreeSockets: 64});
  const upstreamPort = Number(upstream.slice(separator + 1));
  handler = proxyHandler(agent, upstream.slice(0, separator), upstreamPort);
}
const server = tlsCert === '' ?
    http.createServer(handler) :
    https.createServer({cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey)}, handler);
server.keepAliveTimeout = 300 * 1000;
server.listen({host: '127.0.0.1', port, backlog: 4096}, () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});

// Standard input's end stops the server.
process.stdin.on('data', () => {});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
