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
# uninitialised; with malloc every allocation is visible to memcheck. CPython itself still
# reports errors here (random bytes from getrandom, which this valgrind does not model, flow
# into ints and hashes), so the run counts only the error reports that involve Stampede's code:
# a frame of the binding or the runtime in the error's stack, or in the stack that allocated or
# freed the memory it touched. The whole log stays in target/memcheck.log.
# The watchdog is stretched (STAMPEDE_WATCHDOG_S); timing-sensitive tests only assert what
# happened, never how fast.
mkdir -p target
log=target/memcheck.log
status=0
PYTHONMALLOC=malloc STAMPEDE_WATCHDOG_S=900 STAMPEDE_FUZZ_CASES=300 \
    valgrind --tool=memcheck --leak-check=no --num-callers=40 --log-file="$log" \
    .venv/bin/python -m pytest -q -p no:cacheprovider python/tests "$@" || status=$?
python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.split(r"\n==\d+== \n", text)
ours = [b for b in blocks if re.search(r"stampede|_stampede", b) and re.search(r"(Invalid|uninitialised|free'd|Mismatched|overlap)", b)]
print(f"memcheck: {len(blocks)} report blocks, {len(ours)} involving Stampede's code")
for b in ours[:5]:
    print(b[:3000])
sys.exit(1 if ours else 0)
PY
exit $status
