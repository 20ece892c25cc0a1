"""The kiosk in Foxglove (docs/FOXGLOVE.md), live and recorded, checked by independent readers.

Live: the real kiosk runs on a runtime with a ``stampede.Foxglove`` bridge, and a client of the
Foxglove WebSocket protocol (the ``websockets`` package, Foxglove's own protobuf schemas from
``foxglove-schemas-protobuf``) subscribes to the camera, the decisions and the blobs and decodes
them: every image is the very frame the camera rendered at its timestamp, every decision's boxes
arrive as annotations, the blobs as JSON.

Recorded: a kiosk recording with ``foxglove_schemas=True`` read by the ``mcap`` package with
``mcap-protobuf-support``'s decoder: every image decodes back to the frame that was put, beside
the raw item, which replay still restores byte for byte.

Every wait is bounded; no duration is asserted."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import websockets
from foxglove_schemas_protobuf.ImageAnnotations_pb2 import ImageAnnotations
from foxglove_schemas_protobuf.RawImage_pb2 import RawImage
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory
from websockets.typing import Subprotocol

import stampede
from stampede.apps import kiosk

#: Longest wait for the viewer to subscribe, or to receive the last frame.
WAIT_S = 30.0
TOPICS = ("kiosk/frames", "kiosk/decisions", "kiosk/blobs")
FPS = 30
NS_PER_TICK = 1e9 / FPS


class Viewer:
    """A Foxglove viewer in a thread of its own: subscribes to ``TOPICS`` as they are advertised
    and keeps every message, ``(timestamp, payload)`` per topic."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.subscribed = threading.Event()
        self.stop = threading.Event()
        self.received: dict[str, list[tuple[int, bytes]]] = {t: [] for t in TOPICS}
        self.statuses: list[dict] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=lambda: asyncio.run(self.view()), name="viewer")
        self.thread.start()

    async def view(self) -> None:
        subprotocols = [Subprotocol("foxglove.websocket.v1")]
        async with websockets.connect(self.url, subprotocols=subprotocols, max_size=None) as ws:
            topic_of: dict[int, str] = {}
            while not self.stop.is_set():
                try:
                    message = await asyncio.wait_for(ws.recv(), 0.2)
                except TimeoutError:
                    continue  # look at self.stop
                if isinstance(message, str):
                    doc = json.loads(message)
                    if doc["op"] == "status":
                        self.statuses.append(doc)
                    if doc["op"] != "advertise":
                        continue
                    wanted = [c for c in doc["channels"] if c["topic"] in TOPICS]
                    subscriptions = []
                    for channel in wanted:
                        sub = len(topic_of)
                        topic_of[sub] = channel["topic"]
                        subscriptions.append({"id": sub, "channelId": channel["id"]})
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
                    if set(topic_of.values()) == set(TOPICS):
                        self.subscribed.set()
                else:
                    assert message[0] == 1, "messageData"
                    sub = int.from_bytes(message[1:5], "little")
                    log_time = int.from_bytes(message[5:13], "little")
                    with self.lock:
                        self.received[topic_of[sub]].append((round(log_time / NS_PER_TICK), message[13:]))

    def last_ts(self, topic: str) -> int | None:
        with self.lock:
            items = self.received[topic]
            return items[-1][0] if items else None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)


def test_a_foxglove_viewer_draws_the_kiosk():
    with stampede.Runtime() as rt:
        config = kiosk.KioskConfig(fps=FPS, seed=3, progress=False, max_frames=90, width=160, height=120)
        app = kiosk.Kiosk(rt, config)
        with stampede.Foxglove(rt, port=0, names=["kiosk"], overlays=["kiosk/decisions"]) as bridge:
            assert bridge.url == f"ws://127.0.0.1:{bridge.port}"
            viewer = Viewer(bridge.url)
            try:
                assert viewer.subscribed.wait(WAIT_S), "the viewer saw the kiosk's channels advertised"
                result = app.run()
                last = app.camera.last_ts
                deadline = threading.Event()
                for _ in range(int(WAIT_S / 0.05)):
                    if viewer.last_ts("kiosk/frames") == last:
                        break
                    deadline.wait(0.05)  # the viewer's progress has no signal the test could wait on
            finally:
                viewer.close()
    assert result["decisions"] == app.stages["lowfi"].processed, "the bridge changed nothing in the kiosk"

    frames = viewer.received["kiosk/frames"]
    assert frames and frames[-1][0] == last, "the last frame reached the viewer"
    stamps = [ts for ts, _ in frames]
    assert stamps == sorted(set(stamps)), "each frame once, in order"
    for ts, payload in frames:
        image = RawImage()
        image.ParseFromString(payload)
        assert (image.width, image.height, image.encoding, image.step) == (160, 120, "rgb8", 480)
        assert image.data == app.scene.render(ts).tobytes(), f"frame {ts} is the one the camera rendered"

    decisions = viewer.received["kiosk/decisions"]
    assert decisions, "decisions reached the viewer"
    labels = set()
    for _, payload in decisions:
        annotations = ImageAnnotations()
        annotations.ParseFromString(payload)
        assert all(len(p.points) == 4 for p in annotations.points), "each box a closed polygon"
        labels |= {t.text for t in annotations.texts}
    assert any(label.startswith("person") for label in labels), labels

    blobs = viewer.received["kiosk/blobs"]
    assert blobs and all("blobs" in json.loads(payload) for _, payload in blobs)


def test_a_kiosk_recording_for_foxglove_decodes_to_the_frames_put(tmp_path):
    path = tmp_path / "kiosk.mcap"
    with stampede.Runtime() as rt:
        config = kiosk.KioskConfig(fps=FPS, seed=3, progress=False, max_frames=60, width=160, height=120)
        app = kiosk.Kiosk(rt, config)
        with stampede.Recorder(rt, "kiosk", path, foxglove_schemas=True, tick=1 / FPS) as recorder:
            app.run()
        stats = recorder.stop()
    frames = stats["channels"]["kiosk/frames"]["items"]
    assert frames == app.camera.frames and stats["converted"] >= frames and stats["not_converted"] == 0

    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        images = list(reader.iter_decoded_messages(topics=["kiosk/frames/foxglove"]))
    assert len(images) == frames, "every frame has its image beside it"
    for schema, _, message, image in images:
        assert schema is not None and schema.name == "foxglove.RawImage"
        ts = message.publish_time
        assert (image.width, image.height, image.encoding) == (160, 120, "rgb8")
        assert image.data == app.scene.render(ts).tobytes(), f"frame {ts} decodes to the frame put"
        assert abs(image.timestamp.ToNanoseconds() - ts * NS_PER_TICK) <= 1  # float rounding
    with open(path, "rb") as f:
        boxes = list(
            make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(
                topics=["kiosk/decisions/foxglove"]
            )
        )
    assert all(decoded.DESCRIPTOR.full_name == "foxglove.ImageAnnotations" for _, _, _, decoded in boxes)
    polygons = [p for _, _, _, decoded in boxes for p in decoded.points]
    assert polygons and all(len(p.points) == 4 for p in polygons), "each decision's boxes as polygons"

    with stampede.Runtime() as target:
        replayed = stampede.replay(target, path, rate=None)
        assert replayed["items"] == stats["items"], "replay skips the converted messages"
        assert not [n for n in target.names("") if n.endswith("/foxglove")]


def test_the_bridge_refuses_what_it_cannot_keep():
    rt = stampede.Runtime()
    with pytest.raises(stampede.InvalidArgument, match="allow-anonymous"):
        stampede.Foxglove(rt, port=0, host="0.0.0.0")
    with pytest.raises(stampede.InvalidArgument, match="seconds per timestamp"):
        stampede.Foxglove(rt, port=0, tick=0)
    bridge = stampede.Foxglove(rt, port=0, tick="ns", ticks={"a": 0.5})
    assert repr(bridge) == f'Foxglove("{bridge.url}")'
    bridge.close()
    bridge.close()  # idempotent
    rt.close()
