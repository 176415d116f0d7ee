#!/usr/bin/env bash
# Schema-driven fuzzing of the origin with schemathesis: starts a real origin-api on a fresh
# SQLite database (seeded through the admin CLI), then lets schemathesis generate requests from
# GET /api/v1/openapi.json and check every response: no 5xx, documented status, content type,
# headers and body schema, negative data refused, undocumented methods refused with 405.
#
#   scripts/schemathesis.sh                 # the CI budget (well under 2 minutes on 2 cores)
#   ST_MAX_EXAMPLES=500 scripts/schemathesis.sh   # a longer run
#
# Needs python3 with the pinned schemathesis: python3 -m pip install -r scripts/requirements-schemathesis.txt
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_EXAMPLES="${ST_MAX_EXAMPLES:-200}"
SEED="${ST_SEED:-}"

if ! python3 -c 'import schemathesis' 2>/dev/null; then
    echo "schemathesis.sh: python3 cannot import schemathesis; run: python3 -m pip install -r scripts/requirements-schemathesis.txt" >&2
    exit 1
fi

cargo build --quiet -p origin-api
BIN="$PWD/target/debug/origin-api"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/shortlink-schemathesis.XXXXXX")"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

export DATABASE_URL="sqlite://$WORK/db.sqlite"
export RUST_LOG="${RUST_LOG:-warn}"
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }

"$BIN" migrate >/dev/null
account="$("$BIN" admin account create --email fuzz@shortlink.local)"
ACCOUNT_ID="$(json_field id <<<"$account")"
KEY="$("$BIN" admin api-key generate --account "$ACCOUNT_ID" | json_field api_key)"
"$BIN" admin domain add --host sho.localhost --platform --fallback-url https://example.com/ >/dev/null
"$BIN" admin domain add --host links.fuzz.example --account "$ACCOUNT_ID" >/dev/null
"$BIN" admin group create --account "$ACCOUNT_ID" --name Fuzz \
    --settings '{"analytics":{"enabled":true}}' >/dev/null
"$BIN" admin blocklist add --domain blocked.example >/dev/null
# Another account, so generated ids can hit rows the key does not own.
other="$("$BIN" admin account create --email other@shortlink.local)"
"$BIN" admin group create --account "$(json_field id <<<"$other")" --name Theirs >/dev/null

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"
# validate-dynamic's per-IP limit would answer most generated requests with 429 (documented,
# but it hides the handler): raise it for the run. create-link keeps its real limit of 100.
VALIDATE_BURST=1000000 VALIDATE_PER_MINUTE=1000000 \
    "$BIN" serve --listen "127.0.0.1:$PORT" 2>"$WORK/origin.log" &
SERVER_PID=$!

deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "$BASE/healthz" 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "schemathesis.sh: origin-api exited; log:" >&2
        cat "$WORK/origin.log" >&2
        exit 1
    fi
    if ((SECONDS >= deadline)); then
        echo "schemathesis.sh: origin-api not ready within 30 s" >&2
        exit 1
    fi
    sleep 0.1
done

# Checks: all of them except
#   positive_data_acceptance  - schema-valid is not always acceptable (a long_url that matches
#                               ^https:// may still have no valid host; create-link is rate limited);
#   object_level_authorization - schemathesis would need a second key and links between operations;
#                               the isolation tests (origin-api/tests/it/isolation.rs) check every route;
#   ignored_auth               - validate-dynamic, healthz and the document are public by design.
args=(
    --config-file "$PWD/scripts/schemathesis.toml"
    run "$BASE/api/v1/openapi.json"
    --header "Authorization: Token $KEY"
    --checks all
    --exclude-checks positive_data_acceptance,object_level_authorization,ignored_auth
    --max-examples "$MAX_EXAMPLES"
    --max-response-time 10
    --request-timeout 15
    --workers 2
    --suppress-health-check too_slow,filter_too_much
    --report junit
    --report-dir "$WORK/report"
    --output-truncate true
)
[[ -n "$SEED" ]] && args+=(--seed "$SEED")

# From the temp dir: schemathesis keeps a crash cache (.schemathesis/) in its working directory.
run_schemathesis() {
    status=0
    (cd "$WORK" && schemathesis "${args[@]}") >"$WORK/run.log" 2>&1 || status=$?
    cat "$WORK/run.log"
}
run_schemathesis
# schemathesis 4.32.5 sometimes crashes inside its own coverage phase (a KeyError in its generator, a "Runtime
# Error" in its summary) while every test case passed. That is the tool failing, not the API: run once more, and
# let that run decide. Any failed check, or a second crash, still fails.
if ((status != 0)) && grep -q "Runtime Error" "$WORK/run.log" &&
    grep -Eq '([0-9]+) generated, \1 passed' "$WORK/run.log" && [[ -z "$SEED" ]]; then
    echo "schemathesis.sh: schemathesis crashed with every case passing; running it once more" >&2
    run_schemathesis
fi
# Evidence that the success paths ran, not only the refusals.
curl -fsS "$BASE/api/v1/external/links?limit=1" -H "Authorization: Token $KEY" |
    python3 -c 'import json,sys; print("schemathesis.sh: links created during the run:", json.load(sys.stdin)["total"])'
curl -fsS "$BASE/api/v1/external/audit-log?limit=1" -H "Authorization: Token $KEY" |
    python3 -c 'import json,sys; print("schemathesis.sh: activity-log rows after the run:", json.load(sys.stdin)["total"])'
if ((status != 0)); then
    echo "schemathesis.sh: failures found (origin log follows)" >&2
    tail -n 50 "$WORK/origin.log" >&2
fi
exit "$status"
