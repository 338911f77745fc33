#!/usr/bin/env bash
# Unit tests of the benchmark scripts' parsers and summaries (bench/compare
# reads db_bench and strata-bench output; a parser that silently misreads a
# figure would put a wrong ratio in a results file), of bench/plot's
# pictures, of bench/server/report.py (YCSB medians over repetitions), and
# of the replication benchmark's report and probe arithmetic
# (bench/server/report_repl.py, repl_probe.py; repl.sh itself is checked
# for syntax only: it needs redis-server, YCSB and root for its cgroup).
# bench/compare and the report need the standard library only; bench/plot
# needs matplotlib, installed here when missing: pip into a venv under the cargo
# target directory, else Debian's python3-matplotlib.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=python3
if ! python3 -c 'import matplotlib' >/dev/null 2>&1; then
    VENV="${CARGO_TARGET_DIR:-target}/bench-plot-venv"
    if ! "$VENV/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
        echo "10-bench-scripts: installing matplotlib into $VENV"
        rm -rf "$VENV"
        if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check matplotlib </dev/null; }; then
            rm -rf "$VENV"
        fi
    fi
    if "$VENV/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
        PY="$VENV/bin/python"
    else
        echo "10-bench-scripts: pip failed; installing Debian's python3-matplotlib"
        SUDO=""
        if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq </dev/null
        $SUDO apt-get install -y -qq python3-matplotlib </dev/null
        PY=/usr/bin/python3
    fi
fi
"$PY" bench/test_compare.py -v
"$PY" bench/test_plot.py -v
"$PY" bench/server/test_report.py -v
"$PY" bench/server/test_report_repl.py -v
bash -n bench/server/repl.sh
