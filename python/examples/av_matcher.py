"""Audio/video matcher: an approximate join of 30 fps frames with 20 ms audio blocks
(docs/CORRELATION.md, "Approximate join").

Timestamps are milliseconds. A video task puts a NumPy frame every 1000/30 ms (timestamps 0, 33,
67, 100, ...); an audio task puts a 20 ms block of a synthetic sine every 20 ms (0, 20, 40, ...),
each block with its own known frequency. Both are paced against real time by ``Pacer`` (1 ms per
unit of virtual time), both advance their virtual time to the next timestamp they will put (which
settles everything in between), and the audio task drops a fraction ``--drop`` of its blocks
(seeded) so that some frames find nothing within the tolerance.

``ApproxJoin([video, audio], tolerance=10)`` releases, for each frame, the audio block closest in
time within 10 ms (the earlier on a tie) — as soon as the producers' virtual times prove no better
block can still come, not when a later block happens to arrive. The matcher checks each match
against the brute-force choice and decodes the block's frequency, and prints matches, unmatched
frames and audio blocks, and the release latency (from the frame's put to its release).

    python examples/av_matcher.py --seconds 2 --drop 0.1
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time

import numpy as np

import stampede

RATE = 16_000  # audio samples per second
BLOCK_MS = 20
TOLERANCE_MS = 10


def frame_ts(i: int) -> int:
    return round(i * 1000 / 30)


def frequency(ts: int) -> float:
    """The known frequency (Hz) of the audio block at ``ts``: 200..1180 Hz in 20 Hz steps."""
    return 200.0 + 20.0 * ((ts // BLOCK_MS) % 50)


def block(ts: int) -> np.ndarray:
    t = (ts / 1000) + np.arange(RATE * BLOCK_MS // 1000) / RATE
    return np.sin(2 * np.pi * frequency(ts) * t).astype(np.float32)


def decode(samples: np.ndarray) -> float:
    """The dominant frequency of a block: the peak of a zero-padded FFT (about 3 Hz bins)."""
    n = 16 * len(samples)
    spectrum = np.abs(np.fft.rfft(samples, n))
    return float(np.argmax(spectrum) * RATE / n)


def video(task: stampede.Task, out: stampede.ChannelOutput, frames: int, put_at: dict[int, float]) -> None:
    pacer = stampede.Pacer(tick=0.001, tolerance=0.005, on_late=lambda vt, late: vt)
    with task, out:
        for i in range(frames):
            ts = frame_ts(i)
            pacer.sync(ts)
            put_at[ts] = time.monotonic()
            out.put(ts, np.full((72, 128), i % 256, dtype=np.uint8))
            task.set_virtual_time(frame_ts(i + 1))


def audio(task: stampede.Task, out: stampede.ChannelOutput, blocks: int, dropped: set[int]) -> None:
    pacer = stampede.Pacer(tick=0.001, tolerance=0.005, on_late=lambda vt, late: vt)
    with task, out:
        for k in range(blocks):
            ts = k * BLOCK_MS
            pacer.sync(ts)
            if ts not in dropped:
                out.put(ts, block(ts))
            task.set_virtual_time(ts + BLOCK_MS)


def best(t: int, present: list[int]) -> int | None:
    """Brute force: the closest timestamp within the tolerance, the earlier on a tie."""
    near = [a for a in present if abs(a - t) <= TOLERANCE_MS]
    return min(near, key=lambda a: (abs(a - t), a)) if near else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of the streams")
    parser.add_argument("--drop", type=float, default=0.1, help="fraction of audio blocks dropped")
    parser.add_argument("--seed", type=int, default=3, help="seed of the dropped blocks")
    args = parser.parse_args()
    frames = int(args.seconds * 30)
    blocks = int(args.seconds * 1000) // BLOCK_MS
    rng = random.Random(args.seed)
    dropped = {k * BLOCK_MS for k in range(blocks) if rng.random() < args.drop}
    present = [k * BLOCK_MS for k in range(blocks) if k * BLOCK_MS not in dropped]

    with stampede.Runtime() as rt:
        vch, ach = rt.create_channel("av/video"), rt.create_channel("av/audio")
        vtask, atask = rt.task(0), rt.task(0)
        vout, aout = vtask.attach_output(vch), atask.attach_output(ach)
        vch.close_producers()
        ach.close_producers()
        matcher = rt.task(stampede.INFINITY)
        join = stampede.ApproxJoin([matcher.attach_input(vch), matcher.attach_input(ach)], TOLERANCE_MS)

        put_at: dict[int, float] = {}
        threads = [
            threading.Thread(target=video, args=(vtask, vout, frames, put_at)),
            threading.Thread(target=audio, args=(atask, aout, blocks, dropped)),
        ]
        for t in threads:
            t.start()

        matched, unmatched, wrong, freq_errors = 0, 0, 0, 0
        latencies: list[float] = []
        used: set[int] = set()
        shown = 0
        for m in join:  # ends when both producers closed and every frame is released
            latencies.append(time.monotonic() - put_at[m.ts])
            a = m.matches[0]
            wrong += (a.ts if a is not None else None) != best(m.ts, present)
            if a is None:
                unmatched += 1
            else:
                matched += 1
                used.add(a.ts)
                freq_errors += abs(decode(a.array()) - frequency(a.ts)) > 5
            if shown < 6:
                shown += 1
                match = f"audio {a.ts:5d} ms" if a is not None else "no audio block"
                print(f"  frame {m.ts:5d} ms -> {match}")
        for t in threads:
            t.join()

        stats = join.stats()
        lat = sorted(x * 1000 for x in latencies) or [0.0]
        print(
            f"frames {frames}: matched {matched}, unmatched {unmatched} "
            f"(stats: complete {stats['complete']}, partial {stats['partial']}); "
            f"not the brute-force choice {wrong}; frequency errors {freq_errors}"
        )
        print(
            f"audio blocks {blocks}: dropped {len(dropped)}, matched to some frame {len(used)}, "
            f"never matched {len(present) - len(used)}"
        )
        print(
            f"release latency after the frame's put: median {statistics.median(lat):.2f} ms, "
            f"p95 {lat[int(0.95 * (len(lat) - 1))]:.2f} ms, max {lat[-1]:.2f} ms "
            f"(tolerance {TOLERANCE_MS} ms)"
        )


if __name__ == "__main__":
    main()
