#!/usr/bin/env bash
# Edge worker speed in local workerd (Miniflare directly; `wrangler dev` adds a proxy that halves throughput), with
# wrk on loopback, against two other workers in the same run: the floor (a JavaScript worker answering every request
# with a fixed 302: what workerd itself costs) and the careful JavaScript worker a user would write instead of ours
# (../shared/bench/peer-js/careful-worker.mjs: a per-isolate Map cache, WebCrypto with the imported key cached).
#
# Cases, each on ours and on the careful worker: a hot persistent link (isolate-cached), a dynamic link with the
# same token every request, and a dynamic link with a fresh token every request (4,096 tokens of one group, taken
# in turn by a wrk script: more than any per-isolate memo keeps); and, ours alone (the careful worker has no such
# thing), a smart link with 5 rules (issue 25) hit by visitors whose User-Agent, country and language rotate (a wrk
# script), against which the hot plain link's CPU is the yardstick, both as measured (no visitor headers) and for the
# same rotating visitors (the floor and the hot plain link hit by the rules' wrk script on their paths: a request's
# headers cost workerd CPU before any worker code runs). For every measurement: requests/s, median latency,
# and CPU per request of the worker's workerd process (user + system time from /proc over the measured requests; the
# floor's is what workerd costs with no worker code, so a worker's own cost is its CPU minus the floor's). Rounds
# interleave all measurements, so drift on a shared machine hits them alike; medians are printed as a Markdown table
# (copied into BENCHMARKS.md by hand), with ours / careful JS and ours / floor.
#
# Usage: scripts/bench-edge.sh            (after scripts/install-edge-toolchain.sh and `apt-get install wrk`)
# Environment: DURATION (seconds per measurement, default 8), ROUNDS (default 5), CONNECTIONS (default 32),
#              THREADS (default 1), SKIP_BUILD=1 to reuse edge-worker/build,
#              CASES (default "hot same fresh rules": which of the cases to measure, e.g. CASES=hot),
#              PEER_JS (default ../shared/bench/peer-js next to the repository),
#              BASELINE_BUILD=DIR: also serve the worker built in DIR (a copy of an earlier edge-worker/build,
#              inside the repository, e.g. target/edge-baseline: workerd reads nothing above its root) and
#              measure it in the same rounds, for a before/after of a change.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
DURATION=${DURATION:-8}
CASES=${CASES:-hot same fresh rules}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
PEER_JS=${PEER_JS:-$root/../shared/bench/peer-js}
HOST=bench.example.com
GROUP=cccccccc-0000-4000-8000-000000000001
KEY=QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI # 32 bytes of 0x42, base64url
SECRET=bench-secret
HOT_URL="https://destination.example.org/landing?campaign=bench"
node="$root/node_modules/.bin/node"
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  WRANGLER_HIDE_BANNER=true

command -v wrk >/dev/null || { echo "bench-edge: wrk is missing (apt-get install -y wrk)" >&2; exit 1; }
[ -f "$PEER_JS/careful-worker.mjs" ] || { echo "bench-edge: no careful worker at $PEER_JS" >&2; exit 1; }
[ "${SKIP_BUILD:-}" = 1 ] || bash scripts/build-edge-worker.sh >&2

work=$(mktemp -d "$root/target/bench-edge.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits with a deadline for a readiness line matching $2 in file $1, then sets $url from it (sed expression $3).
await_ready() {
  local out=$1 pattern=$2 expr=$3
  for _ in $(seq 1 240); do
    if grep -q "$pattern" "$out"; then
      url=$(grep "$pattern" "$out" | head -n 1 | sed -e "$expr")
      url=${url%/}
      return
    fi
    sleep 0.25
  done
  echo "bench-edge: a worker did not start; it said:" >&2
  cat "$out" >&2
  exit 1
}

# The workerd process under a node pid (Miniflare's child), for its CPU time.
workerd_of() {
  local parent=$1 child
  for _ in $(seq 1 40); do
    child=$(pgrep -P "$parent" workerd | head -n 1 || true)
    [ -n "$child" ] && { echo "$child"; return; }
    sleep 0.25
  done
  echo "bench-edge: no workerd under $parent" >&2
  exit 1
}

# Ours (or the floor with --floor) through serve-worker.mjs, from the build in $EDGE_BUILD_DIR if set; sets $url
# and $wpid (its workerd).
start_ours() {
  local out
  out=$(mktemp "$work/ours.XXXXXX")
  SYNC_SECRET=$SECRET "$node" tests/support/serve-worker.mjs "$@" >"$out" 2>"$out.err" </dev/null &
  pids+=("$!")
  await_ready "$out" '"url"' 's/.*"url":"\([^"]*\)".*/\1/'
  wpid=$(workerd_of "${pids[-1]}")
}

# The careful worker through its own serve.mjs, run from a directory below the repository so that Node finds
# the repository's miniflare; KV seeded with its own layout. Sets $url and $wpid.
start_careful() {
  cp "$PEER_JS/careful-worker.mjs" "$PEER_JS/serve.mjs" "$work/"
  local port seed out="$work/careful.out"
  port=$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  seed=$(printf '{"link:%s:hot":"{\\"u\\":\\"%s\\",\\"a\\":true}","group:%s":"{\\"key\\":\\"%s\\"}"}' \
    "$HOST" "$HOT_URL" "$GROUP" "$KEY")
  SEED=$seed "$node" "$work/serve.mjs" "$work/careful-worker.mjs" "$port" "$work/careful-kv" >"$out" 2>&1 </dev/null &
  pids+=("$!")
  await_ready "$out" '^ready ' 's/^ready //'
  wpid=$(workerd_of "${pids[-1]}")
}

# CPU time of a process so far, in clock ticks (user + system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# Runs wrk against URL (with the Lua script $3 when given) and prints "rps median_ms cpu_us_per_request".
measure() {
  local url=$1 pid=$2 script=${3:-} out before after requests
  local args=(-c"$CONNECTIONS" -H "Host: $HOST")
  [ -n "$script" ] && args+=(-s "$script")
  wrk -t1 "${args[@]}" -d2s "$url" >/dev/null # warm-up: JIT, caches, connections
  before=$(ticks "$pid")
  out=$(wrk "${args[@]}" -t"$THREADS" -d"${DURATION}s" --latency "$url")
  after=$(ticks "$pid")
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  local rps median
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  median=$(to_ms "$(echo "$out" | awk '$1 == "50%" {print $2}')")
  echo "$rps $median $(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
}

to_ms() { # wrk prints 1.23ms / 456.00us / 1.02s
  awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
                         else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
                         else { sub(/s$/, "", v); printf "%.2f", v * 1000 } }'
}

start_ours --floor
floor_url=$url floor_pid=$wpid
start_ours
ours_url=$url ours_pid=$wpid
start_careful
js_url=$url js_pid=$wpid
if [ -n "${BASELINE_BUILD:-}" ]; then
  EDGE_BUILD_DIR=$(cd "$BASELINE_BUILD" && pwd) start_ours
  base_url=$url base_pid=$wpid
fi

seed() {
  curl -sf -X POST "$1/__shortlink/sync" -H "Host: $HOST" -H "Authorization: Bearer $SECRET" \
    -H 'Content-Type: application/json' --data-binary @- >/dev/null <<JSON
{"put":[
 {"key":"domain:$HOST","value":{"v":1,"enabled":true,"fallback_url":"https://www.example.com/"}},
 {"key":"group:$GROUP","value":{"v":1,"key":"$KEY","settings":{}}},
 {"key":"blocklist","value":{"v":1,"domains":["evil.example"],"enabled_hosts":["$HOST"]}},
 {"key":"link:$HOST:hot","value":{"v":1,"long_url":"$HOT_URL","group_id":"$GROUP","is_active":true,"group_settings":{},"vouched":true}},
 {"key":"link:$HOST:rules","value":{"v":1,"long_url":"$HOT_URL","group_id":"$GROUP","is_active":true,"group_settings":{},"vouched":true,
  "rules":[{"if":{"os":["ios"]},"to":"https://apps.apple.com/app/id1"},
           {"if":{"os":["android"]},"to":"https://play.google.com/store/apps/details?id=x"},
           {"if":{"country":["DE","AT","CH"],"language":["de"]},"to":"https://destination.example.org/de"},
           {"if":{"device":["tablet"],"country":["FR"]},"to":"https://destination.example.org/fr-tablet"},
           {"if":{"query":[["utm_source","news"]]},"to":"https://destination.example.org/news"}]}}
]}
JSON
}
seed "$ours_url"
[ -n "${BASELINE_BUILD:-}" ] && seed "$base_url"

# Tokens: one for the same-token case, 4,096 for the fresh-token case (paths in a wrk script, taken in turn).
"$node" --input-type=module -e "
import { buildDynamicLink } from '$root/snippets/sign.mjs';
import { writeFileSync } from 'node:fs';
const paths = [];
for (let i = 0; i < 4097; i++) {
  const link = await buildDynamicLink('$KEY', '$GROUP', '$HOST', {
    destination_url: 'https://destination.example.org/landing/page?campaign=benchmark&n=' + i,
    back_param: 'utm_source=bench&utm_medium=wrk' });
  paths.push(link.slice('https://$HOST'.length));
}
writeFileSync('$work/same.path', paths[4096]);
writeFileSync('$work/fresh.lua', 'local paths = {' + paths.slice(0, 4096).map((p) => JSON.stringify(p)).join(',') +
  '}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", paths[i])\nend\n');
"
same=$(cat "$work/same.path")
# The smart link's visitors: real User-Agents, countries and languages in turn (each request one combination).
cat >"$work/rules.lua" <<'LUA'
local visitors = {
  {"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "US", "en-US,en;q=0.9"},
  {"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36", "IN", "hi-IN,en;q=0.8"},
  {"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "DE", "de-DE,de;q=0.9,en;q=0.5"},
  {"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "FR", "fr-FR,fr;q=0.9"},
  {"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0", "BR", "pt-BR,pt;q=0.9"},
}
local i = 0
request = function()
  i = i % #visitors + 1
  local v = visitors[i]
  return wrk.format("GET", "/rules", {["User-Agent"] = v[1], ["CF-IPCountry"] = v[2], ["Accept-Language"] = v[3]})
end
LUA
# The same visitors on the hot plain link and on the floor: their headers cost workerd itself (parsing, the
# request's Headers) CPU that no worker code spends, so the rules are compared with a plain link for these visitors.
sed 's|"/rules"|"/hot"|' "$work/rules.lua" >"$work/plain-visitors.lua"
# Sanity: every case redirects where it should on both workers before anything is measured.
has_case() { [[ " $CASES " == *" $1 "* ]]; }
for base in "$ours_url" "$js_url" ${BASELINE_BUILD:+"$base_url"}; do
  if has_case hot; then
    curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' -H "Host: $HOST" "$base/hot" | grep -q "^302 $HOT_URL\$"
  fi
  if has_case rules && [ "$base" != "$js_url" ]; then
    curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' -H "Host: $HOST" -H 'CF-IPCountry: DE' \
      -H 'Accept-Language: de' "$base/rules" | grep -q '^302 https://destination.example.org/de$'
  fi
  if has_case same || has_case fresh; then
    curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' -H "Host: $HOST" "$base$same" \
      | grep -q '^302 https://destination.example.org/landing/page?campaign=benchmark&n=4096&utm_source=bench&utm_medium=wrk$'
  fi
done

cases=(floor)
for c in hot same fresh; do
  if has_case "$c"; then
    cases+=("ours_$c" "js_$c")
    [ -n "${BASELINE_BUILD:-}" ] && cases+=("base_$c")
  fi
done
if has_case rules; then
  cases+=(floor_visitors ours_plain_visitors ours_rules)
  [ -n "${BASELINE_BUILD:-}" ] && cases+=(base_rules)
fi
declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    case $c in
      floor) r=$(measure "$floor_url/" "$floor_pid") ;;
      ours_hot) r=$(measure "$ours_url/hot" "$ours_pid") ;;
      js_hot) r=$(measure "$js_url/hot" "$js_pid") ;;
      ours_same) r=$(measure "$ours_url$same" "$ours_pid") ;;
      js_same) r=$(measure "$js_url$same" "$js_pid") ;;
      ours_fresh) r=$(measure "$ours_url/" "$ours_pid" "$work/fresh.lua") ;;
      js_fresh) r=$(measure "$js_url/" "$js_pid" "$work/fresh.lua") ;;
      base_hot) r=$(measure "$base_url/hot" "$base_pid") ;;
      base_same) r=$(measure "$base_url$same" "$base_pid") ;;
      base_fresh) r=$(measure "$base_url/" "$base_pid" "$work/fresh.lua") ;;
      ours_rules) r=$(measure "$ours_url/" "$ours_pid" "$work/rules.lua") ;;
      floor_visitors) r=$(measure "$floor_url/" "$floor_pid" "$work/plain-visitors.lua") ;;
      ours_plain_visitors) r=$(measure "$ours_url/" "$ours_pid" "$work/plain-visitors.lua") ;;
      base_rules) r=$(measure "$base_url/" "$base_pid" "$work/rules.lua") ;;
    esac
    results[$c]+="$r;"
    echo "bench-edge: round $round $c: $r" >&2
  done
done

# The median of field $2 (1 rps, 2 median ms, 3 CPU µs) over a case's rounds.
med() { echo "${results[$1]}" | tr ';' '\n' | awk -v f="$2" 'NF {print $f}' | sort -g \
  | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
over() { awk -v a="$1" -v f="$2" 'BEGIN { printf "%.1f", a - f }'; }
floor_cpu=$(med floor 3)
row() {
  local label=$1 ours=$2 js=$3
  [ -n "${results[$ours]:-}" ] || return 0 # a case left out by CASES
  local orps jrps ocpu jcpu
  orps=$(med "$ours" 1) jrps=$(med "$js" 1) ocpu=$(med "$ours" 3) jcpu=$(med "$js" 3)
  echo "| $label | $orps | $jrps | $(ratio "$orps" "$jrps") | $(ratio "$orps" "$(med floor 1)") | $(med "$ours" 2) / $(med "$js" 2) ms | $(over "$ocpu" "$floor_cpu") / $(over "$jcpu" "$floor_cpu") | $(ratio "$(over "$ocpu" "$floor_cpu")" "$(over "$jcpu" "$floor_cpu")") |"
}

wasm=edge-worker/build/index_bg.wasm
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
cat <<TABLE
| case | ours req/s | careful JS req/s | ours / JS | ours / floor | median latency, ours / JS | CPU µs per request over the floor, ours / JS | CPU ratio |
|---|---|---|---|---|---|---|---|
$(row "hot persistent link (isolate-cached)" ours_hot js_hot)
$(row "dynamic link, the same token every request" ours_same js_same)
$(row "dynamic link, a fresh token every request" ours_fresh js_fresh)
$(if [ -n "${results[ours_rules]:-}" ]; then
  rcpu=$(over "$(med ours_rules 3)" "$floor_cpu")
  echo
  echo "Smart link with 5 rules, visitors rotating User-Agent, country and language (ours only): $(med ours_rules 1) req/s,"
  echo "median $(med ours_rules 2) ms, $rcpu µs CPU per request over the floor;"
  if [ -n "${results[ours_hot]:-}" ]; then
    echo "against the hot plain link's $(over "$(med ours_hot 3)" "$floor_cpu") µs: **$(ratio "$rcpu" "$(over "$(med ours_hot 3)" "$floor_cpu")") ×** (goal ≤ 1.5)."
  fi
  vfloor=$(med floor_visitors 3)
  vrules=$(over "$(med ours_rules 3)" "$vfloor") vplain=$(over "$(med ours_plain_visitors 3)" "$vfloor")
  echo "The same visitors on the floor: $vfloor µs CPU per request ($(over "$vfloor" "$floor_cpu") µs more than"
  echo "the floor without their headers); over it, the smart link $vrules µs and the hot plain link $vplain µs"
  echo "for the same visitors. Total CPU per request, smart / plain for the same visitors:"
  echo "$(med ours_rules 3) / $(med ours_plain_visitors 3) µs = **$(ratio "$(med ours_rules 3)" "$(med ours_plain_visitors 3)") ×**."
  if [ -n "${results[base_rules]:-}" ]; then
    echo "Baseline build, smart link: $(over "$(med base_rules 3)" "$floor_cpu") µs over the floor."
  fi
fi)

$(if [ -n "${BASELINE_BUILD:-}" ]; then
  echo
  echo "Baseline build ($BASELINE_BUILD) in the same rounds, against the careful JS worker:"
  echo
  echo "| case | baseline req/s | careful JS req/s | baseline / JS | baseline / floor | median latency, baseline / JS | CPU µs per request over the floor, baseline / JS | CPU ratio |"
  echo "|---|---|---|---|---|---|---|---|"
  row "hot persistent link (isolate-cached)" base_hot js_hot
  row "dynamic link, the same token every request" base_same js_same
  row "dynamic link, a fresh token every request" base_fresh js_fresh
fi)

floor (fixed 302): $(med floor 1) requests/s, median $(med floor 2) ms, $floor_cpu µs CPU per request.
wasm (\`edge-worker/build/index_bg.wasm\`): $raw bytes raw, $gz bytes gzip -9.
wrk: -t$THREADS -c$CONNECTIONS -d${DURATION}s after a 2 s warm-up, loopback, Host: $HOST; medians of $ROUNDS rounds,
each round measuring every case in turn.
TABLE
