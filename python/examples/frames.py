"""Frames across processes: a camera process puts paced NumPy frames into a channel on a node, a
viewer process reads the freshest one. Start a node first (``stampede serve --listen
tcp/127.0.0.1:7447``), then, in two other terminals::

    python python/examples/frames.py camera --connect tcp/127.0.0.1:7447
    python python/examples/frames.py viewer --connect tcp/127.0.0.1:7447

The camera's frame ``ts`` is a 480x640 grey image of value ``ts % 256``; the viewer checks it, so
a frame that arrived damaged would say so. Either may start first and be restarted any time.

Across two nodes of a mesh (``stampede serve ...``, the second with ``--connect`` to the first;
they share one ts_min), ``--place a`` puts the channel on node ``a`` while the process is
attached to another: its task stays on its own node and reaches the channel through its shadow
(docs/NODES.md "One task, several nodes").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import stampede

CHANNEL = "camera/frames"
SHAPE = (480, 640)


def frames_channel(rt: stampede.Runtime) -> stampede.Channel:
    """The frames channel on the node: created by whichever process comes first."""
    try:
        return rt.create_channel(CHANNEL, capacity=30, codec="npy", description="camera frames, 480x640 u8")
    except stampede.AlreadyExists:
        channel = rt.lookup(CHANNEL)
        assert isinstance(channel, stampede.Channel)
        return channel


def camera(rt: stampede.Runtime, count: int, fps: float) -> None:
    channel = frames_channel(rt)
    start = rt.ts_min  # a camera that restarts carries on above everything put so far
    task = rt.task(start)
    # Up to 4 frames on their way to the node: the camera never waits a round trip per frame. A
    # frame's error comes from a later put or flush (docs/NODES.md, "Pipelined puts").
    out = task.attach_output(channel, put_window=4)
    pacer = stampede.Pacer(tick=1 / fps)
    dropped = 0
    for ts in range(start, start + count):
        pacer.sync(ts - start)
        frame = np.full(SHAPE, ts % 256, dtype=np.uint8)
        while True:
            try:
                out.put(ts, frame)
                break
            except stampede.Full:
                dropped += 1  # an earlier frame found no room within a second (a stalled viewer)
        task.set_virtual_time(ts + 1)
    try:
        out.flush()
    except stampede.Full:
        dropped += 1
    print(f"camera: put frames {start}..{start + count - 1}, {dropped} dropped for want of room")


def viewer(rt: stampede.Runtime, count: int, timeout: float) -> None:
    channel = frames_channel(rt)
    inp = rt.task(stampede.INFINITY).attach_input(channel)
    seen = 0
    started = time.monotonic()
    while seen < count:
        try:
            item = inp.get(stampede.NEWEST_UNSEEN, timeout=timeout)
        except stampede.NotAvailable:
            print(f"viewer: no frame for {timeout} s, stopping")
            break
        frame = item.array()
        assert frame.shape == SHAPE and (frame == item.ts % 256).all(), f"frame {item.ts} is damaged"
        inp.consume_until(item.ts)
        seen += 1
        if seen % 30 == 0 or seen == count:
            rate = seen / (time.monotonic() - started)
            print(f"viewer: frame {item.ts} ({seen} shown, {rate:.0f}/s, ts_min {rt.ts_min})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("role", choices=["camera", "viewer"])
    parser.add_argument("--connect", default="tcp/127.0.0.1:7447", help="the node's endpoint")
    parser.add_argument("--count", type=int, default=300, help="frames to put, or to show")
    parser.add_argument("--fps", type=float, default=30.0, help="the camera's rate")
    parser.add_argument("--place", help="the node to create the channel on (default: the one connected to)")
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="the viewer stops after this long without a frame"
    )
    args = parser.parse_args()
    with stampede.connect(args.connect, timeout=10, placement=args.place) as rt:
        if args.role == "camera":
            camera(rt, args.count, args.fps)
        else:
            viewer(rt, args.count, args.timeout)


if __name__ == "__main__":
    main()
