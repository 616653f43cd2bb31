// Peer: a WebSocket echo server on Node.js with the `ws` package (Debian's node-ws, found through
// NODE_PATH=/usr/share/nodejs, which run.py sets) for suite net's websocket_echo_64c.
//
//   node ws_echo.js --port N [--mode ws]
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening and serves until killed
// or until its standard input reaches end of file. Any path upgrades; every message is sent back
// as it came (binary stays binary, text stays text), the package's documented echo idiom. No
// permessage-deflate (the server's default in ws 8, and the load client does not offer it); ws
// sets TCP_NODELAY on every upgraded socket. A connection that fails is dropped.
'use strict';

const { WebSocketServer } = require('ws');

function usage() {
  process.stderr.write('usage: node ws_echo.js --port N [--mode ws]\n');
  process.exit(2);
}

let port = -1;
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index++) {
  if (argv[index] === '--port' && index + 1 < argv.length) {
    port = Number(argv[++index]);
  } else if (argv[index] === '--mode' && index + 1 < argv.length) {
    if (argv[++index] !== 'ws') usage();
  } else {
    usage();
  }
}
if (!Number.isInteger(port) || port < 0 || port > 65535) usage();

const server = new WebSocketServer({
  host: '127.0.0.1',
  port,
  backlog: 511,
  clientTracking: false,
  perMessageDeflate: false,
});
server.on('connection', (socket) => {
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
  socket.on('error', () => socket.terminate());
});
server.on('error', (error) => {
  process.stderr.write(`node ws_echo.js: ${error.message}\n`);
  process.exit(1);
});
server.on('listening', () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.on('data', () => {});
process.stdin.resume();
