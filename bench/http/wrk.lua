-- wrk script of suite http (bench/http/http_load.py runs every row with it):
--
--   WEFT_WRK_CONNECTIONS=C WEFT_WRK_DEPTH=DEPTH wrk -t1 -cC ... -s wrk.lua URL -- DEPTH
--
-- DEPTH > 1 (hello_pipelined: 16): every write on a connection carries DEPTH GET requests of the
-- URL, and the next write goes out once all their responses are in. wrk counts the requests in
-- what request() returns at start (its pipeline depth), so every response is counted; it times
-- each batch, from its write to its last response. DEPTH 1: wrk's own static request (no Lua
-- runs per request).
--
-- At the end, done() prints "weft-p99-us P": the 99th percentile, in us, of wrk's latency
-- distribution with its coordinated-omission correction done right for pipelining. wrk 4.1
-- adds, for every recorded latency n, copies at n - E, n - 2E, ... while above E (n >= 2E),
-- E = run time / (responses / C): the time a connection would take per request at the mean
-- rate, which assumes one request per connection at a time. With DEPTH per write, E comes out
-- DEPTH times too small, the copies land below the smallest recorded latency, and wrk's own
-- percentile scan (which starts at that smallest latency) misses them and prints 0 (seen with
-- beast). So done() undoes wrk's correction, from the top down (copies[n] = original[n + E] +
-- copies[n + E] for n > E; original = recorded - copies), and applies it again with the
-- interval per batch, run time / (responses / DEPTH / C). With DEPTH 1 the two intervals are
-- the same: P is then wrk's own 99% figure, read directly. C and DEPTH come from the environment
-- (WEFT_WRK_CONNECTIONS, WEFT_WRK_DEPTH): done() runs in wrk's main Lua state, where init()
-- and its arguments never ran.
local depth = tonumber(os.getenv("WEFT_WRK_DEPTH") or "1")
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

-- How many entries of the distribution, corrected with interval E, are >= v: each original
-- latency n stands for itself and for its copies n - kE (k >= 1) that are > E (wrk's rule).
local function count_at_least(values, original, interval, v)
  local count = 0
  for index = 1, #values do
    local n = values[index]
    if n >= v then
      local copies = 0
      if interval > 0 then
        copies = math.max(0, math.floor((n - 1) / interval) - 1)
        copies = math.min(copies, math.floor((n - v) / interval))
      end
      count = count + original[n] * (1 + copies)
    end
  end
  return count
end

function done(summary, latency, requests)
  local connections = tonumber(os.getenv("WEFT_WRK_CONNECTIONS") or "")
  if connections == nil then
    io.write("weft-p99-us none (WEFT_WRK_CONNECTIONS not set)\n")
    return
  end
  if depth == 1 then
    -- wrk's correction is right with one request in flight: its own percentile (one pass).
    io.write(string.format("weft-p99-us %d\n", latency:percentile(99)))
    return
  end
  -- latency(i) is wrk's i-th distinct recorded value (from its smallest up) and its count;
  -- wrk finds it by scanning from the smallest, so this loop costs distinct values x range
  -- (a few seconds at most for the batches of the pipelined row). Only those values matter: where nothing was recorded there is neither an original nor a
  -- copy, so the chains n, n + E, n + 2E, ... are followed through recorded values only.
  local values = {}
  local recorded = {}
  for index = 1, #latency do
    local value, count = latency(index)
    values[index] = value
    recorded[value] = count
  end
  local top = latency.max
  -- wrk's interval (one request per connection at a time), then the right one (batches).
  local per_connection = math.floor(summary.requests / connections)
  local wrk_interval = 0
  if per_connection > 0 then
    wrk_interval = math.floor(summary.duration / per_connection)
  end
  local batches = math.floor(summary.requests / depth / connections)
  local interval = 0
  if batches > 0 then
    interval = math.floor(summary.duration / batches)
  end
  local original = {}
  local copies = {}
  local total = 0
  for index = #values, 1, -1 do
    local n = values[index]
    local copied = 0
    local up = n + wrk_interval
    if wrk_interval > 0 and n > wrk_interval and up <= top and recorded[up] ~= nil then
      copied = original[up] + copies[up]
    end
    copies[n] = copied
    original[n] = recorded[n] - copied
  end
  -- wrk's percentile: the smallest v with at least round(0.99 * count + 0.5) entries <= v.
  local count = count_at_least(values, original, interval, 0)
  local rank = math.floor(0.99 * count + 0.5 + 0.5)
  if count == 0 then
    io.write("weft-p99-us none\n")
    return
  end
  local low, high = 0, top
  while low < high do
    local middle = math.floor((low + high) / 2)
    if count - count_at_least(values, original, interval, middle + 1) >= rank then
      high = middle
    else
      low = middle + 1
    end
  end
  io.write(string.format("weft-p99-us %d\n", low))
end
