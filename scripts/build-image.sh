#!/usr/bin/env bash
# Builds the origin's container image (deploy/Containerfile): a static musl origin-api on an empty base, as a
# non-root user. Compiles the binary here (the Containerfile only copies it, so nothing is pulled), checks that it is
# static and that it runs (migrate, serve, /healthz on a scratch SQLite file: containers themselves cannot run on
# these CI machines), then `podman build`. Prints the binary's and the image's size (BENCHMARKS.md).
#
#   scripts/build-image.sh                  IMAGE=registry.example.com/shortlink-origin:1.2 scripts/build-image.sh
# Needs: rustup (adds the musl target), musl-tools (musl-gcc, for the C in ring and SQLite), podman (or docker:
# BUILDER=docker).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=x86_64-unknown-linux-musl
IMAGE="${IMAGE:-localhost/shortlink-origin:latest}"
BUILDER="${BUILDER:-podman}"

rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
command -v musl-gcc >/dev/null || { echo "build-image.sh: needs musl-gcc (apt-get install musl-tools)" >&2; exit 1; }
CC_x86_64_unknown_linux_musl=musl-gcc cargo build --quiet --release --locked --target "$TARGET" -p origin-api
bin="${CARGO_TARGET_DIR:-target}/$TARGET/release/origin-api"

# Static: no program interpreter, no dynamic section.
if readelf -l "$bin" | grep -q 'program interpreter'; then
    echo "build-image.sh: $bin is not statically linked" >&2
    exit 1
fi

# The image's contents, staged where the Containerfile expects them (ignored by git).
rm -rf deploy/image
mkdir -p deploy/image/data
cp "$bin" deploy/image/origin-api
strip deploy/image/origin-api

# The same binary, run directly: migrate and serve a scratch SQLite database, then /healthz.
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cleanup() { [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
DATABASE_URL="sqlite://$work/db.sqlite" deploy/image/origin-api migrate >/dev/null
DATABASE_URL="sqlite://$work/db.sqlite" LOG_FORMAT=json deploy/image/origin-api serve --listen "127.0.0.1:$port" \
    2>"$work/log" &
pid=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || { echo "build-image.sh: the binary did not serve" >&2; cat "$work/log" >&2; exit 1; }

"$BUILDER" build --quiet -f deploy/Containerfile -t "$IMAGE" . >/dev/null
image_bytes="$("$BUILDER" image inspect --format '{{.Size}}' "$IMAGE")"
bin_bytes="$(stat -c %s deploy/image/origin-api)"
echo "| artifact | bytes | MiB |"
echo "|---|---|---|"
printf '| origin-api (static musl, stripped) | %s | %.1f |\n' "$bin_bytes" "$(echo "$bin_bytes / 1048576" | bc -l)"
printf '| image %s | %s | %.1f |\n' "$IMAGE" "$image_bytes" "$(echo "$image_bytes / 1048576" | bc -l)"
