// Peer: Node.js `net` server for the io suite (one thread, libuv underneath, JavaScript
// callbacks on top).
//
//   node echo.js --port N [--mode echo|sink]
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening and serves until
// killed or until its standard input reaches end of file. TCP_NODELAY on every connection.
// echo: every 'data' chunk is written straight back; when write() reports a full buffer the
//   socket pauses until 'drain' (Node's backpressure idiom; socket.pipe(socket) does the same
//   with more machinery). At end of stream the connection is ended.
// sink: 'data' chunks are counted and dropped (the total goes to stderr at exit).
'use strict';

const net = require('net');

function usage() {
  process.stderr.write('usage: node echo.js --port N [--mode echo|sink]\n');
  process.exit(2);
}

let port = -1;
let mode = 'echo';
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index++) {
  if (argv[index] === '--port' && index + 1 < argv.length) {
    port = Number(argv[++index]);
  } else if (argv[index] === '--mode' && index + 1 < argv.length) {
    mode = argv[++index];
    if (mode !== 'echo' && mode !== 'sink') usage();
  } else {
    usage();
  }
}
if (!Number.isInteger(port) || port < 0 || port > 65535) usage();

let sunk = 0;

function echo(socket) {
  socket.setNoDelay(true);
  socket.on('data', (chunk) => {
    if (!socket.write(chunk)) {
      socket.pause();
      socket.once('drain', () => socket.resume());
    }
  });
  socket.on('end', () => socket.end());
  socket.on('error', () => socket.destroy());
}

function sink(socket) {
  socket.setNoDelay(true);
  socket.on('data', (chunk) => {
    sunk += chunk.length;
  });
  socket.on('end', () => socket.end());
  socket.on('error', () => socket.destroy());
}

function finish() {
  if (mode === 'sink') process.stderr.write(`node echo.js: sink read ${sunk} bytes\n`);
  process.exit(0);
}

const server = net.createServer(mode === 'sink' ? sink : echo);
server.on('error', (error) => {
  process.stderr.write(`node echo.js: ${error.message}\n`);
  process.exit(1);
});
server.listen({ host: '127.0.0.1', port, backlog: 511 }, () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
process.stdin.on('data', () => {});
process.stdin.resume();
