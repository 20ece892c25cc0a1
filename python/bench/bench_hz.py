"""``stampede hz`` against the producer's own count (docs/BENCHMARKS.md, "hz"): a camera process
putting 6 MB frames at 30 fps (paced by ``stampede.Pacer``) through a node, and ``stampede hz``
reading the channel's put log on the node meanwhile. Prints hz's lines and one JSON line: hz's
last rate and bandwidth beside the producer's frames per second and bytes per second over the
same run, and their ratios.

    .venv/bin/python python/bench/bench_hz.py [--seconds 8] [--fps 30] [--mb 6]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import stampede

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))
from faults import stampede_bin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--mb", type=float, default=6.0, help="frame size in MB")
    args = parser.parse_args()
    binary = stampede_bin()
    with tempfile.TemporaryDirectory() as tmp:
        endpoint = f"unixsock-stream/{tmp}/node.sock"
        node = subprocess.Popen([binary, "serve", "--listen", endpoint], stdout=subprocess.PIPE, text=True)
        try:
            assert node.stdout is not None and node.stdout.readline().startswith("listening on")
            rt = stampede.connect(endpoint, timeout=10)
            channel = rt.create_channel("camera/frames", codec="npy")
            frame = np.zeros(int(args.mb * 1e6), dtype=np.uint8)
            stop = threading.Event()
            produced: dict[str, float] = {}

            def camera() -> None:
                task = rt.task(0)
                out = task.attach_output(channel)
                pacer = stampede.Pacer(tick=1 / args.fps, tolerance=0.010)
                start, ts = time.monotonic(), 0
                while not stop.is_set():
                    ts = pacer.sync(ts)
                    out.put(ts, frame)
                    task.set_virtual_time(ts + 1)
                    ts += 1
                produced["frames"], produced["seconds"] = ts, time.monotonic() - start

            thread = threading.Thread(target=camera)
            thread.start()
            lines = int(args.seconds)
            window = int(args.fps)  # a second of puts
            hz = subprocess.run(
                [
                    binary,
                    "hz",
                    "camera/frames",
                    "--connect",
                    endpoint,
                    "--count",
                    str(lines),
                    "--window",
                    str(window),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            stop.set()
            thread.join()
            rt.close()
        finally:
            node.terminate()
            node.wait(timeout=10)
    print(hz.stdout, end="")
    last = hz.stdout.strip().splitlines()[-1]
    rate = float(last.split()[1])
    bandwidth_mb = float(last.split("bandwidth ")[1].split()[0]) * (1000 if "GB/s" in last else 1)
    fps = produced["frames"] / produced["seconds"]
    mb_s = fps * args.mb
    print(
        json.dumps(
            {
                "bench": "hz",
                "frame_mb": args.mb,
                "producer_fps": round(fps, 2),
                "hz_rate": rate,
                "rate_ratio": round(rate / fps, 3),
                "producer_mb_s": round(mb_s, 1),
                "hz_mb_s": bandwidth_mb,
                "bandwidth_ratio": round(bandwidth_mb / mb_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
