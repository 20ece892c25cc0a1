"""Pacer from Python (docs/SEMANTICS.md, "Pacing"): waits when early, calls on_late (which may skip
ahead) when late."""

from __future__ import annotations

import time

import pytest

import stampede


def test_sync_waits_until_due():
    """sync(vt) does not return before start + vt * tick (no upper bound asserted)."""
    pacer = stampede.Pacer(tick=0.01, tolerance=0.005)
    start = time.monotonic()
    assert pacer.sync(5) == 5
    assert time.monotonic() - start >= 0.045


def test_on_late_called_and_may_skip_ahead():
    """When later than the tolerance, on_late(vt, lateness) runs; an int it returns is the vt to
    proceed with."""
    calls: list[tuple[int, float]] = []

    def on_late(vt: int, lateness: float) -> int:
        calls.append((vt, lateness))
        return pacer.vt_now() + 1

    pacer = stampede.Pacer(tick=0.001, tolerance=0.0, on_late=on_late)
    time.sleep(0.02)
    vt = pacer.sync(1)
    assert calls and calls[0][0] == 1 and calls[0][1] > 0
    assert vt > 1


def test_on_late_exception_propagates():
    """An exception raised by on_late is raised by sync."""

    def on_late(vt: int, lateness: float) -> None:
        raise RuntimeError("late!")

    pacer = stampede.Pacer(tick=0.001, tolerance=0.0, on_late=on_late)
    time.sleep(0.01)
    with pytest.raises(RuntimeError, match="late!"):
        pacer.sync(0 + 1)


def test_reset_and_invalid_tick():
    """reset() restarts the clock; a zero tick is InvalidArgument."""
    pacer = stampede.Pacer(tick=1.0)
    pacer.reset()
    assert pacer.vt_now() == 0 and pacer.tick == 1.0
    with pytest.raises(stampede.InvalidArgument, match="tick"):
        stampede.Pacer(tick=0)
    with pytest.raises(stampede.InvalidArgument, match="tick"):
        stampede.Pacer(tick=-1)


def test_thirty_fps_source_holds_rate():
    """A 30 fps loop written with Pacer produces 10 frames in about 1/3 s (lower bound only)."""
    pacer = stampede.Pacer(tick=1 / 30, tolerance=0.005)
    start = time.monotonic()
    vt = 0
    for _ in range(10):
        vt = pacer.sync(vt) + 1
    assert time.monotonic() - start >= 9 / 30


def test_pacers_from_one_epoch_number_frames_alike():
    """Pacers made at different times from the runtime's epoch count from it, not from their own
    making; a pacer made without one counts from its making."""
    with stampede.Runtime() as rt:
        epoch = rt.epoch()
        assert 0.0 <= epoch.elapsed < 5.0
        first = stampede.Pacer(tick=0.01, epoch=epoch)
        time.sleep(0.2)
        second = stampede.Pacer(tick=0.01, epoch=rt.epoch())
        alone = stampede.Pacer(tick=0.01)
        assert abs(first.vt_now() - second.vt_now()) <= 1
        assert second.vt_now() - alone.vt_now() >= 19
        assert "Epoch(elapsed=" in repr(epoch)
