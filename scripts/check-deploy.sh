#!/usr/bin/env bash
# Checks that the edge worker deploys, without deploying it and without a Cloudflare account or network: runs
# `wrangler deploy --dry-run --outdir` for each environment of wrangler.toml (the top level, staging, production),
# which validates the configuration and bundles exactly what would be uploaded, then measures that upload and fails
# if it is over the size limit. Prints one row per environment.
#
# The size checked is what Cloudflare limits: the uploaded modules (the bundled JavaScript and the wasm, not the
# source map) gzip-compressed together, measured as wrangler measures it (gzip of the concatenated modules). The
# limit is the strictest there is, the Workers Free plan's 3 MB after compression (Paid: 10 MB), counted as 3 MiB
# like the pinned wrangler, which compares its "Total Upload" with it; a worker under it deploys on every plan. The
# size is also cold-start time, so the headroom is worth watching, not just the pass.
#
# The worker is not rebuilt: the build from scripts/build-edge-worker.sh is used (built first if there is none),
# and wrangler.toml's [build] command is skipped with SHORTLINK_EDGE_SKIP_BUILD (wrangler has no flag for that).
# Run scripts/build-edge-worker.sh first when the sources changed since the last build.
#
# Usage: scripts/check-deploy.sh     (about 10 s; CI runs it from `cargo xtask test` after the edge tests)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin="$root/node_modules/.bin"
say() { printf 'check-deploy: %s\n' "$*" >&2; }
if [ ! -x "$bin/wrangler" ] || [ ! -x "$bin/node" ]; then
  say "wrangler is missing; run scripts/install-edge-toolchain.sh first"
  exit 1
fi
# Wrangler needs Node 22: the pinned one first on PATH.
export PATH="$bin:$PATH"
# Offline and quiet: no metrics, no error reports, no request.cf fetch, no update check banner. A dry run needs no
# login and makes no request to Cloudflare (checked with strace: no connect() at all with these set).
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  WRANGLER_HIDE_BANNER=true NO_UPDATE_NOTIFIER=1 CI=true

if [ ! -f edge-worker/build/index.js ] || [ ! -f edge-worker/build/index_bg.wasm ]; then
  say "no worker build yet: scripts/build-edge-worker.sh"
  bash scripts/build-edge-worker.sh
fi
export SHORTLINK_EDGE_SKIP_BUILD=1

# 3 MiB, as wrangler counts it (MAX_GZIP_SIZE_BYTES = 3 * 1024 * 1024).
LIMIT_BYTES=$((3 * 1024 * 1024))

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Environment names as `--env` takes them; "" is the top level.
envs=("" staging production)
failed=0
rows=()
for env in "${envs[@]}"; do
  label=${env:-top level}
  dir="$out/${env:-top}"
  args=(deploy --dry-run --outdir "$dir")
  [ -n "$env" ] && args+=(--env "$env")
  if ! log=$(wrangler "${args[@]}" 2>&1); then
    printf '%s\n' "$log" >&2
    say "wrangler deploy --dry-run failed for $label"
    exit 1
  fi
  # The uploaded modules: everything in the output directory but the source map and wrangler's README.
  # Sizes with the pinned Node, gzip as wrangler computes it (zlib.gzipSync of the concatenation, default level).
  measured=$(node -e '
    const fs = require("fs"), path = require("path"), zlib = require("zlib");
    const dir = process.argv[1];
    const files = fs.readdirSync(dir).filter((f) => !f.endsWith(".map") && f !== "README.md").sort();
    const bufs = files.map((f) => fs.readFileSync(path.join(dir, f)));
    const sum = (pred) => files.reduce((n, f, i) => n + (pred(f) ? bufs[i].length : 0), 0);
    const js = sum((f) => /\.m?js$/.test(f)), wasm = sum((f) => f.endsWith(".wasm"));
    const total = sum(() => true), gzip = zlib.gzipSync(Buffer.concat(bufs)).length;
    const name = (fs.readFileSync(path.join(dir, "README.md"), "utf8").match(/for the worker "([^"]+)"/) || [])[1];
    console.log([name || "?", files.length, js, wasm, total, gzip].join(" "));
  ' "$dir")
  read -r name modules js wasm total gzip <<<"$measured"
  if [ "$wasm" -eq 0 ]; then
    say "$label: no wasm module in the bundle ($dir)"
    exit 1
  fi
  status=ok
  if [ "$gzip" -ge "$LIMIT_BYTES" ]; then
    status=OVER
    failed=1
  fi
  rows+=("$(printf '%s|%s|%s|%s|%s|%s|%s|%s' "$label" "$name" "$modules" "$js" "$wasm" "$total" "$gzip" "$status")")
done

kib() { awk -v b="$1" 'BEGIN { printf "%.1f KiB", b / 1024 }'; }
printf '%-11s  %-26s  %7s  %11s  %11s  %11s  %11s  %8s  %s\n' \
  environment worker modules js wasm upload gzip "of limit" result
for row in "${rows[@]}"; do
  IFS='|' read -r label name modules js wasm total gzip status <<<"$row"
  pct=$(awk -v g="$gzip" -v l="$LIMIT_BYTES" 'BEGIN { printf "%.1f%%", 100 * g / l }')
  printf '%-11s  %-26s  %7s  %11s  %11s  %11s  %11s  %8s  %s\n' \
    "$label" "$name" "$modules" "$(kib "$js")" "$(kib "$wasm")" "$(kib "$total")" "$(kib "$gzip")" "$pct" "$status"
done
echo "limit: the upload's gzip size ≤ 3 MiB, the Workers Free plan's size limit after compression as wrangler counts it (Paid plan: 10 MB)"

# Placeholders are fine for this check (no upload happens) but must be gone before a real deploy.
placeholders=$(grep -cE '# REPLACE|"REPLACE_' wrangler.toml || true)
if [ "$placeholders" -gt 0 ]; then
  echo "note: $placeholders values in wrangler.toml are marked REPLACE; replace them before a real deploy"
fi
if [ "$failed" -ne 0 ]; then
  say "the worker is over the size limit"
  exit 1
fi
