"""Python-side benchmarks of Stampede, each beside its reference in the same run
(docs/BENCHMARKS.md, "How every benchmark measures and reports").

Prints one JSON object per line: {"bench", "case", "p50_us", "p99_us", "ratio_vs", "ratio"}
where ratio = p50(stampede) / p50(reference).

- handoff: ping-pong between two Python threads through two channels vs two queue.Queue;
  the figure is the one-way hand-off time (round trip / 2).
- get_array_6mb: get(ts) + item.array() of a 1080x1920x3 uint8 frame (zero-copy) vs copying
  those 6 MB once (np.copyto into a preallocated array).
- put_6mb: put of that frame (one copy into the channel, .npy header included) vs one memcpy
  of it (np.copyto).

    python bench/bench_python.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import threading
import time
from collections.abc import Callable

import numpy as np
from build_check import warn_if_not_release

import stampede

FRAME_SHAPE = (1080, 1920, 3)


def percentiles(samples_ns: list[int]) -> tuple[float, float]:
    samples = sorted(samples_ns)
    p50 = statistics.median(samples) / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    return p50, p99


def emit(bench: str, case: str, samples_ns: list[int], ref_name: str, ref_ns: list[int]) -> None:
    p50, p99 = percentiles(samples_ns)
    r50, r99 = percentiles(ref_ns)
    print(json.dumps({"bench": bench, "case": ref_name, "p50_us": round(r50, 3), "p99_us": round(r99, 3)}))
    print(
        json.dumps(
            {
                "bench": bench,
                "case": case,
                "p50_us": round(p50, 3),
                "p99_us": round(p99, 3),
                "ratio_vs": ref_name,
                "ratio": round(p50 / r50, 3),
            }
        ),
        flush=True,
    )


def timed(op: Callable[[int], object], rounds: int) -> list[int]:
    out = []
    for i in range(rounds):
        t0 = time.perf_counter_ns()
        op(i)
        out.append(time.perf_counter_ns() - t0)
    return out


def handoff_stampede(rounds: int) -> list[int]:
    with stampede.Runtime() as rt:
        ping, pong = rt.create_channel("ping"), rt.create_channel("pong")
        a, b = rt.task(0), rt.task(0)
        a_out, a_in = a.attach_output(ping), a.attach_input(pong)
        b_out, b_in = b.attach_output(pong), b.attach_input(ping)

        def echo() -> None:
            for ts in range(rounds):
                b_in.get(ts)
                b_in.consume(ts)
                b_out.put(ts, b"pong")
                b.set_virtual_time(ts + 1)

        t = threading.Thread(target=echo)
        t.start()
        samples = []
        for ts in range(rounds):
            t0 = time.perf_counter_ns()
            a_out.put(ts, b"ping")
            a_in.get(ts)
            samples.append((time.perf_counter_ns() - t0) // 2)
            a_in.consume(ts)
            a.set_virtual_time(ts + 1)
        t.join()
        return samples


def handoff_queue(rounds: int) -> list[int]:
    ping: queue.Queue[bytes] = queue.Queue()
    pong: queue.Queue[bytes] = queue.Queue()

    def echo() -> None:
        for _ in range(rounds):
            pong.put(ping.get())

    t = threading.Thread(target=echo)
    t.start()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        ping.put(b"ping")
        pong.get()
        samples.append((time.perf_counter_ns() - t0) // 2)
    t.join()
    return samples


def frame_benches(rounds: int) -> None:
    frame = np.random.default_rng(0).integers(0, 255, FRAME_SHAPE, dtype=np.uint8)
    dst = np.empty_like(frame)
    copies = timed(lambda _: np.copyto(dst, frame), rounds)
    with stampede.Runtime() as rt:
        ch = rt.create_channel("frames")
        producer = rt.task(0)
        out = producer.attach_output(ch)
        reader = rt.task(stampede.INFINITY).attach_input(ch)
        out.put(0, frame)
        gets = timed(lambda _: reader.get(0).array(), rounds)
        emit("get_array_6mb", "stampede get+array()", gets, "np.copyto 6MB", copies)

        def put(i: int) -> None:
            out.put(i + 1, frame)

        reader.detach()
        puts = []
        for i in range(rounds):
            t0 = time.perf_counter_ns()
            put(i)
            puts.append(time.perf_counter_ns() - t0)
            producer.set_virtual_time(i + 2)  # reclaims the frame: nobody reads this channel
        emit("put_6mb", "stampede put(ndarray)", puts, "np.copyto 6MB", copies)


def main() -> None:
    warn_if_not_release()
    parser = argparse.ArgumentParser(description="Stampede Python benchmarks (JSON lines)")
    parser.add_argument("--rounds", type=int, default=2000, help="hand-off round trips")
    parser.add_argument("--frame-rounds", type=int, default=200, help="6 MB frame operations")
    args = parser.parse_args()
    handoff_stampede(100)  # warm-up
    handoff_queue(100)
    emit(
        "handoff",
        "stampede channel",
        handoff_stampede(args.rounds),
        "queue.Queue",
        handoff_queue(args.rounds),
    )
    frame_benches(args.frame_rounds)


if __name__ == "__main__":
    main()
