#!/usr/bin/env bash
# Measures strata-server against Debian's redis-server in one run, on
# 127.0.0.1 only, and prints ratios (the only place speed is claimed):
#
# 1. redis-benchmark -t set,get,incr,hset,mset -n N -r N -c 50, with -P 1
#    and -P 16: strata-server (--durability default) vs redis-server
#    (appendonly yes, appendfsync everysec), and the same with strata-server
#    --event-loops 2; then durable mode: strata-server --durability sync vs
#    redis-server appendfsync always.
# 2. YCSB A-F (site.ycsb:core from Maven Central) through Jedis with a
#    binding mirroring YCSB's Redis binding (bench/server/ycsb), both servers.
# 3. The seed-003 study: 90/10 and 10/90 read/write zipfian runs against
#    --storage memory without persistence (the ideal), with the command log
#    (always, everysec), with snapshots, and --storage engine (default and
#    sync), normalized to the ideal.
#
# usage: bench/server/run.sh [--quick] [--skip-redis-benchmark] [--skip-ycsb] [--skip-study]
# env:   N (default 1000000), YCSB_RECORDS (100000), YCSB_OPS (100000),
#        YCSB_POINT_OPS (YCSB_OPS: operations of the point workloads A-D
#        and F, which run some 40 times faster than E's scans; more make
#        their ratios steadier on a shared machine), YCSB_THREADS (8), YCSB_REPS (1: how many times the YCSB sequence
#        runs on each server, alternating redis and strata; the report
#        gives the median of the repetitions and each one's ratio),
#        RB_REPS (1: alternating repetitions of the durable redis-benchmark
#        runs; the report gives medians), OUT (results directory)
# --quick: N=20000, YCSB_RECORDS=YCSB_OPS=2000 (a smoke run, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/sbin:/sbin"

QUICK=0 DO_RB=1 DO_YCSB=1 DO_STUDY=1
for a in "$@"; do
    case "$a" in
        --quick) QUICK=1 ;;
        --skip-redis-benchmark) DO_RB=0 ;;
        --skip-ycsb) DO_YCSB=0 ;;
        --skip-study) DO_STUDY=0 ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    N="${N:-20000}" YCSB_RECORDS="${YCSB_RECORDS:-2000}" YCSB_OPS="${YCSB_OPS:-2000}"
fi
N="${N:-1000000}"
YCSB_RECORDS="${YCSB_RECORDS:-100000}"
YCSB_OPS="${YCSB_OPS:-100000}"
YCSB_POINT_OPS="${YCSB_POINT_OPS:-$YCSB_OPS}"
export YCSB_THREADS="${YCSB_THREADS:-8}"
OUT="${OUT:-$ROOT/bench/server/results/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/strata-server-bench.XXXXXX)"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
if [ "$DO_YCSB$DO_STUDY" != "00" ]; then
    command -v mvn >/dev/null 2>&1 || need+=(maven)
    command -v java >/dev/null 2>&1 || need+=(default-jdk-headless)
fi
if [ "${#need[@]}" -gt 0 ]; then
    $SUDO apt-get update -qq </dev/null
    $SUDO apt-get install -y -qq "${need[@]}" </dev/null
fi

TARGET="${CARGO_TARGET_DIR:-target}"
cargo build --release -p strata-server
STRATA="$(cd "$TARGET/release" && pwd)/strata-server"

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK" "${SHM_DIR:-}"
}
trap cleanup EXIT

port=17400
# Sets p to a port no earlier server of this run used (a plain function, not
# $(...), so the counter advances in this shell).
next_port() { port=$((port + 1)); p=$port; }

wait_ready() { # port
    for _ in $(seq 1 600); do
        if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ]; then return 0; fi
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2
    return 1
}

SERVER_PID="" SERVER_DIR=""
start_redis() { # port args...
    local p="$1"; shift
    local d="$WORK/redis-$p"; mkdir -p "$d"; SERVER_DIR="$d"
    redis-server --port "$p" --bind 127.0.0.1 --dir "$d" --save "" "$@" >"$d/log" 2>&1 &
    SERVER_PID=$!; PIDS+=("$SERVER_PID")
    wait_ready "$p"
}

start_strata() { # port args...
    local p="$1"; shift
    local d="$WORK/strata-$p"; mkdir -p "$d"; SERVER_DIR="$d"
    "$STRATA" --port "$p" --dir "$d/data" "$@" >"$d/log" 2>&1 &
    SERVER_PID=$!; PIDS+=("$SERVER_PID")
    wait_ready "$p"
}

# Each server's files are deleted once it stops (its log kept in $OUT), so
# the page cache's writeback of one run's gigabytes does not land on the
# disk while the next server is measured.
stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    if [ -n "$SERVER_DIR" ]; then
        cp "$SERVER_DIR/log" "$OUT/log-$(basename "$SERVER_DIR")" 2>/dev/null || true
        rm -rf "$SERVER_DIR"
    fi
    rm -rf "${SHM_DIR:-}"; SHM_DIR=""
}

rb() { # name port pipeline (env RB_CLIENTS: connections, default 50)
    echo "== redis-benchmark $1 (-P $3)"
    redis-benchmark -h 127.0.0.1 -p "$2" -t set,get,incr,hset,mset -n "$N" -r "$N" -c "${RB_CLIENTS:-50}" -P "$3" --csv \
        >"$OUT/rb-$1.csv" 2>"$OUT/rb-$1.err"
    cat "$OUT/rb-$1.csv"
}

if [ "$DO_RB" = 1 ]; then
    for P in 1 16; do
        next_port; start_redis "$p" --appendonly yes --appendfsync everysec
        rb "redis-everysec-P$P" "$p" "$P"; stop_server
        next_port; start_strata "$p" --durability default
        rb "strata-default-P$P" "$p" "$P"; stop_server
        # A tuning, not the default: two event loops (the trade-off is in
        # the summary: more throughput, longer tails when cores are short).
        next_port; start_strata "$p" --durability default --event-loops 2
        rb "strata-loops2-P$P" "$p" "$P"; stop_server
    done
    # The durable comparisons sit near 1.0 and vary by several percent
    # from run to run here: RB_REPS alternating repetitions, and the report
    # gives medians and each repetition's ratio.
    for rep in $(seq 1 "${RB_REPS:-1}"); do
        sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
        next_port; start_redis "$p" --appendonly yes --appendfsync always
        rb "redis-always-P1$sfx" "$p" 1; stop_server
        next_port; start_strata "$p" --durability sync
        rb "strata-sync-P1$sfx" "$p" 1; stop_server
        # Many clients with pipelines: what one sync per event-loop pass shares.
        next_port; start_redis "$p" --appendonly yes --appendfsync always
        RB_CLIENTS=200 rb "redis-always-c200-P4$sfx" "$p" 4; stop_server
        next_port; start_strata "$p" --durability sync
        RB_CLIENTS=200 rb "strata-sync-c200-P4$sfx" "$p" 4; stop_server
    done
    # The same with the PM file on /dev/shm: PM emulated with DRAM as the
    # papers did (survives a process crash, not a power loss; DESIGN.md §3),
    # i.e. what sync costs when persisting is a cache-line flush.
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        SHM_DIR="$(mktemp -d /dev/shm/strata-server-bench.XXXXXX)"
        next_port; start_strata "$p" --durability sync --pm-dir "$SHM_DIR"
        rb "strata-sync-shm-P1" "$p" 1; stop_server
    fi
fi

YCSB_DIR="$ROOT/bench/server/ycsb"
# The server's CPU time (user + system, all threads, in clock ticks) from
# /proc: ycsb() writes what each run used to OUT/<run>.txt.cpu, so the report
# can give CPU per operation, which predicts a faster machine better than
# ops/s on two cores shared with a 16-thread Java client.
CPU_MARK=0
server_cpu() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat" 2>/dev/null || echo 0; }
server_cpu_since() { local now; now=$(server_cpu); echo "ticks=$((now - CPU_MARK)) hz=$(getconf CLK_TCK)"; }

ycsb() { # load|run workload port outfile [extra -p ...]
    local mode="$1" wl="$2" p="$3" out="$4"; shift 4
    CPU_MARK=$(server_cpu)
    [ "$mode" = run ] && mode=t
    java -cp "$YCSB_DIR/target/strata-ycsb-redis-0.1.0.jar:$YCSB_DIR/target/lib/*" site.ycsb.Client "-$mode" \
        -db site.ycsb.db.StrataRedisClient -P "$YCSB_DIR/workloads/$wl" \
        -p recordcount="$YCSB_RECORDS" -p operationcount="$YCSB_OPS" \
        -p redis.host=127.0.0.1 -p redis.port="$p" -threads "$YCSB_THREADS" "$@" >"$out" 2>"$out.err"
    server_cpu_since >"$out.cpu"
    grep -E "^\[OVERALL\], Throughput" "$out" || { echo "YCSB failed, see $out.err" >&2; tail -5 "$out.err" >&2; return 1; }
}

if [ "$DO_YCSB$DO_STUDY" != "00" ]; then
    (cd "$YCSB_DIR" && mvn -q -B package -DskipTests)
fi

if [ "$DO_YCSB" = 1 ]; then
    REPS="${YCSB_REPS:-1}"
    for rep in $(seq 1 "$REPS"); do
        # The first repetition's files keep their plain names.
        sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
        for server in redis strata; do
            next_port
            if [ "$server" = redis ]; then start_redis "$p" --appendonly yes --appendfsync everysec
            else start_strata "$p" --durability default; fi
            echo "== YCSB $server (repetition $rep of $REPS)"
            ycsb load workloada "$p" "$OUT/ycsb-load-$server$sfx.txt"
            # Standard order: D and E insert, so they run last.
            for w in a b c f d e; do
                ops="$YCSB_POINT_OPS"; [ "$w" = e ] && ops="$YCSB_OPS"
                echo -n "$w: "; ycsb run "workload$w" "$p" "$OUT/ycsb-$w-$server$sfx.txt" -p operationcount="$ops"
            done
            stop_server
        done
    done
fi

if [ "$DO_STUDY" = 1 ]; then
    declare -A MODES=(
        [ideal]="--storage memory"
        [log-always]="--storage memory --appendfsync always"
        [log-everysec]="--storage memory --appendfsync everysec"
        [snapshot]="--storage memory --snapshot-seconds 10"
        [engine]="--storage engine"
        [engine-sync]="--storage engine --durability sync"
    )
    # Warm-up (page cache, jars, CPU frequency) so the first mode is not penalized.
    next_port; start_strata "$p" --storage memory
    ycsb load study-read90 "$p" "$WORK/warmup-load.txt" >/dev/null
    ycsb run study-write90 "$p" "$WORK/warmup-run.txt" >/dev/null
    stop_server
    for mode in ideal log-always log-everysec snapshot engine engine-sync; do
        next_port
        # shellcheck disable=SC2086
        start_strata "$p" ${MODES[$mode]}
        echo "== study $mode"
        ycsb load study-read90 "$p" "$OUT/study-$mode-load.txt.log" >/dev/null
        for mix in read90 write90; do
            echo -n "$mix: "; ycsb run "study-$mix" "$p" "$OUT/study-$mode-$mix.txt"
        done
        stop_server
    done
fi

python3 "$ROOT/bench/server/report.py" "$OUT" | tee "$OUT/summary.md"
echo "raw outputs: $OUT"
