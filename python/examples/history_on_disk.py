"""History beyond memory: a camera channel with a disk tier keeps its newest frames in memory and
the older ones in extents on disk, and a re-analysis reads old frames back by timestamp, without a
copy. Run::

    python python/examples/history_on_disk.py --frames 600 --dirs /tmp/disk1 /tmp/disk2

Each frame ``ts`` is a 480x640 RGB image of value ``ts % 256``; the re-analysis checks every frame
it reads, so a frame that came back damaged would say so (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stampede

SHAPE = (480, 640, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=600, help="frames to put (921.6 KB each)")
    parser.add_argument("--memory-items", type=int, default=30, help="newest frames kept in memory")
    parser.add_argument("--dirs", nargs="*", type=Path, help="a directory per disk (default: two temporary)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        dirs = args.dirs or [Path(scratch) / "disk1", Path(scratch) / "disk2"]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        rt = stampede.Runtime()
        disk = {"dirs": [str(d) for d in dirs], "extent_bytes": 64 << 20, "memory_items": args.memory_items}
        frames = rt.create_channel("camera/frames", codec="npy", disk=disk)
        camera = rt.task(virtual_time=0)
        analysis = rt.task(virtual_time=0).attach_input(frames)
        out = camera.attach_output(frames)
        started = time.perf_counter()
        for ts in range(args.frames):
            out.put(ts, np.full(SHAPE, ts % 256, dtype=np.uint8))
        put_s = time.perf_counter() - started
        stats = frames.disk_stats()
        assert stats is not None
        print(
            f"put {args.frames} frames in {put_s:.2f} s; on disk: {stats['items']} frames, "
            f"{stats['bytes'] / 1e6:.0f} MB in {stats['extents']} extents over {len(dirs)} directories"
        )
        damaged = 0
        started = time.perf_counter()
        for ts in range(0, args.frames, 7):
            frame = analysis.get(ts, timeout=0).array()
            damaged += int(not (frame == ts % 256).all())
        read_s = time.perf_counter() - started
        print(f"re-analysed every 7th frame from the start in {read_s:.2f} s: {damaged} damaged")
        rt.close()
        return 1 if damaged else 0


if __name__ == "__main__":
    sys.exit(main())
