"""SPEC §8 — payloads from Python: bytes-like (raw), str (utf8), NumPy arrays (npy) with
zero-copy, read-only views out."""

from __future__ import annotations

import array
import io

import numpy as np
import pytest

from stampede import INFINITY

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


def test_frame_zero_copy_shared_and_read_only(conns):
    """Two gets of one 6 MB frame share memory; the views are read-only; the data is aligned."""
    out, inp = conns
    frame = np.random.default_rng(0).integers(0, 255, FRAME_SHAPE, dtype=np.uint8)
    out.put(0, frame)
    a, b = inp.get(0).array(), inp.get(0).array()
    assert np.shares_memory(a, b)
    assert not np.shares_memory(a, frame)  # copy-in
    assert a.flags.aligned and a.flags.c_contiguous and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0, 0] = 1
    with pytest.raises(ValueError):
        a.setflags(write=True)
    view = inp.get(0).data
    assert np.shares_memory(np.frombuffer(view, dtype=np.uint8), a)
    np.testing.assert_array_equal(a, frame)


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
    assert ch.stats()["live_items"] == 0
    del inp
    assert arr[999] == 999.0 and bytes(view[:6]) == b"\x93NUMPY"


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
