"""Issue 8 — every argument-conversion path, fuzzed: random and hostile values (bools, huge and
negative ints, NaN, infinities, wrong types, odd names) in every position of every public call.
A call may succeed or raise a typed error (StampedeError, TypeError, ValueError); it may never
panic (pyo3's PanicException), overflow (OverflowError) or kill the interpreter.

Seeded and bounded: CASES calls per run (replay one run with STAMPEDE_FUZZ_SEED=n)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable

import numpy as np
import pytest

import stampede

CASES = int(os.environ.get("STAMPEDE_FUZZ_CASES", "3000"))
SEED = int(os.environ.get("STAMPEDE_FUZZ_SEED", "8"))
ALLOWED = (stampede.StampedeError, TypeError, ValueError)

HOSTILE: list[object] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    7,
    2**31,
    2**32,
    2**63 - 2,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    10**30,
    -(10**30),
    0.0,
    -0.5,
    0.001,
    1e300,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x",
    "camera/left",
    "a//b",
    "/a",
    "a/",
    "..",
    "a*b",
    "\x00",
    "é",
    "x" * 10_000,
    b"",
    b"payload",
    bytearray(b"12"),
    memoryview(b"abc"),
    [],
    {},
    (1, 2),
    object(),
    np.int64(5),
    np.uint64(2**64 - 1),
    np.float64(1.5),
    np.zeros(3),
    np.zeros((2, 2), dtype=">i4"),
    stampede.OLDEST,
    stampede.NEWEST_UNSEEN,
    stampede.INFINITY,
]


def _value(rng: random.Random) -> object:
    return rng.choice(HOSTILE)


def _calls(rt: stampede.Runtime) -> list[tuple[str, Callable[..., object], int]]:
    """(label, call, how many positional arguments it takes at most). Calls that could block
    get timeout=0 from the fixture, never from the fuzzer."""
    ch = rt.create_channel("fuzz/c", capacity=8)
    q = rt.create_queue("fuzz/q", capacity=8)
    producer = rt.task(0)
    reader = rt.task(stampede.INFINITY)
    out = producer.attach_output(ch)
    inp = reader.attach_input(ch)
    qo = producer.attach_output(q)
    qi = reader.attach_input(q)
    pacer = stampede.Pacer(tick=0.001)

    def never_blocking_sync(vt: object) -> object:
        # sync waits for real time: only values that cannot be a long wait are given to it.
        if isinstance(vt, int) and not isinstance(vt, bool) and 0 <= vt:
            return None
        return pacer.sync(vt)  # type: ignore[arg-type]

    return [
        ("create_channel", lambda *a: rt.create_channel(*a), 4),
        ("create_queue", lambda *a: rt.create_queue(*a), 3),
        ("lookup", rt.lookup, 1),
        ("names", rt.names, 1),
        ("task", rt.task, 1),
        ("on_reclaim", rt.on_reclaim, 1),
        ("spawn", producer.spawn, 1),
        ("set_virtual_time", producer.set_virtual_time, 1),
        ("attach_input", reader.attach_input, 1),
        ("attach_input_max_lag", lambda n, d: reader.attach_input(ch, max_lag_items=n, max_lag_ts=d), 2),
        ("attach_output", producer.attach_output, 1),
        ("put", lambda *a: out.put(*a[:3], 0, *a[3:]), 4),
        ("put_refcount", lambda ts, rc: out.put(ts, b"x", refcount=rc, timeout=0), 2),
        ("put_timeout", lambda ts, t: out.put(ts, b"x", timeout=t) if _short(t) else None, 2),
        ("get", lambda s: inp.get(s, 0), 1),
        ("get_timeout", lambda t: inp.get(stampede.NEWEST_UNSEEN, t) if _short(t) else None, 1),
        ("get_range", inp.get_range, 2),
        ("consume", inp.consume, 1),
        ("consume_until", inp.consume_until, 1),
        ("stream", lambda *a: inp.stream(*a[:1], 0, *a[1:]), 2),
        ("queue_put", lambda *a: qo.put(*a[:3], 0, *a[3:]), 4),
        ("queue_get", lambda s: qi.get(s, 0), 1),
        ("queue_consume", qi.consume, 1),
        ("is_settled", ch.is_settled, 1),
        ("channel_on_reclaim", ch.on_reclaim, 1),
        ("Pacer", stampede.Pacer, 3),
        ("sync", never_blocking_sync, 1),
        ("ApproxJoin_tolerance", lambda t: _approx_join(rt, t), 1),
    ]


def _short(timeout: object) -> bool:
    """A timeout the fuzzer may pass to a call that may wait: not None, not long."""
    if timeout is None:
        return False
    try:
        return not float(timeout) > 0.01  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return True  # not a number: the call refuses it without waiting


def _approx_join(rt: stampede.Runtime, tolerance: object) -> object:
    ch = rt.create_channel(f"fuzz/j{random.random()}")
    ch.close_producers()
    a = rt.task(stampede.INFINITY).attach_input(ch)
    b = rt.task(stampede.INFINITY).attach_input(ch)
    join = stampede.ApproxJoin([a, b], tolerance)  # type: ignore[arg-type]
    join.close()
    return join


@pytest.mark.parametrize("seed", [SEED])
def test_no_argument_panics(seed: int) -> None:
    """CASES random calls with random arguments: each returns or raises a typed error."""
    rng = random.Random(seed)
    with stampede.Runtime() as rt:
        calls = _calls(rt)
        for case in range(CASES):
            label, call, most = rng.choice(calls)
            args = [_value(rng) for _ in range(rng.randint(0, most))]
            try:
                call(*args)
            except ALLOWED:
                pass
            except BaseException as e:  # noqa: BLE001 - anything else is the bug we look for
                pytest.fail(
                    f"case {case} (seed {seed}): {label}{tuple(args)!r:.200} raised {type(e).__name__}: {e}"
                )
