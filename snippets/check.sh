#!/usr/bin/env bash
# Cross-checks the snippets against the Rust implementation: links built by sign.mjs and sign.py must verify
# with `shortlink verify` (valid, with the expected redirect), and expired ones must fail with reason "expired".
#
# Needs: node >= 20, python3 with `cryptography` (pip install -r snippets/requirements.txt), and cargo
# (or SHORTLINK_BIN=/path/to/shortlink to skip the build).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${SHORTLINK_BIN:-}" ]]; then
  shortlink=("$SHORTLINK_BIN")
else
  cargo build --quiet -p shortlink
  shortlink=(cargo run --quiet -p shortlink --)
fi
python3 -c 'import cryptography' 2>/dev/null || {
  echo "check.sh: python3 cannot import cryptography; run: pip install -r snippets/requirements.txt" >&2
  exit 1
}

key=$(python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode())')
group=$(python3 -c 'import uuid; print(uuid.uuid4())')
domain=go.example.com
now=$(date +%s)
failures=0

# extract_token URL: the signature parameter, percent-decoded, after checking the URL's shape.
extract_token() {
  local url=$1 prefix="https://$domain/e/$group?signature="
  if [[ $url != "$prefix"* ]]; then
    echo "unexpected URL shape: $url" >&2
    return 1
  fi
  python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.argv[1]))' "${url#"$prefix"}"
}

# expect NAME URL VALID REDIRECT_TO REASON: verify the URL's token and compare the JSON verdict.
expect() {
  local name=$1 url=$2 valid=$3 redirect=$4 reason=$5 token verdict
  token=$(extract_token "$url") || { failures=$((failures + 1)); return; }
  # Not under `set -e`: a failing verify is a failed check with its message, not a silent exit.
  if ! verdict=$("${shortlink[@]}" verify --group-key "$key" --now "$now" "$token"); then
    echo "FAIL $name: shortlink verify failed (group key $key)" >&2
    failures=$((failures + 1))
    return
  fi
  if python3 - "$verdict" "$valid" "$redirect" "$reason" <<'PY'; then
import json, sys
got = json.loads(sys.argv[1])
want = {"valid": sys.argv[2] == "true", "redirect_to": sys.argv[3] or None, "reason": sys.argv[4] or None}
sys.exit(0 if got == want else 1)
PY
    echo "ok   $name"
  else
    echo "FAIL $name: got $verdict, want valid=$valid redirect_to=${redirect:-null} reason=${reason:-null}" >&2
    failures=$((failures + 1))
  fi
}

for lang in js py; do
  sign() {
    if [[ $lang == js ]]; then node snippets/sign.mjs "$@"; else python3 snippets/sign.py "$@"; fi
  }
  expect "$lang plain" "$(sign "$key" "$group" "$domain" "https://dest.example.org/path")" \
    true "https://dest.example.org/path" ""
  expect "$lang back_param, http upgrade, fragment" \
    "$(sign "$key" "$group" "$domain" "http://dest.example.org/path?a=1#top" "utm_source=$lang")" \
    true "https://dest.example.org/path?a=1&utm_source=$lang#top" ""
  expect "$lang unicode" "$(sign "$key" "$group" "$domain" "https://dest.example.org/café")" \
    true "https://dest.example.org/café" ""
  expect "$lang future expiry" "$(sign "$key" "$group" "$domain" "https://dest.example.org/" "" $((now + 3600)))" \
    true "https://dest.example.org/" ""
  expect "$lang expired" "$(sign "$key" "$group" "$domain" "https://dest.example.org/" "" $((now - 10)))" \
    false "" "expired"
done

if ((failures > 0)); then
  echo "check.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "check.sh: all snippet checks passed"
