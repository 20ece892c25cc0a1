"""The disk tier from Python (docs/RECORDING.md, "The disk tier: history beyond memory"): history
beyond memory read back as arrays without a copy, its statistics, and clear errors for bad settings
and missing directories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stampede
from stampede import INFINITY


def test_history_beyond_memory_reads_back_as_arrays(tmp_path: Path):
    """Frames older than the newest `memory_items` move to disk, striped over both directories,
    and come back as the same arrays, read-only, after the newest frames were put."""
    rt = stampede.Runtime()
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    disk = {"dirs": [str(d) for d in dirs], "extent_bytes": 1 << 20, "memory_items": 3}
    ch = rt.create_channel("camera/left", disk=disk)
    producer = rt.task(virtual_time=0)
    reader = rt.task(virtual_time=INFINITY).attach_input(ch)
    out = producer.attach_output(ch)
    frames = [np.full((120, 160, 3), ts, dtype=np.uint8) for ts in range(40)]
    for ts, frame in enumerate(frames):
        out.put(ts, frame)
    stats = ch.disk_stats()
    assert stats is not None
    assert (stats["items"], stats["written"], stats["recovered"]) == (37, 37, 0)
    assert stats["bytes"] > 37 * frames[0].nbytes
    assert all(list((d / "camera%left").glob("*.extent")) for d in dirs), "striped over both"
    for ts in (0, 17, 39):
        array = reader.get(ts).array()
        assert not array.flags.writeable
        np.testing.assert_array_equal(array, frames[ts])
        assert np.shares_memory(array, reader.get(ts).array()), "gets hand out one buffer, not copies"
    assert [item.ts for item in reader.get_range(5, 9)] == [5, 6, 7, 8, 9]


def test_without_a_tier_disk_stats_is_none():
    rt = stampede.Runtime()
    assert rt.create_channel("plain").disk_stats() is None


@pytest.mark.parametrize(
    ("disk", "words"),
    [
        ({}, "needs"),
        ({"dirs": "not-a-list"}, "list"),
        ({"dirs": ["."], "memory_items": 0}, "memory_items=0"),
        ({"dirs": ["."], "extent_bytes": -1}, "out of range"),
        ({"dirs": ["."], "stripes": 2}, "unknown key"),
        ({"dirs": [".", "./"]}, "given before"),
    ],
)
def test_bad_settings_are_invalid_argument(disk, words):
    rt = stampede.Runtime()
    with pytest.raises(stampede.InvalidArgument, match=words):
        rt.create_channel("bad", disk=disk)
    assert rt.names() == []


def test_a_missing_directory_is_a_storage_error(tmp_path: Path):
    rt = stampede.Runtime()
    missing = tmp_path / "gone"
    with pytest.raises(stampede.Storage) as e:
        rt.create_channel("frames", disk={"dirs": [str(tmp_path), str(missing)]})
    assert "gone" in str(e.value) and e.value.name == "frames"
    assert rt.names() == []


def test_the_example_runs_and_checks_itself(tmp_path: Path):
    """`python/examples/history_on_disk.py` (README) reads old frames back from disk undamaged."""
    example = Path(__file__).resolve().parents[1] / "examples" / "history_on_disk.py"
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    done = subprocess.run(
        [sys.executable, str(example), "--frames", "60", "--memory-items", "5", "--dirs", *dirs],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "on disk: 55 frames" in done.stdout and "0 damaged" in done.stdout, done.stdout
