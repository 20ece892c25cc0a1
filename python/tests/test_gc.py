"""Virtual time, visibility, ts_min, reference counts and GC handlers from Python
(docs/SEMANTICS.md, "Virtual time, visibility, GC")."""

from __future__ import annotations

import gc
import sys

import pytest
from conftest import CONFIGURATION, settled

import stampede
from stampede import INFINITY, NEWEST_UNSEEN


def test_visibility_is_min_of_vt_and_open_items(rt):
    """visibility = min(vt, timestamps open on the task's inputs)."""
    ch = rt.create_channel("c")
    producer = rt.task(0)
    out = producer.attach_output(ch)
    reader = rt.task(INFINITY)
    inp = reader.attach_input(ch)
    out.put(5, b"")
    assert reader.visibility == INFINITY
    inp.get(5)
    assert reader.virtual_time == INFINITY and reader.visibility == 5
    inp.consume(5)
    assert reader.visibility == INFINITY


def test_set_virtual_time_rules(rt):
    """set_virtual_time(v) requires v >= visibility; going down to the visibility is allowed."""
    t = rt.task(10)
    t.set_virtual_time(20)
    assert t.virtual_time == 20
    t.set_virtual_time(20)
    with pytest.raises(stampede.BelowVisibility):
        t.set_virtual_time(19)


def test_spawn_rules(rt):
    """A child's initial vt must be >= the parent's visibility; default is the visibility."""
    parent = rt.task(10)
    assert parent.spawn(virtual_time=15).virtual_time == 15
    assert parent.spawn().virtual_time == 10
    with pytest.raises(stampede.BelowVisibility):
        parent.spawn(virtual_time=9)


def test_root_task_below_ts_min(rt):
    """A root task cannot start below ts_min; the error names the bound and what to do."""
    ch = rt.create_channel("c")
    t = rt.task(7)
    assert rt.ts_min == 0  # nothing put yet: ts_min never runs ahead of 1 + the highest put
    t.attach_output(ch).put(9, b"")
    assert settled(7, lambda: rt.ts_min) == 7
    with pytest.raises(stampede.BelowVisibility, match="below ts_min 7.*start it at 7 or later"):
        rt.task(3)
    t.close()


def test_readers_first_then_producer_at_zero(rt):
    """A display at INFINITY attached before its camera exists: the camera can still start at 0."""
    ch = rt.create_channel("camera")
    display = rt.task(INFINITY)
    inp = display.attach_input(ch)
    assert rt.ts_min == 0
    camera = rt.task(0)
    camera.attach_output(ch).put(0, b"hello")
    assert inp.get(stampede.NEWEST_UNSEEN, timeout=0).ts == 0


def test_restarted_producer_starts_above_its_last_timestamp(rt):
    """The only producer closes; a new one starts at 1 + its last timestamp, not INFINITY."""
    ch = rt.create_channel("camera")
    display = rt.task(INFINITY)
    inp = display.attach_input(ch)
    camera = rt.task(0)
    out = camera.attach_output(ch)
    for ts in range(5):
        out.put(ts, b"f")
    camera.close()
    inp.consume_until(4)
    assert settled(5, lambda: rt.ts_min) == 5
    with pytest.raises(stampede.BelowVisibility, match="start it at 5 or later"):
        rt.task(4)
    rt.task(5).attach_output(ch).put(5, b"again")
    assert inp.get(stampede.OLDEST_UNSEEN, timeout=0).ts == 5


def test_ts_min_tracks_tasks_and_unseen_items(rt):
    """ts_min = min over tasks' visibility and items unseen or open on input connections."""
    ch = rt.create_channel("c")
    producer = rt.task(0)
    out = producer.attach_output(ch)
    reader = rt.task(INFINITY)
    inp = reader.attach_input(ch)
    out.put(3, b"")
    producer.set_virtual_time(10)
    assert settled(3, lambda: rt.ts_min) == 3  # item 3 is unseen on inp
    inp.get(3)
    assert rt.ts_min == 3  # open
    inp.consume(3)
    assert settled(4, lambda: rt.ts_min) == 4  # never ahead of 1 + the highest timestamp put
    assert settled((0, 1), lambda: (ch.stats()["live_items"], ch.stats()["reclaimed"])) == (0, 1)


def test_a_bound_on_lag_lets_a_slow_reader_fall_behind(rt):
    """attach_input(ch, max_lag_items=n): beyond n unseen items the oldest are consumed for the
    reader and counted as skipped, so it cannot hold ts_min back (docs/SEMANTICS.md, "Slow
    readers: max_lag"); max_lag_ts bounds the distance below the newest item instead."""
    ch = rt.create_channel("frames")
    camera = rt.task(0)
    out = camera.attach_output(ch)
    slow = rt.task(INFINITY)
    inp = slow.attach_input(ch, max_lag_items=2)
    for ts in range(10):
        out.put(ts, b"f")
    camera.set_virtual_time(10)
    assert settled(8, lambda: rt.ts_min) == 8  # 0 to 7 were let go unseen
    assert inp.get(stampede.OLDEST_UNSEEN).ts == 8
    by_ts = slow.attach_input(ch, max_lag_ts=3)
    for ts in range(10, 20):
        out.put(ts, b"f")
    assert by_ts.get(stampede.OLDEST_UNSEEN).ts == 16
    with pytest.raises(stampede.InvalidArgument):
        slow.attach_input(ch, max_lag_items=0)
    with pytest.raises(stampede.InvalidArgument):
        slow.attach_input(ch, max_lag_ts=-1)
    with pytest.raises(TypeError):
        slow.attach_input(rt.create_queue("jobs"), max_lag_items=2)


def test_reclamation_is_prompt_and_collect_is_deterministic(rt):
    """Items below ts_min are reclaimed within the operation; collect() then finds nothing."""
    ch = rt.create_channel("c")
    t = rt.task(0)
    out = t.attach_output(ch)
    for ts in range(5):
        out.put(ts, b"x" * 10)
    assert ch.stats()["live_bytes"] == 50
    t.set_virtual_time(3)
    settled(3, lambda: ch.stats()["reclaimed"])
    s = ch.stats()
    assert (s["live_items"], s["live_bytes"], s["reclaimed"], s["ts_min"]) == (2, 20, 3, 3)
    assert rt.collect() == 0


def test_refcount_reclaims_above_ts_min(rt):
    """An item put with refcount=2 is reclaimed after two consumptions, even above ts_min."""
    ch = rt.create_channel("c")
    producer = rt.task(0)
    out = producer.attach_output(ch)
    a = rt.task(INFINITY).attach_input(ch)
    b = rt.task(INFINITY).attach_input(ch)
    c = rt.task(INFINITY).attach_input(ch)
    out.put(1, b"", refcount=2)
    a.consume(1)
    assert ch.stats()["live_items"] == 1
    b.consume(1)
    assert ch.stats()["live_items"] == 0 and rt.ts_min == 0
    with pytest.raises(stampede.Reclaimed):
        c.get(1)
    with pytest.raises(stampede.InvalidArgument, match="refcount"):
        out.put(2, b"", refcount=0)


def test_channel_gc_handler(rt):
    """on_reclaim(callback) is called with the timestamp of each reclaimed item."""
    ch = rt.create_channel("c")
    seen: list[int] = []
    ch.on_reclaim(seen.append)
    everywhere: list[tuple[str, int]] = []
    rt.on_reclaim(lambda name, ts: everywhere.append((name, ts)))
    t = rt.task(0)
    out = t.attach_output(ch)
    for ts in range(4):
        out.put(ts, b"")
    t.set_virtual_time(3)
    assert settled([0, 1, 2], lambda: seen) == [0, 1, 2]
    assert settled(3, lambda: len(everywhere)) == 3
    assert everywhere == [("c", 0), ("c", 1), ("c", 2)]


def test_raising_gc_handler_is_reported_and_counted(rt, monkeypatch):
    """An exception in a GC handler goes to sys.unraisablehook, is counted in stats, and does not
    break the runtime or stop other handlers (here the runtime-wide one)."""
    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    ch = rt.create_channel("c")

    def bad(ts: int) -> None:
        raise ValueError(f"handler failed at {ts}")

    good: list[int] = []
    ch.on_reclaim(bad)
    rt.on_reclaim(lambda name, ts: good.append(ts))
    t = rt.task(0)
    out = t.attach_output(ch)
    out.put(0, b"")
    out.put(1, b"")
    t.set_virtual_time(2)
    assert settled([0, 1], lambda: good) == [0, 1]
    assert settled(2, lambda: len(reported)) == 2
    assert isinstance(reported[0].exc_value, ValueError)  # type: ignore[attr-defined]
    assert "handler failed at 0" in str(reported[0].exc_value)  # type: ignore[attr-defined]
    assert ch.stats()["handler_errors"] == 2
    assert rt.stats()["handler_errors"] == 2
    out.put(2, b"")  # the runtime still works
    assert ch.stats()["live_items"] == 1
    rt.close()  # reclaims item 2: the handler raises once more, still reported
    if CONFIGURATION != "split":
        # Across nodes item 2 goes once its node hears the task's home released it, after this
        # client left (docs/NODES.md "One task, several nodes").
        assert len(reported) == 3 and rt.stats()["handler_errors"] == 3


def test_handler_runs_for_items_reclaimed_by_another_thread(rt):
    """GC handlers also run when the reclaiming operation happens in another Python thread."""
    import threading

    ch = rt.create_channel("c")
    seen: list[int] = []
    ch.on_reclaim(seen.append)
    t = rt.task(0)
    out = t.attach_output(ch)
    out.put(0, b"")
    worker = threading.Thread(target=t.set_virtual_time, args=(1,))
    worker.start()
    worker.join()
    assert settled([0], lambda: seen) == [0]


def test_task_close_releases_claim(rt):
    """Closing a task releases its claim on ts_min and detaches its connections."""
    ch = rt.create_channel("c")
    reader = rt.task(0)
    inp = reader.attach_input(ch)
    writer = rt.task(0)
    out = writer.attach_output(ch)
    out.put(0, b"")
    out.put(4, b"")
    writer.set_virtual_time(5)
    assert rt.ts_min == 0
    reader.close()
    assert settled((5, 0), lambda: (rt.ts_min, ch.stats()["live_items"])) == (5, 0)
    with pytest.raises(stampede.Closed):
        inp.get(NEWEST_UNSEEN, timeout=0)


def test_dropped_handles_release_task(rt):
    """A task whose handles and connections are all gone no longer holds ts_min back."""
    ch = rt.create_channel("c")
    blocker = rt.task(0)
    keeper = rt.task(5)
    keeper.attach_output(ch).put(8, b"")
    assert rt.ts_min == 0
    del blocker
    gc.collect()
    assert settled(5, lambda: rt.ts_min) == 5
    keeper.close()
    assert rt.stats()["claims"] == 0
    assert settled(9, lambda: rt.ts_min) == 9  # with no claims at all: 1 + the highest timestamp put


def test_runtime_stats_and_names(rt):
    """Runtime counters and the name service."""
    rt.create_channel("camera/left")
    rt.create_channel("camera/right")
    rt.create_queue("work")
    assert rt.names() == ["camera/left", "camera/right", "work"]
    assert rt.names(prefix="camera/") == ["camera/left", "camera/right"]
    assert isinstance(rt.lookup("camera/left"), stampede.Channel)
    assert isinstance(rt.lookup("work"), stampede.Queue)
    assert rt.lookup("camera/left").name == "camera/left"
    with pytest.raises(stampede.NotFound, match='"nope"'):
        rt.lookup("nope")
    with pytest.raises(stampede.AlreadyExists):
        rt.create_channel("camera/left")
    with pytest.raises(stampede.InvalidArgument):
        rt.create_channel("/bad/")
    s = rt.stats()
    assert s["containers"] == 3 and s["ts_min"] == 0 and s["claims"] == 0 and s["handler_errors"] == 0


def test_several_runtimes_share_nothing():
    """Several runtimes coexist; a runtime's close ends only its own channels."""
    with stampede.Runtime() as a, stampede.Runtime() as b:
        a.create_channel("x")
        b.create_channel("x")
        a.close()
        assert b.names() == ["x"]
        with pytest.raises(stampede.Closed):
            a.create_channel("y")
