"""Prefetch from Python (docs/PREFETCH.md): a skipping reader of a remote channel is answered from
its cache with exactly what a get through the node could return; the policy is an argument of
attach_input and of connect; a word that is no policy is refused. Embedded, the same reads read
the same items and nothing is pushed (STAMPEDE_CONFIGURATION)."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import CONFIGURATION, NODE_START_S, served_nodes

import stampede

FRAMES = 40


def prefetch_of(rt: stampede.Runtime, task: stampede.Task) -> dict | None:
    """The node's report of `task`'s input connection: policy, pushed, used (None embedded)."""
    [view] = [t for t in rt.graph()["tasks"] if t["id"] == task.id]
    [connection] = [c for c in view["connections"] if c["kind"] == "input"]
    return connection["prefetch"]


def test_a_skipping_reader_reads_forward_from_its_cache(rt: stampede.Runtime) -> None:
    frames = rt.create_channel("prefetch/frames")
    with rt.task(0) as camera, rt.task(stampede.INFINITY) as display:
        out = camera.attach_output(frames)
        inp = display.attach_input(frames, prefetch="newest")

        def produce() -> None:
            for ts in range(FRAMES):
                out.put(ts, ts.to_bytes(8, "little"))
                time.sleep(0.004)

        producer = threading.Thread(target=produce)
        producer.start()
        last, gets = -1, 0
        while last < FRAMES - 1:
            item = inp.get(stampede.NEWEST_UNSEEN, timeout=10)
            assert item.ts > last, "a skipping reader only goes forward"
            assert bytes(item.data) == item.ts.to_bytes(8, "little"), "the item's own payload"
            inp.consume_until(item.ts)
            last, gets = item.ts, gets + 1
        producer.join()
        pushed = prefetch_of(rt, display)
        if CONFIGURATION == "embedded":
            assert pushed is None
        else:
            assert pushed["policy"] == "newest"
            assert 0 < pushed["used"] <= min(pushed["pushed"], gets), pushed


def test_a_word_that_is_no_policy_is_refused(rt: stampede.Runtime) -> None:
    frames = rt.create_channel("prefetch/refused")
    with rt.task(stampede.INFINITY) as reader:
        with pytest.raises(stampede.InvalidArgument, match='prefetch="sometimes" is no prefetch policy'):
            reader.attach_input(frames, prefetch="sometimes")
        with pytest.raises(TypeError, match="a Queue's items go to one reader each"):
            reader.attach_input(rt.create_queue("prefetch/jobs"), prefetch="newest")


def test_connect_sets_the_default_policy() -> None:
    with (
        served_nodes("prefetch") as [endpoint],
        stampede.connect(endpoint, timeout=NODE_START_S, prefetch="off") as rt,
    ):
        frames = rt.create_channel("prefetch/default")
        with rt.task(0) as camera, rt.task(stampede.INFINITY) as display:
            out, inp = camera.attach_output(frames), display.attach_input(frames)
            for ts in range(10):
                out.put(ts, b"x")
                assert inp.get(stampede.NEWEST_UNSEEN, timeout=10).ts == ts
            assert prefetch_of(rt, display) == {"policy": "off", "notices": 0, "pushed": 0, "used": 0}
