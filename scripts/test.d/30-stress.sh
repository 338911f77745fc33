#!/usr/bin/env bash
# strata-stress, short form: each mode for a few seconds (about a minute in
# all on 2 cores), then a check of the JSON line each mode prints: the mode
# ran, did real work, and found no violation. Scale with
# STRATA_STRESS_SCALE (a multiplier of the per-mode budgets, default 1) and
# pick the seed with STRATA_STRESS_SEED (default: from the clock; printed).
#
# Long runs: cargo run --release --bin strata-stress -- --mode M --seconds 600
# (the model mode over one level-0 kind only: STRATA_MODEL_L0=pm-only, say;
# SIGKILL and failover in a replicated group: --mode kill --target replication).
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGET="${CARGO_TARGET_DIR:-target}"
SCALE="${STRATA_STRESS_SCALE:-1}"
SEED="${STRATA_STRESS_SEED:-$(( $(date +%s) % 1000000007 ))}"

cargo build --release -p strata-stress
# The kill and limits modes also drive strata-server when it builds.
if ! cargo build --release -p strata-server; then
    echo "30-stress: strata-server did not build; its kill and limits rounds are skipped"
fi
BIN="$TARGET/release/strata-stress"

# mode seconds key-that-must-be-positive [more flags]
MODES=(
    "pm-crash 16 crash_states"
    "fs-fault 12 faults_injected"
    "kill 14 kill_rounds"
    "model 10 ops"
    "limits 8 rounds"
    "kill 6 kill_rounds --shards 2"
    "kill 10 repl_rounds --target replication"
    "model 6 cross_batches --shards 4"
    "limits 4 sharded_pm_full_errors --shards 2"
    "pm-crash 5 crash_states --shards 2"
    "fs-fault 4 faults_injected --shards 2"
)

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
status=0
for m in "${MODES[@]}"; do
    read -r mode secs key more <<<"$m"
    # The replication rounds are all strata-server: nothing to run without it.
    if [[ "${more:-}" == *replication* ]] && [ ! -x "${STRATA_SERVER_BIN:-$TARGET/release/strata-server}" ]; then
        echo "--- strata-stress --mode $mode ${more:-}: skipped (no strata-server binary)"
        continue
    fi
    secs=$(awk -v s="$secs" -v k="$SCALE" 'BEGIN { printf "%.1f", s * k }')
    echo "--- strata-stress --mode $mode --seconds $secs --seed $SEED ${more:-}"
    # shellcheck disable=SC2086 # $more is a list of flags
    if ! "$BIN" --mode "$mode" --seconds "$secs" --seed "$SEED" ${more:-} </dev/null >"$OUT/$mode.out" 2>"$OUT/$mode.err"; then
        echo "30-stress: mode $mode FAILED"
        tail -n 20 "$OUT/$mode.err"
        status=1
    fi
    line="$(tail -n 1 "$OUT/$mode.out")"
    echo "$line"
    if ! python3 - "$mode" "$key" "$line" <<'PY'
import json, sys
mode, key, line = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.loads(line)
except ValueError as e:
    sys.exit(f"not a JSON line: {e}")
if r.get("mode") != mode:
    sys.exit(f"JSON line is for mode {r.get('mode')!r}, not {mode!r}")
if r.get("violations") != 0:
    sys.exit(f"{r.get('violations')} violations")
if not isinstance(r.get(key), int) or r[key] <= 0:
    sys.exit(f"{key} = {r.get(key)!r}: the mode did no work")
PY
    then
        echo "30-stress: mode $mode: bad summary line"
        status=1
    fi
done
if [ "$status" -ne 0 ]; then
    echo "30-stress: FAILED (seed $SEED)"
    exit 1
fi
echo "30-stress: all modes passed (seed $SEED)"
