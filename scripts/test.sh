#!/usr/bin/env bash
# The whole test suite: Rust (unit, rules, model, stress, example, doc tests) and Python.
# On a fresh machine it installs what it needs itself: maturin, numpy, pytest and ruff into .venv.
#
# --quick: the inner loop while developing (at most ~5 minutes after a build): the core, the wire,
# the house rules, the engine in its embedded configuration (rules, model, simulations, stress)
# and the Python semantic suites on the embedded runtime. Run the whole suite before you push.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Python package is built with the dev profile: it reuses the debug build of every dependency
# the Rust tests made (no second, release build of zenoh and the rest), and its debug assertions
# check the runtime's invariants under the Python suites too (scripts/python-env.sh).
export STAMPEDE_PY_PROFILE=dev

if [ "${1:-}" = "--quick" ]; then
    echo "== [${SECONDS} s] Quick: core, wire, house rules, the engine embedded (Rust)"
    cargo test -q -p stampede-core -p stampede-wire -p stampede-tidy -p stampede-engine -p stampede --all-targets
    echo "== [${SECONDS} s] Quick: the Python semantic suites on the embedded runtime"
    . scripts/python-env.sh
    python_env pytest
    .venv/bin/python -m pytest -q python/tests/test_channel.py python/tests/test_gc.py python/tests/test_queue.py \
        python/tests/test_correlation.py python/tests/test_concurrency.py python/tests/test_payload.py \
        python/tests/test_graph.py python/tests/test_vectors.py python/tests/test_pacer.py
    echo "== [${SECONDS} s] Quick checks passed; ./scripts/test.sh (no argument) runs the whole suite"
    exit 0
fi

echo "== [${SECONDS} s] Rust tests"
# The binding crate is a Python extension (it links against the interpreter at import time);
# it is tested from Python below.
cargo test --workspace --exclude stampede-py --all-targets
cargo test --workspace --exclude stampede-py --doc

echo "== [${SECONDS} s] Interleavings (seeded scheduler, 2000 seeds; replay one with STAMPEDE_SEED=n)"
STAMPEDE_SEEDS="${STAMPEDE_SEEDS:-2000}" cargo test -p stampede --features shuttle --test interleavings

echo "== [${SECONDS} s] Mesh simulation (its \"seeds passed\" line is in the Rust tests above; replay one with STAMPEDE_MESH_SEED=n): the protocol faults it must catch"
cargo test -p stampede-core --features mutations --test mesh_simulation mutations
cargo test -p stampede-core --features mutations --lib mesh::tests::ignoring_dependencies_is_caught
echo "== [${SECONDS} s] Whole-path simulation (clients and a mesh of nodes; its \"seeds passed\" line is in the Rust tests above; replay one with STAMPEDE_PATH_SEED=n): the session-rule faults it must catch"
cargo test -p stampede-node --features mutations --lib sim::mutations_are_caught

echo "== [${SECONDS} s] Conformance (docs/NODES.md, location transparency): the Rust semantic suites against a client of a stampede serve process,"
echo "   against a client of node b whose session is on node a, in a mesh a <- b <- c, and (split) against"
echo "   a client whose tasks are on node b and whose channels are on node a, the nodes sharing ts_min"
cargo build -q -p stampede-cli
for configuration in serve mesh split; do
    STAMPEDE_CONFIGURATION=$configuration cargo test -p stampede \
        --test rules_channel --test rules_gc --test rules_queue --test correlation --test progress --test graph \
        --test vectors --test prefetch
done
echo "   and with prefetch off (docs/PREFETCH.md): every remote get a request and its reply"
STAMPEDE_CONFIGURATION=serve STAMPEDE_PREFETCH=off cargo test -p stampede \
    --test rules_channel --test rules_gc --test correlation --test graph --test vectors --test prefetch

echo "== [${SECONDS} s] C client (docs/C.md): API tests and the shared vectors, linked shared and static, under valgrind,"
echo "   the vectors against a stampede serve node, a client admitted by a node's access policy; every exported symbol is stp_*"
make -s -C c PROFILE=debug test valgrind test-serve test-handlers test-access symbols

echo "== [${SECONDS} s] Java client (docs/JAVA.md): the shared vectors and API tests, embedded and on stampede serve nodes"
cargo build -q -p stampede-jni
mvn -q -B -f java/pom.xml test -Dstampede.serve="$PWD/target/debug/stampede"

echo "== [${SECONDS} s] Browser client (docs/BROWSER.md, Node.js): the TypeScript codec held to the wire's golden vectors, .npy,"
echo "   the client and the node's WebSocket endpoint against stampede serve nodes, and the shared vectors (its demo page runs in Chromium below)"
(cd browser && npm ci --no-audit --no-fund --loglevel=error && npm test)

echo "== [${SECONDS} s] Python package"
. scripts/python-env.sh
python_env pytest ruff mypy playwright mcap matplotlib jsonschema websockets foxglove-schemas-protobuf mcap-protobuf-support rosbags mcap-ros2-support

echo "== [${SECONDS} s] Debian's Chromium for the dashboard's browser test (Playwright drives it; no browser download)"
if ! command -v chromium >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y -q chromium >/dev/null || { $sudo apt-get update -q && $sudo apt-get install -y -q chromium >/dev/null; } \
        || echo "   could not install chromium: the browser test will say it is skipped"
fi

echo "== [${SECONDS} s] Python tests"
.venv/bin/python -m pytest -q python/tests

echo "== [${SECONDS} s] The wheel (README \"Install\"): built from this build, installed into a fresh venv with no Rust"
echo "   toolchain on PATH, the hello example, stampede serve, a client and stampede ls (the release wheel: ./scripts/wheel.sh)"
./scripts/wheel.sh --dev

echo "== [${SECONDS} s] Remote benchmark, smoke run (docs/BENCHMARKS.md \"remote\"): every row once, tiny counts, figures meaningless"
cargo build -q -p stampede-bench --bin remote --bin trace --bin overshoot --bin mesh_lag --bin prefetch --bin hops
target/debug/remote --quick >/dev/null
echo "== [${SECONDS} s] Hop profile benchmark, smoke run (docs/BENCHMARKS.md \"hops\"): wake-ups and system calls per hand-off"
target/debug/hops --quick >/dev/null
echo "== [${SECONDS} s] Prefetch benchmark, smoke run (docs/BENCHMARKS.md \"prefetch\"): off against auto, tiny counts"
target/debug/prefetch --quick >/dev/null
echo "== [${SECONDS} s] Timeout overshoot benchmark, smoke run (docs/BENCHMARKS.md \"overshoot\")"
target/debug/overshoot --quick >/dev/null
echo "== [${SECONDS} s] Mesh reclamation lag benchmark, smoke run (docs/BENCHMARKS.md \"From garbage on one node to reclaimed on another\")"
target/debug/mesh_lag --quick >/dev/null
echo "== [${SECONDS} s] Event log benchmark, smoke run (docs/BENCHMARKS.md \"trace\")"
target/debug/trace --quick >/dev/null
echo "== [${SECONDS} s] Videoconference benchmark, smoke run (docs/BENCHMARKS.md \"conference\"): K=2 and 3, 2 s each"
.venv/bin/python python/bench/bench_conference.py --quick >/dev/null
echo "== [${SECONDS} s] Failure detection benchmark, smoke run (docs/BENCHMARKS.md \"failure detection\"): a reader on another host killed, cut off"
.venv/bin/python python/bench/bench_failure_detection.py --quick >/dev/null

# CI runs the serve configuration only (STAMPEDE_PY_CONFIGURATIONS=serve, .ci/run): the Rust suites
# above cover mesh and split in every run; docs/CHECKS.md keeps the last full result.
configurations="${STAMPEDE_PY_CONFIGURATIONS:-serve mesh split}"
echo "== [${SECONDS} s] Conformance: the Python semantic suites in the configurations: ${configurations}"
for configuration in $configurations; do
    STAMPEDE_CONFIGURATION=$configuration .venv/bin/python -m pytest -q -rs python/tests/test_channel.py \
        python/tests/test_gc.py python/tests/test_queue.py python/tests/test_correlation.py \
        python/tests/test_concurrency.py python/tests/test_payload.py python/tests/test_graph.py \
        python/tests/test_vectors.py
done
