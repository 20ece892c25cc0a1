"""The shared test vectors (``tests/vectors/*.vectors``, format in ``tests/vectors/README.md``) run
by the Python client: the same cases the Rust, C and Java suites run. Each case runs on a fresh
runtime of the conformance configuration in force (``conftest.rt``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import settled

import stampede

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"

SELECTORS = {
    "oldest": stampede.OLDEST,
    "newest": stampede.NEWEST,
    "oldest_unseen": stampede.OLDEST_UNSEEN,
    "newest_unseen": stampede.NEWEST_UNSEEN,
}


def load_cases() -> list[tuple[str, list[tuple[int, str]]]]:
    """(file:case, [(line number, operation line)]) for every case of every vectors file."""
    cases: list[tuple[str, list[tuple[int, str]]]] = []
    for path in sorted(VECTORS.glob("*.vectors")):
        for number, raw in enumerate(path.read_text().splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("case "):
                cases.append((f"{path.stem}:{line[5:].strip()}", []))
            else:
                cases[-1][1].append((number, line))
    return cases


def payload(token: str) -> bytes:
    """`-`, `text:<percent-encoded>` or `hex:<bytes>`."""
    if token == "-":
        return b""
    if token.startswith("hex:"):
        return bytes.fromhex(token[4:])
    assert token.startswith("text:"), token
    out = bytearray()
    text = token[5:].encode()
    i = 0
    while i < len(text):
        if text[i : i + 1] == b"%":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return bytes(out)


def show_item(ts: int, codec: str, data: bytes) -> str:
    return f"item {ts} {codec} {'hex:' + data.hex() if data else '-'}"


def normalise(expected: str) -> str:
    """The expected value with an item's payload written as `hex:`, as `show_item` writes it."""
    tokens = expected.split(" ")
    if tokens[0] == "item":
        return show_item(int(tokens[1]), tokens[2], payload(tokens[3]))
    return expected


def timestamp(token: str) -> int:
    return stampede.INFINITY if token == "inf" else int(token)


def npy_header(data: bytes) -> str:
    """`npy <descr> <shape>` as numpy reads the header, or the error a put would raise."""
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError:
        return "InvalidArgument"
    return f"npy {array.dtype.str} {'x'.join(map(str, array.shape)) if array.shape else 'scalar'}"


def run_operation(
    rt: stampede.Runtime, env: dict[str, Any], held: dict[tuple[str, int], Any], op: str
) -> str:
    """Runs one operation; its outcome as the vectors write it."""
    kind, *args = op.split(" ")
    try:
        if kind in ("channel", "queue"):
            name, cap = args
            create = rt.create_channel if kind == "channel" else rt.create_queue
            create(name, None if cap == "-" else int(cap))
        elif kind == "task":
            env[args[0]] = rt.task(timestamp(args[1]))
        elif kind == "vt":
            env[args[0]].set_virtual_time(timestamp(args[1]))
        elif kind == "close":
            env[args[0]].close()
        elif kind in ("in", "out"):
            conn, name, container = args
            found = rt.lookup(container)
            env[conn] = env[name].attach_input(found) if kind == "in" else env[name].attach_output(found)
        elif kind == "detach":
            env[args[0]].detach()
        elif kind in ("put", "tryput", "putref"):
            conn, ts, codec, data, *rest = args
            options: dict[str, Any] = {"codec": codec}
            if kind == "tryput":
                options["timeout"] = 0
            if rest:
                options["refcount"] = int(rest[0])
            env[conn].put(int(ts), payload(data), **options)
        elif kind == "get":
            conn, sel, ms = args
            selector = SELECTORS[sel] if sel in SELECTORS else int(sel)
            item = env[conn].get(selector, timeout=int(ms) / 1000)
            return show_item(item.ts, item.codec, bytes(item))
        elif kind == "qget":
            item = env[args[0]].get(timeout=int(args[1]) / 1000)
            held[(args[0], item.ts)] = item
            return show_item(item.ts, item.codec, bytes(item))
        elif kind == "consume":
            env[args[0]].consume(int(args[1]))
        elif kind == "qconsume":
            env[args[0]].consume(held.pop((args[0], int(args[1]))))
        elif kind == "until":
            env[args[0]].consume_until(int(args[1]))
        elif kind == "range":
            items = env[args[0]].get_range(int(args[1]), int(args[2]))
            return "items " + (",".join(str(item.ts) for item in items) or "-")
        elif kind == "destroy":
            rt.lookup(args[0]).destroy()
        elif kind == "lookup":
            rt.lookup(args[0])
        elif kind == "ts_min":
            return "inf" if rt.ts_min == stampede.INFINITY else str(rt.ts_min)
        elif kind == "live":
            return str(rt.lookup(args[0]).stats()["live_items"])
        elif kind == "npy":
            return npy_header(payload(args[0]))
        else:
            raise AssertionError(f"unknown operation {op!r}")
    except stampede.StampedeError as e:
        return type(e).__name__
    return "ok"


CASES = load_cases()


@pytest.mark.parametrize("lines", [lines for _, lines in CASES], ids=[name for name, _ in CASES])
def test_shared_vectors(rt, lines):
    """Every operation of the case gives the expected outcome."""
    env: dict[str, Any] = {}
    held: dict[tuple[str, int], Any] = {}
    for number, line in lines:
        op, expected = line.split(" -> ", 1)
        if op.split()[0] in ("ts_min", "live"):
            # What reclamation shows, read once it settled (across nodes, within a bounded time).
            got = settled(normalise(expected), lambda op=op: run_operation(rt, env, held, op))
        else:
            got = run_operation(rt, env, held, op)
        assert got == normalise(expected), f"line {number}: `{op}` gave `{got}`, expected `{expected}`"
