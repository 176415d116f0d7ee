#!/usr/bin/env bash
# Load on the origin: 200 concurrent clients (wrk, 200 connections) mixing create-link (one in
# three) and list links (first page), spread over 200 API keys, for DURATION (default 30s), on
# SQLite and on PostgreSQL. Prints requests/s, p50/p99 latency, the status counts (anything but
# 200, 201 and 429 is a failure; the script exits non-zero then) and the origin's peak RSS.
# Then the same 200 connections on the worker in workerd (a hot persistent link; anything but
# a 302 is a failure), with workerd's peak RSS. Set EDGE=0 to skip the worker.
#
#   scripts/bench-load.sh                 # both engines, 30 s each
#   DURATION=60s ENGINES=postgres scripts/bench-load.sh
#
# Needs wrk (apt-get install wrk) and the local PostgreSQL on 127.0.0.1:5432.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-30s}"
ENGINES="${ENGINES:-sqlite postgres}"
command -v wrk >/dev/null || { echo "bench-load: needs wrk (apt-get install wrk)" >&2; exit 1; }
cargo build --quiet --release -p origin-api
bin="$PWD/target/release/origin-api"
tmp=$(mktemp -d)
pid=""
schema="load_$$"
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
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
cat "$tmp/table"

if [ "${EDGE:-1}" = 1 ]; then
  export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
    WRANGLER_HIDE_BANNER=true
  bash scripts/build-edge-worker.sh >/dev/null 2>&1
  SYNC_SECRET=load-secret PORT=0 node_modules/.bin/node tests/support/serve-worker.mjs > "$tmp/worker.out" </dev/null &
  pid=$!
  for _ in $(seq 1 240); do grep -q '"url"' "$tmp/worker.out" && break; sleep 0.25; done
  edge=$(sed -e 's/.*"url":"\([^"]*\)".*/\1/' "$tmp/worker.out"); edge=${edge%/}
  curl -sf -X POST "$edge/__shortlink/sync" -H "Authorization: Bearer load-secret" -H 'Content-Type: application/json' \
    -d '{"put":[{"key":"domain:load.rt","value":{"v":1,"enabled":true,"fallback_url":"https://www.example.com/"}},
                {"key":"link:load.rt:hot","value":{"v":1,"long_url":"https://example.org/landing","group_id":"00000000-0000-4000-8000-000000000000","is_active":true}}]}' >/dev/null
  wrk -t2 -c200 -d"$DURATION" --timeout 15s -H "Host: load.rt" -s scripts/load-edge.lua "$edge/hot" > "$tmp/wrk.out"
  # workerd is the worker process's child: its peak RSS is the one that matters.
  workerd=$(pgrep -P "$pid" workerd | head -n 1)
  rss=$(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$workerd/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  read -r _ s302 sother < <(sed -n 's/^STATUSES 302=\([0-9]*\) other=\([0-9]*\)$/x \1 \2/p' "$tmp/wrk.out")
  read -r _ p50 p99 max < <(sed -n 's/^LATENCY p50=\(.*\) p99=\(.*\) max=\(.*\)$/x \1 \2 \3/p' "$tmp/wrk.out")
  rps=$(sed -n 's/^RPS //p' "$tmp/wrk.out")
  printf '\n| worker | requests/s | p50 | p99 | max | 302 | other | workerd peak RSS |\n|---|---|---|---|---|---|---|---|\n'
  printf '| hot persistent link | %s | %s | %s | %s | %s | %s | %s |\n' "$rps" "$p50" "$p99" "$max" "$s302" "$sother" "$rss"
  [ "$sother" = 0 ] || failed=1
fi
exit "$failed"
