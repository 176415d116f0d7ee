#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer) of the parsers that take untrusted input:
# dynamic-link tokens, destinations, back_param appending (shared-crypto) and short codes
# (kv-model). Each target runs for FUZZ_SECONDS (default 60); a crash stops the script with the
# reproducer under fuzz/artifacts/<target>/. `cargo xtask test` runs it with FUZZ_SECONDS=10 as
# CI's smoke; BENCHMARKS.md records longer runs.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh token destination
#
# Toolchain: the machine's one (stable) rustc. cargo-fuzz passes nightly-only flags
# (-Zsanitizer=address and friends); RUSTC_BOOTSTRAP=1 lets stable accept them, and stable's
# rust-std for x86_64-unknown-linux-gnu ships the AddressSanitizer runtime. No nightly download,
# which a fresh machine here cannot do. cargo-fuzz itself comes from crates.io, pinned.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(token destination back_param short_code)

CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -qw "$CARGO_FUZZ_VERSION"; then
    cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
export RUSTC_BOOTSTRAP=1

cd fuzz
summary=()
for target in "${TARGETS[@]}"; do
    mkdir -p "corpus/$target"
    log="$(mktemp)"
    status=0
    # -jobs/-workers unset: one process per target, so the figures are per core.
    cargo fuzz run --release "$target" "corpus/$target" -- \
        -max_total_time="$SECONDS_EACH" -print_final_stats=1 -max_len=4096 2>"$log" || status=$?
    runs="$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
    per_sec="$(grep -m1 -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')"
    corpus="$(find "corpus/$target" -type f | wc -l)"
    if ((status != 0)); then
        tail -n 40 "$log" >&2
        echo "fuzz.sh: $target FAILED (exit $status); reproducer in fuzz/artifacts/$target/" >&2
        rm -f "$log"
        exit "$status"
    fi
    rm -f "$log"
    summary+=("$(printf '%-12s %4ss %12s runs %9s/s  cov %5s  corpus %5s  crashes 0' \
        "$target" "$SECONDS_EACH" "$runs" "$per_sec" "$cov" "$corpus")")
done
printf '%s\n' "${summary[@]}"
