// ws_server.js: a scripted WebSocket server with Node's `ws` package (Debian node-ws, found through
// NODE_PATH=/usr/share/nodejs), a server no one in weft wrote, for weft's WebSocket client
// (tests/net/websocket_client_test.cpp).
//
// Usage: NODE_PATH=/usr/share/nodejs node ws_server.js [--deflate]
//
// Listens on 127.0.0.1 on a port the kernel picks and prints "port N". Takes one connection on
// /echo, selecting the first subprotocol the client offers, and:
//   - pings it at once with the payload "are-you-there" and prints "ok pong" when the pong
//     carries that payload back;
//   - answers the text message "fragments" with one text message sent as two frames
//     ("frag" non-final, then "ments");
//   - answers the text message "close-me" with a close frame, code 4002 and reason "server-bye";
//   - echoes every other message as it came (text as text, binary as binary);
//   - prints "ok masked" once, for the first message: ws itself refuses an unmasked client frame
//     (close code 1002), so a message that arrives was masked;
//   - when the conversation ends prints "closed CODE REASON" (the code and reason of the close
//     frame this side received, or 1006 when the connection dropped without one) and exits 0.
// Exits 1 with "FAIL ..." when nothing happens within 10 s. Compression is off unless --deflate
// is given: then ws accepts a permessage-deflate offer with its own defaults (context takeover
// both ways unless the offer asks otherwise), compresses every message (threshold 0), and prints
// "deflate EXTENSIONS" (the names of the extensions agreed) before "ok masked".
'use strict';

const { WebSocketServer } = require('ws');

setTimeout(() => {
  console.log('FAIL no end within 10 s');
  process.exit(1);
}, 10000).unref();

const deflate = process.argv[2] === '--deflate';
const server = new WebSocketServer({
  host: '127.0.0.1',
  port: 0,
  path: '/echo',
  perMessageDeflate: deflate ? { threshold: 0 } : false,
  handleProtocols: (protocols) => (protocols.size > 0 ? protocols.values().next().value : false),
});
server.on('listening', () => console.log(`port ${server.address().port}`));
server.on('connection', (socket) => {
  let masked = false;
  socket.on('pong', (data) => {
    if (data.toString() === 'are-you-there') console.log('ok pong');
  });
  socket.on('message', (data, isBinary) => {
    if (!masked) {
      masked = true;
      if (deflate) console.log(`deflate ${socket.extensions}`);
      console.log('ok masked');
    }
    if (!isBinary && data.toString() === 'fragments') {
      socket.send('frag', { fin: false });
      socket.send('ments', { fin: true });
    } else if (!isBinary && data.toString() === 'close-me') {
      socket.close(4002, 'server-bye');
    } else {
      socket.send(data, { binary: isBinary });
    }
  });
  socket.on('close', (code, reason) => {
    console.log(`closed ${code} ${reason.toString()}`);
    server.close();
    process.exit(0);
  });
  socket.ping('are-you-there');
});
