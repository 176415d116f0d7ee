#!/usr/bin/env bash
# Load on the origin: 200 concurrent clients (wrk, 200 connections) mixing create-link (one in
# three) and list links (first page), spread over 200 API keys, for DURATION (default 30s), on
# SQLite and on PostgreSQL. Prints requests/s, p50/p99 latency, the status counts (anything but
# 200, 201 and 429 is a failure; the script exits non-zero then) and the origin's peak RSS.
# Then the same 200 connections on the worker in workerd (a hot persistent link; anything but
# a 302 is a failure) and on two JavaScript floors that answer a fixed 302, one in Miniflare as the
# worker is, one in bare workerd: EDGE_ROUNDS (3) interleaved rounds of EDGE_DURATION (15s) each,
# every round printed, then the medians and each workerd's peak RSS. Set EDGE=0 to skip them.
#
#   scripts/bench-load.sh                 # both engines, 30 s each, then the edge
#   DURATION=60s ENGINES=postgres EDGE=0 scripts/bench-load.sh
#   ENGINES= EDGE_ROUNDS=5 scripts/bench-load.sh     # the edge only
#
# Needs wrk (apt-get install wrk) and the local PostgreSQL on 127.0.0.1:5432.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-30s}"
ENGINES="${ENGINES-sqlite postgres}"   # ENGINES= (empty): the edge only
command -v wrk >/dev/null || { echo "bench-load: needs wrk (apt-get install wrk)" >&2; exit 1; }
[ -z "$ENGINES" ] || cargo build --quiet --release -p origin-api
bin="$PWD/target/release/origin-api"
tmp=$(mktemp -d)
pid=""
schema="load_$$"
edge_pids=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  [ -n "$edge_pids" ] && kill $edge_pids 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d test -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
printf '| engine | requests/s | p50 | p99 | max | 200 | 201 | 429 | other | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|\n' > "$tmp/table"
for engine in $ENGINES; do
  if [ "$engine" = sqlite ]; then
    url="sqlite://$tmp/load.db"
  else
    psql -q -h 127.0.0.1 -U postgres -d test -c "DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema" >/dev/null
    url="postgres://postgres@127.0.0.1:5432/test?options=-c%20search_path%3D$schema"
  fi
  export DATABASE_URL="$url" RUST_LOG=warn
  "$bin" migrate >/dev/null
  "$bin" admin domain add --host load.rt --platform >/dev/null
  : > "$tmp/keys"
  for i in $(seq 1 200); do
    account=$("$bin" admin account create --email "load$i-$engine@example.com" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    "$bin" admin api-key generate --account "$account" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])' >> "$tmp/keys"
  done
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" serve --listen "127.0.0.1:$port" --max-connections 16 &
  pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  KEYS_FILE="$tmp/keys" wrk -t2 -c200 -d"$DURATION" --timeout 15s -s scripts/load.lua "http://127.0.0.1:$port" > "$tmp/wrk.out"
  rss=$(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  read -r _ s200 s201 s429 sother < <(sed -n 's/^STATUSES 200=\([0-9]*\) 201=\([0-9]*\) 429=\([0-9]*\) other=\([0-9]*\)$/x \1 \2 \3 \4/p' "$tmp/wrk.out")
  read -r _ p50 p99 max < <(sed -n 's/^LATENCY p50=\(.*\) p99=\(.*\) max=\(.*\)$/x \1 \2 \3/p' "$tmp/wrk.out")
  rps=$(sed -n 's/^RPS //p' "$tmp/wrk.out")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$engine" "$rps" "$p50" "$p99" "$max" "$s200" "$s201" "$s429" "$sother" "$rss" >> "$tmp/table"
  [ "$sother" = 0 ] || failed=1
  grep -E "Socket errors" "$tmp/wrk.out" && failed=1 || true
done
[ -z "$ENGINES" ] || cat "$tmp/table"

if [ "${EDGE:-1}" = 1 ]; then
  # The worker, and two floors that answer every request with a fixed 302 from JavaScript: one served the same way
  # as the worker (Miniflare's workerd, whose entry worker sits in front of every request) and one in bare workerd
  # (a config of our own, no Miniflare). All three run side by side and take EDGE_ROUNDS interleaved rounds of
  # EDGE_DURATION each, so a slow moment of the machine hits every case alike; the medians are the result.
  export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
    WRANGLER_HIDE_BANNER=true
  bash scripts/build-edge-worker.sh >/dev/null 2>&1
  declare -A serve_pid url
  for kind in worker floor; do
    flag=""; [ "$kind" = floor ] && flag=--floor
    SYNC_SECRET=load-secret PORT=0 node_modules/.bin/node tests/support/serve-worker.mjs $flag > "$tmp/$kind.out" </dev/null &
    serve_pid[$kind]=$!
    for _ in $(seq 1 240); do grep -q '"url"' "$tmp/$kind.out" && break; sleep 0.25; done
    u=$(sed -e 's/.*"url":"\([^"]*\)".*/\1/' "$tmp/$kind.out"); url[$kind]=${u%/}
  done
  bare_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$tmp/floor.js" <<'JS'
export default { fetch() { return new Response(null, { status: 302, headers: { Location: "https://example.com/", "Cache-Control": "private, no-store, max-age=0" } }); } };
JS
  cat > "$tmp/bare.capnp" <<CAPNP
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "floor", worker = (modules = [ (name = "floor.js", esModule = embed "floor.js") ],
                                          compatibilityDate = "2025-11-01")) ],
  sockets = [ (name = "http", address = "127.0.0.1:$bare_port", http = (), service = "floor") ]
);
CAPNP
  node_modules/.bin/workerd serve "$tmp/bare.capnp" > "$tmp/bare.out" 2>&1 &
  serve_pid[bare]=$!; url[bare]="http://127.0.0.1:$bare_port"
  for _ in $(seq 1 100); do curl -s -o /dev/null "${url[bare]}/" && break; sleep 0.1; done
  edge_pids="${serve_pid[worker]} ${serve_pid[floor]} ${serve_pid[bare]}"
  # The records a live link has in production: its domain, its group (the publisher writes it before any of its
  # links) and the blocklist (naming the domain's host as an enabled platform domain, as the origin publishes it).
  curl -sf -X POST "${url[worker]}/__shortlink/sync" -H "Authorization: Bearer load-secret" -H 'Content-Type: application/json' \
    -d '{"put":[{"key":"domain:load.rt","value":{"v":1,"enabled":true,"fallback_url":"https://www.example.com/"}},
                {"key":"group:00000000-0000-4000-8000-000000000000","value":{"v":1,"key":"QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI","settings":{}}},
                {"key":"blocklist","value":{"v":1,"domains":["evil.example"],"enabled_hosts":["load.rt"]}},
                {"key":"link:load.rt:hot","value":{"v":1,"long_url":"https://example.org/landing","group_id":"00000000-0000-4000-8000-000000000000","is_active":true,"group_settings":{},"vouched":true}}]}' >/dev/null
  # The process whose memory is measured: workerd, a child of Miniflare's Node process, or the bare one itself.
  workerd_of() { if [ "$1" = bare ]; then echo "${serve_pid[bare]}"; else pgrep -P "${serve_pid[$1]}" workerd | head -n 1; fi; }
  rss_of() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$(workerd_of "$1")/status"; }
  printf '| round | case | requests/s | p50 | p99 | max | 302 | other | reconnects | workerd RSS after |\n|---|---|---|---|---|---|---|---|---|---|\n' > "$tmp/edge-rounds"
  for round in $(seq 1 "${EDGE_ROUNDS:-3}"); do
    for kind in worker floor bare; do
      wrk -t2 -c200 -d"${EDGE_DURATION:-15s}" --timeout 15s -H "Host: load.rt" -s scripts/load-edge.lua "${url[$kind]}/hot" > "$tmp/wrk.out"
      read -r _ s302 sother < <(sed -n 's/^STATUSES 302=\([0-9]*\) other=\([0-9]*\)$/x \1 \2/p' "$tmp/wrk.out")
      read -r _ p50 p99 max < <(sed -n 's/^LATENCY p50=\(.*\) p99=\(.*\) max=\(.*\)$/x \1 \2 \3/p' "$tmp/wrk.out")
      rps=$(sed -n 's/^RPS //p' "$tmp/wrk.out")
      # wrk's socket errors: connections the server closed (read), or that failed to open or send. Each one is
      # a connection wrk opened again; a request on it may have been lost, so they are reported, not hidden.
      errs=$(sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$tmp/wrk.out" | awk '{print $1+$2+$3+$4}')
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s MiB |\n' "$round" "$kind" "$rps" "$p50" "$p99" "$max" \
        "$s302" "$sother" "${errs:-0}" "$(rss_of "$kind")" >> "$tmp/edge-rounds"
      [ "$sother" = 0 ] || failed=1
    done
  done
  peaks=""
  for kind in worker floor bare; do
    peaks="$peaks $kind=$(awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$(workerd_of "$kind")/status")"
  done
  kill $edge_pids 2>/dev/null; wait $edge_pids 2>/dev/null || true; edge_pids=""
  printf '\n'; cat "$tmp/edge-rounds"
  # Medians over the rounds, per case; the floor's requests/s is the denominator of the ratio.
  python3 - "$tmp/edge-rounds" $peaks <<'PY'
import statistics, sys
rows = [l.strip("|\n").split("|") for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| round")]
peaks = dict(p.split("=") for p in sys.argv[2:])
ms = lambda v: float(v.strip().removesuffix("ms"))
names = {"worker": "worker, hot persistent link (Miniflare)", "floor": "floor: JS fixed 302 (Miniflare)",
         "bare": "floor: JS fixed 302 (bare workerd)"}
med = {}
for kind in names:
    r = [x for x in rows if x[1].strip() == kind]
    med[kind] = {"rps": statistics.median(float(x[2]) for x in r), "p50": statistics.median(ms(x[3]) for x in r),
                 "p99": statistics.median(ms(x[4]) for x in r), "p99s": [ms(x[4]) for x in r],
                 "max": max(ms(x[5]) for x in r), "other": sum(int(x[7]) for x in r), "re": sum(int(x[8]) for x in r)}
print("\n| case (medians of the rounds) | requests/s | ratio to Miniflare floor | p50 | p99 | p99 of each round | max | other | reconnects | workerd peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|")
for kind, name in names.items():
    m = med[kind]
    print(f"| {name} | {m['rps']:.0f} | {m['rps'] / med['floor']['rps']:.2f} | {m['p50']:.2f}ms | {m['p99']:.2f}ms | "
          f"{' / '.join(f'{v:.0f}' for v in m['p99s'])} ms | {m['max']:.2f}ms | {m['other']} | {m['re']} | {peaks[kind]} MiB |")
PY
fi
exit "$failed"
