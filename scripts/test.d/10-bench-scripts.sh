#!/usr/bin/env bash
# Unit tests of the benchmark scripts' parsers and summaries (bench/compare
# reads db_bench and strata-bench output; a parser that silently misreads a
# figure would put a wrong ratio in a results file). Standard library only.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 bench/test_compare.py -v
