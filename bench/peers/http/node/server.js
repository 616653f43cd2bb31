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
'use strict';

const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');

function usage() {
  process.stderr.write(
      'usage: node server.js --port N --mode hello|static --root DIR ' +
      '[--tls-cert FILE --tls-key FILE]\n');
  process.exit(2);
}

let port = -1;
let mode = '';
let root = '';
let tlsCert = '';
let tlsKey = '';
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index += 2) {
  if (index + 1 >= argv.length) usage();
  const value = argv[index + 1];
  if (argv[index] === '--port') port = Number(value);
  else if (argv[index] === '--mode') mode = value;
  else if (argv[index] === '--root') root = value;
  else if (argv[index] === '--tls-cert') tlsCert = value;
  else if (argv[index] === '--tls-key') tlsKey = value;
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

const handler = mode === 'hello' ? helloHandler : staticHandler;
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
