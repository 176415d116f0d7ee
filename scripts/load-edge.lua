-- wrk script for scripts/bench-load.sh's worker runs: counts 302s (the redirect) and anything else, by status.
local threads = {}
function setup(thread) threads[#threads + 1] = thread end
-- Globals, not locals: done() reads them from each thread with thread:get.
found, other, others, first_body = 0, 0, "", ""
function response(status, headers, body)
  if status == 302 then
    found = found + 1
  else
    other = other + 1
    -- Keep the first few unexpected statuses (as text: thread:get copies strings, not tables).
    if other <= 10 then others = others .. " " .. status end
    if other == 1 and body then first_body = string.sub(body, 1, 300) end
  end
end
function done(summary, latency)
  local f, o, list, bodies = 0, 0, "", ""
  for _, thread in ipairs(threads) do
    f = f + thread:get("found"); o = o + thread:get("other"); list = list .. thread:get("others")
    local b = thread:get("first_body")
    if b ~= "" then bodies = bodies .. " | " .. string.gsub(b, "\n", " ") end
  end
  io.write(string.format("STATUSES 302=%d other=%d\n", f, o))
  if o > 0 then io.write("OTHER STATUSES" .. list .. " BODY" .. bodies .. "\n") end
  io.write(string.format("LATENCY p50=%.2fms p99=%.2fms max=%.2fms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("RPS %.0f\n", summary.requests / (summary.duration / 1e6)))
end
