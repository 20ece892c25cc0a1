"""Shared fixtures: a fresh runtime per test, and a watchdog instead of wall-clock assertions."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

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


@pytest.fixture
def rt() -> Iterator[stampede.Runtime]:
    """A fresh embedded runtime, closed after the test."""
    with stampede.Runtime() as runtime:
        yield runtime


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
