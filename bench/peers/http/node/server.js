// Peer: Node.js `http` server for suite http (one thread, libuv underneath, llhttp parsing,
// JavaScript callbacks on top).
//
//   node server.js --port N --mode hello|static --root DIR
//
// Contract (READY line, stdin EOF): bench/http/README.md. http.createServer on 127.0.0.1:N
// (backlog 4096), keep-alive on (Node's default), TCP_NODELAY (Node's default for http).
// hello: writeHead(200, text/plain, Content-Length 6) and end('hello\n'). static: GET /4k.txt
// is read from DIR with fs.readFile per request (Node's idiom without a framework; the read
// runs on libuv's thread pool, whose threads' CPU time counts too) and sent with its length;
// any other path is 404. Node answers pipelined requests one at a time, in order.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

function usage() {
  process.stderr.write('usage: node server.js --port N --mode hello|static --root DIR\n');
  process.exit(2);
}

let port = -1;
let mode = '';
let root = '';
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index += 2) {
  if (index + 1 >= argv.length) usage();
  const value = argv[index + 1];
  if (argv[index] === '--port') port = Number(value);
  else if (argv[index] === '--mode') mode = value;
  else if (argv[index] === '--root') root = value;
  else usage();
}
if (!Number.isInteger(port) || port < 0 || port > 65535) usage();
if (mode !== 'hello' && mode !== 'static') usage();
if (mode === 'static' && root === '') usage();

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

const server = http.createServer(mode === 'hello' ? helloHandler : staticHandler);
server.keepAliveTimeout = 300 * 1000;
server.listen({host: '127.0.0.1', port, backlog: 4096}, () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});

// Standard input's end stops the server.
process.stdin.on('data', () => {});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
