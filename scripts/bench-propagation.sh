#!/usr/bin/env bash
# Origin → edge propagation figures (BENCHMARKS.md, "Origin → edge propagation"): the real origin (debug build, as the
# e2e tests run it, SQLite) and the real worker in workerd, started like the e2e tests. Prints a table:
#   1. publisher lag at 100 link creations/s for 20 s (max outbox pending / oldest age, 201 → KV redirect);
#   2. 201 → first edge redirect through the KV-miss fallback (ORIGIN_URL set), and the next visit.
# The measurement is tests/tests/bench_propagation.rs, an #[ignore]d test, so it never runs in the normal suite.
#
# Usage: scripts/bench-propagation.sh          (about a minute)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  WRANGLER_HIDE_BANNER=true
bash scripts/install-edge-toolchain.sh >/dev/null
bash scripts/build-edge-worker.sh >/dev/null
cargo build -q -p origin-api
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
SHORTLINK_EDGE_SKIP_BUILD=1 SHORTLINK_ORIGIN_SKIP_BUILD=1 \
  cargo test -q -p e2e --test bench_propagation -- --ignored --nocapture --test-threads=1
