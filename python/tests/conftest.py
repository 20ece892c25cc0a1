"""Shared fixtures: a fresh runtime per test, and a watchdog instead of wall-clock assertions.

The `rt` fixture is the conformance switch (location transparency: docs/NODES.md,
"Embedded by default, one API everywhere"). Every test that takes `rt` runs unchanged against, with
``STAMPEDE_CONFIGURATION`` =

- ``embedded`` (the default): a runtime in this process;
- ``serve``: a client of a fresh ``stampede serve`` process;
- ``mesh``: a client attached to node B whose session, channels and queues are on node A, in a
  mesh of three ``stampede serve`` processes A ← B ← C (B connects to A, C to B);
- ``split``: the same mesh, a client whose session and
  tasks are on node B and whose channels and queues are on node A (``placement="a"``): every
  connection is a task's shadow on A (docs/NODES.md "One task, several nodes"). Its nodes follow
  each other's claims a message round later, so what reclamation shows is read with `settled`.

Nodes are fresh per test: ts_min is global and monotone on a node.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import stampede

#: A test still running after this many seconds is hung: dump every thread's stack and exit.
WATCHDOG_S = float(os.environ.get("STAMPEDE_WATCHDOG_S", "60"))


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    """Turns a hang into a stack dump and a failed run instead of a stuck CI job."""
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


#: Which runtime the `rt` fixture gives: "embedded" or "serve" (see the module's doc).
CONFIGURATION = os.environ.get("STAMPEDE_CONFIGURATION", "embedded")
REPO = Path(__file__).resolve().parents[2]
#: Longest wait for a spawned node to say it listens, or to exit after SIGTERM.
NODE_START_S = 30.0


def stampede_bin() -> str:
    """The `stampede` binary: $STAMPEDE_BIN, else the workspace's debug build (built if missing)."""
    path = os.environ.get("STAMPEDE_BIN") or str(REPO / "target" / "debug" / "stampede")
    if not Path(path).exists():
        subprocess.run(["cargo", "build", "-q", "-p", "stampede-cli"], cwd=REPO, check=True)
    return path


def listening(proc: subprocess.Popen[str]) -> bool:
    """Waits (at most NODE_START_S) for a `stampede serve` process to print its first line."""
    assert proc.stdout is not None
    out, ready = proc.stdout, threading.Event()
    threading.Thread(target=lambda: (out.readline(), ready.set()), daemon=True).start()
    return ready.wait(NODE_START_S)


#: How long the split configuration's nodes may take to reclaim once the last blocker moved: a
#: few message rounds on loopback (docs/PROTOCOL.md, "Why it is live": within a bounded time).
MESH_SETTLE_S = 10.0


def settled(expected: object, value: Callable[[], object]) -> object:
    """`value()` once it equals `expected`, else its last value: read at once where reclamation
    happens inside the operation that makes an item garbage (embedded, serve, mesh), polled for
    at most MESH_SETTLE_S in the split configuration, whose nodes share ts_min over the fabric."""
    if CONFIGURATION == "split":
        deadline = time.monotonic() + MESH_SETTLE_S
        while value() != expected and time.monotonic() < deadline:
            time.sleep(0.01)
    return value()


def placement(rt: stampede.Runtime) -> str | None:
    """The node a runtime of this configuration places channels and queues on (None: embedded)."""
    return "a" if CONFIGURATION == "split" else rt.node


@contextlib.contextmanager
def served_nodes(*names: str) -> Iterator[list[str]]:
    """`stampede serve` processes on Unix sockets of their own, each connected to the one before
    it (a mesh: they share one ts_min); yields their endpoints. Every one is stopped in a
    `finally`, whatever happens."""
    with tempfile.TemporaryDirectory(prefix="stampede-node-") as tmp:
        procs: list[subprocess.Popen[str]] = []
        endpoints: list[str] = []
        try:
            for name in names:
                endpoint = f"unixsock-stream/{tmp}/{name}.sock"
                args = [stampede_bin(), "serve", "--listen", endpoint, "--name", name]
                if endpoints:
                    args += ["--connect", endpoints[-1]]
                proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
                procs.append(proc)
                assert listening(proc), f"stampede serve ({name}) did not say it listens"
                endpoints.append(endpoint)
            yield endpoints
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=NODE_START_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def rt() -> Iterator[stampede.Runtime]:
    """A fresh runtime, closed after the test: embedded, or a client of a fresh node."""
    if CONFIGURATION == "embedded":
        with stampede.Runtime() as runtime:
            yield runtime
    elif CONFIGURATION == "serve":
        with served_nodes("test") as [endpoint], stampede.connect(endpoint, timeout=NODE_START_S) as runtime:
            yield runtime
    elif CONFIGURATION == "mesh":
        with (
            served_nodes("a", "b", "c") as [_, b, _],
            stampede.connect(b, timeout=NODE_START_S, node="a") as runtime,
        ):
            yield runtime
    elif CONFIGURATION == "split":
        with (
            served_nodes("a", "b", "c") as [_, b, _],
            stampede.connect(b, timeout=NODE_START_S, placement="a") as runtime,
        ):
            yield runtime
    else:
        raise ValueError(f"STAMPEDE_CONFIGURATION={CONFIGURATION!r}: use embedded, serve, mesh or split")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_only(reason): a property of the embedded runtime only (e.g. memory shared between "
        "gets in one process); skipped, with the reason, in the other configurations",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("embedded_only")
    if marker is not None and CONFIGURATION != "embedded":
        pytest.skip(f"not in the {CONFIGURATION} configuration: {marker.args[0]}")


@pytest.fixture
def interrupted() -> Callable[[str], None]:
    """Runs `code` in a child interpreter that prints "ready" before blocking, sends it SIGINT,
    and asserts it caught KeyboardInterrupt (printed "interrupted", exit status 42)."""

    def run(code: str) -> None:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=10)
        assert (rc, proc.stdout.read().strip()) == (42, "interrupted")

    return run
