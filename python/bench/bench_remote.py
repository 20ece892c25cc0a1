"""Python client to Python client across processes through a node, beside multiprocessing.Queue.

The Python row of the ``remote`` benchmark (crates/stampede-bench/src/bin/remote.rs, which runs
this script itself with ``--connect`` so that its lines come from the same run; it also runs on
its own). Prints one JSON object per line: {"bench", "case", "impl", "p50_us", "p99_us", ...};
figures are one way (round trip / 2), percentiles nearest-rank, as the Rust programs do.

- stampede: the ``handoff`` ping-pong between two Python processes (multiprocessing, spawn), each
  with its own session of one ``stampede serve`` node on loopback TCP (``stampede.connect``). A
  (this process, virtual time ``i``) puts ``ts=i`` into ``ping``, advances its virtual time, gets
  ``i`` from ``pong`` and consumes it; B (virtual time ``INFINITY``) gets ``NEWEST_UNSEEN`` from
  ``ping``, puts its answer at the same ts into ``pong`` and consumes.
- multiprocessing.Queue: the same exchange between the same two kinds of process through two
  ``multiprocessing.Queue`` (pickled bytes over a pipe, a feeder thread on each side).
- a 6 MB frame (a 1080p RGB NumPy array) on one host: ``get`` + ``array()`` of a frame already on
  the node, put by a producer process, which arrives as a shared-memory segment; beside the same
  for an 8-byte array and beside one NumPy copy of the frame.

Payloads of 8 B, 1 KiB, 8 KiB and 60 KiB; every receiver reads the first and last byte of what
it got. Every wait is bounded (the node's start, each get, each child's exit); children are
stopped whatever happens. Nothing here asserts a speed.

    python bench/bench_remote.py [--quick] [--connect ENDPOINT] [--round-trips N]

Without ``--connect`` it starts its own node: ``$STAMPEDE_BIN``, else the workspace's release
``stampede`` binary, else its debug one (``cargo build --release -p stampede-cli``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import platform
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import numpy as np
from build_check import warn_if_not_release

import stampede

REPO = Path(__file__).resolve().parents[2]
PAYLOAD_BYTES = (8, 1024, 8 * 1024, 60 * 1024)
BENCH = "remote"
STAMPEDE = "stampede Python (serve, tcp loopback)"
QUEUE = "multiprocessing.Queue (Python)"
#: Longest wait for the node to listen, a client to connect, or a child to attach.
START_S = 30.0
#: Longest wait for one message of an exchange: far above any figure, it only ends a stuck run.
EXCHANGE_S = 20.0
#: Longest wait for a child to exit once its work is done.
EXIT_S = 20.0
#: A 1080p RGB frame: the large frame of the shared-memory row ("6 MB").
LARGE_FRAME = (1080, 1920, 3)
#: Frames a producer may be ahead of the getter (the channel's capacity).
FRAMES_AHEAD = 4


def source(payload_bytes: int, seed: int) -> bytes:
    """A payload with a recognisable pattern (as the Rust benchmarks' ``payload::source``)."""
    return bytes((i + seed) & 0xFF for i in range(payload_bytes))


def touch(data: bytes | memoryview) -> int:
    """Reads the first and last byte of what was received (``payload::touch``)."""
    return data[0] ^ data[-1] if len(data) else 0


def percentile(sorted_ns: list[int], p: float) -> int:
    """The nearest-rank ``p``-th percentile of sorted samples (``stats::percentile``)."""
    rank = math.ceil(p / 100 * len(sorted_ns))
    return sorted_ns[min(max(rank, 1), len(sorted_ns)) - 1]


def summary_us(samples_ns: list[int], per: int = 1) -> dict[str, float]:
    """p50, p99 and mean of the samples, each divided by ``per``, in µs."""
    ns = sorted(samples_ns)
    return {
        "p50_us": round(percentile(ns, 50) / per / 1e3, 3),
        "p99_us": round(percentile(ns, 99) / per / 1e3, 3),
        "mean_us": round(sum(ns) / len(ns) / per / 1e3, 3),
    }


def one_way_us(rtt_ns: list[int]) -> dict[str, float]:
    """p50, p99 and mean one way (round trip / 2), in µs."""
    return summary_us(rtt_ns, per=2)


def emit(line: dict[str, object]) -> None:
    print(json.dumps(line, ensure_ascii=False, separators=(",", ":")), flush=True)


def stampede_bin() -> str:
    """``$STAMPEDE_BIN``, else the workspace's release build, else its debug build."""
    if os.environ.get("STAMPEDE_BIN"):
        return os.environ["STAMPEDE_BIN"]
    for profile in ("release", "debug"):
        path = REPO / "target" / profile / "stampede"
        if path.exists():
            return str(path)
    raise SystemExit("no stampede binary: cargo build --release -p stampede-cli (or set STAMPEDE_BIN)")


@contextlib.contextmanager
def serve() -> Iterator[str]:
    """A ``stampede serve`` node on a free loopback TCP port, stopped whatever happens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"tcp/127.0.0.1:{s.getsockname()[1]}"
    args = [stampede_bin(), "serve", "--listen", endpoint, "--name", "bench"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        out, first = proc.stdout, []
        reader = threading.Thread(target=lambda: first.append(out.readline()), daemon=True)
        reader.start()
        reader.join(START_S)
        if not first or first[0].strip() != f"listening on {endpoint}":
            raise RuntimeError(f"stampede serve did not say it listens on {endpoint}: {first}")
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=EXIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def await_ready(proc: SpawnProcess, ready: Event) -> None:
    """Waits (at most START_S) for the child to set ``ready``; fails at once if it dies first."""
    deadline = time.monotonic() + START_S
    while not ready.wait(0.05):
        if not proc.is_alive():
            raise RuntimeError(f"{proc.name} exited ({proc.exitcode}) before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.name} was not ready within {START_S} s")


def finish(proc: SpawnProcess) -> None:
    """Waits (at most EXIT_S) for the child to exit with status 0."""
    proc.join(EXIT_S)
    if proc.exitcode != 0:
        raise RuntimeError(f"{proc.name} exited with {proc.exitcode}")


@contextlib.contextmanager
def child(
    target: Callable[..., None], args: tuple[object, ...], name: str
) -> Iterator[tuple[SpawnProcess, Event]]:
    """A spawned child process running ``target(*args, ready)``, stopped whatever happens."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=(*args, ready), name=name, daemon=True)
    proc.start()
    try:
        yield proc, ready
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(EXIT_S)
        if proc.is_alive():
            proc.kill()
            proc.join()


def stampede_echo(
    endpoint: str, ping_name: str, pong_name: str, payload_bytes: int, total: int, ready: Event
) -> None:
    """B: its own session, a task at INFINITY, echoing every ping into pong."""
    with stampede.connect(endpoint, timeout=START_S) as rt:
        ping, pong = rt.lookup(ping_name), rt.lookup(pong_name)
        assert isinstance(ping, stampede.Channel) and isinstance(pong, stampede.Channel)
        b = rt.task(stampede.INFINITY)
        b_in, b_out = b.attach_input(ping), b.attach_output(pong)
        answer = source(payload_bytes, 0xB0)
        ready.set()  # B reads ping before A puts into it (else A's first items go unread)
        for _ in range(total):
            item = b_in.get(stampede.NEWEST_UNSEEN, timeout=EXCHANGE_S)
            touch(item.data)
            b_out.put(item.ts, answer)
            b_in.consume(item.ts)


def stampede_ping_pong(endpoint: str, payload_bytes: int, warmup: int, round_trips: int) -> list[int]:
    """Round-trip times in ns of ``round_trips`` ping-pongs with B after ``warmup`` untimed ones."""
    total = warmup + round_trips
    with stampede.connect(endpoint, timeout=START_S) as rt:
        # Fresh names on a node shared with other rows and runs.
        suffix = f"{payload_bytes}-{os.getpid()}-{time.monotonic_ns()}"
        ping, pong = rt.create_channel(f"bench/py-ping{suffix}"), rt.create_channel(f"bench/py-pong{suffix}")
        base = rt.ts_min  # earlier rows moved ts_min: a new root task starts at or above it
        a = rt.task(base)
        a_out, a_in = a.attach_output(ping), a.attach_input(pong)
        args = (endpoint, ping.name, pong.name, payload_bytes, total)
        with child(stampede_echo, args, "stampede echo (B)") as (b, ready):
            await_ready(b, ready)
            buf = source(payload_bytes, 0xA0)
            samples = []
            for i in range(total):
                ts = base + i
                t0 = time.perf_counter_ns()
                a_out.put(ts, buf)
                a.set_virtual_time(ts + 1)
                touch(a_in.get(ts, timeout=EXCHANGE_S).data)
                a_in.consume(ts)
                if i >= warmup:
                    samples.append(time.perf_counter_ns() - t0)
            finish(b)
        puts = (ping.stats()["puts"], pong.stats()["puts"])
        assert puts == (total, total), f"puts {puts}, expected {total} each"
    return samples


def queue_echo(ping: Queue[bytes], pong: Queue[bytes], payload_bytes: int, total: int, ready: Event) -> None:
    """The other process of the multiprocessing.Queue ping-pong."""
    answer = source(payload_bytes, 0xB0)
    ready.set()
    for _ in range(total):
        touch(ping.get(timeout=EXCHANGE_S))
        pong.put(answer)


def queue_ping_pong(payload_bytes: int, warmup: int, round_trips: int) -> list[int]:
    """Round-trip times in ns through two multiprocessing.Queue, after ``warmup`` untimed ones."""
    ctx = multiprocessing.get_context("spawn")
    ping: Queue[bytes] = ctx.Queue()
    pong: Queue[bytes] = ctx.Queue()
    total = warmup + round_trips
    with child(queue_echo, (ping, pong, payload_bytes, total), "queue echo") as (echo, ready):
        await_ready(echo, ready)
        buf = source(payload_bytes, 0xA0)
        samples = []
        for i in range(total):
            t0 = time.perf_counter_ns()
            ping.put(buf)
            touch(pong.get(timeout=EXCHANGE_S))
            if i >= warmup:
                samples.append(time.perf_counter_ns() - t0)
        finish(echo)
    return samples


def frame_producer(endpoint: str, name: str, shape: tuple[int, ...], total: int, ready: Event) -> None:
    """Puts ``total`` arrays of ``shape`` into ``name``, at most ``FRAMES_AHEAD`` ahead."""
    with stampede.connect(endpoint, timeout=START_S) as rt:
        channel = rt.lookup(name)
        assert isinstance(channel, stampede.Channel)
        base = rt.ts_min
        task = rt.task(base)
        out = task.attach_output(channel)
        frame = np.full(shape, 0x5A, dtype=np.uint8)
        ready.set()
        for i in range(total):
            out.put(base + i, frame, timeout=EXCHANGE_S)
            task.set_virtual_time(base + i + 1)


def present_gets(endpoint: str, shape: tuple[int, ...], warmup: int, gets: int) -> list[int]:
    """Times in ns of ``get`` + ``array()`` of a frame already on the node (got once, untimed, to
    wait for it; then again, timed), after ``warmup`` untimed ones."""
    total = warmup + gets
    with stampede.connect(endpoint, timeout=START_S) as rt:
        suffix = f"{math.prod(shape)}-{os.getpid()}-{time.monotonic_ns()}"
        frames = rt.create_channel(f"bench/py-present{suffix}", capacity=FRAMES_AHEAD)
        reader = rt.task(stampede.INFINITY)
        inp = reader.attach_input(frames)
        args = (endpoint, frames.name, shape, total)
        with child(frame_producer, args, "frame producer") as (producer, ready):
            await_ready(producer, ready)
            samples = []
            for i in range(total):
                ts = inp.get(stampede.OLDEST_UNSEEN, timeout=EXCHANGE_S).ts
                t0 = time.perf_counter_ns()
                array = inp.get(ts, timeout=EXCHANGE_S).array()
                touch(array.reshape(-1))
                elapsed = time.perf_counter_ns() - t0
                del array
                inp.consume(ts)
                if i >= warmup:
                    samples.append(elapsed)
            finish(producer)
    return samples


def copy_ns(shape: tuple[int, ...], warmup: int, copies: int) -> list[int]:
    """Times in ns of one NumPy copy of an array of ``shape`` into another."""
    source_array, target = np.full(shape, 0x5A, dtype=np.uint8), np.empty(shape, dtype=np.uint8)
    samples = []
    for i in range(warmup + copies):
        t0 = time.perf_counter_ns()
        np.copyto(target, source_array)
        if i >= warmup:
            samples.append(time.perf_counter_ns() - t0)
    return samples


def run_large(endpoint: str, warmup: int, gets: int) -> None:
    large_bytes = math.prod(LARGE_FRAME)
    large = summary_us(present_gets(endpoint, LARGE_FRAME, warmup, gets))
    small = summary_us(present_gets(endpoint, (8,), warmup, gets))
    copy = summary_us(copy_ns(LARGE_FRAME, warmup, gets))
    present = "stampede Python get + array(), item present (serve, tcp loopback)"
    emit(
        {
            "bench": BENCH,
            "case": f"{large_bytes} B",
            "impl": present,
            **large,
            "gets": gets,
            "ratio_vs": "numpy copy",
            "ratio": round(large["p50_us"] / copy["p50_us"], 3),
            "ratio_vs_8_b": round(large["p50_us"] / small["p50_us"], 3),
        }
    )
    emit({"bench": BENCH, "case": "8 B", "impl": present, **small, "gets": gets})
    emit({"bench": BENCH, "case": f"{large_bytes} B", "impl": "numpy copy", **copy, "copies": gets})


def machine_line(quick: bool, round_trips: int) -> None:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        model = [
            line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")
        ]
        cpu = model[0].split(":", 1)[1].strip() if model else cpu
    emit(
        {
            "bench": BENCH,
            "case": "machine (Python)",
            "impl": "this run",
            "cores": os.cpu_count(),
            "cpu": cpu,
            "python": platform.python_version(),
            "quick": quick,
            "round_trips": round_trips,
        }
    )


def run(endpoint: str, warmup: int, round_trips: int) -> None:
    run_large(endpoint, warmup, max(round_trips // 4, 5))
    for payload_bytes in PAYLOAD_BYTES:
        case = f"{payload_bytes}B"
        ours = one_way_us(stampede_ping_pong(endpoint, payload_bytes, warmup, round_trips))
        queue = one_way_us(queue_ping_pong(payload_bytes, warmup, round_trips))
        emit(
            {
                "bench": BENCH,
                "case": case,
                "impl": STAMPEDE,
                **ours,
                "round_trips": round_trips,
                "ratio_vs": QUEUE,
                "ratio": round(ours["p50_us"] / queue["p50_us"], 3),
                "ratio_p99": round(ours["p99_us"] / queue["p99_us"], 3),
            }
        )
        emit({"bench": BENCH, "case": case, "impl": QUEUE, **queue, "round_trips": round_trips})


def main() -> None:
    warn_if_not_release()
    parser = argparse.ArgumentParser(description="Python across processes: Stampede vs multiprocessing.Queue")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny counts, figures meaningless")
    parser.add_argument("--connect", metavar="ENDPOINT", help="use this node instead of starting one")
    parser.add_argument("--round-trips", type=int, help="timed round trips per row (default 1000, quick 20)")
    args = parser.parse_args()
    round_trips = args.round_trips or (20 if args.quick else 1000)
    warmup = 5 if args.quick else 100
    machine_line(args.quick, round_trips)
    if args.connect:
        run(args.connect, warmup, round_trips)
    else:
        with serve() as endpoint:
            run(endpoint, warmup, round_trips)


if __name__ == "__main__":
    main()
