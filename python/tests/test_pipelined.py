"""Pipelined puts from Python (docs/NODES.md, "Pipelined puts"): with a put_window a remote put
returns before the node's reply; its error is raised by the connection's next put or flush,
naming its timestamp, once; the puts land in order and every later call of the client sees them.
Embedded, a put lands before it returns and raises its own error (STAMPEDE_CONFIGURATION)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import CONFIGURATION

import stampede


def test_a_pipelined_puts_error_is_raised_later_naming_its_timestamp(rt: stampede.Runtime) -> None:
    frames = rt.create_channel("pipelined/full", capacity=2)
    t = rt.ts_min
    with rt.task(t) as producer:
        out = producer.attach_output(frames, put_window=4)
        out.put(t + 1, b"one", timeout=0)
        out.put(t + 2, b"two", timeout=0)
        with pytest.raises(stampede.Full, match=f"ts={t + 3}"):
            try:
                out.put(t + 3, b"three", timeout=0)
            except stampede.Full:
                assert CONFIGURATION != "serve", "on the direct path a put returns before its reply"
                raise
            out.flush()
        out.flush()  # raised once
        assert frames.timestamps() == [t + 1, t + 2]


def test_pipelined_puts_land_in_order_and_a_later_get_sees_them(rt: stampede.Runtime) -> None:
    frames = rt.create_channel("pipelined/frames")
    t = rt.ts_min
    with rt.task(t) as producer, rt.task(t) as reader:
        out = producer.attach_output(frames, put_window=8)
        inp = reader.attach_input(frames)
        for i in range(100):
            out.put(t + i, i.to_bytes(4, "little"))
        assert inp.get(stampede.NEWEST, timeout=0).ts == t + 99, "a get after the puts sees the last"
        for i in range(99):  # the 100th is open already
            item = inp.get(stampede.OLDEST_UNSEEN, timeout=0)
            assert (item.ts, bytes(item.data)) == (t + i, i.to_bytes(4, "little"))
        out.flush()


def test_a_window_out_of_bounds_or_on_a_queue_is_refused(rt: stampede.Runtime) -> None:
    frames, jobs = rt.create_channel("pipelined/refused"), rt.create_queue("pipelined/jobs")
    with rt.task(rt.ts_min) as producer:
        with pytest.raises(stampede.InvalidArgument, match="PUT_WINDOW_MAX"):
            producer.attach_output(frames, put_window=65)
        with pytest.raises(TypeError, match="a Queue's puts wait"):
            producer.attach_output(jobs, put_window=4)
        producer.attach_output(frames, put_window=0).flush()


def test_put_async_on_a_pipelined_output_waits_for_its_own_reply(rt: stampede.Runtime) -> None:
    """asyncio's put tries until there is room: on a pipelined output each try is waited for, so
    a full channel's refusal comes from the put itself, at its timeout."""
    frames = rt.create_channel("pipelined/async", capacity=1)
    t = rt.ts_min
    with rt.task(t) as producer:
        out = producer.attach_output(frames, put_window=4)
        asyncio.run(out.put_async(t + 1, b"one", timeout=0.05))
        with pytest.raises(stampede.Full, match=f"ts={t + 2}"):
            asyncio.run(out.put_async(t + 2, b"two", timeout=0.05))
        out.flush()
        assert frames.timestamps() == [t + 1]
