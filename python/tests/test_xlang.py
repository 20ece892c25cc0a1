"""The cross-language test (issue 16, docs/SEMANTICS.md, "Payloads and codecs"): a C producer, a
Java consumer and a Python consumer on one node exchange one item of each standard codec — raw,
utf8, json and npy — and agree on every byte; the Java and Python consumers decode the npy header
to the same dtype and shape.

The C program is built by ``make -C c`` (``c/tests/xlang_producer.c``), the Java one runs from the
compiled classes (``java/examples/XlangConsumer.java``); both need their native library built first
(``scripts/test.sh`` does). Every spawned process is bounded and stopped in a ``finally``."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest
from conftest import NODE_START_S, REPO, served_nodes

import stampede

#: Longest any one process may take.
PROCESS_S = 120.0
PRODUCER = REPO / "c" / "build" / "debug" / "xlang_producer"
CLASSES = REPO / "java" / "target" / "classes"
CONSUMER = REPO / "java" / "examples" / "XlangConsumer.java"

RAW = bytes(range(256))
TEXT = "héllo from C ✓"
DOC = {"from": "c", "values": [1, 2, 3]}


def run(args: list[str]) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=PROCESS_S, check=False, cwd=REPO)
    assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def prerequisites() -> None:
    """Builds the C program and the Java classes, or brings them up to date (make, cargo and
    Maven rebuild only what changed)."""
    run(["make", "-s", "-C", "c", "PROFILE=debug", "build/debug/xlang_producer"])
    if shutil.which("mvn") is None:
        pytest.skip("no Maven here: the Java consumer cannot be built (scripts/test.sh needs it)")
    run(["cargo", "build", "-q", "-p", "stampede-jni"])
    run(["mvn", "-q", "-B", "-f", "java/pom.xml", "compile"])


def test_c_producer_java_and_python_consumers_agree():
    prerequisites()
    with served_nodes("xlang") as [endpoint], stampede.connect(endpoint, timeout=NODE_START_S) as rt:
        channel = rt.create_channel("xlang/items")
        reader = rt.task(virtual_time=0).attach_input(channel)  # holds ts_min below the items
        produced = run([str(PRODUCER), "--connect", endpoint, "xlang/items"])
        assert produced.strip() == "put 4 items from ts=1"
        java = run(
            [
                "java",
                "-cp",
                str(CLASSES),
                f"-Dstampede.library.path={REPO / 'target' / 'debug'}",
                str(CONSUMER),
                "--connect",
                endpoint,
                "xlang/items",
                "4",
            ]
        ).splitlines()

        items = [reader.get(ts, timeout=0) for ts in range(1, 5)]
        assert [(item.ts, item.codec) for item in items] == [(1, "raw"), (2, "utf8"), (3, "json"), (4, "npy")]
        assert bytes(items[0]) == RAW
        assert items[1].text() == TEXT
        assert json.loads(items[2].text()) == DOC
        array = items[3].array()
        assert (array.dtype.str, array.shape) == ("|u1", (2, 3))
        np.testing.assert_array_equal(array, [[1, 2, 3], [4, 5, 6]])

        digest = [hashlib.sha256(bytes(item)).hexdigest() for item in items]
        expected = [
            f"1 raw {digest[0]}",
            f"2 utf8 {digest[1]} {TEXT}",
            f"3 json {digest[2]} {items[2].text()}",
            f"4 npy {digest[3]} |u1 2x3 1 2 3 4 5 6",
        ]
        assert java == expected, "\n".join(java)
