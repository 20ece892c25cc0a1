"""Writes a ROS 2 bag of the colour tracker's synthetic scene with ``rosbags`` (not with
Stampede): a rosbag2 directory with MCAP storage, ``sensor_msgs/msg/Image`` frames in ``bgr8`` on
``/camera/image_raw``, header stamps 1/fps apart. Then ``--bag`` plays it into the colour tracker:

    .venv/bin/pip install rosbags
    .venv/bin/python python/examples/make_ros2_bag.py camera_bag --seconds 10
    .venv/bin/python -m stampede.apps.colour_tracker --headless --bag camera_bag
"""

from __future__ import annotations

import argparse

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from stampede.apps.scenes import Scene


def write_bag(path: str, seconds: float, fps: float, width: int, height: int, seed: int) -> int:
    """Writes the bag; returns how many frames it holds."""
    store = get_typestore(Stores.ROS2_HUMBLE)
    image_type, header_type, time_type = (
        store.types[t]
        for t in ("sensor_msgs/msg/Image", "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    scene = Scene(seed, height, width, fps)
    frames = int(seconds * fps)
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        topic = writer.add_connection("/camera/image_raw", image_type.__msgtype__, typestore=store)
        for ts in range(frames):
            ns = int(ts * 1e9 / fps)
            bgr = np.ascontiguousarray(scene.render(ts)[:, :, ::-1])
            stamp = time_type(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
            message = image_type(
                header=header_type(stamp=stamp, frame_id="camera"),
                height=height,
                width=width,
                encoding="bgr8",
                is_bigendian=0,
                step=width * 3,
                data=bgr.reshape(-1),
            )
            writer.write(topic, ns, store.serialize_cdr(message, image_type.__msgtype__))
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the bag directory to create")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--seed", type=int, default=0, help="the scene's seed (the tracker's --seed)")
    args = parser.parse_args()
    frames = write_bag(args.path, args.seconds, args.fps, args.width, args.height, args.seed)
    print(f"wrote {frames} frames to {args.path}")


if __name__ == "__main__":
    main()
