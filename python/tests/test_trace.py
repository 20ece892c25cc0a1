"""The event log from Python (docs/TRACING.md): a process run with STAMPEDE_TRACE logs its puts,
gets and `with stampede.span(...)` blocks; `stampede trace report` and `export` read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import stampede_bin

import stampede

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
    command = [stampede_bin(), "trace", "report", str(tmp_path)]
    report = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    rows = [line for line in report.splitlines()[1:] if line.strip()]
    assert len(rows) == 2, f"the main thread and the camera's: {report}"
    out = tmp_path / "trace.json"
    subprocess.run([stampede_bin(), "trace", "export", str(tmp_path), "-o", str(out)], check=True, timeout=60)
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert sum(e["name"] == "span track" for e in slices) == 50, "every `with stampede.span` block"
    assert sum(e["name"] == "put camera/frames" for e in slices) == 50
    assert sum(e["ph"] == "f" for e in events) == 50, "a flow from each put to its get"


def test_a_span_outside_tracing_costs_nothing_and_nests():
    with stampede.span("outer"), stampede.span("inner") as inner:
        assert repr(inner) == 'span("inner")'
    stampede.trace_flush()
