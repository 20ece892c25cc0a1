#!/usr/bin/env bash
# The Python package as a wheel that carries the `stampede` command (README "Install"), and its
# check: installed into a fresh venv with no Rust toolchain on PATH, it runs the hello example,
# `stampede serve`, a client of that node and `stampede ls`.
#
#   scripts/wheel.sh         the release wheel into dist/ (what README installs; ~15 min cold)
#   scripts/wheel.sh --dev   a dev-profile wheel into target/wheel-dev/: the same package, built from
#                            the test suite's debug build (what ./scripts/test.sh checks)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
out=dist
if [ "${1:-}" = "--dev" ]; then
    profile=dev
    out=target/wheel-dev
fi

# maturin, from the package's venv; built with the same profile, the venv's package and the wheel
# share one build.
export STAMPEDE_PY_PROFILE=$profile
. scripts/python-env.sh
python_env
rm -f "$out"/stampede-*.whl
echo "== Building the $profile wheel into $out/ (maturin; its audit picks the manylinux tag)"
# The release wheel is stripped: the release profile's line tables (for backtraces in benchmarks)
# would double its size.
strip=()
[ "$profile" = release ] && strip=(--strip)
(cd python && ../.venv/bin/maturin build --profile "$profile" "${strip[@]}" --out "../$out") 2>&1 | grep -v "^ *Compiling" >&2
wheel=$(ls "$out"/stampede-*.whl)
echo "   $wheel ($(du -h "$wheel" | cut -f1))"

scratch=$(mktemp -d)
node_pid=""
cleanup() {
    [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
echo "== Installing it into a fresh venv ($scratch/venv; numpy from PyPI)"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet "$wheel"

# Only the venv and the system's own directories: no cargo, rustc or maturin.
clean=(env -i HOME="$HOME" PATH="$scratch/venv/bin:/usr/local/bin:/usr/bin:/bin")
if "${clean[@]}" sh -c 'command -v cargo || command -v rustc || command -v maturin'; then
    echo "a Rust toolchain is on the clean PATH: the check would prove nothing" >&2
    exit 1
fi
cp python/examples/hello.py "$scratch/"
cd "$scratch"
echo "== The hello example"
"${clean[@]}" python hello.py
echo "== stampede serve, a client of it, stampede ls"
endpoint="unixsock-stream/$scratch/node.sock"
"${clean[@]}" stampede serve --listen "$endpoint" --name wheel >"$scratch/serve.log" 2>&1 &
node_pid=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$scratch/serve.log" && break
    kill -0 "$node_pid" 2>/dev/null || { cat "$scratch/serve.log"; exit 1; }
    sleep 0.1 # the node prints its line once it listens: polled, at most 10 s
done
grep "listening on" "$scratch/serve.log"
"${clean[@]}" python - "$endpoint" <<'EOF'
import sys

import stampede

with stampede.connect(sys.argv[1], timeout=5) as rt:
    frames = rt.create_channel("camera/frames")
    camera, viewer = rt.task(virtual_time=0), rt.task(virtual_time=stampede.INFINITY)
    out, inp = camera.attach_output(frames), viewer.attach_input(frames)
    out.put(0, b"frame 0")
    item = inp.get(stampede.NEWEST_UNSEEN, timeout=5)
    assert bytes(item.data) == b"frame 0", item
    print("a client of the node put and got", item.ts, bytes(item.data))
    inp.consume_until(item.ts)
EOF
"${clean[@]}" stampede ls --connect "$endpoint"
kill -TERM "$node_pid"
wait "$node_pid"
node_pid=""
echo "== The wheel works without a Rust toolchain: $(basename "$wheel")"
