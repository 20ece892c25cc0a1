"""Issue 8 — no crash, no hang, no silent loss: the Python surface under cancellation, fork,
Ctrl-C, hostile arguments and reference cycles. Each test names the defect it pins down."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import stampede
from stampede import INFINITY, NEWEST_UNSEEN, OLDEST, OLDEST_UNSEEN

# ---- 4, 5: cancellation never loses an item, a cancelled put is withdrawn --------------------

TRIALS = 10


def test_cancelled_queue_get_async_swallows_nothing(rt):
    """Defect 4 (queue): a get_async timed out by asyncio.wait_for takes nothing; the next item
    goes to another worker, every time, and ts_min does not stick."""
    q = rt.create_queue("work")
    out = rt.task(0).attach_output(q)
    a = rt.task(INFINITY).attach_input(q)
    b = rt.task(INFINITY).attach_input(q)

    async def trial(ts: int) -> int:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.get_async(), 0.01)
        out.put(ts, b"x")
        await asyncio.sleep(0.01)  # time for a leftover waiter to steal the item, if one survived
        got = b.get(OLDEST, timeout=0)
        b.consume(got)
        return got.ts

    async def main() -> list[int]:
        return [await trial(ts) for ts in range(TRIALS)]

    assert asyncio.run(main()) == list(range(TRIALS))
    assert q.stats()["live_items"] == 0


def test_cancelled_channel_get_async_marks_nothing_seen(rt):
    """Defect 4 (channel): a cancelled NEWEST_UNSEEN get_async leaves the next frame unseen."""
    ch = rt.create_channel("frames")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)

    async def trial(ts: int) -> int:
        getter = asyncio.ensure_future(inp.get_async(NEWEST_UNSEEN))
        await asyncio.sleep(0.005)
        getter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await getter
        out.put(ts, b"frame")
        await asyncio.sleep(0.005)
        return inp.get(NEWEST_UNSEEN, timeout=0).ts

    async def main() -> list[int]:
        return [await trial(ts) for ts in range(TRIALS)]

    assert asyncio.run(main()) == list(range(TRIALS))


def test_cancelled_put_async_is_withdrawn(rt):
    """Defect 5: a put_async cancelled while waiting for room never lands later; a retry of the
    same timestamp succeeds instead of failing DuplicateTimestamp."""
    ch = rt.create_channel("bounded", capacity=1)
    producer = rt.task(0)
    out = producer.attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)

    async def trial(ts: int) -> None:
        out.put(2 * ts, b"fills the channel")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(out.put_async(2 * ts + 1, b"waits"), 0.01)
        # Free the room the cancelled put waited for.
        inp.consume_until(2 * ts)
        producer.set_virtual_time(2 * ts + 1)
        await asyncio.sleep(0.01)
        assert 2 * ts + 1 not in ch.timestamps()
        await out.put_async(2 * ts + 1, b"retry", timeout=1)
        inp.consume_until(2 * ts + 1)
        producer.set_virtual_time(2 * ts + 2)

    async def main() -> None:
        for ts in range(TRIALS):
            await trial(ts)

    asyncio.run(main())


def test_put_async_cancelled_before_it_ran_never_lands(rt):
    """Defect 5: a put_async cancelled before the loop ran it stores nothing, now or later (the
    old future started at once and landed anyway)."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)

    async def main() -> None:
        for ts in range(TRIALS):
            task = asyncio.ensure_future(out.put_async(ts, b"x"))
            task.cancel()
            await asyncio.sleep(0.005)
            assert task.cancelled() and ts not in ch.timestamps()
            await out.put_async(ts, b"retry")

    asyncio.run(main())
    assert ch.timestamps() == list(range(TRIALS))


def test_asyncio_run_accepts_get_async(rt):
    """Defect 16: get_async and put_async return coroutines, so asyncio.run takes them."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    asyncio.run(out.put_async(3, b"x"))
    assert asyncio.run(inp.get_async(OLDEST_UNSEEN, timeout=1)).ts == 3


def _forked_child_get_async(result: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    rt = stampede.Runtime()
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    threading.Timer(0.05, lambda: out.put(9, b"x")).start()
    result.put(asyncio.run(inp.get_async(OLDEST_UNSEEN, timeout=10)).ts)


def test_get_async_in_a_forked_child(rt):
    """Defect 10: get_async completes in a fork()ed child after the parent used asyncio (the
    parent's wake-up threads do not exist in the child)."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)

    async def parent_uses_asyncio() -> int:
        getter = asyncio.ensure_future(inp.get_async(OLDEST_UNSEEN))
        await asyncio.sleep(0.01)
        out.put(1, b"x")
        return (await getter).ts

    assert asyncio.run(parent_uses_asyncio()) == 1
    ctx = multiprocessing.get_context("fork")
    result = ctx.Queue()
    child = ctx.Process(target=_forked_child_get_async, args=(result,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert result.get(timeout=1) == 9


# ---- 6, 8: blocked calls wake on detach and when nothing can arrive -------------------------


def _blocked(call, *args):  # type: ignore[no-untyped-def]
    """Runs `call` on a thread; returns (thread, box) where box gets the result or exception."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call(*args))
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


@pytest.mark.parametrize("kind", ["channel", "queue"])
def test_detach_wakes_a_blocked_get_with_closed(rt, kind):
    """Defect 6: detach() on another thread wakes a get blocked forever on that connection with
    Closed, and the connection never returns an item afterwards."""
    c = rt.create_channel("c") if kind == "channel" else rt.create_queue("q")
    out = rt.task(0).attach_output(c)
    inp = rt.task(INFINITY).attach_input(c)
    t, box = _blocked(inp.get, OLDEST_UNSEEN if kind == "channel" else OLDEST)
    time.sleep(0.05)
    inp.detach()
    t.join(10)
    assert not t.is_alive() and isinstance(box[0], stampede.Closed)
    out.put(1, b"x")
    with pytest.raises(stampede.Closed):
        inp.get(OLDEST_UNSEEN if kind == "channel" else OLDEST, timeout=0)


def test_detach_wakes_a_blocked_put(rt):
    """Defect 6: a put waiting for room wakes with Closed when its connection is detached."""
    ch = rt.create_channel("c", capacity=1)
    out = rt.task(0).attach_output(ch)
    out.put(0, b"full")
    t, box = _blocked(out.put, 1, b"waits")
    time.sleep(0.05)
    out.detach()
    t.join(10)
    assert not t.is_alive() and isinstance(box[0], stampede.Closed)
    assert 1 not in ch.timestamps()


def test_stream_ends_when_nothing_can_arrive(rt):
    """Defect 8: a stream over a channel whose producers are closed and gone ends after the last
    item instead of waiting forever."""
    ch = rt.create_channel("c")
    producer = rt.task(0)
    out = producer.attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    ch.close_producers()
    for ts in range(3):
        out.put(ts, b"x")

    def finish() -> None:
        time.sleep(0.05)
        producer.close()

    threading.Thread(target=finish).start()
    assert [item.ts for item in inp.stream()] == [0, 1, 2]


# ---- 9, 3, 12: Pacer -------------------------------------------------------------------------


PACER_SYNC = textwrap.dedent(
    """
    import sys, stampede
    pacer = stampede.Pacer(tick={tick})
    print("ready", flush=True)
    try:
        pacer.sync({vt})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(42)
    """
)


@pytest.mark.parametrize(("tick", "vt"), [(1.0, 3600), (1000.0, 2**62)])
def test_ctrl_c_interrupts_pacer_sync(interrupted, tick, vt):
    """Defect 9 (and 3): Ctrl-C interrupts a long Pacer.sync (an hour; centuries) at once,
    without a panic."""
    interrupted(PACER_SYNC.format(tick=tick, vt=vt))


@pytest.mark.parametrize("tick", [1e300, 1e10, -1, 0, float("nan"), float("inf")])
def test_pacer_bad_tick_is_invalid_argument(tick):
    """Defects 3, 12: every unusable tick is InvalidArgument (no panic, no ValueError)."""
    with pytest.raises(stampede.InvalidArgument):
        stampede.Pacer(tick=tick)


def test_pacer_bad_arguments():
    """Defect 12: a negative vt is InvalidTimestamp, a bool TypeError, a non-callable on_late
    TypeError."""
    pacer = stampede.Pacer(tick=0.001)
    with pytest.raises(stampede.InvalidTimestamp):
        pacer.sync(-5)
    with pytest.raises(TypeError):
        pacer.sync(True)
    with pytest.raises(TypeError):
        stampede.Pacer(tick=0.01, on_late=42)


# ---- 12: bad input -------------------------------------------------------------------------


def test_bools_are_not_numbers(rt):
    """Defect 12: a bool is refused (TypeError) as timestamp, refcount, capacity and timeout."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    with pytest.raises(TypeError):
        out.put(True, b"x")
    with pytest.raises(TypeError):
        out.put(1, b"x", refcount=True)
    with pytest.raises(TypeError):
        inp.get(True, timeout=0)
    with pytest.raises(TypeError):
        inp.get(NEWEST_UNSEEN, timeout=True)
    with pytest.raises(TypeError):
        rt.create_channel("d", capacity=True)
    with pytest.raises(TypeError):
        rt.task(False)
    assert ch.timestamps() == []


def test_out_of_range_ints_get_typed_errors(rt):
    """Defect 12: 2**63 is InvalidTimestamp; negative or huge counts are InvalidArgument;
    capacity=0 is InvalidArgument (never OverflowError or TypeError)."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    for ts in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(stampede.InvalidTimestamp) as info:
            out.put(ts, b"x")
        assert info.value.ts == ts and info.value.name == "c"
        with pytest.raises(stampede.InvalidTimestamp):
            inp.get(ts, timeout=0)
    with pytest.raises(stampede.InvalidTimestamp):
        rt.task(2**64)
    for refcount in (-1, 2**32, 2**64):
        with pytest.raises(stampede.InvalidArgument):
            out.put(1, b"x", refcount=refcount)
    for capacity in (-1, 0, 2**64):
        with pytest.raises(stampede.InvalidArgument):
            rt.create_channel(f"cap{capacity}", capacity=capacity)
    with pytest.raises(stampede.InvalidArgument):
        rt.create_channel("bytes0", max_bytes=0)
    for timeout in (-1, float("nan")):
        with pytest.raises(stampede.InvalidArgument):
            inp.get(NEWEST_UNSEEN, timeout=timeout)
    # Huge but valid: waits "forever" (like None), here satisfied at once.
    out.put(1, b"x")
    assert inp.get(1, timeout=10**400).ts == 1
    assert ch.timestamps() == [1]


def test_numpy_integers_are_ints(rt):
    """NumPy integers are accepted wherever an int is (through __index__)."""
    ch = rt.create_channel("c")
    out = rt.task(0).attach_output(ch)
    out.put(np.int64(4), b"x", refcount=np.uint8(1))
    assert ch.timestamps() == [4]


def test_non_callable_handler_is_refused(rt):
    """Defect 12: on_reclaim takes a callable (or None), anything else is TypeError."""
    ch = rt.create_channel("c")
    with pytest.raises(TypeError):
        ch.on_reclaim(42)
    with pytest.raises(TypeError):
        rt.on_reclaim("not a function")


# ---- 11: GC handlers neither leak nor stick -------------------------------------------------


class _Sentinel:
    pass


def test_handler_capturing_its_channel_does_not_leak_the_runtime():
    """Defect 11: a handler that captures its channel and runtime no longer keeps them (and
    their payloads) alive once the program drops them: Python's collector frees the cycle."""
    refs = []
    for _ in range(20):
        rt = stampede.Runtime()
        ch = rt.create_channel("c")
        out = rt.task(0).attach_output(ch)
        out.put(0, b"payload" * 1000)
        sentinel = _Sentinel()
        ch.on_reclaim(lambda ts, ch=ch, rt=rt, sentinel=sentinel: (ch, rt, sentinel))
        rt.on_reclaim(lambda name, ts, ch=ch, rt=rt: (ch, rt))
        refs.append(weakref.ref(sentinel))
        del rt, ch, out, sentinel
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_on_reclaim_none_removes_the_handler(rt):
    """Defect 11: on_reclaim(None) removes the handler; setting one replaces the previous one."""
    ch = rt.create_channel("c")
    producer = rt.task(0)
    out = producer.attach_output(ch)
    first: list[int] = []
    second: list[int] = []
    ch.on_reclaim(first.append)
    out.put(0, b"x")
    producer.set_virtual_time(1)
    ch.on_reclaim(second.append)
    out.put(1, b"x")
    producer.set_virtual_time(2)
    ch.on_reclaim(None)
    out.put(2, b"x")
    producer.set_virtual_time(3)
    assert (first, second) == ([0], [1])
    assert ch.stats()["reclaimed"] == 3


def test_handlers_survive_while_a_connection_keeps_the_runtime():
    """A handler keeps firing while only a connection (not the channel or runtime object) is
    held: every handle that keeps the runtime alive keeps its handlers."""
    seen: list[int] = []

    def make() -> stampede.ChannelOutput:
        rt = stampede.Runtime()
        ch = rt.create_channel("c")
        ch.on_reclaim(seen.append)
        return rt.task(0).attach_output(ch)

    out = make()
    gc.collect()
    out.put(0, b"x")
    out.detach()  # the task ends with its last connection: ts_min passes 0
    assert seen == [0]


# ---- 16: one call shape for queues and channels ---------------------------------------------


def test_queue_connections_take_the_channel_call_shape(rt):
    """Defect 16: a queue input takes get(OLDEST, timeout) (an int selector is refused, not read
    as a timeout); a queue output takes put(ts, data, refcount=None, timeout=None)."""
    q = rt.create_queue("q")
    out = rt.task(0).attach_output(q)
    inp = rt.task(INFINITY).attach_input(q)
    out.put(0, b"a", None, 0)
    with pytest.raises(stampede.InvalidArgument):
        out.put(1, b"b", refcount=2)
    with pytest.raises(stampede.InvalidArgument):
        inp.get(3)
    with pytest.raises(stampede.InvalidArgument):
        inp.get(NEWEST_UNSEEN)
    item = inp.get(OLDEST, 0)
    assert item.ts == 0
    inp.consume(item)
    with pytest.raises(stampede.NotAvailable):
        inp.get(OLDEST, timeout=0)


def test_lookup_returns_an_equal_handle(rt):
    """Defect 16: rt.lookup(name) == ch (and hashes alike); a recreated channel is a new one."""
    ch = rt.create_channel("camera/left")
    q = rt.create_queue("work")
    assert rt.lookup("camera/left") == ch and hash(rt.lookup("camera/left")) == hash(ch)
    assert rt.lookup("work") == q and rt.lookup("work") != ch
    ch.destroy()
    assert rt.create_channel("camera/left") != ch


# ---- 14: an oversized put fails before the copy ---------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("kind", ["channel", "queue"])
def test_oversized_put_fails_before_copying(rt, kind):
    """Defect 14: a payload larger than max_bytes fails Full without being copied first. The
    source is 256 MiB of untouched (lazily zeroed) pages: a copy would make the process's
    resident memory grow by about that much."""
    c = rt.create_channel("c", max_bytes=1024) if kind == "channel" else rt.create_queue("q", max_bytes=1024)
    out = rt.task(0).attach_output(c)
    big = np.zeros(256 << 20, dtype=np.uint8)  # calloc: pages untouched until read or written
    before = _rss_bytes()
    for data in (big, memoryview(big)):
        with pytest.raises(stampede.Full) as info:
            out.put(1, data)
        assert "can never fit" in str(info.value) or "larger" in str(info.value)
    assert _rss_bytes() - before < (64 << 20)


# ---- 1, 13, 15: cross-runtime attach, names, messages ---------------------------------------


def test_attaching_to_another_runtimes_channel_is_refused():
    """Defect 1: a task of one runtime cannot attach to another runtime's channel or queue (it
    used to be accepted, then its put panicked and cleanup aborted the process)."""
    with stampede.Runtime() as a, stampede.Runtime() as b:
        ch, q = b.create_channel("c"), b.create_queue("q")
        task = a.task(0)
        for attach in (task.attach_input, task.attach_output):
            for container in (ch, q):
                with pytest.raises(stampede.InvalidArgument, match="runtime"):
                    attach(container)


@pytest.mark.parametrize(
    "name",
    [
        "",
        " ",
        "a b",
        "a\x00b",
        "a\nb",
        "a*",
        "a$",
        "a?",
        "a#",
        "a/../b",
        "..",
        "/a",
        "a/",
        "a//b",
        "x" * 10_000,
    ],
)
def test_names_outside_the_rule_are_refused(rt, name):
    """Defect 13: names are '/'-separated segments of letters, digits and _ - . : of bounded
    length; anything else is InvalidArgument, for channels and queues."""
    with pytest.raises(stampede.InvalidArgument):
        rt.create_channel(name)
    with pytest.raises(stampede.InvalidArgument):
        rt.create_queue(name)
    assert rt.names() == []


def test_names_prefix_is_hierarchical(rt):
    """Defect 13: "camera/" matches what is under camera, "camera" also camera itself, never
    "cameras"."""
    for name in ("camera", "camera/left", "camera/right:raw", "cameras"):
        rt.create_channel(name)
    assert rt.names("camera/") == ["camera/left", "camera/right:raw"]
    assert rt.names("camera") == ["camera", "camera/left", "camera/right:raw"]
    assert rt.names("") == ["camera", "camera/left", "camera/right:raw", "cameras"]


def test_messages_say_what_happened(rt):
    """Defect 15: NotAvailable for an exact get carries its ts; consume is worded as a consume;
    using a closed runtime says the runtime is closed."""
    ch = rt.create_channel("c")
    rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    with pytest.raises(stampede.NotAvailable) as info:
        inp.get(5, timeout=0)
    assert info.value.ts == 5 and info.value.settled is False
    with pytest.raises(stampede.NotAvailable) as info:
        inp.consume(7)
    assert str(info.value).startswith("consume")
    rt.close()
    for call in (lambda: rt.lookup("c"), lambda: rt.create_channel("d"), lambda: rt.task(0)):
        with pytest.raises(stampede.Closed, match="runtime was closed"):
            call()
