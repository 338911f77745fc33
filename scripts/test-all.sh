#!/usr/bin/env bash
# Runs every test of StrataKV. Installs what the tests need first, so it
# works on a fresh Debian machine (CI runs it with CI=true and no stdin).
#
# 1. `cargo test --workspace` (unit, model, crash, corruption, concurrency tests)
# 2. every scripts/test.d/*.sh in name order (server integration tests,
#    stress modes, fuzz smoke runs, ...); each installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR=never
export RUST_BACKTRACE=1
export DEBIAN_FRONTEND=noninteractive
# A one-shot build gains nothing from incremental state, which is large.
export CARGO_INCREMENTAL=0

step() { printf '\n=== %s ===\n' "$*"; }

step "toolchain"
cargo --version
# Free disk shown up front: a full disk fails builds with odd errors
# (a linker bus error, 'IO failure on output stream').
df -h . /tmp 2>/dev/null || true

step "cargo test --workspace"
cargo test --workspace --no-fail-fast

for s in scripts/test.d/*.sh; do
    [ -e "$s" ] || continue
    step "$s"
    bash "$s"
done

step "all tests passed"
