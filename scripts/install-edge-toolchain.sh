#!/usr/bin/env bash
# Installs what building and testing the edge worker needs, pinned; skips whatever is already installed at the
# pinned version, so a second run takes seconds.
#
#   - the wasm32-unknown-unknown Rust target
#   - worker-build 0.8.7 (the workers-rs build driver)
#   - wasm-bindgen-cli 0.2.130: must equal the `wasm-bindgen = "=0.2.130"` pin in edge-worker/Cargo.toml.
#     worker-build's own download of it fails without internet, so we install it and point WASM_BINDGEN_BIN at it.
#   - npm packages from package-lock.json (`npm ci`): Node 22 (wrangler >= 4.87 needs it), wrangler, Miniflare
#     (workerd) and binaryen (wasm-opt, used through WASM_OPT_BIN because worker-build's download fails too).
#
# Usage: scripts/install-edge-toolchain.sh     (from anywhere; cold about 8 minutes on 2 cores, warm a few seconds)
set -euo pipefail

WORKER_BUILD_VERSION=0.8.7
WASM_BINDGEN_VERSION=0.2.130

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
say() { printf 'install-edge-toolchain: %s\n' "$*" >&2; }

if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "wasm32-unknown-unknown target present"
else
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# `cargo install` of a pinned version that is already installed is a no-op anyway, but it still refreshes the
# registry index, which costs time and network; checking `--version` first avoids that.
install_pinned() { # crate version binary
  local crate=$1 version=$2 bin=$3
  if command -v "$bin" >/dev/null 2>&1 && "$bin" --version 2>/dev/null | grep -qw "$version"; then
    say "$crate $version present"
  else
    say "installing $crate $version"
    # --locked first, for the versions the crate was tested with; wasm-bindgen-cli 0.2.130's lockfile names a
    # webpki-roots release the registry no longer offers, so fall back to a fresh resolution.
    cargo install --locked "$crate" --version "$version" \
      || cargo install "$crate" --version "$version"
  fi
}
install_pinned worker-build "$WORKER_BUILD_VERSION" worker-build
install_pinned wasm-bindgen-cli "$WASM_BINDGEN_VERSION" wasm-bindgen

# npm ci wipes and reinstalls node_modules; skip it when the installed tree already matches the lockfile. npm
# writes node_modules/.package-lock.json on every install, so comparing it with a stamp of package-lock.json tells.
stamp=node_modules/.shortlink-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x node_modules/.bin/node ] \
  && [ -x node_modules/.bin/workerd ]; then
  say "node_modules matches package-lock.json"
else
  say "npm ci"
  # The registry this project uses lacks workerd's macOS and Windows packages (optional dependencies), so the
  # lockfile cannot list them and `npm ci` calls it out of sync. `npm install --no-save` then installs the same
  # locked versions for this platform without touching package-lock.json.
  npm ci --no-audit --no-fund 2>/dev/null || {
    say "npm ci refused the lockfile; npm install --no-save from the same lockfile"
    npm install --no-save --no-audit --no-fund
  }
  echo "$want" >"$stamp"
fi
say "node $(node_modules/.bin/node --version), workerd $(node_modules/.bin/workerd --version)"
say "done"
