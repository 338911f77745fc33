#!/usr/bin/env bash
# strata-server integration tests: redis-py (RESP2 and RESP3) over every
# command, auth and limits, storage modes and restarts, hostile input,
# the kill -9 durability loop, sharding behind twemproxy, and keyspace
# notifications command by command against redis-server 7.0.
#
# Installs what it needs: redis-tools, redis-server, redis-sentinel (the
# failover test runs three) and nutcracker (Debian),
# redis and pytest (pip, into a venv under the cargo target directory).
# redis-server is the reference the keyspace-event tests compare against;
# they start their own instances, so the package's service is kept from
# starting (policy-rc.d) while it installs.
# Scale the crash loop with STRATA_SERVER_CRASH_ROUNDS (default 25).
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/sbin:/sbin"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
missing=()
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    # No service start from the packages' scripts (redis-server's would
    # take port 6379, redis-sentinel's 26379): invoke-rc.d asks policy-rc.d, and 101 means "no".
    POLICY=/usr/sbin/policy-rc.d
    own_policy=""
    if [ ! -e "$POLICY" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
        $SUDO chmod 755 "$POLICY"
        own_policy=1
    fi
    status=0
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}"; } </dev/null || status=$?
    if [ -n "$own_policy" ]; then $SUDO rm -f "$POLICY"; fi
    [ "$status" -eq 0 ] || exit "$status"
fi

TARGET="${CARGO_TARGET_DIR:-target}"
cargo build --release -p strata-server
BIN="$(cd "$TARGET/release" && pwd)/strata-server"

VENV="$TARGET/strata-server-venv"
if ! "$VENV/bin/python" -c 'import redis, pytest' >/dev/null 2>&1; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check redis pytest </dev/null
fi

STRATA_SERVER_BIN="$BIN" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    -W ignore::DeprecationWarning crates/strata-server/tests/python "$@"
