#!/usr/bin/env bash
# The source tree's shape (issue 24): no import circle between the child
# modules of any module of any crate, at every level of the module tree
# (crates/*/src; each circle printed with one file:line reference per edge),
# no engine file over 600 lines outside its tests, db/ under 2,500 lines and
# free of level-0 kinds. Standard library only.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 scripts/architecture.py
