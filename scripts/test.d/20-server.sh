#!/usr/bin/env bash
# strata-server integration tests: redis-py (RESP2 and RESP3) over every
# command, auth and limits, storage modes and restarts, hostile input,
# the kill -9 durability loop, and sharding behind twemproxy.
#
# Installs what it needs: redis-tools and nutcracker (Debian), redis and
# pytest (pip, into a venv under the cargo target directory).
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
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    $SUDO apt-get update -qq </dev/null
    $SUDO apt-get install -y -qq "${missing[@]}" </dev/null
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
