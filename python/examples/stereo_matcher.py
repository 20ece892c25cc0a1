"""Stereo matcher: two paced cameras correlated by an exact join
(docs/CORRELATION.md, "Exact join").

Two camera threads, each a task paced by ``Pacer`` at ``--fps``, render synthetic NumPy frames of
a bright square moving over a dark background; the right camera sees it shifted left by a known,
slowly varying disparity. The right camera drops a fraction ``--drop`` of its frames (seeded): it
advances its virtual time past them without putting, which *settles* them. The producer sets of
both channels are closed, so an ``ExactJoin`` with policy ``"skip"`` releases every complete pair
as soon as it exists and drops a timestamp as soon as the missing frame is settled — it never
waits for a frame that will not come, and every skip is counted and reported.

The matcher locates the square in both frames, computes the disparity, checks it against the
ground truth, and puts it at the pair's timestamp into a result channel (the pair stays open on
the join until the next one is asked for, so the matcher may put there). The run is bounded by
``--frames``; it prints pairs matched, frames dropped vs timestamps skipped, disparity errors,
pair rate and release latency, and live items at the end.

    python examples/stereo_matcher.py --frames 90 --fps 60 --drop 0.1
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time

import numpy as np

import stampede

HEIGHT, WIDTH, SQUARE = 120, 200, 16


def truth(ts: int) -> tuple[int, int, int]:
    """(row, left column, disparity) of the square in frame ``ts``."""
    x = 40 + (ts * 3) % (WIDTH - SQUARE - 60)
    y = 20 + (ts * 2) % (HEIGHT - SQUARE - 40)
    disparity = 8 + (ts // 10) % 12  # the square moves nearer and farther
    return y, x, disparity


def render(ts: int, right: bool) -> np.ndarray:
    frame = np.full((HEIGHT, WIDTH), 12, dtype=np.uint8)
    y, x, d = truth(ts)
    x = x - d if right else x
    frame[y : y + SQUARE, x : x + SQUARE] = 230
    return frame


def left_edge(frame: np.ndarray) -> int:
    """Column where the bright square starts."""
    return int(np.flatnonzero((frame > 128).any(axis=0))[0])


def camera(
    task: stampede.Task,
    out: stampede.ChannelOutput,
    right: bool,
    frames: int,
    fps: float,
    dropped: set[int],
    put_at: dict[tuple[bool, int], float],
) -> None:
    """Puts frames 0..frames-1 at virtual time = frame number; skips the frames in `dropped`
    (advancing its virtual time past them all the same). Closing the task at the end settles
    everything: the join then ends."""
    pacer = stampede.Pacer(tick=1 / fps, tolerance=0.005, on_late=lambda vt, late: vt)
    with task, out:
        for ts in range(frames):
            pacer.sync(ts)
            if ts not in dropped:
                put_at[(right, ts)] = time.monotonic()
                out.put(ts, render(ts, right))
            task.set_virtual_time(ts + 1)  # frame ts is settled now, put or not


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=120, help="frames per camera")
    parser.add_argument("--fps", type=float, default=60.0, help="camera rate")
    parser.add_argument("--drop", type=float, default=0.1, help="fraction of right-camera frames dropped")
    parser.add_argument("--seed", type=int, default=7, help="seed of the dropped frames")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    dropped = {ts for ts in range(args.frames) if rng.random() < args.drop}

    with stampede.Runtime() as rt:
        left, right = rt.create_channel("stereo/left"), rt.create_channel("stereo/right")
        result = rt.create_channel("stereo/disparity")
        cams = [rt.task(virtual_time=0), rt.task(virtual_time=0)]
        outs = [cams[0].attach_output(left), cams[1].attach_output(right)]
        for channel in (left, right):
            channel.close_producers()  # settledness now follows these two cameras only

        matcher = rt.task(virtual_time=stampede.INFINITY)
        join = stampede.ExactJoin([matcher.attach_input(left), matcher.attach_input(right)], policy="skip")
        reported: list[int] = []
        join.on_incomplete(lambda ts, present, what: reported.append(ts))
        put_result = matcher.attach_output(result)

        put_at: dict[tuple[bool, int], float] = {}
        threads = [
            threading.Thread(
                target=camera,
                args=(cams[k], outs[k], k == 1, args.frames, args.fps, dropped if k == 1 else set(), put_at),
            )
            for k in range(2)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()

        pairs, errors = 0, 0
        latencies: list[float] = []
        for pair in join:  # ends when both cameras closed and everything is released
            released = time.monotonic()
            latencies.append(released - max(put_at[(False, pair.ts)], put_at[(True, pair.ts)]))
            l_item, r_item = pair.items
            assert l_item is not None and r_item is not None  # "skip" never releases a partial pair
            disparity = left_edge(l_item.array()) - left_edge(r_item.array())  # zero-copy views
            errors += disparity != truth(pair.ts)[2]
            put_result.put(pair.ts, str(disparity))  # at the pair's timestamp
            pairs += 1
        elapsed = time.monotonic() - start
        for t in threads:
            t.join()

        stats = join.stats()
        join.close()
        print(
            f"pairs matched {pairs} of {args.frames} frames in {elapsed:.2f} s "
            f"({pairs / elapsed:.1f} pairs/s), disparity errors {errors}"
        )
        print(
            f"right camera dropped {len(dropped)}; join skipped {stats['skipped']} "
            f"(on_incomplete reported {len(reported)}, "
            f"same timestamps: {sorted(reported) == sorted(dropped)}), "
            f"partial {stats['partial']}, late {stats['late']}"
        )
        lat_ms = sorted(x * 1000 for x in latencies) or [0.0]
        print(
            f"release latency after the later frame's put: median {statistics.median(lat_ms):.2f} ms, "
            f"max {lat_ms[-1]:.2f} ms"
        )
        print(
            f"live items: left {left.stats()['live_items']}, right {right.stats()['live_items']}; "
            f"disparities put {result.stats()['puts']}"
        )


if __name__ == "__main__":
    main()
