-- wrk script for scripts/bench-load.sh's worker run: counts 302s (the redirect) and anything else.
local threads = {}
function setup(thread) threads[#threads + 1] = thread end
-- Globals, not locals: done() reads them from each thread with thread:get.
found, other = 0, 0
function response(status)
  if status == 302 then found = found + 1 else other = other + 1 end
end
function done(summary, latency)
  local f, o = 0, 0
  for _, thread in ipairs(threads) do f = f + thread:get("found"); o = o + thread:get("other") end
  io.write(string.format("STATUSES 302=%d other=%d\n", f, o))
  io.write(string.format("LATENCY p50=%.2fms p99=%.2fms max=%.2fms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("RPS %.0f\n", summary.requests / (summary.duration / 1e6)))
end
