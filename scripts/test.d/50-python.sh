#!/usr/bin/env bash
# The stratakv Python package (crates/strata-python): builds and installs it
# with pip (maturin, a release build of the engine) into a fresh virtualenv
# in a temp dir, then runs its pytest suite: the API, bad input, closed and
# locked databases, a SIGKILLed writer, threads, the 100k-key acceptance run.
#
# Installs python3-venv (Debian) if `python3 -m venv` is missing. The build
# uses the workspace's target directory (CARGO_TARGET_DIR if set), so it
# reuses an earlier release build of the engine; from scratch it takes about
# 3 minutes on 2 cores, the tests a few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "installing python3-venv"
    $SUDO apt-get update -qq </dev/null
    $SUDO apt-get install -y -qq python3-venv </dev/null
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/strata-python-test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
python3 -m venv "$TMP/venv"
PY="$TMP/venv/bin/python"

# maturin builds in the workspace's target directory (pip builds a local
# directory in place), so only this crate compiles when the engine's release
# build is already there.
start=$(date +%s)
"$PY" -m pip install -q --no-cache-dir ./crates/strata-python pytest </dev/null
echo "pip install ./crates/strata-python: $(( $(date +%s) - start ))s"

cd crates/strata-python/tests
# Run from the tests directory against the installed package, with the
# temp dir for pytest's own tmp_path databases (removed on exit).
"$PY" -m pytest -q -p no:cacheprovider --basetemp="$TMP/pytest" . "$@" </dev/null
