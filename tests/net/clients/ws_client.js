// ws_client.js: a scripted WebSocket echo session with Node's `ws` package (Debian node-ws,
// found through NODE_PATH=/usr/share/nodejs), a client no one in weft wrote, pointed at a
// server that echoes every message back as it came (text as text, binary as binary).
//
// Usage: NODE_PATH=/usr/share/nodejs node ws_client.js [--deflate] ws://host:port/path
//
// Checks, in order: text, binary, an empty message, a fragmented text message (three frames:
// ws sends each send() with {fin: false} as one non-final frame and the next ones as
// continuations), a 1 MiB binary message, a ping whose pong must carry the same payload, and a
// close with code 4000 and a reason that the server must echo. Prints "ok <check>" per check
// and exits 0; on the first failure prints "FAIL <check>: <why>" and exits 1. Compression is
// off unless --deflate is given: then ws offers permessage-deflate as it does by default (with
// client_max_window_bits), compresses every message whatever its size (threshold 0) and with
// context takeover unless the server's answer forbids it, and the first check, "deflate", is
// that the server agreed (ws's socket.extensions).
'use strict';

const WebSocket = require('ws');

const deflate = process.argv.length === 4 && process.argv[2] === '--deflate';
if (process.argv.length !== 3 && !deflate) {
  console.log('usage: node ws_client.js [--deflate] ws://host:port/path');
  process.exit(2);
}
const url = process.argv[process.argv.length - 1];

let current = 'handshake';
function fail(why) {
  console.log(`FAIL ${current}: ${why}`);
  process.exit(1);
}
function ok() {
  console.log(`ok ${current}`);
}
setTimeout(() => fail('no progress within 10 s'), 10000).unref();

const socket = new WebSocket(url, {
  perMessageDeflate: deflate ? { threshold: 0, clientMaxWindowBits: true } : false,
});
const inbox = [];
let waiting = null;
socket.on('message', (data, isBinary) => {
  inbox.push({ data, isBinary });
  if (waiting) {
    const wake = waiting;
    waiting = null;
    wake();
  }
});
socket.on('error', (error) => fail(`socket error: ${error.message}`));
socket.on('unexpected-response', (request, response) =>
  fail(`handshake answered ${response.statusCode}`));

function nextMessage() {
  if (inbox.length > 0) {
    return Promise.resolve(inbox.shift());
  }
  return new Promise((resolve) => {
    waiting = () => resolve(inbox.shift());
  });
}

async function expectEcho(isBinary, payload) {
  const message = await nextMessage();
  if (message.isBinary !== isBinary) {
    fail(`got a ${message.isBinary ? 'binary' : 'text'} message`);
  }
  if (!Buffer.from(payload).equals(message.data)) {
    fail(`echo of ${message.data.length} bytes differs from the ${Buffer.from(payload).length} sent`);
  }
  ok();
}

async function session() {
  await new Promise((resolve) => socket.once('open', resolve));
  ok();

  if (deflate) {
    current = 'deflate';
    if (!socket.extensions.startsWith('permessage-deflate')) {
      fail(`the server's answer named '${socket.extensions}', not permessage-deflate`);
    }
    ok();
  }

  current = 'text';
  socket.send('hello from node ws');
  await expectEcho(false, 'hello from node ws');

  current = 'binary';
  const binary = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) binary[i] = i;
  socket.send(binary, { binary: true });
  await expectEcho(true, binary);

  current = 'empty';
  socket.send('');
  await expectEcho(false, '');

  current = 'fragmented';
  // The first piece ends inside "€" (3 bytes): each fragment alone is not valid UTF-8.
  const euro = Buffer.from('price: €', 'utf8');
  socket.send(euro.subarray(0, euro.length - 1), { binary: false, fin: false });
  socket.send(euro.subarray(euro.length - 1), { binary: false, fin: false });
  socket.send(' 42', { binary: false, fin: true });
  await expectEcho(false, 'price: € 42');

  current = '1MiB';
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 131 + (i >> 9)) & 0xff;
  socket.send(big, { binary: true });
  await expectEcho(true, big);

  current = 'ping';
  const pong = new Promise((resolve) => socket.once('pong', resolve));
  socket.ping(Buffer.from('ping-payload'));
  const payload = await pong;
  if (payload.toString() !== 'ping-payload') {
    fail(`pong payload '${payload}', want 'ping-payload'`);
  }
  ok();

  current = 'close';
  const closed = new Promise((resolve) =>
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  socket.close(4000, 'bye from node');
  const { code, reason } = await closed;
  if (code !== 4000 || reason !== 'bye from node') {
    fail(`echo carried ${code} '${reason}', want 4000 'bye from node'`);
  }
  ok();
  process.exit(0);
}

session().catch((error) => fail(error.stack));
