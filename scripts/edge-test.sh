#!/usr/bin/env bash
# Installs the edge toolchain if needed, builds the worker and the origin, runs the worker's host unit tests and the
# end-to-end tests (tests/tests/*.rs: the worker in workerd, and with the origin as a process). This is the CI
# entry point for the edge worker.
#
# Usage: scripts/edge-test.sh [extra cargo test args for the e2e crate]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Wrangler (loaded by the serve script for wrangler.toml) stays offline and quiet.
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  WRANGLER_HIDE_BANNER=true
bash scripts/install-edge-toolchain.sh
cargo test -p kv-model -p link-rules -p first-arena -p edge-worker
bash scripts/build-edge-worker.sh
# The propagation tests run the real origin as a process; build it once here rather than inside a test.
cargo build -p origin-api
SHORTLINK_EDGE_SKIP_BUILD=1 SHORTLINK_ORIGIN_SKIP_BUILD=1 cargo test -p e2e "$@"
