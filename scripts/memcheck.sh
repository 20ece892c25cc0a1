#!/usr/bin/env bash
# The Python suite once under valgrind memcheck (issue 8): invalid reads and writes, uses of
# uninitialised memory and bad frees in the binding's unsafe code (buffer exports, zero-copy
# arrays, the asyncio bridge) fail the run. Leaks are not counted: CPython and NumPy keep
# interned objects alive until exit. Slow (~30x): a few minutes for the suite.
#
#   ./scripts/memcheck.sh                 # the whole Python suite
#   ./scripts/memcheck.sh -k payload      # a subset (arguments go to pytest)
#
# Needs valgrind (Debian: sudo apt-get install -y valgrind) and the .venv that
# ./scripts/test.sh creates. The extension is the release build installed there (with debug
# info off, reports name functions but not lines).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing: sudo apt-get install -y valgrind" >&2; exit 2; }
[ -x .venv/bin/python ] || { echo "run ./scripts/test.sh first (it creates .venv)" >&2; exit 2; }
# PYTHONMALLOC=malloc: CPython's small-object allocator reads memory valgrind considers
# uninitialised; with malloc every allocation is visible to memcheck.
# The watchdog is stretched (STAMPEDE_WATCHDOG_S) and timing-sensitive Ctrl-C tests still pass
# because they only assert what happened, never how fast.
PYTHONMALLOC=malloc STAMPEDE_WATCHDOG_S=600 STAMPEDE_FUZZ_CASES=300 \
    valgrind --tool=memcheck --error-exitcode=99 --leak-check=no --track-origins=no \
    --suppressions=scripts/valgrind-python.supp --quiet \
    .venv/bin/python -m pytest -q -p no:cacheprovider python/tests "$@"
