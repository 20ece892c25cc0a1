"""A camera that plays a ROS 2 bag (docs/RECORDING.md, "ROS 2 bags"): the applications' ``--bag``.

:class:`BagCamera` is a drop-in for :class:`~stampede.apps.scenes.Camera`: ``stampede.replay``
puts the bag's image topic, at its recorded pace and timed by the images' header stamps in frame
numbers, into a channel of its own (``bag/frames``); the camera's task forwards each frame into
the application's frames channel at its timestamp, so the pipeline downstream (producer sets,
settledness, joins) is the same as with the synthetic camera. A frame the bag skips is a gap the
joins settle, as a late camera's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import stampede

from .common import GET_TIMEOUT_S

#: The channel the bag's images are replayed into.
BAG_CHANNEL = "bag/frames"
#: The image topic a bag made by ``python/examples/make_ros2_bag.py`` holds.
IMAGE_TOPIC = "camera/image_raw"


class BagCamera:
    """Plays the image topic ``topic`` (without its leading ``/``) of the ROS 2 bag at ``path``,
    whose header stamps are ``1 / fps`` apart, as a camera."""

    def __init__(self, rt: stampede.Runtime, path: str, fps: float, topic: str = IMAGE_TOPIC) -> None:
        self.rt, self.path, self.fps, self.topic = rt, path, fps, topic
        self.frames = 0
        self.late = 0
        self.last_ts = -1
        #: What the replay reported (``stampede.replay``'s dict), once it ended.
        self.replayed: dict | None = None
        self.error: BaseException | None = None

    def run(
        self,
        task: stampede.Task,
        out: stampede.ChannelOutput,
        stop: threading.Event,
        max_frames: int | None = None,
        on_put: Callable[[], object] | None = None,
    ) -> None:
        """Forwards the bag's frames until it ends, ``stop`` is set or ``max_frames`` were put;
        each put is followed by ``set_virtual_time(ts + 1)``, as the synthetic camera does."""
        inp = task.attach_input(self.rt.create_channel(BAG_CHANNEL, codec="npy"))
        done = threading.Event()

        def replay() -> None:
            try:
                remap = {self.topic: BAG_CHANNEL}
                self.replayed = stampede.replay(self.rt, self.path, rate=1.0, remap=remap, tick=1 / self.fps)
            except BaseException as e:  # noqa: BLE001 - reported by run()'s caller through .error
                self.error = e
            finally:
                done.set()

        player = threading.Thread(target=replay, name="bag", daemon=True)
        player.start()
        while not stop.is_set() and (max_frames is None or self.frames < max_frames):
            try:
                item = inp.get(stampede.OLDEST_UNSEEN, timeout=GET_TIMEOUT_S)
            except stampede.NotAvailable:
                if done.is_set():
                    break
                continue
            out.put(item.ts, item.array())
            inp.consume(item.ts)
            task.set_virtual_time(item.ts + 1)
            self.frames += 1
            self.last_ts = item.ts
            if on_put is not None:
                on_put()
        inp.detach()
        player.join(GET_TIMEOUT_S)
