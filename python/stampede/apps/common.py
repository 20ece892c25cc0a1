"""What the applications share: named tasks, stage counters, the progress line, the run loop and
the summary.

Guarantees:

- :func:`task` and :func:`spawn` pass ``name=`` to the runtime when it accepts one and fall back
  to an unnamed task when it does not (``TypeError``), so the applications run on both.
- :class:`Stage` counters are safe to update from the stage's thread and read from the monitor.
- :func:`run` drives an application: it samples the live items and bytes of the application's
  channels ten times a second (keeping the peaks), prints one progress line per second on stderr,
  stops on ``seconds`` or Ctrl-C (the first Ctrl-C stops the sources and lets the pipeline drain;
  the summary is printed all the same), and joins every thread it was given, each with a bound.
- :func:`print_summary` prints human-readable lines and ends stdout with ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import stampede

#: Longest wait of one blocking get or join of a stage: it checks its end condition at least this often.
GET_TIMEOUT_S = 0.5
#: How often the monitor samples the channels' live items, in seconds.
SAMPLE_S = 0.1
#: Longest wait for one thread to end once the sources stopped (a hung stage is reported, not waited on).
JOIN_S = 10.0


def task(rt: stampede.Runtime, virtual_time: int, name: str) -> stampede.Task:
    """A root task named ``name`` (the dashboard and ``rt.graph()`` show it)."""
    return rt.task(virtual_time, name=name)


def spawn(parent: stampede.Task, virtual_time: int, name: str) -> stampede.Task:
    """A child of ``parent`` named ``name``."""
    return parent.spawn(virtual_time, name=name)


@dataclass
class Stage:
    """Counters of one pipeline stage: items it processed and timestamps it skipped."""

    name: str
    processed: int = 0
    skipped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def done(self, n: int = 1, skipped: int = 0) -> None:
        with self._lock:
            self.processed += n
            self.skipped += skipped


@dataclass
class Errors:
    """Distances (pixels) between a tracker's estimate and the ground truth's full-figure centre,
    over all samples and split by whether the figure was partly hidden by another (occluded)."""

    count: int = 0
    total_px: float = 0.0
    max_px: float = 0.0
    occluded_count: int = 0
    occluded_total_px: float = 0.0
    occluded_max_px: float = 0.0
    clear_max_px: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, px: float, occluded: bool = False) -> None:
        with self._lock:
            self.count += 1
            self.total_px += px
            self.max_px = max(self.max_px, px)
            if occluded:
                self.occluded_count += 1
                self.occluded_total_px += px
                self.occluded_max_px = max(self.occluded_max_px, px)
            else:
                self.clear_max_px = max(self.clear_max_px, px)

    def summary(self) -> dict:
        def stats(count: int, total: float, peak: float) -> dict:
            return {
                "mean": round(total / count, 3) if count else None,
                "max": round(peak, 3) if count else None,
                "samples": count,
            }

        with self._lock:
            out = stats(self.count, self.total_px, self.max_px)
            clear = self.count - self.occluded_count
            out["clear"] = stats(clear, self.total_px - self.occluded_total_px, self.clear_max_px)
            out["occluded"] = stats(self.occluded_count, self.occluded_total_px, self.occluded_max_px)
        return out


class Monitor:
    """Samples the live items and bytes of every channel under ``prefix`` (the sum, and the peak
    of the sum), from the monitor's thread only."""

    def __init__(self, rt: stampede.Runtime, prefix: str) -> None:
        self.rt, self.prefix = rt, prefix
        self.peak_live_items = 0
        self.peak_live_bytes = 0
        self.live_items = 0
        self.live_bytes = 0
        self.peak_by_channel: dict[str, int] = {}

    def sample(self) -> None:
        items = nbytes = 0
        for name in self.rt.names(self.prefix):
            try:
                container = self.rt.lookup(name)
                stats = container.stats()
            except stampede.StampedeError:
                continue  # destroyed between names() and stats(): a tracker that ended
            if not isinstance(container, stampede.Channel):
                continue
            items += stats["live_items"]
            nbytes += stats["live_bytes"]
            key = name if not name.startswith(f"{self.prefix}tracks/") else f"{self.prefix}tracks/*"
            self.peak_by_channel[key] = max(self.peak_by_channel.get(key, 0), stats["live_items"])
        self.live_items, self.live_bytes = items, nbytes
        self.peak_live_items = max(self.peak_live_items, items)
        self.peak_live_bytes = max(self.peak_live_bytes, nbytes)


def run(
    threads: list[threading.Thread],
    stop: threading.Event,
    monitor: Monitor,
    stages: Iterable[Stage],
    seconds: float | None,
    progress: bool = True,
    extra: Callable[[], str] | None = None,
    sources: int = 1,
) -> tuple[float, bool]:
    """Starts ``threads``, samples and reports until ``seconds`` pass, Ctrl-C, or every thread
    ends; sets ``stop`` (the sources watch it), then joins the threads. The first ``sources``
    threads are the sources: the run's duration is theirs. Returns (elapsed seconds, interrupted)."""
    stages = list(stages)
    start = time.monotonic()
    for t in threads:
        t.start()
    interrupted = False
    last_report, last_counts = start, {s.name: 0 for s in stages}
    elapsed = 0.0
    try:
        while any(t.is_alive() for t in threads[:sources]):
            now = time.monotonic()
            if seconds is not None and now - start >= seconds:
                break
            stop.wait(SAMPLE_S)
            monitor.sample()
            now = time.monotonic()
            if progress and now - last_report >= 1.0:
                dt = now - last_report
                rates = " ".join(f"{s.name} {(s.processed - last_counts[s.name]) / dt:.1f}/s" for s in stages)
                line = (
                    f"[{now - start:6.1f} s] {rates} | live items {monitor.live_items} "
                    f"({monitor.live_bytes / 1e6:.2f} MB)"
                )
                print(line + (f" | {extra()}" if extra else ""), file=sys.stderr, flush=True)
                last_report, last_counts = now, {s.name: s.processed for s in stages}
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: stopping the sources, draining the pipeline", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - start
    stop.set()
    for t in threads:
        while True:
            try:
                t.join(JOIN_S)
                break
            except KeyboardInterrupt:  # a second Ctrl-C while draining: keep joining, bounded
                interrupted = True
        if t.is_alive():
            print(f"warning: thread {t.name} did not end within {JOIN_S} s", file=sys.stderr)
        monitor.sample()
    return elapsed, interrupted


def fps(stages: Iterable[Stage], elapsed: float) -> dict[str, float]:
    return {s.name: round(s.processed / elapsed, 2) if elapsed > 0 else 0.0 for s in stages}


def print_summary(lines: Iterable[str], result: dict) -> None:
    """The human-readable summary — frames and fps per stage, the application's own ``lines``,
    peak live items — then ONE JSON line: the last line on stdout."""
    print(
        f"frames {result['frames']} in {result['seconds']} s; fps per stage "
        + ", ".join(f"{k} {v}" for k, v in result["fps"].items())
    )
    for line in lines:
        print(line)
    print(
        f"peak live items {result['peak_live_items']} ({result['peak_live_bytes'] / 1e6:.2f} MB): "
        f"{result['peak_live_items_by_channel']}"
    )
    print(json.dumps(result, sort_keys=False), flush=True)


def error_line(what: str, err: dict, unit: str) -> str:
    """A tracker's error summary (``Errors.summary()``) as one line."""
    occluded = err["occluded"]
    return (
        f"{what} vs ground truth: mean {err['mean']} px, max {err['max']} px over {err['samples']} "
        f"{unit}; of which partly hidden {occluded['samples']}: mean {occluded['mean']} px, "
        f"max {occluded['max']} px"
    )


def hex_colour(rgb: Iterable[int]) -> str:
    r, g, b = (int(c) for c in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass
class RunConfig:
    """What every application is configured with (its own config adds to it)."""

    #: Bound of the run (None: until Ctrl-C).
    seconds: float | None = None
    fps: float = 30.0
    width: int = 320
    height: int = 240
    seed: int = 0
    headless: bool = True
    #: Dashboard port (0: any free port).
    port: int = 0
    #: A progress line per second on stderr.
    progress: bool = True
    #: Stop the sources after this many timestamps (tests); None: run until seconds / Ctrl-C.
    max_frames: int | None = None
    #: Record the application's channels to this MCAP file (None: no recording).
    record: str | None = None
    #: Serve the application's channels live to Foxglove on this port (None: no bridge).
    foxglove: int | None = None


def display(task: stampede.Task, inp: stampede.ChannelInput, stage: Stage, done: threading.Event) -> None:
    """A display: shows (counts) the freshest item with ``NEWEST_UNSEEN``, skipping stale ones,
    until ``done`` is set and nothing more comes, or its channel closes; closes ``task`` at the end."""
    last = -1
    with task:
        while True:
            try:
                item = inp.get(stampede.NEWEST_UNSEEN, timeout=GET_TIMEOUT_S)
            except stampede.NotAvailable:
                if done.is_set():
                    return
                continue
            except stampede.Closed:
                return
            inp.consume_until(item.ts)
            stage.done(skipped=max(0, item.ts - last - 1) if last >= 0 else 0)
            last = item.ts


def summary(
    app: str,
    sources: list[Any],
    stages: dict[str, Stage],
    elapsed: float,
    monitor: Monitor,
    interrupted: bool,
    **specific: Any,
) -> dict[str, Any]:
    """An application's result: what every one reports (frames its cameras — ``sources`` — put,
    fps and skips per stage, camera lateness, peaks of live items and bytes), then what is
    ``specific`` to it."""
    return {
        "app": app,
        "frames": sum(c.frames for c in sources),
        "seconds": round(elapsed, 3),
        "fps": fps(stages.values(), elapsed),
        "skipped": {s.name: s.skipped for s in stages.values()},
        "camera_late": sum(c.late for c in sources),
        **specific,
        "peak_live_items": monitor.peak_live_items,
        "peak_live_bytes": monitor.peak_live_bytes,
        "peak_live_items_by_channel": monitor.peak_by_channel,
        "interrupted": interrupted,
    }


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options every application takes (see ``run_options``)."""
    parser.add_argument("--seconds", type=float, default=None, help="bound the run (default: until Ctrl-C)")
    parser.add_argument("--fps", type=float, default=30.0, help="camera rate (frames per second)")
    parser.add_argument("--width", type=int, default=320, help="frame width in pixels")
    parser.add_argument("--height", type=int, default=240, help="frame height in pixels")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic scenes")
    parser.add_argument("--headless", action="store_true", help="no dashboard")
    parser.add_argument("--port", type=int, default=0, help="dashboard port (0 = any free port)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--record", metavar="FILE", default=None, help="record every channel of the run to an MCAP file"
    )
    parser.add_argument(
        "--foxglove",
        metavar="PORT",
        type=int,
        default=None,
        help="serve the run's channels live to Foxglove on this port (8765 is Foxglove's default)",
    )


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration fields every application shares, from ``add_run_arguments``' options."""
    return {
        "seconds": args.seconds,
        "fps": args.fps,
        "width": args.width,
        "height": args.height,
        "seed": args.seed,
        "headless": args.headless,
        "port": args.port,
        "progress": not args.quiet,
        "record": args.record,
        "foxglove": args.foxglove,
    }


def run_embedded(
    app_class: Callable[[stampede.Runtime, Any], Any], config: Any, image: str, overlays: list[str]
) -> dict:
    """Runs ``app_class(rt, config)`` on a fresh embedded runtime — serving its dashboard (``image``
    with ``overlays``, on ``config.port``; the URL is printed) unless ``config.headless``, its
    channels (those under ``image``'s first name segment) live to Foxglove on ``config.foxglove``
    when set (the URL is printed), and recording them to ``config.record`` when set — and
    returns its result, with the recorder's account under ``"recording"``."""
    with stampede.Runtime() as rt:
        app = app_class(rt, config)
        dash = None
        if not config.headless:
            dash = stampede.Dashboard(rt, port=config.port, image=image, overlays=overlays)
            print(f"dashboard on {dash.url}", flush=True)
        bridge = None
        if config.foxglove is not None:
            prefix, tick = image.split("/")[0], 1.0 / config.fps  # frame numbers at the camera's rate
            bridge = stampede.Foxglove(rt, port=config.foxglove, names=[prefix], overlays=overlays, tick=tick)
            print(f"foxglove on {bridge.url}", flush=True)
        recorder = None
        if config.record is not None:
            recorder = stampede.Recorder(rt, image.split("/")[0], config.record)
            print(f"recording to {config.record}", flush=True)
        try:
            result: dict = app.run()
        finally:
            if dash is not None:
                dash.close()
            if bridge is not None:
                bridge.close()
            if recorder is not None:
                recording = recorder.stop()
        if recorder is not None:
            result["recording"] = recording
            missed = sum(c["missed"] for c in recording["channels"].values())
            print(
                f"recorded {recording['items']} items ({recording['bytes'] / 1e6:.1f} MB) to {config.record}"
                f"; missed {missed}",
                flush=True,
            )
    return result
