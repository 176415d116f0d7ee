#!/usr/bin/env bash
# Webhook delivery figures (BENCHMARKS.md, "Webhooks"): the real origin (a release build; PROFILE=debug for the e2e tests' build) on
# SQLite and on PostgreSQL (TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test), receivers on
# loopback in the test process. Prints a table:
#   1. link.created latency, 201 → receiver (p50/p99), 320 links at 10/s;
#   2. 500 events/s (PATCH) into the outbox for 60 s to one receiver: events/s delivered, backlog every second;
#   3. create-link latency with 0 endpoints vs 20 endpoints of which 10 are dead, interleaved rounds.
# The measurement is tests/tests/bench_webhooks.rs, an #[ignore]d test, so it never runs in the normal suite. It
# reads the backlog with sqlite3 / psql, which must be installed.
#
# Usage: scripts/bench-webhooks.sh                               (about 6 minutes)
#        WEBHOOK_BENCH_ENGINES=sqlite scripts/bench-webhooks.sh   (one engine: sqlite or postgres)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# The origin as it is deployed: a release build (PROFILE=debug measures the build the e2e tests run).
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build -q --release -p origin-api
else
  cargo build -q -p origin-api
fi
target_dir=${CARGO_TARGET_DIR:-$root/target}
echo "origin: $profile build"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
SHORTLINK_ORIGIN_BIN="$target_dir/$profile/origin-api" \
  cargo test -q -p e2e --test bench_webhooks -- --ignored --nocapture --test-threads=1
