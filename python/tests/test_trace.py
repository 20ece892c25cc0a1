"""The event log from Python (docs/TRACING.md): a process run with STAMPEDE_TRACE logs its puts,
gets and `with stampede.span(...)` blocks; `stampede trace report` and `export` read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
from conftest import NODE_START_S, listening, stampede_bin

import stampede

#: The trace format's JSON Schema, written independently of the exporter. (The `perfetto`
#: package's trace processor would be the better reader, but it downloads its binary at run time
#: from outside the package registries, which tests here may not.)
SCHEMA = json.loads((Path(__file__).parent / "trace_event.schema.json").read_text())


def exported(logs: Path, out: Path) -> list[dict]:
    """`stampede trace export` of `logs` into `out`: its events, checked against the schema and
    every flow's two ends present (each id once as a start and once as an end)."""
    subprocess.run([stampede_bin(), "trace", "export", str(logs), "-o", str(out)], check=True, timeout=60)
    trace = json.loads(out.read_text())
    jsonschema.validate(trace, SCHEMA)
    events = trace["traceEvents"]
    starts = [e["id"] for e in events if e["ph"] == "s"]
    ends = [e["id"] for e in events if e["ph"] == "f"]
    assert sorted(starts) == sorted(ends) and len(set(starts)) == len(starts), "every flow has both its ends"
    return events


PROGRAM = textwrap.dedent(
    """
    import threading, stampede
    rt = stampede.Runtime()
    frames = rt.create_channel("camera/frames", capacity=4)
    inp = rt.task(stampede.INFINITY).attach_input(frames)

    def camera():
        task = rt.task(0)
        out = task.attach_output(frames)
        for ts in range(50):
            out.put(ts, b"frame")
            task.set_virtual_time(ts + 1)

    thread = threading.Thread(target=camera, name="camera")
    thread.start()
    for _ in range(50):
        item = inp.get(stampede.OLDEST_UNSEEN, timeout=20)
        with stampede.span("track"):
            inp.consume(item.ts)
    thread.join()
    rt.close()
    """
)


def test_a_traced_python_process_reads_back_with_its_spans(tmp_path):
    env = {**os.environ, "STAMPEDE_TRACE": str(tmp_path)}
    subprocess.run([sys.executable, "-c", PROGRAM], env=env, check=True, timeout=60)
    logs = list(tmp_path.glob("*.stlog"))
    assert len(logs) == 1, logs
    command = [stampede_bin(), "trace", "report", str(tmp_path), "--no-chart"]
    report = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    rows = [line for line in report.splitlines()[1:] if line.strip()]
    assert len(rows) == 2, f"the main thread and the camera's: {report}"
    events = exported(tmp_path, tmp_path / "trace.json")
    slices = [e for e in events if e["ph"] == "X"]
    assert sum(e["name"] == "span track" for e in slices) == 50, "every `with stampede.span` block"
    assert sum(e["name"] == "put camera/frames" for e in slices) == 50
    assert sum(e["ph"] == "f" for e in events) == 50, "a flow from each put to its get"


def test_a_span_outside_tracing_costs_nothing_and_nests():
    with stampede.span("outer"), stampede.span("inner") as inner:
        assert repr(inner) == 'span("inner")'
    stampede.trace_flush()


CROSS_PROCESS_FRAMES = 30

PRODUCER = """
out = rt.task(0).attach_output(rt.lookup("camera/frames"))
for ts in range(FRAMES):
    out.put(ts, b"frame %d" % ts)
rt.close()
"""

CONSUMER = """
rt.create_channel("camera/frames")
inp = rt.task(stampede.INFINITY).attach_input(rt.lookup("camera/frames"))
print("ready", flush=True)
for _ in range(FRAMES):
    item = inp.get(stampede.OLDEST_UNSEEN, timeout=20)
    with stampede.span("track"):
        inp.consume(item.ts)
rt.close()
"""


def test_a_traced_pipeline_across_processes_and_hosts_merges(tmp_path):
    """A node and two client processes, each logging as a host of its own (STAMPEDE_TRACE_HOST):
    the clients' clock exchanges with the node map them onto its clock, and every flow from the
    producer's put to a get ends after it starts."""
    logs = tmp_path / "logs"
    endpoint = f"unixsock-stream/{tmp_path}/traced.sock"
    env = {**os.environ, "STAMPEDE_TRACE": str(logs)}
    node = subprocess.Popen(
        [stampede_bin(), "serve", "--listen", endpoint, "--name", "traced"],
        env={**env, "STAMPEDE_TRACE_HOST": "node-host"},
        stdout=subprocess.PIPE,
        text=True,
    )
    clients: list[subprocess.Popen[str]] = []
    try:
        assert listening(node), "stampede serve did not say it listens"

        def start(body: str, host: str) -> subprocess.Popen[str]:
            code = f"import stampede\nFRAMES = {CROSS_PROCESS_FRAMES}\n"
            code += f"rt = stampede.connect({endpoint!r}, timeout={NODE_START_S})\n{body}"
            proc = subprocess.Popen(
                [sys.executable, "-c", code],
                env={**env, "STAMPEDE_TRACE_HOST": host},
                stdout=subprocess.PIPE,
                text=True,
            )
            clients.append(proc)
            return proc

        consumer = start(CONSUMER, "tracker-host")
        assert consumer.stdout is not None and consumer.stdout.readline().strip() == "ready"
        producer = start(PRODUCER, "camera-host")
        for proc in (producer, consumer):
            proc.communicate(timeout=60)
            assert proc.returncode == 0
    finally:
        for proc in clients:
            proc.kill()
            proc.wait()
        node.terminate()
        node.wait(timeout=NODE_START_S)
    assert len(list(logs.glob("*.stlog"))) == 3, "the node's log and each client's"
    events = exported(logs, tmp_path / "trace.json")
    processes = {
        e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert sorted(name.rsplit(" on ", 1)[1].rstrip(")") for name in processes.values()) == [
        "camera-host",
        "node-host",
        "tracker-host",
    ]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    camera = next(p for p, name in processes.items() if "camera-host" in name)
    tracker = next(p for p, name in processes.items() if "tracker-host" in name)
    crossing = [i for i in starts if starts[i]["pid"] == camera and ends[i]["pid"] == tracker]
    assert len(crossing) == CROSS_PROCESS_FRAMES, "a flow from each of the camera's puts to the tracker's get"
    # Reconciled through the exchanges (the three "hosts" share one clock, so any error in the
    # maps shows): no get ends before the put of its item began.
    assert all(ends[i]["ts"] >= starts[i]["ts"] for i in starts), "a flow that goes back in time"
    chart = tmp_path / "breakdown.png"
    report = subprocess.run(
        [stampede_bin(), "trace", "report", str(logs), "--chart", str(chart)],
        env={**os.environ, "STAMPEDE_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "message %" in report and f"chart: {chart}" in report
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the chart is a PNG"
