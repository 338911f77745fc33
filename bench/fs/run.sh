#!/usr/bin/env bash
# Sweeps the strata-fs metadata benchmark (`strata-fs bench`) on loopback and
# writes a markdown summary:
#
# 1. mdtest-style phases (dir/file create, stat, readdir, rename, remove) and
#    the Pangu operation mix, for 1, 2 and 4 servers, cache on/off,
#    speculation on/off;
# 2. cold lookups of paths of depth 1..16, speculation on vs off (round trips
#    per lookup and latency), for 1, 2 and 4 servers;
# 3. the same POSIX phases through a FUSE mount and on a local directory.
#
# usage: bench/fs/run.sh [--quick]
# env:   THREADS (4), ITEMS (files per dir, 100), DEPTH (2), FANOUT (4),
#        PANGU_OPS (per thread, 5000), LOOKUPS (300), SYNC (0: crash-durable
#        writes; 1: msync before each reply), OUT (results file)
# --quick: ITEMS=10 PANGU_OPS=500 LOOKUPS=50 (a smoke run, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/../.."

THREADS=${THREADS:-4} ITEMS=${ITEMS:-100} DEPTH=${DEPTH:-2} FANOUT=${FANOUT:-4}
PANGU_OPS=${PANGU_OPS:-5000} LOOKUPS=${LOOKUPS:-300} SYNC=${SYNC:-0}
if [ "${1:-}" = "--quick" ]; then ITEMS=10 PANGU_OPS=500 LOOKUPS=50; fi
OUT=${OUT:-bench/fs/results/$(date -u +%Y-%m-%d-%H%M).md}
mkdir -p "$(dirname "$OUT")"

cargo build --release -q -p strata-fs
BIN=target/release/strata-fs
SYNCFLAG=""
if [ "$SYNC" = 1 ]; then SYNCFLAG="--sync"; fi

{
    echo "# strata-fs metadata benchmark"
    echo
    echo "$(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), threads=$THREADS depth=$DEPTH fanout=$FANOUT items=$ITEMS pangu_ops=$PANGU_OPS sync=$SYNC"
    echo
    echo "## mdtest phases and Pangu mix"
    echo
    echo "| label | servers | threads | cache | spec | phase | ops | ops/s | RTT/op | client CPU µs/op | server CPU µs/op |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
} > "$OUT"

for servers in 1 2 4; do
    for cache in on off; do
        for spec in on off; do
            if [ "$cache" = on ] && [ "$spec" = off ] && [ "$servers" != 4 ]; then continue; fi
            "$BIN" bench --servers "$servers" $SYNCFLAG --mode mdtest --threads "$THREADS" --depth "$DEPTH" \
                --fanout "$FANOUT" --items "$ITEMS" --cache "$cache" --speculate "$spec" \
                --label "s$servers" | grep '^| s' >> "$OUT"
            "$BIN" bench --servers "$servers" $SYNCFLAG --mode pangu --threads "$THREADS" --depth 3 \
                --fanout "$FANOUT" --pangu-ops "$PANGU_OPS" --cache "$cache" --speculate "$spec" \
                --label "s$servers" | grep '^| s' >> "$OUT"
        done
    done
done

{
    echo
    echo "## Cold lookup by path depth (no cache): speculation on vs off"
} >> "$OUT"
for servers in 1 2 4; do
    "$BIN" bench --servers "$servers" $SYNCFLAG --mode lookup --lookups "$LOOKUPS" \
        --lookup-depths 1,2,4,6,8,10,12,14,16 | grep '^|' | { if [ "$servers" = 1 ]; then cat; else grep -v -e '^| servers' -e '^|---'; fi; } >> "$OUT"
done
{
    echo
    echo "## The FUSE hop: POSIX phases on a FUSE mount (2 servers) vs a local directory"
} >> "$OUT"
"$BIN" bench --servers 2 $SYNCFLAG --mode fuse --threads "$THREADS" --depth "$DEPTH" --fanout "$FANOUT" \
    --items "$ITEMS" | grep '^|' >> "$OUT"
echo >> "$OUT"
echo "wrote $OUT"
cat "$OUT"
