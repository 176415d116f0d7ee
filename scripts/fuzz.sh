#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer, nightly) of the parsers that take untrusted
# input: dynamic-link tokens, destinations, back_param appending (shared-crypto) and short codes
# (origin-api). Each target runs for FUZZ_SECONDS (default 60); a crash stops the script with
# the reproducer under fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh token destination
#
# Needs the nightly toolchain and cargo-fuzz (installed here from crates.io when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(token destination back_param short_code)

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: needs the nightly toolchain: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

cd fuzz
summary=()
for target in "${TARGETS[@]}"; do
    mkdir -p "corpus/$target"
    log="$(mktemp)"
    status=0
    # -jobs/-workers unset: one process per target, so the figures are per core.
    cargo +nightly fuzz run --release "$target" "corpus/$target" -- \
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
