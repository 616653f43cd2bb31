-- wrk script of suite http (bench/http/http_load.py runs every row with it):
--
--   WEFT_WRK_CONNECTIONS=C wrk -t1 -cC ... -s wrk.lua URL -- DEPTH
--
-- DEPTH > 1 (hello_pipelined: 16): every write on a connection carries DEPTH GET requests of the
-- URL, and the next write goes out once all their responses are in. wrk counts the requests in
-- what request() returns at start (its pipeline depth), so every response is counted; it times
-- each batch, from its write to its last response. DEPTH 1: wrk's own static request (no Lua
-- runs per request).
--
-- At the end, done() prints "weft-p99-us P": the 99th percentile, in us, of the latencies wrk
-- recorded, with wrk's coordinated-omission correction taken out. wrk 4.1 adds, for every
-- latency n at least twice the interval E = run time / (responses / C), a copy at n - E,
-- n - 2E, ... while above E, before it prints or calls done(). It assumes one request per
-- connection at a time: with pipelining E comes out DEPTH times too small, the copies land
-- below the smallest recorded latency, and wrk's own percentile scan (which starts at that
-- smallest latency) never reaches the 99th and prints 0. The correction is undone here from
-- the top down: copies[n] = original[n + E] + copies[n + E] for n > E, original = recorded -
-- copies (copies below the smallest recorded latency are all copies: wrk does not show them);
-- the percentile is then read from the originals. C, the -c given to wrk, comes from the
-- environment: done() runs in wrk's main Lua state, where init() and its arguments never ran.
local depth = 1
local batch

function init(args)
  depth = tonumber(args[1] or "1")
  if depth > 1 then
    local requests = {}
    for index = 1, depth do
      requests[index] = wrk.format(nil)
    end
    batch = table.concat(requests)
    request = function()
      return batch
    end
  end
end

function done(summary, latency, requests)
  -- latency(i) is wrk's i-th distinct recorded value (from its smallest up) and its count.
  local recorded = {}
  for index = 1, #latency do
    local value, count = latency(index)
    recorded[value] = count
  end
  local low, top = latency.min, latency.max
  local connections = tonumber(os.getenv("WEFT_WRK_CONNECTIONS") or "")
  if connections == nil then
    io.write("weft-p99-us none (WEFT_WRK_CONNECTIONS not set)\n")
    return
  end
  local per_connection = math.floor(summary.requests / connections)
  local interval = 0
  if per_connection > 0 then
    interval = math.floor(summary.duration / per_connection)
  end
  local original = {}
  local copies = {}
  local total = 0
  for n = top, low, -1 do
    local copied = 0
    if interval > 0 and n > interval and n + interval <= top then
      copied = original[n + interval] + copies[n + interval]
    end
    copies[n] = copied
    original[n] = (recorded[n] or 0) - copied
    total = total + original[n]
  end
  local rank = math.ceil(total * 0.99)
  local seen = 0
  for n = low, top do
    seen = seen + original[n]
    if rank > 0 and seen >= rank then
      io.write(string.format("weft-p99-us %d\n", n))
      return
    end
  end
  io.write("weft-p99-us none\n")
end
