-- wrk script for suite http's hello_pipelined row (bench/http/http_load.py runs it): every
-- write on a connection carries `depth` GET requests of the URL (the first script argument,
-- after wrk's `--`; default 16), and the next write goes out once all their responses are in.
-- wrk counts the requests in what request() returns at start (its pipeline depth), so every
-- response is counted and timed.
local depth = 16
local batch

function init(args)
  if args[1] ~= nil then
    depth = tonumber(args[1])
  end
  local requests = {}
  for index = 1, depth do
    requests[index] = wrk.format(nil)
  end
  batch = table.concat(requests)
end

function request()
  return batch
end
