#!/usr/bin/env bash
# Builds the edge worker to edge-worker/build/ (worker/shim.mjs + index_bg.wasm) with `worker-build --release`,
# using the tools scripts/install-edge-toolchain.sh installed: wasm-bindgen-cli from cargo, and wasm-opt
# (binaryen) and esbuild from node_modules, because worker-build cannot download its own copies offline.
#
# Usage: scripts/build-edge-worker.sh     (wrangler.toml's [build] command runs the same thing)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/node_modules/.bin"
if [ ! -x "$bin/esbuild" ] || ! command -v worker-build >/dev/null 2>&1; then
  echo "build-edge-worker: missing tools; run scripts/install-edge-toolchain.sh first" >&2
  exit 1
fi
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen)}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$bin/wasm-opt}"
export ESBUILD_BIN="${ESBUILD_BIN:-$bin/esbuild}"
# binaryen's wasm-opt and esbuild's wrapper are Node scripts; run them with the pinned Node 22.
export PATH="$bin:$PATH"
# Size is cold-start time: whole-program LTO and one codegen unit for the wasm only (these override the
# workspace release profile for this build, not for the origin).
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
cd "$root/edge-worker"
exec worker-build --release
