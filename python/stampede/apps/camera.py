"""The Smart Kiosk's camera on a node, for remote viewers (docs/BROWSER.md): puts the kiosk's
synthetic scene into ``kiosk/frames`` (npy, RGB) at the camera's rate and its people's boxes into
``kiosk/decisions`` (json overlays, ``{"boxes": [{"x", "y", "w", "h", "label", "color"}]}``) at
the same timestamps, as the kiosk's decision task does. Its virtual time follows its frames, so
what no viewer holds is reclaimed behind it.

    stampede serve --listen tcp/127.0.0.1:7447 --websocket 8765 --allow-origin http://127.0.0.1:8000
    python -m stampede.apps.camera --connect tcp/127.0.0.1:7447
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

import stampede
from stampede.apps.scenes import PALETTE, Scene

FRAMES, BOXES = "kiosk/frames", "kiosk/decisions"


def _channel(rt: stampede.Runtime, name: str, codec: str, description: str) -> stampede.Channel:
    try:
        return rt.create_channel(name, capacity=64, codec=codec, description=description)
    except stampede.AlreadyExists:
        found = rt.lookup(name)
        assert isinstance(found, stampede.Channel), f"{name} is a queue"
        return found


def run(
    rt: stampede.Runtime, stop: threading.Event, fps: float = 30.0, seed: int = 0, frames_max: int = 0
) -> int:
    """Puts frames and boxes until ``stop`` is set (or ``frames_max`` frames, when positive);
    returns how many frames it put. Starts at ``rt``'s ts_min: a node's ts_min only rises."""
    frames = _channel(rt, FRAMES, "npy", "the kiosk camera's frames (RGB)")
    boxes = _channel(rt, BOXES, "json", "the people's boxes at each frame's timestamp")
    scene = Scene(seed, 240, 320, fps)
    start = rt.ts_min
    pacer = stampede.Pacer(tick=1 / fps)
    put = 0
    with (
        rt.task(start, name="camera") as camera,
        camera.attach_output(frames) as out,
        camera.attach_output(boxes) as overlay,
    ):
        while not stop.is_set() and (frames_max <= 0 or put < frames_max):
            k = put
            ts = start + k
            pacer.sync(k)
            out.put(ts, scene.render(k))
            shown = [
                {
                    "x": f.visible_bbox[0],
                    "y": f.visible_bbox[1],
                    "w": f.visible_bbox[2],
                    "h": f.visible_bbox[3],
                    "label": f"person {f.id}",
                    "color": "#{:02x}{:02x}{:02x}".format(*PALETTE[f.id % len(PALETTE)]),
                }
                for f in scene.truth(k)
                if f.visible_area > 0
            ]
            overlay.put(ts, json.dumps({"boxes": shown}), codec="json")
            camera.set_virtual_time(ts + 1)
            put += 1
    return put


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stampede.apps.camera", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--connect", required=True, metavar="ENDPOINT", help="the node (tcp/127.0.0.1:7447)")
    parser.add_argument("--fps", type=float, default=30.0, help="camera rate (frames per second)")
    parser.add_argument("--seconds", type=float, default=None, help="bound the run (default: until Ctrl-C)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    if args.seconds is not None:
        threading.Timer(args.seconds, stop.set).start()
    with stampede.connect(args.connect, timeout=10) as rt:
        print(f"camera on {args.connect}: {FRAMES}, {BOXES}", flush=True)
        try:
            put = run(rt, stop, fps=args.fps)
        except KeyboardInterrupt:
            stop.set()
            return 0
    print(f"camera: {put} frames", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
