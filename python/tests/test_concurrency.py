"""Threads, asyncio, streams, timeouts and Ctrl-C: blocking calls release the GIL, awaitables do
not block the event loop, and a blocked get is interrupted by KeyboardInterrupt."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time

import numpy as np
import pytest
from conftest import settled

import stampede
from stampede import INFINITY, NEWEST_UNSEEN, OLDEST_UNSEEN


def pipeline(rt: stampede.Runtime, **limits):
    ch = rt.create_channel("c", **limits)
    producer = rt.task(0)
    return ch, producer, producer.attach_output(ch), rt.task(INFINITY).attach_input(ch)


def test_blocked_get_releases_the_gil(rt):
    """While one thread blocks in get, other Python threads run (they would starve otherwise)."""
    _, _, out, inp = pipeline(rt)
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(inp.get(OLDEST_UNSEEN).ts))
    t.start()
    counter = 0
    deadline = time.monotonic() + 0.1
    while time.monotonic() < deadline:
        counter += 1
    out.put(3, b"")
    t.join(10)
    assert got == [3] and counter > 1000


def test_producer_consumer_threads(rt):
    """A producer and a consumer thread hand over 500 items in order, none lost."""
    _, producer, out, inp = pipeline(rt, capacity=8)
    n = 500

    def produce() -> None:
        for ts in range(n):
            out.put(ts, ts.to_bytes(4, "little"))
            producer.set_virtual_time(ts + 1)

    t = threading.Thread(target=produce)
    t.start()
    seen = []
    for _ in range(n):
        item = inp.get(OLDEST_UNSEEN, timeout=10)
        seen.append(int.from_bytes(item.data, "little"))
        inp.consume(item.ts)
    t.join()
    assert seen == list(range(n))


def test_stream_oldest_unseen_consumes_each(rt):
    """stream() yields in order and consumes each item when the next is asked for."""
    ch, producer, out, inp = pipeline(rt)
    for ts in range(5):
        out.put(ts, b"")
    producer.set_virtual_time(100)
    seen = []
    for item in inp.stream(OLDEST_UNSEEN, timeout=0):
        seen.append(item.ts)
        # earlier ones are consumed and reclaimed
        assert settled(5 - item.ts, lambda: ch.stats()["live_items"]) == 5 - item.ts
    assert seen == [0, 1, 2, 3, 4]
    assert settled(0, lambda: ch.stats()["live_items"]) == 0


def test_stream_newest_unseen_skips_and_consumes_until(rt):
    """stream(NEWEST_UNSEEN) gives the freshest item and consume_until's the skipped ones."""
    ch, producer, out, inp = pipeline(rt)
    for ts in range(5):
        out.put(ts, b"")
    producer.set_virtual_time(100)
    it = inp.stream(NEWEST_UNSEEN, timeout=0)
    assert next(it).ts == 4
    with pytest.raises(StopIteration):
        next(it)
    assert settled(0, lambda: ch.stats()["live_items"]) == 0


def test_stream_without_consume_and_ends_on_close(rt):
    """consume=False leaves items open; the stream ends when the channel is destroyed."""
    ch, _, out, inp = pipeline(rt)
    out.put(0, b"")
    it = inp.stream(timeout=None, consume=False)
    assert next(it).ts == 0
    threading.Timer(0.05, ch.destroy).start()
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(stampede.InvalidArgument):
        inp.stream(5)


def test_asyncio_get_put_do_not_block_the_loop(rt):
    """get_async waits without blocking the event loop; put_async completes it."""
    _, _, out, inp = pipeline(rt)

    async def main() -> tuple[int, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        getter = asyncio.ensure_future(inp.get_async(NEWEST_UNSEEN))
        await asyncio.sleep(0.05)
        await out.put_async(7, np.arange(3))
        item = await asyncio.wait_for(getter, 10)
        tick_task.cancel()
        return item.ts, ticks

    ts, ticks = asyncio.run(main())
    assert ts == 7 and ticks > 5


def test_asyncio_timeout_and_errors(rt):
    """get_async raises NotAvailable after its timeout, and other errors as usual."""
    _, _, out, inp = pipeline(rt)

    async def main() -> None:
        with pytest.raises(stampede.NotAvailable):
            await inp.get_async(NEWEST_UNSEEN, timeout=0.02)
        await out.put_async(1, b"x")
        with pytest.raises(stampede.DuplicateTimestamp):
            await out.put_async(1, b"x")

    asyncio.run(main())


def test_asyncio_cancelled_queue_get_takes_nothing(rt):
    """Cancelling a pending queue get_async leaves the next item to other getters."""
    q = rt.create_queue("q")
    out = rt.task(0).attach_output(q)
    a = rt.task(INFINITY).attach_input(q)
    b = rt.task(INFINITY).attach_input(q)

    async def main() -> int:
        pending = asyncio.ensure_future(a.get_async())
        await asyncio.sleep(0.02)
        pending.cancel()
        await asyncio.sleep(0.02)
        await out.put_async(5, b"")
        return (await b.get_async(timeout=5)).ts

    assert asyncio.run(main()) == 5


def test_many_async_getters_share_one_thread(rt):
    """100 coroutines wait at once on different channels, then all complete."""
    chans = [rt.create_channel(f"c{i}") for i in range(100)]
    producer = rt.task(0)
    reader = rt.task(INFINITY)
    outs = [producer.attach_output(c) for c in chans]
    inps = [reader.attach_input(c) for c in chans]

    async def main() -> list[int]:
        waits = [asyncio.ensure_future(i.get_async(OLDEST_UNSEEN, timeout=10)) for i in inps]
        await asyncio.sleep(0.02)
        for n, o in enumerate(outs):
            o.put(n, b"")
        return [(await w).ts for w in waits]

    assert asyncio.run(main()) == list(range(100))


INTERRUPTED_GET = textwrap.dedent(
    """
    import sys, stampede
    rt = stampede.Runtime()
    ch = rt.create_channel("c", capacity=1)
    out = rt.task(0).attach_output(ch)  # holds ts_min at 0
    inp = rt.task(stampede.INFINITY).attach_input(ch)
    print("ready", flush=True)
    try:
        inp.{call}
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(42)
    """
)


@pytest.mark.parametrize(
    "call",
    ["get(stampede.NEWEST_UNSEEN)", "get(5, timeout=60)", "stream().__next__()"],
)
def test_ctrl_c_interrupts_blocked_get(call, interrupted):
    """SIGINT turns a get blocked forever into KeyboardInterrupt (watchdog: 10 s)."""
    interrupted(INTERRUPTED_GET.format(call=call))


def test_ctrl_c_interrupts_blocked_put(interrupted):
    """SIGINT interrupts a put waiting for room in a full channel."""
    interrupted(INTERRUPTED_GET.format(call="get(0, timeout=0) if out.put(0, b'') else out.put(1, b'')"))


def test_timeouts(rt):
    """None blocks, 0 never blocks, a number waits that long; negative or NaN is InvalidArgument."""
    _, _, _, inp = pipeline(rt)
    start = time.monotonic()
    with pytest.raises(stampede.NotAvailable):
        inp.get(NEWEST_UNSEEN, timeout=0.12)
    assert time.monotonic() - start >= 0.1
    for bad in (-1, float("nan")):
        with pytest.raises(stampede.InvalidArgument):
            inp.get(NEWEST_UNSEEN, timeout=bad)
