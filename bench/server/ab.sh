#!/usr/bin/env bash
# Two builds of strata-server side by side: is a change within the
# run-to-run spread of the build before it? Alternates A and B, REPS times
# each, on 127.0.0.1: redis-benchmark SET and GET (-P 16 and -P 1), then
# YCSB workloads A and C through Jedis (the binding of bench/server/ycsb).
# Prints every repetition and the medians, and B/A as ratios.
#
# usage: bench/server/ab.sh A_BINARY B_BINARY
# env:   REPS (5), N (300000 requests per redis-benchmark test),
#        YCSB_RECORDS (100000), YCSB_OPS (100000), YCSB_THREADS (8),
#        SKIP_YCSB=1, OUT (results directory)
set -euo pipefail
A="$(realpath "$1")" B="$(realpath "$2")"
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
REPS="${REPS:-5}" N="${N:-300000}"
YCSB_RECORDS="${YCSB_RECORDS:-100000}" YCSB_OPS="${YCSB_OPS:-100000}" YCSB_THREADS="${YCSB_THREADS:-8}"
OUT="${OUT:-$ROOT/bench/server/results/ab-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/strata-ab.XXXXXX)"
YCSB_DIR="$ROOT/bench/server/ycsb"
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

start() { # binary port
    rm -rf "$WORK/data"
    "$1" --port "$2" --dir "$WORK/data" >"$WORK/log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        [ "$(redis-cli -p "$2" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "server did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }

if [ "${SKIP_YCSB:-0}" != 1 ]; then (cd "$YCSB_DIR" && mvn -q -B package -DskipTests); fi

port=17600
for rep in $(seq 1 "$REPS"); do
    for side in A B; do
        bin="$A"; [ "$side" = B ] && bin="$B"
        port=$((port + 1)); start "$bin" "$port"
        for P in 16 1; do
            redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n "$N" -r 1000000 -c 50 -P "$P" --csv \
                | awk -F, -v s="$side" -v P="$P" 'NR>1 {gsub(/"/,""); print s, $1 "-P" P, $2}' >>"$OUT/results.txt"
        done
        if [ "${SKIP_YCSB:-0}" != 1 ]; then
            jar="$YCSB_DIR/target/strata-ycsb-redis-0.1.0.jar:$YCSB_DIR/target/lib/*"
            common=(-db site.ycsb.db.StrataRedisClient -p recordcount="$YCSB_RECORDS" -p operationcount="$YCSB_OPS"
                    -p redis.host=127.0.0.1 -p redis.port="$port" -threads "$YCSB_THREADS")
            java -cp "$jar" site.ycsb.Client -load -P "$YCSB_DIR/workloads/workloada" "${common[@]}" >"$WORK/y" 2>&1
            for w in a c; do
                java -cp "$jar" site.ycsb.Client -t -P "$YCSB_DIR/workloads/workload$w" "${common[@]}" >"$WORK/y" 2>&1
                awk -v s="$side" -v w="$w" -F', ' '/^\[OVERALL\], Throughput/ {print s, "YCSB-" w, $3}' "$WORK/y" >>"$OUT/results.txt"
            done
        fi
        stop
        echo "repetition $rep $side done"
    done
done

python3 - "$OUT/results.txt" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    side, test, value = line.split()
    runs[test][side].append(float(value))
print(f"{'test':<12} {'A median':>12} {'B median':>12} {'B/A':>6}  each B/A")
for test, sides in runs.items():
    a, b = statistics.median(sides["A"]), statistics.median(sides["B"])
    each = " ".join(f"{y / x:.2f}" for x, y in zip(sides["A"], sides["B"]))
    print(f"{test:<12} {a:>12.0f} {b:>12.0f} {b / a:>6.2f}  {each}")
EOF
echo "results: $OUT/results.txt"
