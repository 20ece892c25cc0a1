"""Payloads from Python (docs/SEMANTICS.md, "Payloads and codecs"): bytes-like (raw), str (utf8),
NumPy arrays (npy) with zero-copy, read-only views out."""

from __future__ import annotations

import array
import io
import re

import numpy as np
import pytest
from conftest import settled

from stampede import INFINITY, InvalidArgument, NotAvailable

FRAME_SHAPE = (1080, 1920, 3)  # 6 MB of uint8


@pytest.fixture
def conns(rt):
    ch = rt.create_channel("frames")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    return out, inp


@pytest.mark.parametrize(
    ("data", "codec", "expected"),
    [
        (b"bytes", "raw", b"bytes"),
        (bytearray(b"ba"), "raw", b"ba"),
        (memoryview(b"mv"), "raw", b"mv"),
        (array.array("i", [1, 2]), "raw", array.array("i", [1, 2]).tobytes()),
        ("héllo", "utf8", "héllo".encode()),
        (memoryview(b"abcdef")[::2], "raw", b"ace"),
    ],
)
def test_codecs(conns, data, codec, expected):
    """bytes-like objects are stored raw, str as UTF-8."""
    out, inp = conns
    out.put(0, data)
    item = inp.get(0)
    assert item.codec == codec and bytes(item.data) == expected and len(item) == len(expected)


def test_codec_override_and_type_error(conns):
    """codec= names another codec (e.g. json); unsupported objects raise TypeError."""
    out, inp = conns
    out.put(0, '{"a": 1}', codec="json")
    assert inp.get(0).codec == "json"
    with pytest.raises(TypeError, match="bytes-like"):
        out.put(1, 3.5)
    with pytest.raises(TypeError, match="object arrays"):
        out.put(1, np.array([object()]))
    with pytest.raises(ValueError, match="npy"):
        inp.get(0).array()


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(12, dtype="<f4").reshape(3, 4),
        np.arange(6, dtype=">i2").reshape(2, 3),
        np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
        np.arange(20, dtype=np.uint16)[::3],
        np.array(3.5),
        np.zeros((0, 3)),
        np.array([b"ab", b"c"]),
        np.array(["x", "yz"]),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8", (2,))]),
        np.array([1, 2], dtype="datetime64[ns]"),
        np.ones((2, 2), dtype=np.complex128),
        np.array([True, False]),
    ],
)
def test_array_round_trip(conns, arr):
    """dtype, shape and values survive; the payload is a standard .npy file."""
    out, inp = conns
    out.put(0, arr)
    item = inp.get(0)
    got = item.array()
    assert item.codec == "npy"
    assert got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)
    assert not got.flags.writeable
    np.testing.assert_array_equal(np.load(io.BytesIO(bytes(item.data))), arr)


def test_npy_from_numpy_save_is_readable(conns):
    """An .npy file written by NumPy and put with codec npy is read back by array()."""
    out, inp = conns
    buf = io.BytesIO()
    np.save(buf, np.arange(5.0))
    out.put(0, buf.getvalue(), codec="npy")
    np.testing.assert_array_equal(inp.get(0).array(), np.arange(5.0))


def test_frame_read_only_aligned_and_equal(conns):
    """A 6 MB frame comes back as an equal, aligned, read-only array, copied in at the put."""
    out, inp = conns
    frame = np.random.default_rng(0).integers(0, 255, FRAME_SHAPE, dtype=np.uint8)
    out.put(0, frame)
    a = inp.get(0).array()
    assert not np.shares_memory(a, frame)  # copy-in
    assert a.flags.aligned and a.flags.c_contiguous and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0, 0] = 1
    with pytest.raises(ValueError):
        a.setflags(write=True)
    np.testing.assert_array_equal(a, frame)


@pytest.mark.embedded_only("gets in one process share the stored buffer; a client gets separate replies")
def test_frame_zero_copy_shared(conns):
    """Two gets of one 6 MB frame, and its memoryview, share the stored memory."""
    out, inp = conns
    frame = np.random.default_rng(0).integers(0, 255, FRAME_SHAPE, dtype=np.uint8)
    out.put(0, frame)
    a, b = inp.get(0).array(), inp.get(0).array()
    assert np.shares_memory(a, b)
    view = inp.get(0).data
    assert np.shares_memory(np.frombuffer(view, dtype=np.uint8), a)


def test_views_outlive_reclamation(rt):
    """A view keeps the item's memory alive after the channel reclaimed it."""
    ch = rt.create_channel("frames")
    t = rt.task(0)
    out = t.attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    out.put(0, np.arange(1000.0))
    arr = inp.get(0).array()
    view = inp.get(0).data
    inp.consume(0)
    t.set_virtual_time(1)
    assert settled(0, lambda: ch.stats()["live_items"]) == 0
    del inp
    assert arr[999] == 999.0 and bytes(view[:6]) == b"\x93NUMPY"


@pytest.mark.embedded_only("forwarding through a client sends the item back to the node, a copy")
def test_forwarding_an_item_shares_its_buffer(rt):
    """put(ts, item) stores the same immutable buffer (relay without copy)."""
    a, b = rt.create_channel("a"), rt.create_channel("b")
    t = rt.task(0)
    oa, ob = t.attach_output(a), t.attach_output(b)
    r = rt.task(INFINITY)
    ia, ib = r.attach_input(a), r.attach_input(b)
    oa.put(0, np.arange(10))
    ob.put(0, ia.get(0))
    assert np.shares_memory(ia.get(0).array(), ib.get(0).array())
    assert ib.get(0).codec == "npy"


def npy_payload(dict_text: str, data: bytes, version: int = 1) -> bytes:
    """A .npy file: the dict padded to 64 bytes as NumPy does, then `data`."""
    prefix = 10 if version == 1 else 12
    raw = dict_text.encode("utf-8")
    total = -(-(prefix + len(raw) + 1) // 64) * 64
    header = raw + b" " * (total - prefix - len(raw) - 1) + b"\n"
    length = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + length + header + data


def npy_dict(descr: str = "'<f4'", shape: str = "(2,)", fortran: str = "False") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


OBJECT_DTYPE_SCRIPT = """
import stampede
from stampede import INFINITY
payloads = {payloads!r}
with stampede.Runtime() as rt:
    ch = rt.create_channel("objects")
    out = rt.task(0).attach_output(ch)
    inp = rt.task(INFINITY).attach_input(ch)
    for ts, payload in enumerate(payloads):
        try:
            out.put(ts, payload, codec="npy")
        except stampede.InvalidArgument as e:
            assert "Python objects" in str(e), e
            print("refused at put")
            continue
        inp.get(ts).array()  # a view of pointers that are not objects: the crash of issue 8
        print("viewed")
"""


def test_npy_object_dtypes_refused_in_a_subprocess():
    """Issue 8, defect 2: .npy bytes whose dtype holds objects ('|O', or an object field of a
    structure) are refused at put with InvalidArgument; before, item.array() built an object
    array over raw bytes and crashed the process (run in a subprocess so a crash fails only
    this test)."""
    import subprocess
    import sys

    payloads = [
        npy_payload(npy_dict("'|O'", "(4,)"), b"\x41" * 32),
        npy_payload(npy_dict("[('a', '<i8'), ('b', '|O')]", "(2,)"), b"\x41" * 32),
        npy_payload(npy_dict("('|O', (2,))", "(2,)"), b"\x41" * 32),
    ]
    script = OBJECT_DTYPE_SCRIPT.format(payloads=payloads)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split("\n").count("refused at put") == 3, done.stdout


GOOD = npy_dict()
MALFORMED = {
    "bad magic": (b"\x93NUMPX" + npy_payload(GOOD, bytes(8))[6:], "bad magic"),
    "truncated preamble": (b"\x93NUMPY\x01", "bad magic|truncated"),
    "truncated header": (npy_payload(GOOD, bytes(8))[:40], "truncated"),
    "bad version": (b"\x93NUMPY\x07\x00" + npy_payload(GOOD, bytes(8))[8:], "unsupported version 7.0"),
    "not text": (
        npy_payload("{'descr': '\xff\xfe', }", bytes(8)).replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe"),
        "",
    ),
    "bad descr": (npy_payload(npy_dict("'<q9'"), bytes(8)), "descr"),
    "descr not a dtype": (npy_payload(npy_dict("3"), bytes(8)), "descr"),
    "shape entry not an int": (npy_payload(npy_dict(shape="('2',)"), bytes(8)), "shape"),
    "negative dim": (npy_payload(npy_dict(shape="(-2,)"), bytes(8)), "shape"),
    "shape product overflows": (npy_payload(npy_dict(shape="(4294967296, 4294967296)"), b""), "memory"),
    "bytes overflow": (npy_payload(npy_dict("'<f8'", "(2305843009213693952,)"), b""), "memory"),
    "shape not closed": (npy_payload(npy_dict(shape=")"), bytes(8)), ""),
    "shape non-ASCII": (npy_payload(npy_dict(shape="é)"), bytes(8), 3), ""),
    "data shorter": (npy_payload(GOOD, bytes(7)), "8 data bytes"),
    "data longer": (npy_payload(GOOD, bytes(9)), "8 data bytes"),
    "fortran_order not a bool": (npy_payload(npy_dict(fortran="1"), bytes(8)), "fortran_order"),
    "extra key": (npy_payload(GOOD[:-1] + "'x': 1, }", bytes(8)), "unknown key"),
    "missing key": (npy_payload("{'descr': '<f4', 'shape': (2,), }", bytes(8)), "fortran_order"),
    "header length past the payload": (b"\x93NUMPY\x02\x00\xff\xff\xff\xff" + bytes(64), "declares"),
    "deep nesting": (npy_payload(npy_dict("[" * 40 + "'<f4'" + "]" * 40), bytes(8)), "nests"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_npy_refused_at_put(conns, case):
    """Issue 8, defects 2 and 3: every malformed .npy header put as bytes with codec="npy" is
    refused with InvalidArgument naming the channel, the ts and the rule; before, they were
    stored, and item.array() read them by hand (a PanicException for an odd shape, a wrong or
    crashing view for others)."""
    out, inp = conns
    payload, reason = MALFORMED[case]
    with pytest.raises(InvalidArgument, match=r'put on "frames": ts=3: not a valid \.npy payload: ') as err:
        out.put(3, payload, codec="npy")
    assert re.search(reason, str(err.value)), err.value
    with pytest.raises(NotAvailable):
        inp.get(3, timeout=0)


@pytest.mark.parametrize("codec_data", ["str", "bytearray"])
def test_npy_check_covers_str_and_buffers(conns, codec_data):
    """The check applies to every bytes-like and str datum put with codec="npy"."""
    out, _ = conns
    bad = npy_payload(npy_dict("'|O'"), bytes(16))
    data = bad.decode("latin-1") if codec_data == "str" else bytearray(bad)
    with pytest.raises(InvalidArgument):
        out.put(0, data, codec="npy")


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("é", "<i4"), ("日本", "<f8", (2,))]),
        np.dtype([("a", "<i4"), ("b", [("c", "<u2", (3,))])]),
        np.dtype(">c8"),
        np.dtype("<m8[10ms]"),
        np.dtype("<U7"),
    ],
)
def test_written_headers_round_trip_through_numpy(conns, dtype):
    """The headers put writes read back through numpy.lib.format (non-ASCII field names as
    version 3.0, as NumPy writes them), and pass the put-time check when put again as bytes."""
    out, inp = conns
    arr = np.zeros((2, 3), dtype=dtype)
    out.put(0, arr)
    raw = bytes(inp.get(0).data)
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version in read:
        shape, fortran, got = read[version](f)
        assert (shape, fortran, got) == (arr.shape, False, arr.dtype)
    assert version == ((1, 0) if dtype.descr.__repr__().isascii() else (3, 0))
    assert np.load(io.BytesIO(raw)).dtype == arr.dtype
    out.put(1, raw, codec="npy")
    np.testing.assert_array_equal(inp.get(1).array(), arr)
