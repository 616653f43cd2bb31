// Peer: Node.js timers and thread pool for the io suite (self-measuring; bench/run.py pins it
// like every program of the suite: timers to one core, threadpool_roundtrip to two).
//
//   node timers.js [--smoke] [--only timers|threadpool_roundtrip]
//
// timers: N setTimeout calls (10M; 100k with --smoke) in libuv's million_timers shape: timer i
//   fires after 1 + floor(i*10/N) ms. The callback (one shared function) counts; the last one
//   takes the time. Result: ms from before the first setTimeout to the last firing. (Node keeps
//   one list per distinct duration, so starting a timer is a list append; the objects are
//   garbage-collected JavaScript objects, which is part of Node's cost.)
// threadpool_roundtrip: JavaScript cannot queue an arbitrary job on Node's libuv thread pool;
//   the closest to an empty job is crypto.randomFill of 1 byte (a RandomBytesJob that runs on
//   the pool, uv_queue_work underneath, and calls back on the loop). One job in flight;
//   1,000 warm-up round trips, then N (100k; 2k with --smoke). Result: µs per round trip,
//   including Node's JavaScript/C++ crossing, which is part of Node's cost.
'use strict';

const crypto = require('crypto');

let smoke = false;
let only = null;
const argv = process.argv.slice(2);
for (let index = 0; index < argv.length; index++) {
  if (argv[index] === '--smoke') {
    smoke = true;
  } else if (argv[index] === '--only' && index + 1 < argv.length) {
    only = argv[++index].split(',');
  } else {
    process.stderr.write('usage: node timers.js [--smoke] [--only timers|threadpool_roundtrip]\n');
    process.exit(2);
  }
}
const wants = (name) => only === null || only.includes(name);

function report(name, unit, value) {
  process.stdout.write(`RESULT ${name} ${unit} ${value.toFixed(3)}\n`);
}

function timers(next) {
  const count = smoke ? 100000 : 10000000;
  const spreadMs = 10;
  let fired = 0;
  let start = 0n;
  const onTimer = () => {
    if (++fired === count) {
      report('timers', 'ms', Number(process.hrtime.bigint() - start) / 1e6);
      next();
    }
  };
  start = process.hrtime.bigint();
  for (let index = 0; index < count; index++) {
    setTimeout(onTimer, 1 + Math.floor((index * spreadMs) / count));
  }
}

function threadpoolRoundtrip(next) {
  const warmup = 1000;
  const timed = smoke ? 2000 : 100000;
  const buffer = Buffer.alloc(1);
  let left = warmup + timed;
  let start = 0n;
  const onDone = (error) => {
    if (error) throw error;
    if (left === timed) start = process.hrtime.bigint();
    if (left-- === 0) {
      report('threadpool_roundtrip', 'us', Number(process.hrtime.bigint() - start) / 1e3 / timed);
      next();
      return;
    }
    crypto.randomFill(buffer, onDone);
  };
  left--;
  crypto.randomFill(buffer, onDone);
}

const steps = [];
if (wants('timers')) steps.push(timers);
if (wants('threadpool_roundtrip')) steps.push(threadpoolRoundtrip);
const runNext = () => {
  const step = steps.shift();
  if (step) step(runNext);
};
runNext();
