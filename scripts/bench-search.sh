#!/usr/bin/env bash
# Search, filters, export and import at 1,000,000 links (BENCHMARKS.md, "Search, tags, export and import"): the
# real origin (a release build; PROFILE=debug for the e2e tests' build) on SQLite and on PostgreSQL
# (TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test). The measurement is
# tests/tests/bench_search.rs, an #[ignore]d test, so it never runs in the normal suite; it seeds with sqlite3 /
# psql, which must be installed. Prints a table.
#
# Usage: scripts/bench-search.sh                                  (both engines; about 6 minutes)
#        SEARCH_BENCH_ENGINES=sqlite scripts/bench-search.sh       (one engine: sqlite or postgres)
#        SEARCH_BENCH_LINKS=100000 scripts/bench-search.sh         (a smaller account)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build -q --release -p origin-api
else
  cargo build -q -p origin-api
fi
target_dir=${CARGO_TARGET_DIR:-$root/target}
echo "origin: $profile build"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
SHORTLINK_ORIGIN_BIN="$target_dir/$profile/origin-api" \
  cargo test -q -p e2e --test bench_search -- --ignored --nocapture --test-threads=1
