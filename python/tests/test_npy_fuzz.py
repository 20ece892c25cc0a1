"""Issue 8 — seeded fuzzing of npy payloads from Python: valid .npy files of many dtypes and
shapes (object ones included), mutated (bytes flipped, inserted, deleted, truncated, huge
dims), put as bytes with codec="npy" and viewed with item.array(). Only InvalidArgument (at
put) or ValueError (at array()) may come out: never a crash or a PanicException.

The cases run in a subprocess, so that a crash fails this test instead of killing pytest.
"""

from __future__ import annotations

import io
import random
import subprocess
import sys

import numpy as np

SEED = 8
CASES = 2000

DTYPES = [
    "<f4",
    ">i2",
    "u1",
    "?",
    "<c16",
    "<M8[ns]",
    "S5",
    "<U3",
    "V7",
    [("a", "<i4"), ("b", "<f8", (2,))],
    [("x", [("y", "<u2", (3, 2))]), ("z", "<f2")],
    [("é", "<i4")],
]
OBJECT_DESCRS = ["'|O'", "[('a', '<i8'), ('b', '|O')]", "('|O', (2,))"]


def valid_payloads(rng: random.Random) -> list[bytes]:
    """np.save output for every dtype in a few shapes and orders, plus object-dtype headers."""
    out = []
    for dtype in DTYPES:
        for shape in [(), (0,), (3,), (2, 3), (1, 2, 2)]:
            arr = np.zeros(shape, dtype=dtype)
            for order_arr in (arr, np.asfortranarray(arr)):
                buf = io.BytesIO()
                np.save(buf, order_arr)
                out.append(buf.getvalue())
    for descr in OBJECT_DESCRS:
        text = f"{{'descr': {descr}, 'fortran_order': False, 'shape': (2,), }}".encode()
        header = text + b" " * (117 - len(text)) + b"\n"
        out.append(
            b"\x93NUMPY\x01\x00"
            + len(header).to_bytes(2, "little")
            + header
            + bytes([rng.randrange(1, 256)]) * 32
        )
    return out


def mutate(rng: random.Random, payload: bytes) -> bytes:
    data = bytearray(payload)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        kind = rng.randrange(6)
        at = rng.randrange(len(data) + 1) if data else 0
        if kind == 0 and data:
            data[min(at, len(data) - 1)] ^= rng.randrange(1, 256)
        elif kind == 1:
            data.insert(at, rng.choice(b"()[]{}',: 0123456789-LOe\x00\xff\n"))
        elif kind == 2 and data:
            del data[min(at, len(data) - 1)]
        elif kind == 3:
            del data[at:]
        elif kind == 4:
            huge = rng.choice(["4294967296", "18446744073709551616", "-1", "9223372036854775807", "1" * 40])
            data = bytearray(bytes(data).replace(b"'shape': (", b"'shape': (" + huge.encode() + b", ", 1))
        elif kind == 5 and len(data) > 10:
            data[8:10] = rng.randrange(65536).to_bytes(2, "little")
    return bytes(data)


def fuzz(seed: int, cases: int) -> None:
    import stampede

    rng = random.Random(seed)
    valid = valid_payloads(rng)
    counts = {"refused at put": 0, "refused at array()": 0, "viewed": 0}
    with stampede.Runtime() as rt:
        ch = rt.create_channel("fuzz")
        out = rt.task(0).attach_output(ch)
        inp = rt.task(stampede.INFINITY).attach_input(ch)
        for ts in range(cases):
            payload = mutate(rng, rng.choice(valid))
            try:
                out.put(ts, payload, codec="npy")
            except stampede.InvalidArgument:
                counts["refused at put"] += 1
                continue
            except BaseException as e:
                raise AssertionError(
                    f"case {ts}: put raised {type(e).__name__}: {e}; payload {payload!r}"
                ) from e
            try:
                arr = inp.get(ts).array()
            except ValueError:
                counts["refused at array()"] += 1
                continue
            except BaseException as e:
                raise AssertionError(
                    f"case {ts}: array() raised {type(e).__name__}: {e}; payload {payload!r}"
                ) from e
            assert not arr.flags.writeable and arr.dtype.hasobject is False
            arr.tobytes()  # touches every byte of the view
            counts["viewed"] += 1
    print(counts)


def test_mutated_npy_payloads_never_crash():
    """~2 000 mutated npy payloads: each put is refused with InvalidArgument, or its item views
    as a read-only array or raises ValueError; the process never crashes or panics."""
    here = __file__.rsplit("/", 1)[0]
    code = f"import sys; sys.path.insert(0, {here!r}); import test_npy_fuzz as f; f.fuzz({SEED}, {CASES})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert "'viewed'" in done.stdout, done.stdout
