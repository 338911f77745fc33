#!/usr/bin/env bash
# Fuzz smoke run: every cargo-fuzz target in fuzz/ for a few seconds
# (STRATA_FUZZ_SECONDS, default 5) on seeds generated from real engine
# files. Needs the nightly toolchain (skipped with a message without it);
# installs cargo-fuzz if it is missing. Corpora persist under the cargo
# target directory; a crash fails the script and leaves the input in
# fuzz/artifacts/<target>/ (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"

SECS="${STRATA_FUZZ_SECONDS:-5}"
TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "40-fuzz: skipped: the nightly toolchain is not installed (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "40-fuzz: installing cargo-fuzz"
    cargo install --locked cargo-fuzz </dev/null
fi

# Seeds from real files.
cargo build --release -p strata-stress
SEEDS="$TARGET/fuzz-seeds"
rm -rf "$SEEDS"
"$TARGET/release/strata-stress" --gen-corpus "$SEEDS" </dev/null

TARGETS=(block_decode sstable_open log_recover manifest_replay matrix_row resp_frame restore_payload)
cd fuzz
export CARGO_TARGET_DIR="$TARGET/fuzz"
cargo +nightly fuzz build -O </dev/null
for t in "${TARGETS[@]}"; do
    corpus="$TARGET/fuzz-corpus/$t"
    mkdir -p "$corpus"
    cp -n "$SEEDS/$t/"* "$corpus/" 2>/dev/null || true
    echo "--- fuzz $t for ${SECS}s ($(ls "$corpus" | wc -l) inputs)"
    if ! cargo +nightly fuzz run -O "$t" "$corpus" -- \
        -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 </dev/null \
        >"$TARGET/fuzz-$t.log" 2>&1; then
        tail -n 40 "$TARGET/fuzz-$t.log"
        echo "40-fuzz: target $t FAILED; the input is in fuzz/artifacts/$t/"
        exit 1
    fi
    grep -E "^(Done|stat::number_of_executed_units)" "$TARGET/fuzz-$t.log" | tail -n 1 || true
done
echo "40-fuzz: all targets ran clean"
