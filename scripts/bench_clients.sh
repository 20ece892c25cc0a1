#!/usr/bin/env bash
# One-way hand-off latency from the Rust, C and Java clients, in one run (issue 16).
#
#   ./scripts/bench_clients.sh            # ~1.5 min after the builds (2 cores)
#   ./scripts/bench_clients.sh --quick    # a smoke run of every program: figures meaningless
#
# Builds in release what it runs (stampede-bench, stampede-c, stampede-jni, stampede-cli, the C
# program, the Java classes), starts one `stampede serve` node on loopback TCP (stopped on exit),
# then runs back to back, in this order, each for 8 B and 230 400 B payloads, embedded and
# through a node:
#
#   Rust  target/release/handoff                     embedded (beside crossbeam bounded(1))
#   C     c/build/release/latency --connect <node>   embedded, then through this script's node
#   Java  java/examples/Latency.java --connect <node> embedded (data() and dataUntilClose(),
#                                                    beside ArrayBlockingQueue(1)), then through
#                                                    this script's node (dataUntilClose())
#   Rust  target/release/remote                      through a node: it starts its OWN
#                                                    `stampede serve` on loopback TCP (same
#                                                    binary; it takes no endpoint), beside raw
#                                                    TCP and the other references (8 B to 60 KiB)
#
# Every program runs the same ping-pong (crates/stampede-bench/src/ping_pong.rs) with its own
# default counts (none takes a count option, only --quick). Every JSON line goes to
# target/bench_clients.jsonl with two fields put first: "client" (rust, c, java) and "program";
# the first and last lines ("bench":"bench_clients") record the commit, the load averages and
# the machine's busy and idle CPU time during the run. Then the tables: p50 / p99 per case per
# language, the ratios of C and Java to Rust, and the same run's references.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=() quick_json=false
case "${1:-}" in
    "") ;;
    --quick) quick=(--quick) quick_json=true ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

out=target/bench_clients.jsonl
node_log=target/bench_clients_node.log

echo "== build (release): stampede-bench, stampede-cli, stampede-jni, stampede-c (c/bench/latency.c); java classes" >&2
# One package per cargo invocation, as each is documented to be built: `cargo build -p a -p b`
# unifies the dependencies' features across them (stampede-cli's dashboard turns on more of
# tokio, ...), giving other artifacts than a lone build, which the next lone build (the C
# Makefile's) would then rebuild.
for package in stampede-bench stampede-cli stampede-jni; do
    cargo build -q --release -p "$package"
done
make -s -C c build/release/latency >&2   # cargo build --release -p stampede-c, then the program
mvn -q -B -f java/pom.xml compile >&2

# CPU time (clock ticks) the whole machine spent busy, and what this script's children used.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
idle_ticks() { awk '/^cpu / { print $5 + $6 }' /proc/stat; }
steal_ticks() { awk '/^cpu / { print $9 }' /proc/stat; }
children_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; }
meta() { # meta <case> <extra json fields>
    printf '{"client":"-","program":"bench_clients.sh","bench":"bench_clients","case":"%s","commit":"%s","nproc":%s,"loadavg":"%s"%s}\n' \
        "$1" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates c java || echo '+dirty')" \
        "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$2" >>"$out"
}

# The node: a free loopback TCP port, `listening on <endpoint>` once ready.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
endpoint="tcp/127.0.0.1:$port"
node_pid=""
stop_node() {
    if [ -n "$node_pid" ]; then
        kill "$node_pid" 2>/dev/null || true
        wait "$node_pid" 2>/dev/null || true
        node_pid=""
    fi
}
trap stop_node EXIT
trap 'exit 130' INT TERM

: >"$out"
meta start ",\"started\":\"$(date -u +%FT%TZ)\",\"endpoint\":\"$endpoint\",\"quick\":$quick_json"
start_s=$(date +%s.%N) busy0=$(busy_ticks) idle0=$(idle_ticks) steal0=$(steal_ticks) ours0=$(children_ticks)

target/release/stampede serve --listen "$endpoint" --name clients >"$node_log" 2>&1 &
node_pid=$!
for _ in $(seq 200); do
    grep -q "^listening on $endpoint" "$node_log" && break
    kill -0 "$node_pid" 2>/dev/null || { cat "$node_log" >&2; exit 1; }
    sleep 0.1
done
grep -q "^listening on $endpoint" "$node_log" || { echo "the node did not start: $node_log" >&2; exit 1; }

# run <client> <program label> <command...>: JSON lines tagged into $out (and shown), the rest to stderr.
run() {
    local client=$1 program=$2
    shift 2
    echo "== $client: $program" >&2
    "$@" | awk -v tag="{\"client\":\"$client\",\"program\":\"$program\"," -v out="$out" '
        /^\{/ { line = tag substr($0, 2); print line; print line >> out; fflush(); fflush(out); next }
        { print > "/dev/stderr" }'
}

run rust handoff target/release/handoff "${quick[@]}"
run c "latency --connect" c/build/release/latency --connect "$endpoint" "${quick[@]}"
run java "Latency.java --connect" java -cp java/target/classes -Dstampede.library.path=target/release -Dstampede.unsafeBuffers=true \
    java/examples/Latency.java --connect "$endpoint" "${quick[@]}"
run rust remote target/release/remote "${quick[@]}"

stop_node
end_s=$(date +%s.%N) busy1=$(busy_ticks) idle1=$(idle_ticks) steal1=$(steal_ticks) ours1=$(children_ticks)
# Whole machine (/proc/stat) over the run: idle time near 0 means something else wanted the cores.
# This run's own processes by their own accounting (not quite the same counter: the two differ
# by a few seconds), for scale.
hz=$(getconf CLK_TCK)
busy=$(awk -v t="$((busy1 - busy0))" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')
idle=$(awk -v t="$((idle1 - idle0))" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')
ours=$(awk -v t="$((ours1 - ours0))" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')
steal=$(awk -v t="$((steal1 - steal0))" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')
wall=$(awk -v a="$start_s" -v b="$end_s" 'BEGIN { printf "%.1f", b - a }')
meta end ",\"wall_s\":$wall,\"cpu_s_machine_busy\":$busy,\"cpu_s_machine_idle\":$idle,\"cpu_s_steal\":$steal,\"cpu_s_this_run\":$ours"

python3 - "$out" <<'PY'
import json
import sys

lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = {l["case"]: l for l in lines if l.get("bench") == "bench_clients"}


def find(client, bench, impl, case):
    for l in lines:
        if l.get("client") == client and l.get("bench") == bench and l.get("impl") == impl and l.get("case") == case:
            return l
    return None


def us(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def pp(l):
    return "—" if l is None else f"{us(l['p50_us'])} / {us(l['p99_us'])}"


def ratio(l, ref):
    if l is None or ref is None:
        return "—"
    return f"{l['p50_us'] / ref['p50_us']:.2f} ({l['p99_us'] / ref['p99_us']:.2f})"


java_embedded = {"data": "stampede (Java, JNI; data())", "until": "stampede (Java, JNI; dataUntilClose())"}
rows = []
for where in ("embedded", "node"):
    for case in ("8B", "230400B"):
        if where == "embedded":
            rust = find("rust", "handoff", "stampede", case)
            c = find("c", "c_latency", "stampede C embedded", case)
            jd = find("java", "handoff", java_embedded["data"], case)
            ju = find("java", "handoff", java_embedded["until"], case)
        else:
            rust = find("rust", "remote", "stampede remote (serve, tcp loopback)", case)
            c = find("c", "c_latency", "stampede C remote (two sessions of one node)", case)
            jd = None
            ju = find("java", "remote", "stampede remote (Java, JNI; serve, dataUntilClose())", case)
        size = "8 B" if case == "8B" else "230 400 B"
        rows.append((f"{size}, {where}", pp(rust), pp(c), ratio(c, rust), pp(jd), ratio(jd, rust), pp(ju), ratio(ju, rust)))

start, end = meta.get("start", {}), meta.get("end", {})
print()
print(f"one-way latency, µs, p50 / p99 (ratio to Rust: p50 (p99)); commit {start.get('commit')}, "
      f"{start.get('nproc')} cores{', --quick: figures meaningless' if start.get('quick') else ''}")
print(f"load average before {start.get('loadavg')}, after {end.get('loadavg')} (this run's own threads count); "
      f"machine CPU over the {end.get('wall_s')} s run on {start.get('nproc')} cores: busy {end.get('cpu_s_machine_busy')} s, "
      f"idle {end.get('cpu_s_machine_idle')} s, steal {end.get('cpu_s_steal')} s "
      f"(this run's processes: {end.get('cpu_s_this_run')} s)")
print()
head = ("case", "Rust p50 / p99", "C p50 / p99", "C / Rust", "Java data() p50 / p99", "Java data() / Rust",
        "Java dataUntilClose() p50 / p99", "Java dataUntilClose() / Rust")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(r) + " |")

refs = []
for case in ("8B", "230400B"):
    size = "8 B" if case == "8B" else "230 400 B"
    refs.append((size, pp(find("rust", "handoff", "crossbeam bounded(1)", case)),
                 pp(find("java", "handoff", "java ArrayBlockingQueue(1)", case)),
                 pp(find("rust", "remote", "raw TCP ping-pong", case))))
print()
print("same-run references, µs p50 / p99 (remote measures raw TCP at 8 B to 60 KiB, not 230 400 B):")
print("| payload | crossbeam bounded(1) (handoff) | Java ArrayBlockingQueue(1) | raw TCP (remote's) |")
print("|---|---|---|---|")
for r in refs:
    print("| " + " | ".join(r) + " |")

def n(client, bench, impl_part):
    counts = sorted({str(l["round_trips"]) for l in lines if l.get("client") == client and l.get("bench") == bench
                     and impl_part in l.get("impl", "") and "round_trips" in l})
    return "/".join(counts) or "—"


print()
print("round trips per figure (one way = round trip / 2): embedded Rust "
      f"{n('rust', 'handoff', 'stampede')}, C {n('c', 'c_latency', 'embedded')}, Java "
      f"{n('java', 'handoff', 'JNI')} per reading mode; node Rust {n('rust', 'remote', 'serve, tcp loopback)')} (its own node), "
      f"C {n('c', 'c_latency', 'remote')}, Java {n('java', 'remote', 'JNI')} (this script's node)")
print(f"all lines: {sys.argv[1]}")
PY
