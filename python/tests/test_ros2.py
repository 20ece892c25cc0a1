"""ROS 2 bags replayed into channels without ROS installed (docs/RECORDING.md, "ROS 2 bags"),
checked against bags written by two independent writers: ``rosbags`` (a rosbag2 directory with
MCAP storage and its ``metadata.yaml``) and ``mcap-ros2-support`` (one MCAP file); and bags
written by ``Recorder(..., ros2=True)`` read by both. Images in
mono8, rgb8, bgr8 and rgba8 come back as the frames they hold (RGB order), strings as text, any
other type as its CDR bytes under ``ros2:<type>``; timestamps follow the header stamps or the log
times, as nanoseconds or frame numbers; two messages at one timestamp: the later is skipped and
counted; a message that is not what its schema says is skipped and counted, the rest replays."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2.writer import Writer as McapRos2Writer
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapReader
from rosbags.typesys import Stores, get_typestore

import stampede
from stampede.apps import colour_tracker

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
Image = TYPESTORE.types["sensor_msgs/msg/Image"]
Header = TYPESTORE.types["std_msgs/msg/Header"]
Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
String = TYPESTORE.types["std_msgs/msg/String"]
Imu = TYPESTORE.types["sensor_msgs/msg/Imu"]
Quaternion = TYPESTORE.types["geometry_msgs/msg/Quaternion"]
Vector3 = TYPESTORE.types["geometry_msgs/msg/Vector3"]
FRAMES = 6
H, W = 4, 5


def pixels(ts: int, channels: int) -> np.ndarray:
    return ((np.arange(H * W * channels) * 7 + ts) % 256).astype(np.uint8).reshape(H, W, channels)


def header(ts: int) -> Header:
    # Header stamps 100 ms apart from second 10; log times elsewhere (see below).
    ns = 10_000_000_000 + ts * 100_000_000
    return Header(stamp=Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000), frame_id="cam")


def image(ts: int, encoding: str) -> Image:
    channels = {"mono8": 1, "rgb8": 3, "bgr8": 3, "rgba8": 4}[encoding]
    data = pixels(ts, channels)
    if encoding == "bgr8":
        data = data[:, :, ::-1]
    return Image(
        header=header(ts),
        height=H,
        width=W,
        encoding=encoding,
        is_bigendian=0,
        step=W * channels,
        data=np.ascontiguousarray(data).reshape(-1),
    )


def imu(ts: int) -> Imu:
    zero = np.zeros(9, dtype=np.float64)
    return Imu(
        header=header(ts),
        orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=zero,
        angular_velocity=Vector3(x=float(ts), y=0.0, z=0.0),
        angular_velocity_covariance=zero,
        linear_acceleration=Vector3(x=0.0, y=0.0, z=9.8),
        linear_acceleration_covariance=zero,
    )


def messages():
    """(topic, type, log time in ns, message) of the bag: four image encodings, a string, an IMU."""
    for ts in range(FRAMES):
        log_ns = 50_000_000_000 + ts * 150_000_000
        for encoding in ("mono8", "rgb8", "bgr8", "rgba8"):
            yield f"/camera/{encoding}", "sensor_msgs/msg/Image", log_ns, image(ts, encoding)
        yield "/chatter", "std_msgs/msg/String", log_ns, String(data=f"hello {ts}")
        yield "/imu", "sensor_msgs/msg/Imu", log_ns, imu(ts)


def rosbags_bag(path) -> None:
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {}
        for topic, msgtype, log_ns, message in messages():
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TYPESTORE)
            writer.write(connections[topic], log_ns, TYPESTORE.serialize_cdr(message, msgtype))


def mcap_ros2_bag(path) -> None:
    with open(path, "wb") as f:
        writer = McapRos2Writer(f)
        schemas = {}
        for topic, msgtype, log_ns, message in messages():
            if msgtype not in schemas:
                schemas[msgtype] = writer.register_msgdef(
                    msgtype, TYPESTORE.generate_msgdef(msgtype, ros_version=2)[0]
                )
            raw = TYPESTORE.deserialize_cdr(TYPESTORE.serialize_cdr(message, msgtype), msgtype)
            writer.write_message(topic, schemas[msgtype], to_dict(raw), log_time=log_ns, publish_time=log_ns)
        writer.finish()


def to_dict(message):
    """A rosbags message as the plain dicts ``mcap-ros2-support`` encodes."""
    if hasattr(message, "__dataclass_fields__"):
        return {name: to_dict(getattr(message, name)) for name in message.__dataclass_fields__}
    if isinstance(message, np.ndarray):
        return message.tolist() if message.dtype != np.uint8 else bytes(message)
    return message


TOPICS = ["camera/bgr8", "camera/mono8", "camera/rgb8", "camera/rgba8", "chatter", "imu"]


class Readers:
    """A reader of each channel the bag fills, attached before the replay (the replay creates no
    channel that exists; without readers its items would be reclaimed as soon as put)."""

    def __init__(self, rt: stampede.Runtime) -> None:
        self.task = rt.task(0)
        self.inputs = {name: self.task.attach_input(rt.create_channel(name)) for name in TOPICS}

    def items(self, name: str) -> list[stampede.Item]:
        got = []
        while True:
            try:
                got.append(self.inputs[name].get(stampede.OLDEST_UNSEEN, timeout=0))
            except stampede.NotAvailable:
                return got


@pytest.mark.parametrize("writer", ["rosbags", "mcap-ros2-support"])
def test_a_ros2_bag_replays_into_channels(tmp_path, writer):
    if writer == "rosbags":
        path = tmp_path / "bag"
        rosbags_bag(path)
        assert (path / "metadata.yaml").exists()
    else:
        path = tmp_path / "bag.mcap"
        mcap_ros2_bag(path)
    with stampede.Runtime() as rt:
        readers = Readers(rt)
        stats = stampede.replay(rt, path, rate=None, tick=0.1)  # header stamps 100 ms apart: frames
        assert stats["items"] == FRAMES * 6 and stats["duplicates"] == 0 and stats["skipped"] == 0, stats
        assert sorted(rt.names("")) == TOPICS
        first = 100  # 10 s of header stamp at 0.1 s per timestamp
        for encoding, channels in (("mono8", 1), ("rgb8", 3), ("bgr8", 3), ("rgba8", 4)):
            got = readers.items(f"camera/{encoding}")
            assert [i.ts for i in got] == list(range(first, first + FRAMES))
            for i in got:
                expected = pixels(i.ts - first, channels)
                assert np.array_equal(i.array(), expected[:, :, 0] if channels == 1 else expected), encoding
        chatter = readers.items("chatter")
        # A String has no header: timed by its log time (50 s + 150 ms per message) at 0.1 s.
        assert [(i.ts, i.text()) for i in chatter] == [
            (500 + (ts * 15 + 5) // 10, f"hello {ts}") for ts in range(FRAMES)
        ]
        imus = readers.items("imu")
        assert [i.ts for i in imus] == list(range(first, first + FRAMES))
        assert all(i.codec == "ros2:sensor_msgs/msg/Imu" for i in imus)
        decoded = [TYPESTORE.deserialize_cdr(bytes(i.data), "sensor_msgs/msg/Imu") for i in imus]
        assert [m.angular_velocity.x for m in decoded] == [float(ts) for ts in range(FRAMES)]


def test_a_bags_duplicates_and_bad_messages_are_skipped_and_counted(tmp_path):
    path = tmp_path / "bag"
    rosbags_bag(path)
    with stampede.Runtime() as rt:
        readers = Readers(rt)
        # Log times 150 ms apart, one timestamp per 10 s: all six messages of a topic land at 5.
        stats = stampede.replay(rt, path, rate=None, time="log", tick=10.0)
        assert stats["items"] == 6 and stats["duplicates"] == FRAMES * 6 - 6, stats
        assert [i.ts for i in readers.items("chatter")] == [5]
    bad = tmp_path / "bad.mcap"
    with open(bad, "wb") as f:
        writer = McapRos2Writer(f)
        schema = writer.register_msgdef(
            "sensor_msgs/msg/Image", TYPESTORE.generate_msgdef("sensor_msgs/msg/Image", ros_version=2)[0]
        )
        good = to_dict(
            TYPESTORE.deserialize_cdr(
                TYPESTORE.serialize_cdr(image(0, "rgb8"), Image.__msgtype__), Image.__msgtype__
            )
        )
        yuv = dict(good, encoding="yuv422")
        short = dict(good, data=good["data"][:7])
        for n, message in enumerate((good, yuv, short)):
            writer.write_message("/cam", schema, message, log_time=n, publish_time=n)
        writer.finish()
    with stampede.Runtime() as rt:
        cam = rt.task(0).attach_input(rt.create_channel("cam"))
        stats = stampede.replay(rt, bad, rate=None)
        assert (stats["items"], stats["skipped"]) == (1, 2), stats
        assert "yuv422" in stats["skip_reason"]
        assert cam.get(stampede.OLDEST_UNSEEN, timeout=0).array().shape == (H, W, 3)
    with stampede.Runtime() as rt, pytest.raises(stampede.InvalidArgument, match="header.*log"):
        stampede.replay(rt, bad, time="sometime")


def test_a_recording_written_as_a_ros2_bag_reads_in_ros2_tools(tmp_path):
    """``Recorder(..., ros2=True)`` writes a bag that ``mcap-ros2-support`` and ``rosbags`` read:
    frames as ``sensor_msgs/msg/Image`` stamped at timestamp × tick, JSON and text as
    ``std_msgs/msg/String``, ``ros2:<type>`` items as themselves; a raw item has no message and is
    counted; replaying the bag gives the items back."""
    path = tmp_path / "out.mcap"
    put = {}
    with stampede.Runtime() as rt:
        names = {
            "robot/cam": "npy",
            "robot/log": "utf8",
            "robot/doc": "json",
            "robot/imu": None,
            "robot/raw": None,
        }
        channels = {name: rt.create_channel(name) for name in names}
        with stampede.Recorder(rt, "robot", path, ros2=True, tick=0.5) as recorder:
            producer = rt.task(0)
            outs = {name: producer.attach_output(ch) for name, ch in channels.items()}
            for ts in range(FRAMES):
                frame = pixels(ts, 3)
                outs["robot/cam"].put(ts, frame)
                outs["robot/log"].put(ts, f"line {ts}")
                outs["robot/doc"].put(ts, f'{{"n": {ts}}}', codec="json")
                cdr = TYPESTORE.serialize_cdr(imu(ts), "sensor_msgs/msg/Imu")
                outs["robot/imu"].put(ts, bytes(cdr), codec="ros2:sensor_msgs/msg/Imu")
                outs["robot/raw"].put(ts, b"\x00\x01")
                put[ts] = frame
                producer.set_virtual_time(ts + 1)
            producer.close()
        stats = recorder.stop()
    assert (stats["converted"], stats["not_converted"]) == (4 * FRAMES, FRAMES), stats

    with open(path, "rb") as f:
        decoded = list(
            make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(topics=["/robot/cam"])
        )
    assert len(decoded) == FRAMES
    for _, _, message, image in decoded:
        ts = round(message.publish_time / 500_000_000)
        assert (image.height, image.width, image.encoding, image.step) == (H, W, "rgb8", W * 3)
        assert bytes(image.data) == put[ts].tobytes()
        assert (image.header.stamp.sec, image.header.stamp.nanosec) == divmod(ts * 500_000_000, 1_000_000_000)
        assert image.header.frame_id == "robot/cam"

    reader = McapReader(path)
    reader.open()
    try:
        by_topic: dict[str, list] = {}
        for connection, _, raw in reader.messages(reader.connections):
            by_topic.setdefault(connection.topic, []).append(
                TYPESTORE.deserialize_cdr(raw, connection.msgtype)
            )
    finally:
        reader.close()
    assert sorted(by_topic) == ["/robot/cam", "/robot/doc", "/robot/imu", "/robot/log"]
    assert [m.data for m in by_topic["/robot/log"]] == [f"line {ts}" for ts in range(FRAMES)]
    assert [m.data for m in by_topic["/robot/doc"]] == [f'{{"n": {ts}}}' for ts in range(FRAMES)]
    assert [m.angular_velocity.x for m in by_topic["/robot/imu"]] == [float(ts) for ts in range(FRAMES)]

    with stampede.Runtime() as rt:
        cam = rt.task(0).attach_input(rt.create_channel("robot/cam"))
        stampede.replay(rt, path, rate=None, tick=0.5)
        back = [cam.get(stampede.OLDEST_UNSEEN, timeout=0) for _ in range(FRAMES)]
        assert [(i.ts, i.array().tobytes()) for i in back] == [
            (ts, put[ts].tobytes()) for ts in range(FRAMES)
        ]


def test_the_colour_tracker_tracks_a_bag_made_by_rosbags(tmp_path):
    """README's "From a ROS 2 bag": the colour tracker's scene written to a bag by ``rosbags``
    (``python/examples/make_ros2_bag.py``, bgr8 frames), played as its camera with ``--bag``: every
    frame arrives at its own timestamp and the tracker meets the ground truth as with the
    synthetic camera (test_apps.py's bounds)."""
    spec = importlib.util.spec_from_file_location("make_ros2_bag", EXAMPLES / "make_ros2_bag.py")
    assert spec is not None and spec.loader is not None
    make_ros2_bag = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_ros2_bag)
    path = str(tmp_path / "camera_bag")
    frames = make_ros2_bag.write_bag(path, seconds=3.0, fps=30.0, width=160, height=120, seed=3)
    with stampede.Runtime() as rt:
        config = colour_tracker.ColourConfig(
            fps=30.0, width=160, height=120, seed=3, progress=False, bag=path
        )
        app = colour_tracker.ColourTracker(rt, config)
        result = app.run()
    assert app.camera.error is None and app.camera.replayed is not None
    assert app.camera.replayed["duplicates"] == 0 and app.camera.replayed["skipped"] == 0
    assert result["frames"] == frames and app.camera.last_ts == frames - 1
    assert result["persons_missed"] == [] and result["false_tracks"] == 0
    err = result["tracking_error_px"]
    assert err["samples"] > 0 and 0.1 <= err["mean"] <= 1.2 and err["max"] <= 8.0, err
