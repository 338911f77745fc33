#!/usr/bin/env bash
# The redis-benchmark matrix of issue 53: strata-server (its defaults)
# against Valkey 8.0.1 (built from its release source by build-valkey.sh)
# and Debian's redis-server 7.0, both with appendonly yes, appendfsync
# everysec (and save "", as run.sh: no RDB snapshots during a run), on
# 127.0.0.1, the servers alternating (each repetition runs strata, valkey,
# redis in turn, the first server rotating), each run on a fresh server
# and data directory under a mktemp directory in /tmp.
#
# 1. redis-benchmark -t set,get,incr,lpush,rpush,lpop,sadd,hset,zadd,mset
#    -n N -r 1000000 -c 50 --csv, at -P 16 and at -P 1, REPS repetitions.
#    Around each run the server's CPU ticks (utime + stime of
#    /proc/PID/stat, all threads; its reaped children's, e.g. an AOF
#    rewrite, apart) and after it its memory (/proc/PID/status VmRSS,
#    RssAnon, RssFile, RssShmem: strata's PM region file is mapped, so it
#    shows as file or shared memory; the DRAM footprint is RssAnon).
# 2. Memory after ~RSS_KEYS distinct keys of 100 bytes: a fresh server,
#    redis-benchmark -t set -n RSS_KEYS -r 1000000000 -d 100 -P 16 -c 50,
#    then DBSIZE and the memory figures; REPS_RSS alternating repetitions.
# 3. Durable writes: strata-server --durability sync against valkey and
#    redis with appendfsync always, -t set -r 1000000 -P 16 -c 50
#    -n N_DURABLE, alternating, REPS repetitions.
# Then report_matrix.py OUT writes OUT/report.md (medians, ratios, each
# repetition's ratio, CPU per request, memory, and the issue's goals).
#
# usage: bench/server/matrix.sh [--quick]
# env:   N (300000), REPS (5; at least 5 for a committed result),
#        REPS_RSS (1), RSS_KEYS (1000000), N_DURABLE (100000),
#        PORT_BASE (random in 17000-21995), OUT (default
#        bench/server/results/<date>-matrix), STRATA_BIN (default
#        target/release/strata-server, built by cargo only when missing),
#        VALKEY_BIN (default: the path build-valkey.sh prints; VALKEY_SRC is
#        passed to it when Valkey is not built yet), RB_TIMEOUT (1800:
#        seconds one redis-benchmark run may take)
# --quick: N=20000, REPS=1, REPS_RSS=1 with RSS_KEYS=100000, N_DURABLE=5000
#          (a smoke run, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"

QUICK=0
for a in "$@"; do
    case "$a" in
        --quick) QUICK=1 ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    N="${N:-20000}" REPS="${REPS:-1}" REPS_RSS="${REPS_RSS:-1}"
    RSS_KEYS="${RSS_KEYS:-100000}" N_DURABLE="${N_DURABLE:-5000}"
fi
N="${N:-300000}" REPS="${REPS:-5}" REPS_RSS="${REPS_RSS:-1}"
RSS_KEYS="${RSS_KEYS:-1000000}" N_DURABLE="${N_DURABLE:-100000}"
RB_TIMEOUT="${RB_TIMEOUT:-1800}"
TESTS=set,get,incr,lpush,rpush,lpop,sadd,hset,zadd,mset
SERVERS=(strata valkey redis)
OUT="${OUT:-$ROOT/bench/server/results/$(date +%Y%m%d-%H%M%S)-matrix}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed (Debian: redis-server, redis-tools)" >&2; exit 1; }
done

STRATA="${STRATA_BIN:-${CARGO_TARGET_DIR:-target}/release/strata-server}"
if [ ! -x "$STRATA" ]; then
    [ -n "${STRATA_BIN:-}" ] && { echo "STRATA_BIN=$STRATA is not executable" >&2; exit 1; }
    cargo build --release -p strata-server
fi
STRATA="$(realpath "$STRATA")"
if [ -n "${VALKEY_BIN:-}" ]; then
    VALKEY="$(realpath "$VALKEY_BIN")"
else
    VALKEY="$("$ROOT/bench/server/build-valkey.sh" ${VALKEY_SRC:+"$VALKEY_SRC"} | tail -1)"
fi
[ -x "$VALKEY" ] || { echo "no valkey-server at '$VALKEY' (see build-valkey.sh)" >&2; exit 1; }
REDIS="$(command -v redis-server)"
HZ="$(getconf CLK_TCK)"
WORK="$(mktemp -d /tmp/strata-matrix.XXXXXX)"

{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "strata=$STRATA"
    echo "strata_version=$("$STRATA" --version 2>/dev/null | tr ' ' '_')"
    echo "strata_commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "strata_tree_dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no -- crates 2>/dev/null | wc -l | tr -d ' ') (modified tracked files under crates/)"
    echo "strata_binary_mtime=$(date -u -r "$STRATA" +%Y-%m-%dT%H:%M:%SZ)"
    echo "valkey=$VALKEY"
    echo "valkey_version=$("$VALKEY" --version | head -1)"
    echo "redis=$REDIS"
    echo "redis_version=$("$REDIS" --version | head -1)"
    echo "redis_benchmark=$(redis-benchmark --version | head -1)"
    echo "quick=$QUICK n=$N reps=$REPS reps_rss=$REPS_RSS rss_keys=$RSS_KEYS n_durable=$N_DURABLE"
    echo "tests=$TESTS clients=50 random_keyspace=1000000"
    echo "nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg) clk_tck=$HZ"
    echo "kernel=$(uname -r) workdir_fs=$(df -T "$WORK" | awk 'NR == 2 {print $2}')"
} >"$OUT/params.txt"
cat "$OUT/params.txt"

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

port="${PORT_BASE:-$((17000 + RANDOM % 1000 * 5))}"
# Sets p to a free port no earlier server of this run used (a plain
# function, not $(...), so the counter advances in this shell).
next_port() {
    port=$((port + 1))
    while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$((port + 1)); done
    p=$port
}

# alive <pid>: the process runs (a killed child stays a zombie until
# waited, and kill -0 succeeds on a zombie).
alive() { [ -r "/proc/$1/status" ] && ! grep -q "^State:.*zombie" "/proc/$1/status"; }

wait_ready() { # port pid
    for _ in $(seq 1 600); do
        # A server that lost the port to another answers PONG from that
        # one for a moment: it must still be running.
        if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ]; then sleep 0.1; alive "$2" && return 0; fi
        alive "$2" || { echo "server on port $1 exited" >&2; return 1; }
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2
    return 1
}

# start <strata|valkey|redis> [durable]: a fresh server on a fresh port and
# data directory; sets SP (port), SPID, SDIR. "durable": strata
# --durability sync, the others appendfsync always.
start() {
    local kind="$1" durable="${2:-}" cmd
    next_port; SP=$p; SDIR="$WORK/$kind-$SP"; mkdir -p "$SDIR"
    local fsync=everysec; [ -n "$durable" ] && fsync=always
    case "$kind" in
        strata)
            cmd=("$STRATA" --port "$SP" --dir "$SDIR" --pm-dir "$SDIR")
            [ -n "$durable" ] && cmd+=(--durability sync) ;;
        valkey) cmd=("$VALKEY") ;;
        redis) cmd=("$REDIS") ;;
    esac
    if [ "$kind" != strata ]; then
        cmd+=(--port "$SP" --bind 127.0.0.1 --dir "$SDIR" --save "" --appendonly yes --appendfsync "$fsync")
    fi
    "${cmd[@]}" >"$SDIR/log" 2>&1 &
    SPID=$!; PIDS+=("$SPID")
    wait_ready "$SP" "$SPID"
}

# stop <log name>: SHUTDOWN NOSAVE, then kill what is still running; keeps
# the server's log in OUT and deletes its files, so one run's writeback
# does not land on the disk while the next is measured.
stop() {
    timeout 10 redis-cli -p "$SP" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do alive "$SPID" || break; sleep 0.1; done
    alive "$SPID" && kill "$SPID" 2>/dev/null
    for _ in $(seq 1 100); do alive "$SPID" || break; sleep 0.1; done
    alive "$SPID" && kill -9 "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null || true
    PIDS=()  # one server runs at a time
    cp "$SDIR/log" "$OUT/log-$1" 2>/dev/null || true
    rm -rf "$SDIR"
}

# The server's CPU ticks from /proc/PID/stat: utime + stime (fields 14,
# 15) and cutime + cstime (16, 17), counted after the ")" of its name.
cpu_ticks() { sed 's/^.*) //' "/proc/$SPID/stat" | awk '{print $12 + $13}'; }
child_ticks() { sed 's/^.*) //' "/proc/$SPID/stat" | awk '{print $14 + $15}'; }

# mem <file> [dbsize]: the server's resident memory, in kB.
mem() {
    {
        awk '/^(VmRSS|RssAnon|RssFile|RssShmem|VmHWM):/ {printf "%s=%s ", substr($1, 1, length($1) - 1), $2}' \
            "/proc/$SPID/status"
        [ -n "${2:-}" ] && printf 'dbsize=%s ' "$(redis-cli -p "$SP" dbsize)"
        echo
    } >"$1"
}

# rb <name> <requests> <redis-benchmark args...>: one run against the
# current server, with its CPU use (OUT/cpu-<name>.txt) and memory after
# it (OUT/mem-<name>.txt). requests: what the CPU is divided by.
rb() {
    local name="$1" requests="$2"; shift 2
    local t0 c0
    t0=$(cpu_ticks); c0=$(child_ticks)
    if ! timeout "$RB_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$SP" -c 50 --csv "$@" \
        >"$OUT/rb-$name.csv" 2>"$OUT/rb-$name.err"; then
        echo "  redis-benchmark $name failed (see $OUT/rb-$name.err)" >&2
    fi
    if ! alive "$SPID"; then
        echo "  the server of $name exited during the run (see $OUT/log-$name)" >&2
        echo "error=server_exited" >"$OUT/cpu-$name.txt"
        return 0
    fi
    echo "ticks=$(($(cpu_ticks) - t0)) child_ticks=$(($(child_ticks) - c0)) hz=$HZ requests=$requests" \
        >"$OUT/cpu-$name.txt"
    mem "$OUT/mem-$name.txt" "${RB_DBSIZE:-}"
}

# order <rep>: the servers in the order of repetition rep (the first
# server rotates).
order() {
    local i n=${#SERVERS[@]}
    ORDER=()
    for ((i = 0; i < n; i++)); do ORDER+=("${SERVERS[$(((rep - 1 + i) % n))]}"); done
}

# rps_of <csv> <test>: the run's requests per second of one test, for the
# progress lines.
rps_of() { awk -F'"' -v t="$2" '$2 == t {print $4}' "$1" 2>/dev/null; }

ntests=$(echo "$TESTS" | tr ',' '\n' | wc -l)
echo "== 1. redis-benchmark -t $TESTS -n $N -r 1000000 -c 50, -P 16 and -P 1 ($REPS repetitions)"
for rep in $(seq 1 "$REPS"); do
    # The first repetition's files keep their plain names (report.py's rule).
    sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
    order
    for P in 16 1; do
        for kind in "${ORDER[@]}"; do
            name="$kind-P$P$sfx"
            start "$kind"
            # MSET counts as one request (of 10 keys), as redis-benchmark counts it.
            rb "$name" $((N * ntests)) -t "$TESTS" -n "$N" -r 1000000 -P "$P"
            stop "$name"
            printf '  %-16s SET %10s  GET %10s  MSET %10s rps\n' "$name" "$(rps_of "$OUT/rb-$name.csv" SET)" \
                "$(rps_of "$OUT/rb-$name.csv" GET)" "$(rps_of "$OUT/rb-$name.csv" "MSET (10 keys)")"
        done
    done
done

echo "== 2. memory after $RSS_KEYS SETs of 100 bytes to random keys ($REPS_RSS repetitions)"
for rep in $(seq 1 "$REPS_RSS"); do
    sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
    order
    for kind in "${ORDER[@]}"; do
        name="rss-$kind$sfx"
        start "$kind"
        RB_DBSIZE=1 rb "$name" "$RSS_KEYS" -t set -n "$RSS_KEYS" -r 1000000000 -d 100 -P 16
        stop "$name"
        echo "  $name: $(cat "$OUT/mem-$name.txt")"
    done
done

echo "== 3. durable SET: strata --durability sync, valkey and redis appendfsync always ($REPS repetitions)"
for rep in $(seq 1 "$REPS"); do
    sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
    order
    for kind in "${ORDER[@]}"; do
        name="durable-$kind$sfx"
        start "$kind" durable
        rb "$name" "$N_DURABLE" -t set -n "$N_DURABLE" -r 1000000 -P 16
        stop "$name"
        echo "  $name: SET $(rps_of "$OUT/rb-$name.csv" SET) rps"
    done
done

python3 "$ROOT/bench/server/report_matrix.py" "$OUT"
echo "report: $OUT/report.md"
