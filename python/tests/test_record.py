"""Recording and replay (docs/RECORDING.md): MCAP files that an independent reader (the ``mcap``
package) reads, round trips that give back every item byte for byte, the kiosk recorded and replayed
through the command line, and a recorder killed mid-run leaving a readable file.

Every wait is bounded and every spawned process is stopped in a ``finally``.
"""

from __future__ import annotations

import gc
import io
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import served_nodes, stampede_bin
from mcap.exceptions import EndOfFile
from mcap.reader import make_reader
from mcap.stream_reader import StreamReader

import stampede

#: Longest wait for a spawned command to print a line or to exit.
PROCESS_S = 60.0


def messages(path: Path) -> list[tuple[str, int, bytes]]:
    """(topic, Stampede timestamp, payload) of every message, as the mcap package reads them."""
    with open(path, "rb") as f:
        return [(ch.topic, m.publish_time, bytes(m.data)) for _, ch, m in make_reader(f).iter_messages()]


def held(rt: stampede.Runtime, names: list[str]) -> list[tuple[str, int, bytes]]:
    """Every item present in `names`, read by a reader attached at ts_min (and detached after)."""
    out = []
    reader = rt.task(rt.ts_min)
    for name in names:
        inp = reader.attach_input(rt.lookup(name))
        out += [(name, item.ts, bytes(item.data)) for item in inp.get_range(0, stampede.TS_MAX)]
    reader.close()
    return out


def test_a_recording_holds_every_item_for_an_independent_reader(tmp_path: Path) -> None:
    """Arrays, JSON and text put in Python are in the file with their timestamps and codecs, the
    mcap package reads them back, and `np.load` of a frame's bytes is the array that was put."""
    path = tmp_path / "demo.mcap"
    with stampede.Runtime() as rt:
        frames = rt.create_channel("demo/frames", codec="npy", description="frames")
        boxes = rt.create_channel("demo/boxes", codec="json")
        log = rt.create_channel("demo/log")
        keeper = rt.task(0)  # holds every item, to compare with the file afterwards
        with stampede.Recorder(rt, "demo", path) as recorder:
            cam = rt.task(0)
            outs = [cam.attach_output(c) for c in (frames, boxes, log)]
            arrays = {}
            for ts in range(40):
                arrays[ts] = np.full((12, 16, 3), ts, dtype=np.uint8)
                outs[0].put(ts, arrays[ts])
                outs[1].put(ts, json.dumps({"ts": ts, "x": ts * 2}).encode(), codec="json")
                if ts % 3 == 0:
                    outs[2].put(ts, f"line {ts}")
                cam.set_virtual_time(ts + 1)
            cam.close()
        stats = recorder.stop()  # idempotent: the same account as on leaving the block
        assert stats["items"] == 40 + 40 + 14
        frames_stats = stats["channels"]["demo/frames"]
        assert (frames_stats["items"], frames_stats["first_ts"], frames_stats["last_ts"]) == (40, 0, 39)
        assert frames_stats["missed"] == 0 and frames_stats["ended"] is None
        expected = held(rt, ["demo/frames", "demo/boxes", "demo/log"])
        keeper.close()
    recorded = messages(path)
    assert sorted(recorded) == sorted(expected)
    with open(path, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "stampede"
        summary = reader.get_summary()
        assert summary is not None
        encodings = {c.topic: (c.message_encoding, c.metadata) for c in summary.channels.values()}
    assert encodings["demo/frames"] == (
        "npy",
        {"stampede.codec": "npy", "stampede.declared_codec": "npy", "stampede.description": "frames"},
    )
    assert encodings["demo/boxes"][0] == "json" and encodings["demo/log"][0] == "utf8"
    for topic, ts, data in recorded:
        if topic == "demo/frames":
            assert np.array_equal(np.load(io.BytesIO(data)), arrays[ts])

    with stampede.Runtime() as target:
        keeper = target.task(0)
        result = stampede.replay(target, path, rate=None)
        assert result["items"] == len(recorded) and result["passes"] == 1 and result["cut_off"] is None
        assert sorted(held(target, ["demo/frames", "demo/boxes", "demo/log"])) == sorted(expected)
        frame = target.lookup("demo/frames")
        assert frame.info()["codec"] == "npy" and frame.info()["description"] == "frames"
        keeper.close()


def test_replay_options_and_errors(tmp_path: Path) -> None:
    """Remaps, loops at an offset, and the typed errors of bad arguments and bad files."""
    path = tmp_path / "small.mcap"
    with stampede.Runtime() as rt:
        ch = rt.create_channel("cam/a")
        with stampede.Recorder(rt, ["cam"], path):
            t = rt.task(0)
            out = t.attach_output(ch)
            for ts in (0, 2, 1):
                out.put(ts, f"{ts}")
            t.close()
    with stampede.Runtime() as target:
        keeper = target.task(0)
        result = stampede.replay(target, path, rate=None, remap={"cam": "old/cam"}, offset=10)
        assert result["channels"] == {"old/cam/a": 3}
        assert target.lookup("old/cam/a").timestamps() == [10, 11, 12]
        keeper.close()
        with pytest.raises(stampede.InvalidArgument, match="rate"):
            stampede.replay(target, path, rate=0.0)
        with pytest.raises(stampede.InvalidArgument, match="below the runtime's ts_min"):
            stampede.replay(target, path, rate=None)
    with pytest.raises(OSError):
        stampede.replay(stampede.Runtime(), tmp_path / "missing.mcap")
    (tmp_path / "text.mcap").write_text("not a recording")
    with pytest.raises(stampede.InvalidArgument, match="not a readable MCAP"):
        stampede.replay(stampede.Runtime(), tmp_path / "text.mcap")
    with stampede.Runtime() as rt:
        rt.create_queue("jobs")
        with pytest.raises(stampede.InvalidArgument, match="queue"):
            stampede.Recorder(rt, "jobs", tmp_path / "q.mcap")
        with pytest.raises(stampede.NotFound):
            stampede.Recorder(rt, "nothing", tmp_path / "n.mcap")
        with pytest.raises(stampede.InvalidArgument, match="compression"):
            stampede.Recorder(rt, "jobs", tmp_path / "q.mcap", compression="gzip")
        with pytest.raises(TypeError):
            stampede.Recorder(rt, 42, tmp_path / "q.mcap")  # type: ignore[arg-type]


def test_a_recorder_dropped_without_stop_finishes_its_file(tmp_path: Path) -> None:
    """A Recorder collected without stop() stops with the GIL released: its thread may need the
    GIL to finish (the channel's Python GC handler runs when the recorder's consumption reclaims
    an item), so holding the GIL while waiting for it would hang (the watchdog would fail this)."""
    path = tmp_path / "dropped.mcap"
    reclaimed: list[int] = []
    with stampede.Runtime() as rt:
        ch = rt.create_channel("dropped")
        ch.on_reclaim(reclaimed.append)
        recorder = stampede.Recorder(rt, "dropped", path)
        producer = rt.task(0)
        out = producer.attach_output(ch)
        for ts in range(2000):
            out.put(ts, b"x")
            producer.set_virtual_time(ts + 1)
        del recorder
        gc.collect()
        producer.close()
    assert len(messages(path)) > 0  # a finished file: the reader found its summary
    assert reclaimed


def test_an_interpreter_exiting_with_a_recorder_running_does_not_hang(tmp_path: Path) -> None:
    """A Recorder left running when the script ends (with a Python GC handler, which its thread
    may need the GIL for) does not hang the interpreter's exit: the stop is only asked for then."""
    script = (
        "import stampede\n"
        "rt = stampede.Runtime()\n"
        "ch = rt.create_channel('left')\n"
        "ch.on_reclaim(lambda ts: None)\n"
        "producer = rt.task(0)\n"
        "out = producer.attach_output(ch)\n"
        f"rec = stampede.Recorder(rt, 'left', {str(tmp_path / 'left.mcap')!r})\n"
        "for ts in range(20000):\n"
        "    out.put(ts, b'x' * 100)\n"
        "    producer.set_virtual_time(ts + 1)\n"
    )
    for _ in range(3):  # the hang this guards against came about one run in five
        done = run([sys.executable, "-c", script])
        assert done.returncode == 0, done.stderr


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=PROCESS_S, check=False, **kwargs)


def test_kiosk_recorded_and_replayed_through_a_node_byte_for_byte(tmp_path: Path) -> None:
    """The kiosk records its run (`--record`); `stampede replay` puts it into a node while
    `stampede record` records that node; both files hold the same items, byte for byte."""
    first, second = tmp_path / "kiosk.mcap", tmp_path / "again.mcap"
    kiosk = run(
        [sys.executable, "-m", "stampede.apps.kiosk", "--headless", "--seconds", "3", "--quiet"]
        + ["--width", "160", "--height", "120", "--record", str(first)]
    )
    assert kiosk.returncode == 0, kiosk.stderr
    result = json.loads(kiosk.stdout.strip().splitlines()[-1])
    recorded = messages(first)
    assert result["recording"]["items"] == len(recorded)
    topics = Counter(topic for topic, _, _ in recorded)
    assert topics["kiosk/frames"] == result["frames"] and topics["kiosk/decisions"] > 0
    for topic, _, data in recorded:
        if topic == "kiosk/frames":
            assert np.load(io.BytesIO(data)).shape == (120, 160, 3)

    with served_nodes("replayed") as (endpoint,):
        # The channels exist before the second recorder starts, as the first file describes them
        # (so it follows each from its first item).
        client = stampede.connect(endpoint, timeout=PROCESS_S)
        with open(first, "rb") as f:
            summary = make_reader(f).get_summary()
        assert summary is not None
        for channel in summary.channels.values():
            if channel.topic not in client.names(channel.topic):
                client.create_channel(channel.topic, codec=channel.metadata.get("stampede.declared_codec"))
        recorder = subprocess.Popen(
            [stampede_bin(), "record", "kiosk", "-o", str(second), "--connect", endpoint],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert recorder.stdout is not None
            assert recorder.stdout.readline().startswith("recording ")
            replay = run([stampede_bin(), "replay", str(first), "--connect", endpoint, "--rate", "4"])
            assert replay.returncode == 0, replay.stderr
            assert f"replayed {len(recorded)} items" in replay.stdout
            deadline = time.monotonic() + PROCESS_S
            while client.ts_min <= max(ts for _, ts, _ in recorded) and time.monotonic() < deadline:
                time.sleep(0.05)  # the recorder has written and consumed everything
            recorder.send_signal(signal.SIGINT)
            out, _ = recorder.communicate(timeout=PROCESS_S)
            assert recorder.returncode == 0
            assert f"recorded {len(recorded)} items" in out
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
        client.close()
    assert sorted(messages(second)) == sorted(recorded)


def test_a_killed_recorder_leaves_a_file_readable_to_its_last_chunk(tmp_path: Path) -> None:
    """`stampede record` killed with SIGKILL mid-run: the mcap package reads the chunks it closed
    (one at least every --flush-interval), and `stampede replay` puts them back."""
    path = tmp_path / "killed.mcap"
    with served_nodes("killed") as (endpoint,):
        client = stampede.connect(endpoint, timeout=PROCESS_S)
        ch = client.create_channel("feed")
        recorder = subprocess.Popen(
            [
                stampede_bin(),
                "record",
                "feed",
                "-o",
                str(path),
                "--connect",
                endpoint,
                "--flush-interval",
                "0.1",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert recorder.stdout is not None
            assert recorder.stdout.readline().startswith("recording ")
            producer = client.task(0)
            out = producer.attach_output(ch)
            for ts in range(200):
                out.put(ts, f"item {ts}")
                producer.set_virtual_time(ts + 1)
            deadline = time.monotonic() + PROCESS_S
            while path.stat().st_size < 2000 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # a few more flush intervals
            recorder.kill()
            recorder.wait(timeout=PROCESS_S)
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
        producer.close()
        client.close()
    read = []
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f, skip_magic=False).records:
                data = getattr(record, "data", None)
                if hasattr(record, "publish_time") and data is not None:
                    read.append((record.publish_time, bytes(data)))
        except EndOfFile:  # the cut-off end: what came before it was read
            pass
    assert len(read) > 0
    assert read == [(ts, f"item {ts}".encode()) for ts in range(len(read))]
    with stampede.Runtime() as target:
        keeper = target.task(0)
        result = stampede.replay(target, path, rate=None)
        assert result["cut_off"] is not None and result["items"] >= len(read)
        keeper.close()
