"""Temporal correlation from Python — settled timestamps, exact and approximate joins,
demand feedback and the current-readers retention policy (docs/CORRELATION.md)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import MESH_SETTLE_S, settled

import stampede
from stampede import INFINITY, OLDEST_UNSEEN, ApproxJoin, ExactJoin


def cameras(rt: stampede.Runtime, names: list[str], close: bool = True):
    """One producer task per channel at virtual time 0, a joiner task at INFINITY; producer sets
    closed unless `close` is False. Returns (channels, producer tasks, outputs, joiner inputs)."""
    channels = [rt.create_channel(n) for n in names]
    tasks = [rt.task(0) for _ in names]
    outs = [t.attach_output(c) for t, c in zip(tasks, channels)]
    if close:
        for c in channels:
            c.close_producers()
    joiner = rt.task(INFINITY)
    inputs = [joiner.attach_input(c) for c in channels]
    return channels, tasks, outs, inputs


def test_settled_timestamps_open_vs_closed_producer_set(rt):
    """With an open producer set a timestamp is settled only below ts_min (one unrelated slow task
    holds it back); after close_producers() settledness follows the channel's own producers —
    lowered by what can still arrive on their inputs (an unseen item, or what the upstream
    producer may still put) — no producer may attach, and it is INFINITY once the last producer
    closes."""
    up = rt.create_channel("up")
    ch = rt.create_channel("c")
    slow = rt.task(0)  # unrelated, holds ts_min at 0
    feeder = rt.task(6)
    feed = feeder.attach_output(up)
    producer = rt.task(5)
    out = producer.attach_output(ch)
    upstream = producer.attach_input(up)
    assert ch.settled_below == 0 and not ch.is_settled(3)
    ch.close_producers()
    assert ch.settled_below == 0  # anyone may still put 0 into "up", and the producer relay it
    up.close_producers()
    assert ch.settled_below == 5
    assert ch.is_settled(4) and not ch.is_settled(5)
    producer.set_virtual_time(9)
    assert ch.settled_below == 6  # the feeder may still put 6
    feed.put(7, b".")  # unseen on the producer's input: it could still inherit 7
    feeder.set_virtual_time(10)
    assert ch.settled_below == 7
    upstream.get(7, timeout=0)
    out.put(7, b"derived")
    upstream.consume(7)
    assert ch.settled_below == 9
    with pytest.raises(stampede.InvalidArgument, match="producer set is closed"):
        rt.task(9).attach_output(ch)
    producer.close()
    assert ch.settled_below == INFINITY and ch.is_settled(10**12)
    slow.close()


def test_exact_join_wait_all_out_of_order_several_producers(rt):
    """wait_all: three channels, two producer threads per channel each putting its timestamps in
    reverse order; the join yields complete tuples in timestamp order, and the joiner can put its
    result at each tuple's timestamp (the tuple stays open until the next call)."""
    channels = [rt.create_channel(f"cam/{i}") for i in range(3)]
    producers = [rt.task(0) for _ in range(2)]
    joiner = rt.task(0)
    join = ExactJoin([joiner.attach_input(c) for c in channels])
    joiner.set_virtual_time(INFINITY)
    mix = joiner.attach_output(rt.create_channel("mix"))

    def produce(k: int) -> None:
        outs = [producers[k].attach_output(c) for c in channels]
        for ts in reversed(range(k, 20, 2)):
            for out in outs:
                out.put(ts, bytes([ts]))

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ts in range(20):
        tuple_ = join.next(timeout=5)
        assert tuple_.ts == ts
        assert [bytes(item.data) for item in tuple_] == [bytes([ts])] * 3
        mix.put(tuple_.ts, b"composite")
    assert join.stats() == {"complete": 20, "partial": 0, "skipped": 0, "late": 0, "handler_errors": 0}
    with pytest.raises(stampede.NotAvailable):
        join.next(timeout=0)


def test_exact_join_wait_all_concurrent_out_of_order_counts_late_items(rt):
    """wait_all read *while* two producers put out of order: whatever the interleaving, tuples
    come out complete and strictly increasing, and every timestamp is accounted for — released
    complete, or its items (one per channel) counted late and reported, never lost."""
    channels = [rt.create_channel(f"cam/{i}") for i in range(3)]
    producers = [rt.task(0) for _ in range(2)]
    join = ExactJoin([rt.task(INFINITY).attach_input(c) for c in channels])
    late: list[int] = []
    join.on_incomplete(lambda ts, present, what: late.append(ts) if what == "late" else None)

    def produce(k: int) -> None:
        outs = [producers[k].attach_output(c) for c in channels]
        for ts in reversed(range(k, 200, 2)):
            for out in outs:
                out.put(ts, b".")
        producers[k].close()

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    released = [(t.ts, all(i is not None for i in t)) for t in join.stream(timeout=1)]
    for t in threads:
        t.join()
    assert all(complete for _, complete in released)
    ts = [t for t, _ in released]
    assert ts == sorted(set(ts))
    stats = join.stats()
    assert stats["complete"] == len(ts) and stats["late"] == len(late) == 3 * (200 - len(ts))
    assert sorted(set(late) | set(ts)) == list(range(200))


@pytest.mark.parametrize("policy", ["partial", "skip"])
def test_dead_camera_never_stalls_partial_and_skip(rt, policy):
    """partial / skip: camera b stalls at virtual time 3, so the join waits (3.. is not settled on
    b); when camera b's task dies, its missing timestamps are settled and the join moves on —
    None parts under "partial", dropped under "skip" — each counted and reported."""
    _, (cam_a, cam_b), (out_a, out_b), inputs = cameras(rt, ["cam/a", "cam/b"])
    join = ExactJoin(inputs, policy=policy)
    reports: list[tuple[int, list[bool], str]] = []
    join.on_incomplete(lambda ts, present, what: reports.append((ts, present, what)))
    for ts in range(6):
        out_a.put(ts, b"a")
        cam_a.set_virtual_time(ts + 1)
        if ts < 3:
            out_b.put(ts, b"b")
            cam_b.set_virtual_time(ts + 1)
    assert [join.next(timeout=5).ts for _ in range(3)] == [0, 1, 2]
    with pytest.raises(stampede.NotAvailable):
        join.next(timeout=0.02)
    cam_b.close()  # the camera dies
    if policy == "partial":
        tuples = [join.next(timeout=5) for _ in range(3)]
        assert [t.ts for t in tuples] == [3, 4, 5]
        assert all(t.items[0] is not None and t.items[1] is None for t in tuples)
    else:
        with pytest.raises(stampede.NotAvailable):
            join.next(timeout=0.02)
    what = "partial" if policy == "partial" else "skipped"
    assert reports == [(ts, [True, False], what) for ts in (3, 4, 5)]
    stats = join.stats()
    assert (stats["complete"], stats[what]) == (3, 3)


def test_skip_camera_advancing_virtual_time_without_putting(rt):
    """A camera that advances its virtual time past a timestamp without putting it settles that
    timestamp: "skip" drops it at once (counted) instead of waiting."""
    _, (cam_a, cam_b), (out_a, out_b), inputs = cameras(rt, ["a", "b"])
    join = ExactJoin(inputs, policy="skip")
    out_a.put(0, b".")
    out_a.put(1, b".")
    cam_a.set_virtual_time(2)
    out_b.put(1, b".")
    with pytest.raises(stampede.NotAvailable):
        join.next(timeout=0)  # 0 is not settled on b yet
    cam_b.set_virtual_time(2)  # b dropped frame 0
    assert join.next(timeout=0).ts == 1
    assert join.stats()["skipped"] == 1


def test_late_items_are_counted_and_reported(rt):
    """wait_all: an item put at or below a timestamp already released is late: consumed unused,
    counted in stats()["late"] and reported as "late"."""
    ch = rt.create_channel("a")
    out = rt.task(0).attach_output(ch)
    join = ExactJoin([rt.task(INFINITY).attach_input(ch)])
    seen: list[tuple[int, list[bool], str]] = []
    join.on_incomplete(lambda ts, present, what: seen.append((ts, present, what)))
    out.put(5, b".")
    assert join.next(timeout=0).ts == 5
    out.put(3, b".")
    with pytest.raises(stampede.NotAvailable):
        join.next(timeout=0)
    assert seen == [(3, [True], "late")]
    assert join.stats()["late"] == 1


def test_raising_on_incomplete_is_reported_and_counted(rt, monkeypatch):
    """An exception in on_incomplete goes to sys.unraisablehook and is counted (join and
    runtime), like a GC handler's; the join keeps working."""
    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    _, (cam_a, cam_b), (out_a, _), inputs = cameras(rt, ["a", "b"])
    join = ExactJoin(inputs, policy="partial")

    def bad(ts: int, present: list[bool], what: str) -> None:
        raise ValueError(f"callback failed at {ts}")

    join.on_incomplete(bad)
    out_a.put(0, b".")
    cam_b.close()
    tuple_ = join.next(timeout=5)
    assert tuple_.ts == 0 and tuple_.items[1] is None
    assert len(reported) == 1 and "callback failed at 0" in str(reported[0].exc_value)  # type: ignore[attr-defined]
    assert join.stats()["handler_errors"] == 1 and join.stats()["partial"] == 1
    assert rt.stats()["handler_errors"] == 1
    with pytest.raises(TypeError):
        join.on_incomplete(42)  # type: ignore[arg-type]


def test_joins_need_closed_producer_sets_and_leave_inputs_usable(rt):
    """partial/skip joins and ApproxJoin refuse channels whose producer set is open
    (InvalidArgument naming close_producers()), before taking anything: the connections stay
    usable, and the same connections make a join once the sets are closed."""
    channels, _, (out_a, _), inputs = cameras(rt, ["a", "b"], close=False)
    for build in (lambda: ExactJoin(inputs, policy="skip"), lambda: ApproxJoin(inputs, tolerance=1)):
        with pytest.raises(stampede.InvalidArgument, match=r"close_producers\(\)") as err:
            build()
        assert err.value.name == "a"
    out_a.put(0, b".")
    assert inputs[0].get(0, timeout=0).ts == 0  # still usable
    inputs[0].consume(0)
    for c in channels:
        c.close_producers()
    assert ExactJoin(inputs, policy="skip").policy == "skip"
    with pytest.raises(stampede.InvalidArgument, match="policy"):
        ExactJoin([], policy="sometimes")
    with pytest.raises(stampede.InvalidArgument, match="no input connections"):
        ExactJoin([])
    with pytest.raises(stampede.InvalidArgument, match="tolerance"):
        ApproxJoin([rt.task(0).attach_input(channels[0])], tolerance=1)


def test_inputs_are_handed_over_to_the_join(rt):
    """Building a join hands over the Rust connections: the Python inputs raise Closed from then
    on; giving a connection twice (or a handed-over one) fails and hands over nothing; closing the
    join detaches its connections, so their claims stop holding ts_min."""
    _, (cam,), (out,), (inp,) = cameras(rt, ["a"], close=False)
    other = rt.task(INFINITY).attach_input(rt.lookup("a"))
    with pytest.raises(stampede.InvalidArgument, match="twice"):
        ExactJoin([other, inp, inp])
    other.consume_until(0)  # nothing was taken
    with ExactJoin([inp]) as join:
        with pytest.raises(stampede.Closed, match="handed over to a join"):
            inp.get(OLDEST_UNSEEN, timeout=0)
        inp.detach()  # a no-op now
        with pytest.raises(stampede.Closed):
            ExactJoin([inp])
        out.put(3, b".")
        cam.set_virtual_time(10)
        assert join.next(timeout=MESH_SETTLE_S).ts == 3  # at once but across nodes (split)
        assert settled(3, lambda: rt.ts_min) == 3  # the released tuple stays open on the join's connection
        other.consume_until(3)
    assert settled(4, lambda: rt.ts_min) == 4  # closing the join released it (1 + the highest timestamp put)
    with pytest.raises(stampede.Closed, match="join was closed"):
        join.next(timeout=0)
    assert join.stats()["complete"] == 1 and list(join) == []


def test_iteration_ends_when_producers_close_or_the_stream_times_out(rt):
    """`for t in join` stops once every input channel is settled everywhere and nothing is left
    (all producers closed): next() then raises Closed ("exhausted"). `join.stream(timeout)` also
    stops when no tuple comes within the timeout."""
    _, tasks, outs, inputs = cameras(rt, ["a", "b"])
    join = ExactJoin(inputs, policy="partial")
    for ts in range(4):
        for out in outs:
            out.put(ts, b".")
    for t in tasks:
        t.set_virtual_time(4)  # 0..3 are settled: complete tuples may go out in order
    start = time.monotonic()
    assert [t.ts for t in join.stream(timeout=0.05)] == [0, 1, 2, 3]
    assert time.monotonic() - start >= 0.04

    def finish() -> None:
        time.sleep(0.05)
        outs[0].put(4, b".")
        for t in tasks:
            t.close()

    threading.Thread(target=finish).start()
    assert [(t.ts, t.items[1] is None) for t in join] == [(4, True)]
    with pytest.raises(stampede.Closed, match="exhausted"):
        join.next()


def test_blocked_next_releases_the_gil(rt):
    """A next() blocked in one thread lets other Python threads run and put the missing part."""
    _, (cam_a, cam_b), (out_a, out_b), inputs = cameras(rt, ["a", "b"])
    join = ExactJoin(inputs)
    out_a.put(0, b"a")
    result: list[int] = []
    waiter = threading.Thread(target=lambda: result.append(join.next(timeout=5).ts))
    waiter.start()
    time.sleep(0.1)
    out_b.put(0, b"b")
    waiter.join()
    assert result == [0]


INTERRUPTED_JOIN = textwrap.dedent(
    """
    import sys, stampede
    rt = stampede.Runtime()
    chans = [rt.create_channel(n) for n in "ab"]
    producer = rt.task(0)
    outs = [producer.attach_output(c) for c in chans]
    for c in chans:
        c.close_producers()
    joiner = rt.task(stampede.INFINITY)
    join = stampede.{join}([joiner.attach_input(c) for c in chans], {arg})
    print("ready", flush=True)
    try:
        join.next()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(42)
    """
)


@pytest.mark.parametrize(("join", "arg"), [("ExactJoin", "policy='wait_all'"), ("ApproxJoin", "tolerance=5")])
def test_ctrl_c_interrupts_blocked_join(join, arg, interrupted):
    """SIGINT turns a join next() blocked forever into KeyboardInterrupt (watchdog: 10 s)."""
    interrupted(INTERRUPTED_JOIN.format(join=join, arg=arg))


def brute_force(pivot: list[int], other: list[int], tolerance: int) -> list[tuple[int, int | None]]:
    """Per pivot timestamp, the closest timestamp of `other` within `tolerance`, earlier on a tie."""
    result = []
    for t in sorted(pivot):
        near = [o for o in other if abs(o - t) <= tolerance]
        result.append((t, min(near, key=lambda o: (abs(o - t), o)) if near else None))
    return result


def test_approx_join_matches_brute_force_on_random_streams():
    """On 25 seeded random pairs of streams put in random interleavings (each producer in order,
    advancing its virtual time), the approximate join — polled between puts, so it must never
    release a match a later put would improve — releases exactly the brute-force optimum."""
    rng = random.Random(20240501)
    for case in range(25):
        video = sorted(rng.sample(range(200), rng.randint(1, 30)))
        audio = sorted(rng.sample(range(200), rng.randint(0, 40)))
        tolerance = rng.randint(0, 7)
        rt = stampede.Runtime()
        _, (pv, pa), (ov, oa), inputs = cameras(rt, ["video", "audio"])
        join = ApproxJoin(inputs, tolerance=tolerance)
        released: list[tuple[int, int | None]] = []

        def drain(join: ApproxJoin = join, released: list = released) -> None:
            while True:
                try:
                    m = join.next(timeout=0)
                except stampede.NotAvailable:
                    return
                released.append((m.pivot.ts, m.matches[0].ts if m.matches[0] is not None else None))

        vi, ai = iter(video), iter(audio)
        pending = {"v": next(vi, None), "a": next(ai, None)}
        while pending["v"] is not None or pending["a"] is not None:
            take_video = pending["a"] is None or (pending["v"] is not None and rng.random() < 0.5)
            if take_video:
                ov.put(pending["v"], b"v")
                pv.set_virtual_time(pending["v"] + 1)
                pending["v"] = next(vi, None)
            else:
                oa.put(pending["a"], b"a")
                pa.set_virtual_time(pending["a"] + 1)
                pending["a"] = next(ai, None)
            drain()
        pv.close()
        pa.close()
        released += [(m.ts, m.matches[0].ts if m.matches[0] else None) for m in join]
        assert released == brute_force(video, audio, tolerance), (case, tolerance)
        stats = join.stats()
        assert stats["complete"] + stats["partial"] == len(video)
        assert stats["partial"] == sum(1 for _, o in released if o is None)
        rt.close()


def test_demand_on_a_current_readers_channel(rt):
    """demand(): INFINITY with no reader on a current_readers channel, then the readers'
    consume_until floor + 1; ts_min on a history channel. A source honouring it skips ahead."""
    live = rt.create_channel("live", retention="current_readers")
    kept = rt.create_channel("kept")
    assert (live.retention, kept.retention) == ("current_readers", "history")
    source = rt.task(0)
    out, out_kept = source.attach_output(live), source.attach_output(kept)
    assert out.demand() == INFINITY  # nobody reads: skip everything
    inp = rt.task(INFINITY).attach_input(live)
    assert out.demand() == 0
    inp.consume_until(10)
    assert out.demand() == 11
    assert out_kept.demand() == rt.ts_min == 0
    out.put(max(out.demand(), source.visibility), b"frame")
    assert inp.get(OLDEST_UNSEEN, timeout=0).ts == 11
    with pytest.raises(stampede.InvalidArgument, match="retention"):
        rt.create_channel("bad", retention="forever")


def test_current_readers_retention_reclaims_when_current_readers_consumed(rt):
    """current_readers: an item with no reader is reclaimed at once; otherwise as soon as every
    input connection attached now consumed it, far above ts_min (held at 0 by a pinned task);
    detaching a reader releases what only it held. live_items / reclaimed / GC handlers agree,
    and a reclaimed timestamp stays taken."""
    ch = rt.create_channel("frames", retention="current_readers")
    reclaimed: list[int] = []
    ch.on_reclaim(reclaimed.append)
    pinned = rt.task(0)
    out = rt.task(0).attach_output(ch)
    out.put(0, b"nobody")
    assert (ch.stats()["live_items"], ch.stats()["reclaimed"]) == (0, 1)
    with pytest.raises(stampede.DuplicateTimestamp):
        out.put(0, b"again")
    a = rt.task(INFINITY).attach_input(ch)
    b = rt.task(INFINITY).attach_input(ch)
    for ts in range(1, 6):
        out.put(ts, b"f")
    a.consume_until(3)
    assert ch.stats()["live_items"] == 5
    b.get(2, timeout=0)
    b.consume_until(2)
    assert ch.timestamps() == [3, 4, 5]
    b.detach()
    assert ch.timestamps() == [4, 5]
    stats = ch.stats()
    assert (stats["live_items"], stats["reclaimed"]) == (2, 4)
    assert rt.ts_min == 0 and reclaimed == [0, 1, 2, 3]
    pinned.close()


EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        ("stereo_matcher.py", ["--frames", "40", "--fps", "200", "--drop", "0.2"], "disparity errors 0"),
        ("av_matcher.py", ["--seconds", "0.4"], "not the brute-force choice 0; frequency errors 0"),
    ],
)
def test_correlation_examples_run_and_check_themselves(script, args, expected):
    """The two correlation examples run bounded and report no error against their ground truth
    (stereo: every dropped frame skipped, none else)."""
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert expected in out, out
    if script == "stereo_matcher.py":
        assert "same timestamps: True" in out, out
