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
# worker-build bundles through ESBUILD_BIN; ours swaps in the edge worker's own entry module first
# (scripts/esbuild-edge-entry.sh says why).
export REAL_ESBUILD="${ESBUILD_BIN:-$bin/esbuild}" EDGE_ENTRY="$root/edge-worker/js/entry.js"
export ESBUILD_BIN="$root/scripts/esbuild-edge-entry.sh"
# binaryen's wasm-opt and esbuild's wrapper are Node scripts; run them with the pinned Node 22.
export PATH="$bin:$PATH"
# Size is cold-start time: whole-program LTO and one codegen unit for the wasm only (these override the
# workspace release profile for this build, not for the origin).
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
# binaryen's -O at every wasm-opt pass of the build (worker-build's, trim-wasm-bindgen.mjs's, the last one below),
# except that a function of more than 100 of binaryen's size units is no longer inlined into its single caller.
# V8 compiles each wasm function whole on its first call, so on a new isolate's first request every function it
# calls is compiled with all it inlined, rare branches included: kept apart, the rules of a smart link, a forwarded
# query, an expired link's page, the other route's decision are compiled only when they run. A first visit to a
# persistent link compiles 15 % less wasm (BENCHMARKS.md, "Cold start": the `compiled` profile), and the module is
# smaller too. And `shell::full_path` is never inlined (binaryen inlined it, its single caller's, under that size):
# its setup of the full path's future is in `shell::answer`'s body otherwise, and a first visit the fast path
# answers compiled those 81 bytes without running them (BENCHMARKS.md, issue 28). worker-build reads its own pass's
# arguments from edge-worker/Cargo.toml ([package.metadata.wasm-pack.profile.release]), which must say the same
# (checked here).
export EDGE_WASM_OPT_ARGS="--no-inline=edge_worker::shell::full_path::h* -O --one-caller-inline-max-function-size=100"
toml_args="wasm-opt = [\"${EDGE_WASM_OPT_ARGS// /\", \"}\"]"
if ! grep -qxF "$toml_args" "$root/edge-worker/Cargo.toml"; then
  echo "build-edge-worker: edge-worker/Cargo.toml's wasm-opt arguments differ from EDGE_WASM_OPT_ARGS" >&2
  exit 1
fi
cd "$root/edge-worker"
worker-build --release
# The deployed wasm goes without its names section: about 80 KB raw and 23 KB of the gzipped upload, more than
# a tenth of it, and nothing reads it but a stack trace. A trap's stack trace then names functions by index
# (`wasm-function[123]`); build/functions.txt, written here from the same build, maps each index to its Rust name.
# With the strip, one more pass of EDGE_WASM_OPT_ARGS (the one worker-build and trim-wasm-bindgen.mjs ran): a
# pass over their output still finds about 1.5 KB raw and 1.3 KB gzipped (a further pass finds nothing), with
# worker-build's feature set. functions.txt is printed after the passes, so it names this build's indices.
features=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory
  --enable-multivalue --enable-reference-types --enable-exception-handling)
# The arguments as words, unglobbed (the no-inline pattern holds a `*`).
read -ra opt_args <<<"$EDGE_WASM_OPT_ARGS"
"$WASM_OPT_BIN" build/index_bg.wasm "${features[@]}" "${opt_args[@]}" --print-function-map --strip-debug \
  -o build/index_bg.stripped.wasm >build/functions.txt
mv build/index_bg.stripped.wasm build/index_bg.wasm
# The imports' names, `__wbg_<function>_<16-digit hash>` twice each (the wasm and the bundle's imports object), become
# short ones: about 4 KB less JavaScript and 5.5 KB less wasm for a new isolate to parse (scripts/shorten-wasm-imports.mjs).
node "$root/scripts/shorten-wasm-imports.mjs" build/index.js build/index_bg.wasm
# The bundle must be ours: worker-build's entry is the only source of Proxies in it.
if grep -q "new Proxy" build/index.js; then
  echo "build-edge-worker: build/index.js has worker-build's entry, not edge-worker/js/entry.js" >&2
  exit 1
fi
