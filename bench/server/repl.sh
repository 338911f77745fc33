#!/usr/bin/env bash
# Replication benchmark: strata-server with one strata replica against
# redis-server 7 with one redis replica, on 127.0.0.1, in one run, with
# strata and redis rounds alternating (REPS repetitions; the report gives
# medians and each repetition's ratio; no goal is asserted anywhere).
# Both servers run run.sh's default comparison settings, primary and
# replica alike: strata-server --durability default, redis-server
# --appendonly yes --appendfsync everysec.
#
# 1. Write throughput: redis-benchmark -t set -c 50 -n N -r N, -P 16 and
#    -P 1, against (a) strata alone, (b) strata with a replica attached
#    (link up before the run), (c) redis alone, (d) redis with a replica.
#    After each replicated run, the time the replica takes to reach the
#    primary's offset (catch-up) and how often its link dropped. Goals:
#    (b)/(a) >= 0.9 and (b)/(d) >= 1.0.
# 2. Replica lag under YCSB A (bench/server/ycsb, built with Maven): while
#    workload A runs against the primary, repl_probe.py lag SETs a probe key
#    to a sequence number every 10 ms on the primary and polls the replica
#    for it (lag from the primary's reply to the replica showing it: p50,
#    p99, max), and samples master_repl_offset - slave_repl_offset every
#    100 ms (byte lag).
# 3. Full sync of a data set FS_DATA_MB large to a fresh strata replica from
#    a strata primary held to FS_LIMIT_MB by a memory cgroup (v1, needs
#    root): load, drop the page cache, then attach the replica while
#    repl_probe.py latency runs a paced SET/GET load on the primary; the
#    report gives the sync's duration, the primary's peak RSS and cgroup
#    peak, its latency during the sync against before, errors and the
#    longest stall. strata only: redis-server keeps its data set in memory,
#    so it cannot hold 4x its limit. strata-server's engine block cache is
#    256 MiB of DRAM and, in the build this was written against (afe176d),
#    has no flag; that server's anonymous memory grew to some 490 MB
#    loading 1 GB of 1000-byte values and was OOM-killed in cgroups of 64
#    and 384 MB during the load, hence FS_LIMIT_MB 768 (and 3 GB of data)
#    by default. A binary whose --help offers --block-cache-size gets
#    FS_LIMIT_MB / 8 for it and the sizes first asked for (256 MB, 1 GB).
#
# usage: bench/server/repl.sh [--quick] [--skip-throughput] [--skip-lag] [--skip-fullsync]
# env:   STRATA_SERVER_BIN (default: cargo build --release, target/release/strata-server),
#        REPS (3), N (1000000), YCSB_RECORDS (100000), YCSB_OPS (1000000),
#        YCSB_THREADS (8), FS_LIMIT_MB (768; 256 with --block-cache-size),
#        FS_DATA_MB (4 x FS_LIMIT_MB),
#        FS_VALUE (1000: value bytes), FS_PM_MB (FS_LIMIT_MB / 4, at least 16:
#        the PM region file, charged to the cgroup as page cache),
#        FS_RATE (1000: probe operations per second during the sync),
#        FS_BEFORE_S (10: seconds of latency measured before the sync),
#        FS_SYNC_TIMEOUT (900: seconds the replica gets to come up and catch up),
#        OUT (default bench/server/results/<date>-repl)
# --quick: a smoke run of seconds, not a measurement (N=20000, REPS=2,
#          YCSB 2000 records and operations; full sync of 128 MB under a
#          limit of 32 MB with --block-cache-size, else of 96 MB under 320 MB:
#          the plumbing only, not 4x).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
export PATH="$PATH:/usr/sbin:/sbin"

QUICK=0 DO_TP=1 DO_LAG=1 DO_FS=1
for a in "$@"; do
    case "$a" in
        --quick) QUICK=1 ;;
        --skip-throughput) DO_TP=0 ;;
        --skip-lag) DO_LAG=0 ;;
        --skip-fullsync) DO_FS=0 ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    N="${N:-20000}" REPS="${REPS:-2}" YCSB_RECORDS="${YCSB_RECORDS:-2000}" YCSB_OPS="${YCSB_OPS:-2000}"
    FS_BEFORE_S="${FS_BEFORE_S:-2}" FS_SYNC_TIMEOUT="${FS_SYNC_TIMEOUT:-120}"
fi
N="${N:-1000000}" REPS="${REPS:-3}"
YCSB_RECORDS="${YCSB_RECORDS:-100000}" YCSB_OPS="${YCSB_OPS:-1000000}" YCSB_THREADS="${YCSB_THREADS:-8}"
FS_VALUE="${FS_VALUE:-1000}" FS_RATE="${FS_RATE:-1000}" FS_BEFORE_S="${FS_BEFORE_S:-10}"
FS_SYNC_TIMEOUT="${FS_SYNC_TIMEOUT:-900}"
OUT="${OUT:-$ROOT/bench/server/results/$(date +%Y%m%d-%H%M%S)-repl}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/strata-repl-bench.XXXXXX)"
PROBE=(python3 "$ROOT/bench/server/repl_probe.py")
YCSB_DIR="$ROOT/bench/server/ycsb"

for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed (Debian: redis-server, redis-tools)" >&2; exit 1; }
done
if [ "$DO_LAG" = 1 ]; then
    for tool in mvn java; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed for the YCSB lag part (or --skip-lag)" >&2; exit 1; }
    done
fi

if [ -n "${STRATA_SERVER_BIN:-}" ]; then
    STRATA="$(realpath "$STRATA_SERVER_BIN")"
else
    cargo build --release -p strata-server
    STRATA="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)/strata-server"
fi

# The full sync's sizes depend on whether the engine's block cache can be
# sized (see the header).
BLOCK_CACHE=0
"$STRATA" --help 2>/dev/null | grep -q -- "--block-cache-size" && BLOCK_CACHE=1
if [ "$QUICK" = 1 ] && [ "$BLOCK_CACHE" = 1 ]; then
    FS_LIMIT_MB="${FS_LIMIT_MB:-32}" FS_DATA_MB="${FS_DATA_MB:-128}"
elif [ "$QUICK" = 1 ]; then
    FS_LIMIT_MB="${FS_LIMIT_MB:-320}" FS_DATA_MB="${FS_DATA_MB:-96}"
elif [ "$BLOCK_CACHE" = 1 ]; then
    FS_LIMIT_MB="${FS_LIMIT_MB:-256}"
else
    FS_LIMIT_MB="${FS_LIMIT_MB:-768}"
fi
FS_DATA_MB="${FS_DATA_MB:-$((4 * FS_LIMIT_MB))}"
FS_PM_MB="${FS_PM_MB:-$((FS_LIMIT_MB / 4 > 16 ? FS_LIMIT_MB / 4 : 16))}"

PIDS=() CGROUP=""
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    # A cgroup can be removed once its processes are gone.
    [ -n "$CGROUP" ] && rmdir "$CGROUP" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "strata=$STRATA"
    echo "repo_head=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "redis=$(redis-server --version | head -1)"
    echo "quick=$QUICK reps=$REPS n=$N ycsb_records=$YCSB_RECORDS ycsb_ops=$YCSB_OPS ycsb_threads=$YCSB_THREADS"
    echo "nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/params.txt"

port=$((17000 + RANDOM % 1000 * 5))
# Sets p to a port no earlier server of this run used (a plain function, not
# $(...), so the counter advances in this shell).
next_port() { port=$((port + 1)); p=$port; }

wait_ready() { # port pid
    for _ in $(seq 1 600); do
        # A server that lost the port to another answers PONG from that
        # one for a moment: it must still be running.
        if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ]; then sleep 0.1; kill -0 "$2" && return 0; fi
        kill -0 "$2" 2>/dev/null || { echo "server on port $1 exited" >&2; return 1; }
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2
    return 1
}

# start <strata|redis> <name> [primary port]: starts a server with the
# default comparison's persistence (a replica of the given primary), on a
# fresh port; sets SP (port), SPID, SDIR. Extra flags in EXTRA (an array),
# a command prefix in WRAP (for the cgroup).
EXTRA=() WRAP=()
start() {
    local kind="$1" name="$2" primary="${3:-}"
    next_port; SP=$p; SDIR="$WORK/$name-$SP"; mkdir -p "$SDIR"
    local cmd
    if [ "$kind" = strata ]; then
        cmd=("$STRATA" --port "$SP" --dir "$SDIR/data" --durability default)
        [ -n "$primary" ] && cmd+=(--replicaof "127.0.0.1 $primary")
    else
        cmd=(redis-server --port "$SP" --bind 127.0.0.1 --dir "$SDIR" --save "" --appendonly yes --appendfsync everysec)
        [ -n "$primary" ] && cmd+=(--replicaof 127.0.0.1 "$primary")
    fi
    "${WRAP[@]}" "${cmd[@]}" "${EXTRA[@]}" >"$SDIR/log" 2>&1 &
    SPID=$!; PIDS+=("$SPID")
    wait_ready "$SP" "$SPID"
}

# stop_all: stops every server started (replica first), keeps their logs
# in OUT under the given prefix and deletes their files, so one run's
# writeback does not land on the disk while the next is measured.
stop_all() { # log-prefix
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill "${PIDS[$i]}" 2>/dev/null || true
        wait "${PIDS[$i]}" 2>/dev/null || true
    done
    PIDS=()
    for d in "$WORK"/*/; do
        [ -f "$d/log" ] && cp "$d/log" "$OUT/log-$1-$(basename "$d")"
        rm -rf "$d"
    done
}

# pair <strata|redis>: a primary (PP, PPID) and its replica (RP), link up.
pair() {
    start "$1" primary; PP=$SP PPID_=$SPID
    start "$1" replica "$PP"; RP=$SP RDIR=$SDIR
    "${PROBE[@]}" wait-link "$RP" --timeout 60 >/dev/null
}

# link_drops <strata|redis>: how often the replica's link went down
# (strata-server logs "reconnecting"; redis-server "Connecting to MASTER"
# once per connection, the first included).
link_drops() {
    local n
    if [ "$1" = strata ]; then
        n=$(grep -c "reconnecting" "$RDIR/log" || true)
    else
        n=$(( $(grep -c "Connecting to MASTER" "$RDIR/log" || true) - 1 ))
    fi
    echo "$n"
}

rb() { # name port pipeline
    redis-benchmark -h 127.0.0.1 -p "$2" -t set -P "$3" -c 50 -n "$N" -r "$N" --csv \
        >"$OUT/rb-$1.csv" 2>"$OUT/rb-$1.err"
    printf '%-28s %s\n' "$1" "$(tail -1 "$OUT/rb-$1.csv" | cut -d, -f2)"
}

if [ "$DO_TP" = 1 ]; then
    echo "== 1. write throughput with a replica (N=$N, $REPS repetitions)"
    for rep in $(seq 1 "$REPS"); do
        # The first repetition's files keep their plain names (report.py's rule).
        sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
        for P in 16 1; do
            for kind in strata redis; do
                start "$kind" primary
                rb "$kind-solo-P$P$sfx" "$SP" "$P"
                stop_all "$kind-solo-P$P$sfx"
                pair "$kind"
                rb "$kind-repl-P$P$sfx" "$PP" "$P"
                name="$kind-repl-P$P$sfx"
                if ! "${PROBE[@]}" catchup "$PP" "$RP" --timeout 600 >"$OUT/catchup-$name.json"; then
                    echo "  $name: the replica did not catch up (see $OUT/catchup-$name.json)" >&2
                fi
                echo "link_drops=$(link_drops "$kind")" >"$OUT/drops-$name.txt"
                echo "  catch-up $(cat "$OUT/catchup-$name.json"), $(cat "$OUT/drops-$name.txt")"
                stop_all "$name"
            done
        done
    done
fi

ycsb() { # load|run port outfile
    local mode=load
    [ "$1" = run ] && mode=t
    java -cp "$YCSB_DIR/target/strata-ycsb-redis-0.1.0.jar:$YCSB_DIR/target/lib/*" site.ycsb.Client "-$mode" \
        -db site.ycsb.db.StrataRedisClient -P "$YCSB_DIR/workloads/workloada" \
        -p recordcount="$YCSB_RECORDS" -p operationcount="$YCSB_OPS" \
        -p redis.host=127.0.0.1 -p redis.port="$2" -threads "$YCSB_THREADS" >"$3" 2>"$3.err"
    grep -E "^\[OVERALL\], Throughput" "$3" || { echo "YCSB failed, see $3.err" >&2; tail -5 "$3.err" >&2; return 1; }
}

if [ "$DO_LAG" = 1 ]; then
    echo "== 2. replica lag under YCSB A ($YCSB_RECORDS records, $YCSB_OPS operations, $YCSB_THREADS threads)"
    (cd "$YCSB_DIR" && mvn -q -B -Dstyle.color=never package -DskipTests) >"$WORK/mvn.log" 2>&1 \
        || { tail -30 "$WORK/mvn.log" >&2; exit 1; }
    for rep in $(seq 1 "$REPS"); do
        sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
        for kind in strata redis; do
            name="$kind$sfx"
            pair "$kind"
            ycsb load "$PP" "$OUT/ycsb-load-$name.txt" >/dev/null
            "${PROBE[@]}" catchup "$PP" "$RP" --timeout 600 >/dev/null || echo "  $name: no catch-up after the load" >&2
            rm -f "$WORK/stop" "$WORK/ready"
            "${PROBE[@]}" lag "$PP" "$RP" --stop "$WORK/stop" --ready "$WORK/ready" --out "$OUT/lag-$name.json" \
                >"$WORK/lag.out" &
            probe=$!
            # The probe must be writing before YCSB starts (a quick run's
            # YCSB can end before Python is up on a busy machine).
            for _ in $(seq 1 300); do [ -e "$WORK/ready" ] || sleep 0.1; done
            echo -n "  $name: "; ycsb run "$PP" "$OUT/ycsb-a-$name.txt" || true
            touch "$WORK/stop"
            wait "$probe" || echo "  $name: the lag probe reported errors (see $OUT/lag-$name.json)" >&2
            echo "  $name: $(cat "$WORK/lag.out")"
            echo "link_drops=$(link_drops "$kind")" >"$OUT/drops-lag-$name.txt"
            stop_all "lag-$name"
        done
    done
fi

# alive <pid>: the process runs (a killed child stays a zombie until
# waited, and kill -0 succeeds on a zombie).
alive() { [ -r "/proc/$1/status" ] && ! grep -q "^State:.*zombie" "/proc/$1/status"; }

# fullsync_fail <reason>: records why part 3 stopped early (the report
# shows it) and stops the servers.
fullsync_fail() {
    local kills
    kills=$(awk '/^oom_kill / {print $2}' "$CGROUP/memory.oom_control" 2>/dev/null || echo "?")
    echo "  full sync: $1 (cgroup OOM kills: $kills)" >&2
    printf '{"error": "%s", "cgroup_oom_kills": "%s", "cgroup_limit_bytes": %s, "cgroup_max_usage_bytes": %s}\n' \
        "$1" "$kills" "$(cat "$CGROUP/memory.limit_in_bytes")" "$(cat "$CGROUP/memory.max_usage_in_bytes")" \
        >"$OUT/fullsync.json"
    stop_all fullsync
}

# Part 3 (see the header); returns early, through fullsync_fail, when the
# primary does not survive a step.
fullsync() {
    CGROUP="$CGROOT/strata-repl-bench-$$"
    mkdir "$CGROUP"
    echo $((FS_LIMIT_MB << 20)) >"$CGROUP/memory.limit_in_bytes"
    local keys=$(( (FS_DATA_MB << 20) / FS_VALUE )) bc_mb=256 probe
    # The PM region file and the read cache are sized from the limit: with
    # the defaults (4 GiB, 256 MiB) the PM file's page cache alone would
    # exceed it.
    EXTRA=(--pm-size "${FS_PM_MB}mb" --read-cache-size "$((FS_LIMIT_MB / 8))mb")
    if [ "$BLOCK_CACHE" = 1 ]; then
        bc_mb=$((FS_LIMIT_MB / 8)); EXTRA+=(--block-cache-size "${bc_mb}mb")
    fi
    {
        echo "limit_mb=$FS_LIMIT_MB data_mb=$FS_DATA_MB value_bytes=$FS_VALUE keys=$keys"
        echo "pm_mb=$FS_PM_MB read_cache_mb=$((FS_LIMIT_MB / 8)) block_cache_mb=$bc_mb"
        echo "block_cache_flag=$BLOCK_CACHE probe_rate=$FS_RATE before_s=$FS_BEFORE_S sync_timeout_s=$FS_SYNC_TIMEOUT"
    } >"$OUT/fullsync-params.txt"
    # The server joins the cgroup before exec, so the limit holds from its
    # first page.
    WRAP=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CGROUP")
    start strata primary; PP=$SP PPID_=$SPID
    WRAP=() EXTRA=()
    grep -qx "$PPID_" "$CGROUP/cgroup.procs" || { fullsync_fail "the primary is not in $CGROUP"; return; }
    echo "  loading $keys keys of $FS_VALUE bytes"
    "${PROBE[@]}" load "$PP" --keys "$keys" --value-size "$FS_VALUE" | tee "$OUT/fullsync-load.json" || true
    alive "$PPID_" || { fullsync_fail "the primary died during the load"; return; }
    {
        echo "load_cgroup_max_bytes=$(cat "$CGROUP/memory.max_usage_in_bytes")"
        echo "load_vm_hwm_kb=$(awk '/^VmHWM/ {print $2}' "/proc/$PPID_/status")"
        echo "primary_dir_mb=$(du -sm "$WORK"/primary-*/data | cut -f1)"
    } >>"$OUT/fullsync-params.txt"
    sync
    echo 3 >/proc/sys/vm/drop_caches || echo "  could not drop the page cache" >&2
    "${PROBE[@]}" latency "$PP" --seconds "$FS_BEFORE_S" --rate "$FS_RATE" --out "$OUT/fullsync-latency-before.json"
    # The peak from here on is the sync's.
    echo 0 >"$CGROUP/memory.max_usage_in_bytes"
    rm -f "$WORK/stop"
    "${PROBE[@]}" latency "$PP" --stop "$WORK/stop" --rate "$FS_RATE" --out "$OUT/fullsync-latency-during.json" &
    probe=$!
    # The replica is not in the cgroup.
    start strata replica "$PP"; RP=$SP RDIR=$SDIR
    "${PROBE[@]}" fullsync-watch "$PP" "$RP" --pid "$PPID_" --cgroup "$CGROUP" --out "$OUT/fullsync.json" \
        --timeout "$FS_SYNC_TIMEOUT" \
        || echo "  the full sync did not complete (see $OUT/fullsync.json)" >&2
    touch "$WORK/stop"
    wait "$probe" || true
    if alive "$PPID_"; then
        "${PROBE[@]}" compare "$PP" "$RP" >"$OUT/fullsync-compare.json" || echo "  the replica differs from the primary" >&2
        echo "  $(cat "$OUT/fullsync-compare.json")"
    fi
    echo "link_drops=$(link_drops strata)" >"$OUT/drops-fullsync.txt"
    stop_all fullsync
}

if [ "$DO_FS" = 1 ]; then
    echo "== 3. full sync of ${FS_DATA_MB} MB from a strata primary limited to ${FS_LIMIT_MB} MB"
    CGROOT=/sys/fs/cgroup/memory
    if [ "$(id -u)" -ne 0 ] || [ ! -w "$CGROOT/cgroup.procs" ]; then
        echo "  skipped: needs root and a cgroup v1 memory controller at $CGROOT" | tee "$OUT/fullsync-skipped.txt"
    else
        fullsync
        rmdir "$CGROUP" && CGROUP=""
    fi
fi

python3 "$ROOT/bench/server/report_repl.py" "$OUT" | tee "$OUT/report.md"
echo "raw outputs: $OUT"
