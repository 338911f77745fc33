#!/usr/bin/env bash
# Builds Valkey from its public release source, outside the tree, for the
# server benchmarks (bench/server/matrix.sh). Nothing of Valkey is committed.
#
# usage: bench/server/build-valkey.sh SOURCE
#   SOURCE is a Valkey git directory (the release tag VALKEY_TAG is
#   exported from it), an unpacked release tree, or a release tarball.
# env:   VALKEY_TAG (8.0.1), VALKEY_PREFIX (~/.cache/stratakv/valkey-$TAG)
# prints the path of the built valkey-server on its last line; a second run
# with the binary present only prints it.
set -euo pipefail
TAG="${VALKEY_TAG:-8.0.1}"
PREFIX="${VALKEY_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/stratakv/valkey-$TAG}"
BIN="$PREFIX/bin/valkey-server"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
SRC="${1:?usage: build-valkey.sh SOURCE (git dir, release tree or tarball)}"

command -v make >/dev/null && command -v cc >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >/dev/null
}
BUILD="$(mktemp -d /tmp/valkey-build.XXXXXX)"
trap 'rm -rf "$BUILD"' EXIT
if [ -d "$SRC" ] && git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 \
    && git -C "$SRC" rev-parse -q --verify "refs/tags/$TAG" >/dev/null; then
    git -C "$SRC" archive "$TAG" | tar -x -C "$BUILD"
elif [ -d "$SRC" ]; then
    cp -a "$SRC"/. "$BUILD"/
else
    tar -xf "$SRC" -C "$BUILD" --strip-components=1
fi
grep -q "VALKEY_VERSION \"$TAG\"" "$BUILD/src/version.h" \
    || { echo "source is not Valkey $TAG: $(cat "$BUILD/src/version.h")" >&2; exit 1; }
# The release's own defaults (jemalloc, -O3), as its users build it.
make -C "$BUILD" -j"$(nproc)" BUILD_TLS=no >"$BUILD.log" 2>&1 \
    || { tail -30 "$BUILD.log" >&2; exit 1; }
make -C "$BUILD" install PREFIX="$PREFIX" >>"$BUILD.log" 2>&1
rm -f "$BUILD.log"
"$BIN" --version >&2
echo "$BIN"
