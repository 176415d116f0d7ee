#!/usr/bin/env bash
# Edge worker throughput in local workerd (Miniflare directly; `wrangler dev` adds a proxy that halves
# throughput), with wrk on loopback, against a floor worker that answers every request with a fixed 302, all in
# one run. Also reports the wasm size, raw and gzipped. Results go to stdout as a Markdown table
# (copied into BENCHMARKS.md by hand).
#
# Usage: scripts/bench-edge.sh            (after scripts/install-edge-toolchain.sh and `apt-get install wrk`)
# Environment: DURATION (seconds per measurement, default 10), ROUNDS (default 3), CONNECTIONS (default 32),
#              THREADS (default 1),
#              SKIP_BUILD=1 to reuse edge-worker/build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
HOST=bench.example.com
GROUP=cccccccc-0000-4000-8000-000000000001
KEY=QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI # 32 bytes of 0x42, base64url
SECRET=bench-secret
node="$root/node_modules/.bin/node"
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  WRANGLER_HIDE_BANNER=true

command -v wrk >/dev/null || { echo "bench-edge: wrk is missing (apt-get install -y wrk)" >&2; exit 1; }
[ "${SKIP_BUILD:-}" = 1 ] || bash scripts/build-edge-worker.sh >&2

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# Starts serve-worker.mjs with the given arguments (in this shell, so its pid is ours to stop), waits with a
# deadline for its readiness line, and sets $url and $pid.
start() {
  local out
  out=$(mktemp)
  SYNC_SECRET=$SECRET "$node" tests/support/serve-worker.mjs "$@" >"$out" </dev/null &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 240); do
    if grep -q '"url"' "$out"; then
      url=$(sed -e 's/.*"url":"\([^"]*\)".*/\1/' "$out")
      url=${url%/}
      return
    fi
    sleep 0.25
  done
  echo "bench-edge: worker did not start" >&2
  exit 1
}

# Runs wrk against URL with the Host header; prints "rps median_ms".
measure() {
  local url=$1 out
  wrk -t1 -c"$CONNECTIONS" -d2s -H "Host: $HOST" "$url" >/dev/null # warm-up: JIT, caches, connections
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Host: $HOST" "$url")
  local rps median
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  median=$(echo "$out" | awk '$1 == "50%" {print $2}')
  echo "$rps $median"
}

to_ms() { # wrk prints 1.23ms / 456.00us / 1.02s
  awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
                         else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
                         else { sub(/s$/, "", v); printf "%.2f", v * 1000 } }'
}

start --floor
floor_url=$url
start
edge_url=$url
curl -sf -X POST "$edge_url/__shortlink/sync" -H "Host: $HOST" -H "Authorization: Bearer $SECRET" \
  -H 'Content-Type: application/json' --data-binary @- >/dev/null <<JSON
{"put":[
 {"key":"domain:$HOST","value":{"v":1,"enabled":true,"fallback_url":"https://www.example.com/"}},
 {"key":"group:$GROUP","value":{"v":1,"key":"$KEY","settings":{"analytics":{"enabled":true}}}},
 {"key":"blocklist","value":{"v":1,"domains":["evil.example"]}},
 {"key":"link:$HOST:hot","value":{"v":1,"long_url":"https://destination.example.org/landing?campaign=bench","group_id":"$GROUP","is_active":true}}
]}
JSON
dynamic=$("$node" snippets/sign.mjs "$KEY" "$GROUP" "$HOST" \
  "https://destination.example.org/landing/page?campaign=benchmark" "utm_source=bench&utm_medium=wrk")
dynamic_path=${dynamic#https://$HOST}
# Sanity: both routes redirect where they should before they are measured.
curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' -H "Host: $HOST" "$edge_url/hot" | grep -q '^302 https://destination.example.org/landing?campaign=bench$'
curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' -H "Host: $HOST" "$edge_url$dynamic_path" \
  | grep -q '^302 https://destination.example.org/landing/page?campaign=benchmark&utm_source=bench&utm_medium=wrk$'


# Rounds interleave the three cases, so drift on a shared machine hits all of them alike; medians are reported.
floor=() hot=() dyn=()
for round in $(seq 1 "$ROUNDS"); do
  floor+=("$(measure "$floor_url/")")
  hot+=("$(measure "$edge_url/hot")")
  dyn+=("$(measure "$edge_url$dynamic_path")")
  echo "bench-edge: round $round: floor ${floor[-1]}, hot ${hot[-1]}, dynamic ${dyn[-1]}" >&2
done
median_of() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
column() { local i=$1; shift; for row in "$@"; do echo "$row" | awk -v i="$i" '{print $i}'; done; }
floor_rps=$(median_of $(column 1 "${floor[@]}"))
hot_rps=$(median_of $(column 1 "${hot[@]}"))
dyn_rps=$(median_of $(column 1 "${dyn[@]}"))
# Latencies in ms for sorting.
ms_column() { local i=$1; shift; for row in "$@"; do to_ms "$(echo "$row" | awk -v i="$i" '{print $i}')"; echo; done; }
floor_med=$(median_of $(ms_column 2 "${floor[@]}"))
hot_med=$(median_of $(ms_column 2 "${hot[@]}"))
dyn_med=$(median_of $(ms_column 2 "${dyn[@]}"))

wasm=edge-worker/build/index_bg.wasm
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
kib() { awk -v a="$1" 'BEGIN { printf "%.1f", a / 1024 }'; }

cat <<TABLE
| case | requests/s | ratio to floor | median latency |
|---|---|---|---|
| floor (JavaScript worker, fixed 302) | $floor_rps | 1.00 | $floor_med ms |
| hot persistent link (\`/hot\`, isolate cache hit) | $hot_rps | $(ratio "$hot_rps" "$floor_rps") | $hot_med ms |
| dynamic link (\`/e/<group>?signature=…\`, decrypt + validate + back_param) | $dyn_rps | $(ratio "$dyn_rps" "$floor_rps") | $dyn_med ms |

wasm (\`edge-worker/build/index_bg.wasm\`): $raw bytes raw ($(kib "$raw") KiB), $gz bytes gzip -9 ($(kib "$gz") KiB).
wrk: -t$THREADS -c$CONNECTIONS -d${DURATION}s after a 2 s warm-up, loopback, Host: $HOST; median of $ROUNDS interleaved rounds.
TABLE
