"""Shared fixtures: a fresh runtime per test, and a watchdog instead of wall-clock assertions.

The `rt` fixture is the conformance switch (SPEC §7 location transparency): with
``STAMPEDE_CONFIGURATION=serve`` every test that takes `rt` runs unchanged against a client of a
fresh ``stampede serve`` process (a node per test: ts_min is global and monotone on a node);
the default, ``embedded``, is a runtime in this process.
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


@contextlib.contextmanager
def served_node(name: str = "test") -> Iterator[str]:
    """A `stampede serve` process on a Unix socket of its own; yields its endpoint. Killed in a
    `finally`, whatever happens."""
    with tempfile.TemporaryDirectory(prefix="stampede-node-") as tmp:
        endpoint = f"unixsock-stream/{tmp}/node.sock"
        proc = subprocess.Popen(
            [stampede_bin(), "serve", "--listen", endpoint, "--name", name],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready = threading.Event()
            threading.Thread(target=lambda: (proc.stdout.readline(), ready.set()), daemon=True).start()
            assert ready.wait(NODE_START_S), "stampede serve did not say it listens"
            yield endpoint
        finally:
            proc.terminate()
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
        with served_node() as endpoint, stampede.connect(endpoint, timeout=NODE_START_S) as runtime:
            yield runtime
    else:
        raise ValueError(f"STAMPEDE_CONFIGURATION={CONFIGURATION!r}: use embedded or serve")


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
