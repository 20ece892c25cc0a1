"""Shared fixtures: a fresh runtime per test, and a watchdog instead of wall-clock assertions."""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Iterator

import pytest

import stampede

#: A test still running after this many seconds is hung: dump every thread's stack and exit.
WATCHDOG_S = 60.0


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
