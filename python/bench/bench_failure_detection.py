"""Failure detection, measured (docs/BENCHMARKS.md, "failure detection"): how long after a reader
on another host is killed, or cut off by a partition, its node drops the reader's claims — the
moment the node's ts_min passes the item the reader had not seen.

A node runs in a network namespace of its own; each trial starts a reader process in a second
namespace (a host of its own, python/tests/netns.py) that attaches at INFINITY and holds one unseen
item at timestamp T; this process (the producer, in the harness's namespace) checks that ts_min
stays at T, then SIGKILLs the reader (``kill``) or takes its link down (``partition``), and polls the
node's ts_min every POLL_S until it passes T. A killed process's TCP connections are reset by its
kernel, so the node learns at once; a cut link says nothing, so the node waits for the session's
liveliness to lapse (``LIVELINESS_TIMEOUT_DEFAULT``, 3 s). Needs root (network namespaces); prints
one JSON line per kind with p50, p99 and max in milliseconds, and the samples.

    sudo .venv/bin/python python/bench/bench_failure_detection.py [--trials 10] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from build_check import warn_if_not_release

import stampede

REPO = Path(__file__).resolve().parents[2]
# The namespaces are the fault harness's (python/tests/netns.py).
sys.path.insert(0, str(REPO / "python" / "tests"))
import netns  # noqa: E402
from faults import stampede_bin  # noqa: E402

PORT = 7447
POLL_S = 0.005
#: Longest a trial waits for the claims to go (well above the liveliness timeout).
DETECT_MAX_S = 30.0
READY_S = 30.0

READER = """
import sys, time, stampede
rt = stampede.connect(sys.argv[1], timeout=10)
frames = rt.lookup("detect/frames")
inp = rt.task(stampede.INFINITY).attach_input(frames)
print("ready", flush=True)
time.sleep(3600)
"""


def trial(
    network: netns.Network,
    endpoint: str,
    rt: stampede.Runtime,
    producer: tuple[stampede.Task, stampede.ChannelOutput],
    ts: int,
    kind: str,
) -> float:
    """One reader started, made to hold `ts`, then killed or cut off: seconds until ts_min passed `ts`."""
    task, out = producer
    reader = subprocess.Popen(
        [*network.inside("reader"), sys.executable, "-c", READER, endpoint],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None
        if reader.stdout.readline().strip() != "ready":
            raise RuntimeError("the reader did not attach")
        out.put(ts, b"frame")
        task.set_virtual_time(ts + 1)
        deadline = time.monotonic() + READY_S
        while rt.ts_min != ts:  # the reader's unseen item holds it
            if time.monotonic() > deadline:
                raise RuntimeError(f"ts_min is {rt.ts_min}, not held at {ts}")
            time.sleep(POLL_S)
        start = time.monotonic()
        if kind == "kill":
            reader.kill()
        else:
            network.cut("reader")
        while rt.ts_min <= ts:
            if time.monotonic() - start > DETECT_MAX_S:
                raise RuntimeError(f"the reader's claims were not dropped within {DETECT_MAX_S} s ({kind})")
            time.sleep(POLL_S)
        return time.monotonic() - start
    finally:
        reader.kill()
        reader.wait()
        if kind == "partition":
            network.heal("reader")


def summary(kind: str, samples: list[float]) -> dict[str, object]:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return {
        "bench": "failure_detection",
        "case": kind,
        "trials": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(p99, 1),
        "max_ms": round(ms[-1], 1),
        "samples_ms": [round(x, 1) for x in ms],
    }


def main() -> int:
    warn_if_not_release()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="trials of each kind (default 10)")
    parser.add_argument("--quick", action="store_true", help="two trials of each kind (a smoke run)")
    args = parser.parse_args()
    if reason := netns.unavailable():
        print(json.dumps({"bench": "failure_detection", "skipped": True, "reason": reason}))
        return 0
    trials = 2 if args.quick else args.trials
    network = netns.Network(["node", "reader"])
    node = None
    try:
        endpoint = f"tcp/{network.addresses['node']}:{PORT}"
        with tempfile.TemporaryFile() as log:
            node = subprocess.Popen(
                [*network.inside("node"), stampede_bin(), "serve", "--listen", endpoint, "--allow-anonymous"],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            assert node.stdout is not None
            node.stdout.readline()  # it listens
            with stampede.connect(endpoint, timeout=10) as rt:
                frames = rt.create_channel("detect/frames")
                task = rt.task(0)
                producer = (task, task.attach_output(frames))
                ts = 0
                for kind in ("kill", "partition"):
                    samples = []
                    for _ in range(trials):
                        samples.append(trial(network, endpoint, rt, producer, ts, kind))
                        ts += 1
                    print(json.dumps(summary(kind, samples)), flush=True)
    finally:
        if node is not None:
            node.kill()
            node.wait()
        network.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
