-- wrk script for scripts/bench-load.sh: each request takes the next API key from $KEYS_FILE;
-- one request in three creates a link, the others list the first page. Statuses are counted
-- per thread and summed in done(): anything but 200, 201 and 429 is a failure.
local keys = {}
for line in io.lines(os.getenv("KEYS_FILE")) do keys[#keys + 1] = line end

local threads = {}
function setup(thread)
  thread:set("id", #threads)
  threads[#threads + 1] = thread
end

-- Globals, not locals: done() reads them from each thread with thread:get.
n, ok200, ok201, limited, other = 0, 0, 0, 0, 0
function request()
  n = n + 1
  local key = keys[((n * 7 + id) % #keys) + 1]
  local headers = { ["Authorization"] = "Token " .. key }
  if n % 3 == 0 then
    headers["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/v1/external/links/create-link", headers,
      '{"long_url":"https://example.com/load/' .. id .. '/' .. n .. '"}')
  end
  return wrk.format("GET", "/api/v1/external/links?limit=20", headers)
end

function response(status)
  if status == 200 then ok200 = ok200 + 1
  elseif status == 201 then ok201 = ok201 + 1
  elseif status == 429 then limited = limited + 1
  else other = other + 1 end
end

function done(summary, latency)
  local t = { 0, 0, 0, 0 }
  for _, thread in ipairs(threads) do
    t[1] = t[1] + thread:get("ok200"); t[2] = t[2] + thread:get("ok201")
    t[3] = t[3] + thread:get("limited"); t[4] = t[4] + thread:get("other")
  end
  io.write(string.format("STATUSES 200=%d 201=%d 429=%d other=%d\n", t[1], t[2], t[3], t[4]))
  io.write(string.format("LATENCY p50=%.2fms p99=%.2fms max=%.2fms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("RPS %.0f\n", summary.requests / (summary.duration / 1e6)))
end
