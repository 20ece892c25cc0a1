"""Digitizer → tracker (docs/APPLICATIONS.md, "Smart Kiosk": its first stage), in Python.

A digitizer thread paced by ``Pacer`` at ``--fps`` renders synthetic frames: a bright square
moving over a dark background, whose true position is known. A tracker thread reads the
freshest frame with ``NEWEST_UNSEEN`` (skipping stale ones), locates the square, checks it
against the ground truth, and ``consume_until``s the frame, which lets GC reclaim everything up
to it. The run is bounded by ``--frames`` and ``--seconds``; it prints frames/s, frames skipped
by the tracker, tracking error and live items.

    python examples/digitizer_tracker.py --frames 90 --fps 30

With ``--connect`` the channel is on a node (``stampede serve``) and ``--role camera`` or
``--role tracker`` runs one side per process (docs/TRACING.md traces such a run):

    python examples/digitizer_tracker.py --connect tcp/127.0.0.1:7447 --role tracker &
    python examples/digitizer_tracker.py --connect tcp/127.0.0.1:7447 --role camera --frames 300
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

import stampede

HEIGHT, WIDTH, SQUARE = 240, 320, 24


def truth(ts: int) -> tuple[int, int]:
    """Top-left corner of the square in frame ``ts``: it bounces across the image."""
    x = (ts * 7) % (2 * (WIDTH - SQUARE))
    y = (ts * 3) % (2 * (HEIGHT - SQUARE))
    return (
        y if y < HEIGHT - SQUARE else 2 * (HEIGHT - SQUARE) - y,
        x if x < WIDTH - SQUARE else 2 * (WIDTH - SQUARE) - x,
    )


def render(ts: int) -> np.ndarray:
    frame = np.full((HEIGHT, WIDTH, 3), 16, dtype=np.uint8)
    y, x = truth(ts)
    frame[y : y + SQUARE, x : x + SQUARE] = (240, 200, 40)
    return frame


def locate(frame: np.ndarray) -> tuple[int, int]:
    """Top-left corner of the bright region (rows and columns whose brightness stands out)."""
    bright = frame[:, :, 0] > 128
    rows, cols = np.flatnonzero(bright.any(axis=1)), np.flatnonzero(bright.any(axis=0))
    return int(rows[0]), int(cols[0])


def digitizer(
    rt: stampede.Runtime, frames: stampede.Channel, n: int, fps: float, stop: threading.Event
) -> None:
    late = 0

    def on_late(vt: int, lateness: float) -> int:
        nonlocal late
        late += 1
        return vt  # keep every frame; a live camera would skip to pacer.vt_now()

    pacer = stampede.Pacer(tick=1 / fps, tolerance=0.005, on_late=on_late)
    with rt.task(virtual_time=0) as task, task.attach_output(frames) as out:
        for vt in range(n):
            if stop.is_set():
                break
            vt = pacer.sync(vt)
            out.put(vt, render(vt))
            task.set_virtual_time(vt + 1)  # frames below vt+1 will never be put again
    print(f"digitizer: {n} frames, {late} late")


def tracker(rt: stampede.Runtime, frames: stampede.Channel, report: dict) -> None:
    with rt.task(virtual_time=stampede.INFINITY) as task, task.attach_input(frames) as inp:
        processed, skipped, errors, last, first_at, last_at = 0, 0, 0, -1, 0.0, 0.0
        while True:
            try:
                # The first frame may come from a camera process that is still starting.
                item = inp.get(stampede.NEWEST_UNSEEN, timeout=30.0 if last < 0 else 1.0)
            except (stampede.NotAvailable, stampede.Closed):
                break
            last_at = time.monotonic()
            first_at = first_at or last_at
            y, x = locate(item.array())  # zero-copy, read-only view of the stored frame
            errors += (y, x) != truth(item.ts)
            skipped += item.ts - last - 1
            last = item.ts
            processed += 1
            inp.consume_until(item.ts)  # this frame and every older one are garbage to us
        seconds = last_at - first_at
        report.update(processed=processed, skipped=skipped, errors=errors, last=last, seconds=seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150, help="frames to produce")
    parser.add_argument("--fps", type=float, default=30.0, help="digitizer rate")
    parser.add_argument("--seconds", type=float, default=10.0, help="stop after this long")
    parser.add_argument(
        "--connect", metavar="ENDPOINT", help="use the node there instead of an embedded runtime"
    )
    parser.add_argument(
        "--role", choices=["both", "camera", "tracker"], default="both", help="the side(s) this process runs"
    )
    args = parser.parse_args()

    runtime = stampede.connect(args.connect, timeout=30) if args.connect else stampede.Runtime()
    with runtime as rt:
        try:
            frames = rt.create_channel("kiosk/frames", capacity=8)
        except stampede.AlreadyExists:  # the other side's process made it
            frames = rt.lookup("kiosk/frames")
        reclaimed: list = []
        frames.on_reclaim(reclaimed.append)
        stop = threading.Event()
        report: dict = {}
        camera = threading.Thread(
            target=digitizer, args=(rt, frames, args.frames, args.fps, stop), name="digitizer"
        )
        follower = threading.Thread(target=tracker, args=(rt, frames, report), name="tracker")
        runs_camera, runs_tracker = args.role != "tracker", args.role != "camera"
        start = time.monotonic()
        for thread, runs in ((follower, runs_tracker), (camera, runs_camera)):
            if runs:
                thread.start()
        if runs_camera:
            camera.join(args.seconds)
            stop.set()
            camera.join()
        elapsed = time.monotonic() - start  # the digitizer's run; the tracker then drains
        if runs_tracker:
            follower.join()
            elapsed = elapsed if runs_camera else report["seconds"]
            print(
                f"tracker: {report['processed']} frames in {elapsed:.2f} s "
                f"({report['processed'] / max(elapsed, 1e-9):.1f} frames/s), skipped {report['skipped']}, "
                f"tracking errors {report['errors']}"
            )
        stats = frames.stats()
        print(
            f"channel: puts {stats['puts']}, reclaimed {stats['reclaimed']} "
            f"(GC handler saw {len(reclaimed)}), live items {stats['live_items']}, ts_min {rt.ts_min}"
        )


if __name__ == "__main__":
    main()
