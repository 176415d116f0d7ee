#!/usr/bin/env bash
# worker-build's bundling step, with the edge worker's own entry module (edge-worker/js/entry.js) in place of the
# one worker-build writes. worker-build 0.8.7 has no option for that on its module target: CUSTOM_SHIM only applies
# to its legacy target, which also drops wasm-bindgen's reset-state function that the recovery after a trap needs.
# It does let ESBUILD_BIN name the bundler, and runs it once, in its staging directory, on ./shim.js (its entry,
# which imports ./index.js, wasm-bindgen's module): this script replaces that file, then runs esbuild.
# scripts/build-edge-worker.sh sets ESBUILD_BIN to this script and REAL_ESBUILD to node_modules' esbuild.
set -euo pipefail
: "${REAL_ESBUILD:?set by scripts/build-edge-worker.sh}" "${EDGE_ENTRY:?set by scripts/build-edge-worker.sh}"
if [ -f ./shim.js ] && [ -f ./index.js ]; then
  # What our entry relies on: the exports worker-build's own entry used, and ours (the kept answers' two, the
  # first visit's five).
  for name in __worker_init_state __wbg_reset_state fetch queue answer_until on_records_change first_store \
    first_store_missing first_fetch first_settle first_after; do
    grep -Eq "^export function $name ?\(" ./index.js || {
      echo "esbuild-edge-entry: wasm-bindgen's index.js has no export $name; worker-build changed" >&2
      exit 1
    }
  done
  # Classes workers-rs exports that this worker never uses, and their code in the wasm, stay out of the bundle
  # (scripts/trim-wasm-bindgen.mjs says why and how).
  node "$(dirname "${BASH_SOURCE[0]}")/trim-wasm-bindgen.mjs" ./index.js ./index_bg.wasm "$EDGE_ENTRY"
  # The glue a first visit runs is compiled when the isolate starts, not on that visit
  # (scripts/eager-first-visit.mjs says why and which).
  node "$(dirname "${BASH_SOURCE[0]}")/eager-first-visit.mjs" ./index.js
  grep -q '^export const fetch = (function fetch(' ./index.js || {
    echo "esbuild-edge-entry: scripts/eager-first-visit.mjs left index.js as it was" >&2
    exit 1
  }
  cp "$EDGE_ENTRY" ./shim.js
  # The entry's own module (its kept answers, a file of its own to be tested under Node) goes beside it for the
  # bundle, and away again after it: only index.js and the wasm are the build's output.
  cp "$(dirname "$EDGE_ENTRY")/kept-answers.mjs" ./kept-answers.mjs
  status=0
  "$REAL_ESBUILD" "$@" || status=$?
  rm -f ./kept-answers.mjs
  exit "$status"
fi
exec "$REAL_ESBUILD" "$@"
