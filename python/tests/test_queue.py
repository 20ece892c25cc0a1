"""Queues from Python (docs/SEMANTICS.md, "Queues"): FIFO by insertion, each item to exactly one
getter, reclaimed on consume, open items count in the getter's visibility."""

from __future__ import annotations

import threading

import pytest

import stampede
from stampede import INFINITY


def test_fifo_and_duplicates(rt):
    """FIFO by insertion order, duplicate timestamps allowed."""
    q = rt.create_queue("work")
    out = rt.task(0).attach_output(q)
    inp = rt.task(INFINITY).attach_input(q)
    for ts, data in ((5, "a"), (1, "b"), (5, "c")):
        out.put(ts, data)
    got = [inp.get(timeout=0) for _ in range(3)]
    assert [(i.ts, i.text()) for i in got] == [(5, "a"), (1, "b"), (5, "c")]
    assert got[0].seq != got[2].seq
    with pytest.raises(stampede.NotAvailable):
        inp.get(timeout=0)


def test_each_item_to_one_getter_and_reclaimed_on_consume(rt):
    """Two getters never get the same item; consuming reclaims it and runs GC handlers."""
    q = rt.create_queue("work")
    reclaimed: list[int] = []
    q.on_reclaim(reclaimed.append)
    out = rt.task(0).attach_output(q)
    a = rt.task(INFINITY).attach_input(q)
    b = rt.task(INFINITY).attach_input(q)
    out.put(1, b"x")
    out.put(2, b"y")
    ia, ib = a.get(timeout=0), b.get(timeout=0)
    assert {ia.ts, ib.ts} == {1, 2}
    assert q.stats()["live_items"] == 2
    a.consume(ia)
    b.consume(ib.ts)  # by timestamp works too
    assert q.stats()["live_items"] == 0 and sorted(reclaimed) == [1, 2]


def test_open_queue_item_counts_in_visibility(rt):
    """An open queue item holds its task's visibility at its timestamp."""
    q = rt.create_queue("work")
    out = rt.task(0).attach_output(q)
    worker = rt.task(INFINITY)
    inp = worker.attach_input(q)
    out.put(7, b"")
    item = inp.get(timeout=0)
    assert worker.visibility == 7
    inp.consume(item)
    assert worker.visibility == INFINITY


def test_detach_returns_open_items(rt):
    """Items a detached getter still held go back to the head of the queue."""
    q = rt.create_queue("work")
    out = rt.task(0).attach_output(q)
    a = rt.task(INFINITY).attach_input(q)
    b = rt.task(INFINITY).attach_input(q)
    out.put(1, b"")
    a.get(timeout=0)
    a.detach()
    assert b.get(timeout=0).ts == 1


def test_bounded_queue_full(rt):
    """A full bounded queue raises Full with timeout 0."""
    q = rt.create_queue("work", capacity=1)
    out = rt.task(0).attach_output(q)
    out.put(0, b"")
    with pytest.raises(stampede.Full):
        out.put(0, b"", timeout=0)


def test_split_workers_join(rt):
    """Splitter → K workers → joiner over queues: every fragment processed exactly once."""
    work = rt.create_queue("work")
    results = rt.create_queue("results")
    splitter = rt.task(0).attach_output(work)
    k, frames = 4, 5

    def worker() -> None:
        task = rt.task(INFINITY)
        inp, out = task.attach_input(work), task.attach_output(results)
        for item in inp.stream(timeout=0.2):
            out.put(item.ts, bytes(item.data) * 2)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for ts in range(frames):
        for i in range(k):
            splitter.put(ts, bytes([i]))
    joiner = rt.task(INFINITY).attach_input(results)
    got: dict[int, list[bytes]] = {}
    for _ in range(k * frames):
        item = joiner.get(timeout=10)
        got.setdefault(item.ts, []).append(bytes(item.data))
        joiner.consume(item)
    for t in threads:
        t.join()
    assert {ts: sorted(v) for ts, v in got.items()} == {
        ts: [bytes([i, i]) for i in range(k)] for ts in range(frames)
    }
    assert work.stats()["live_items"] == 0 and results.stats()["live_items"] == 0
