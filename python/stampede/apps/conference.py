"""Videoconference (docs/APPLICATIONS.md; D-Stampede's telepresence application): participants in
processes of their own, a mixer joining their frames by timestamp, every display showing the
composite.

Roles, each a process (``python -m stampede.apps.conference <role> --help``):

``mixer``
    Serves the node itself (``--listen``, as D-Stampede's mixer lived in the server's address
    space) or is a client of nodes (``--connect``). It finds participants by the names of their
    channels (``conference/in/<name>``, on every node of the mesh), and for each timestamp ``t`` (a
    frame number on the wall clock, ``int(time.time() * fps)``, so every process on the machine
    agrees on it without talking) gets frame ``t`` of every present participant **by exact
    timestamp**, pastes it into its tile of the composite and puts the composite at ``t`` into
    ``conference/composite``, and a label per tile (fps, skips) into ``conference/tiles`` (the
    dashboard's overlay). ``--threads``: one thread per participant gets and pastes its tile, as
    D-Stampede's multi-threaded mixer; without it, one thread does all in turn.
``participant``
    A paced synthetic camera (a coloured square bouncing over a gradient: ground truth is a pure
    function of the timestamp; each frame carries a stamp of who and which timestamp) putting its
    frames into its own channel, and a display task reading the composite (``NEWEST_UNSEEN``) and
    checking its own tile against the stamp and the ground truth.
``run``
    A whole conference on this machine in one command (a mixer and ``--participants`` processes).

What the mixer guarantees:

- **Never stalled by a participant.** Each timestamp has a deadline, ``t / fps + budget``: a
  participant whose frame is not there by then is skipped for that timestamp (its tile is blank)
  and counted; one that misses for ``ABSENT_AFTER_S`` is left out of the composite and polled
  without waiting, and comes back into it the timestamp after its next frame arrives. A mixer that
  falls behind by more than the budget jumps to the current frame (counted as ``behind``).
- **Exact join.** A tile of the composite at ``t`` is that participant's frame ``t``, or blank:
  displays check every composite's own tile stamp (``mismatched`` counts violations).
- **Bounded.** Channels hold at most ``INPUT_CAPACITY`` / ``COMPOSITE_CAPACITY`` items; a put that
  finds its channel full is dropped and counted (never waits), at most ``PARTICIPANTS_MAX`` seats.
- Every process prints a progress line per second on stderr, stops on ``--seconds``, Ctrl-C or
  SIGTERM, and ends its stdout with one JSON line (its summary).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Self

import numpy as np

import stampede
from stampede import INFINITY, NEWEST_UNSEEN

from . import common
from .scenes import PALETTE

PREFIX = "conference/"
#: Participants' channels: ``conference/in/<name>``.
INPUTS = PREFIX + "in/"
COMPOSITE = PREFIX + "composite"
TILES = PREFIX + "tiles"
#: Width of every participant's frame (pixels, RGB); its height follows from the frame size.
TILE_WIDTH = 160
#: D-Stampede's per-client image sizes (Table 1), in KB of 1000 bytes.
SIZES_KB = (74, 89, 125, 145, 190)
#: Seats a mixer keeps; a participant beyond them is not shown (and said so once).
PARTICIPANTS_MAX = 16
INPUT_CAPACITY = 8
COMPOSITE_CAPACITY = 8
#: How long past a frame's time the mixer waits for it (default of ``--budget``).
BUDGET_S = 0.1
#: A participant that missed every timestamp for this long is left out of the composite.
ABSENT_AFTER_S = 0.5
#: How often the mixer looks for new participants' channels.
DISCOVER_EVERY_S = 0.25
#: How long a participant waits for the mixer's composite channel to exist.
WAIT_FOR_MIXER_S = 30.0
#: Grey of a tile whose participant missed the timestamp.
BLANK = 48
#: The stamp in the first pixels of each frame: magic, participant id, timestamp.
STAMP = struct.Struct("<4sIq")
MAGIC = b"STPC"


#: What a get of a frame by timestamp may meet that only means "not this frame": not there (yet),
#: gone, or not an image (``Item.array`` raises ``ValueError``).
MISSED = (stampede.NotAvailable, stampede.Reclaimed, stampede.AlreadyConsumed, ValueError)


def frame_now(fps: float) -> int:
    """The frame number of the wall clock: the timestamp every process of the conference puts or
    mixes now."""
    return int(time.time() * fps)


def participant_id(name: str) -> int:
    return zlib.crc32(name.encode())


def stamp(frame: np.ndarray, pid: int, ts: int) -> None:
    frame[0, :6].reshape(-1)[: STAMP.size] = np.frombuffer(STAMP.pack(MAGIC, pid, ts), np.uint8)


def is_tile(frame: np.ndarray) -> bool:
    """Whether a participant's frame can be a tile: RGB ``uint8``, ``TILE_WIDTH`` wide, a row or more."""
    return (
        frame.ndim == 3
        and frame.shape[1:] == (TILE_WIDTH, 3)
        and frame.shape[0] > 0
        and frame.dtype == np.uint8
    )


def read_stamp(tile: np.ndarray) -> tuple[int, int] | None:
    """(participant id, timestamp) of a tile, None for a blank or foreign one."""
    magic, pid, ts = STAMP.unpack(tile[0, :6].tobytes()[: STAMP.size])
    return (pid, ts) if magic == MAGIC else None


class SyntheticCamera:
    """Frames of about ``size_bytes`` (``TILE_WIDTH`` pixels wide, RGB): a gradient in the
    participant's colour and a square bouncing across it, a pure function of the timestamp."""

    def __init__(self, name: str, size_bytes: int) -> None:
        self.id = participant_id(name)
        self.height = max(32, round(size_bytes / (TILE_WIDTH * 3)))
        self.colour = np.array(PALETTE[self.id % len(PALETTE)], dtype=np.uint8)
        rows = np.linspace(0.15, 0.45, self.height, dtype=np.float32)[:, None, None]
        self.background = np.broadcast_to(rows * self.colour, (self.height, TILE_WIDTH, 3)).astype(np.uint8)
        self.side = self.height // 4

    @property
    def nbytes(self) -> int:
        return self.background.nbytes

    def truth(self, ts: int) -> tuple[int, int]:
        """Top-left corner of the square at ``ts``: it bounces, 3 px per frame across and 2 down,
        below row 0 (the stamp's)."""

        def bounce(pos: int, span: int) -> int:
            pos %= 2 * span
            return pos if pos < span else 2 * span - pos

        return bounce(3 * ts, TILE_WIDTH - self.side), 1 + bounce(2 * ts, self.height - self.side - 1)

    def render(self, ts: int) -> np.ndarray:
        frame = self.background.copy()
        x, y = self.truth(ts)
        frame[y : y + self.side, x : x + self.side] = 255 - self.colour
        stamp(frame, self.id, ts)
        return frame

    def shows(self, tile: np.ndarray, ts: int) -> bool:
        """Whether ``tile`` shows this camera's square exactly where the ground truth puts it at
        ``ts``: all of it, and not the pixel just past each of its sides."""
        x, y, side, square = *self.truth(ts), self.side, 255 - self.colour
        if tile.shape[0] < self.height or not (tile[y : y + side, x : x + side] == square).all():
            return False
        mid_x, mid_y = x + side // 2, y + side // 2
        past = [(mid_y, x - 1), (mid_y, x + side), (y - 1, mid_x), (y + side, mid_x)]
        return not any(
            (tile[r, c] == square).all() for r, c in past if 0 <= r < self.height and 0 <= c < TILE_WIDTH
        )


def until_stopped(
    stop: threading.Event, seconds: float | None, progress: Callable[[float], str] | None
) -> float:
    """Waits until ``stop`` is set, ``seconds`` pass, Ctrl-C or SIGTERM, printing ``progress`` once
    a second on stderr; sets ``stop`` and returns the seconds elapsed. SIGTERM sets ``stop`` from
    then on, for the rest of the process: one that stopped by itself (its node went away) and is
    told to end while it winds up still prints its summary."""
    start = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            elapsed = time.monotonic() - start
            if progress is not None:
                print(f"[{elapsed:6.1f} s] {progress(elapsed)}", file=sys.stderr, flush=True)
            if seconds is not None and elapsed >= seconds:
                break
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr, flush=True)
    finally:
        stop.set()
    return time.monotonic() - start


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


# --- participant ---------------------------------------------------------------------------------


class Participant:
    """A participant's camera and display on ``rt`` (see the module's doc)."""

    def __init__(
        self, rt: stampede.Runtime, name: str, size_bytes: int, fps: float, record_ts: bool = False
    ) -> None:
        if "/" in name or not name:
            raise ValueError(f"a participant's name is one name segment, not {name!r}")
        self.rt, self.name, self.fps, self.record_ts = rt, name, fps, record_ts
        self.camera = SyntheticCamera(name, size_bytes)
        try:
            channel = rt.create_channel(
                INPUTS + name, capacity=INPUT_CAPACITY, codec="npy", description=f"{name}'s camera"
            )
        except stampede.AlreadyExists:  # a participant of that name was here before: rejoin
            found = rt.lookup(INPUTS + name)
            if not isinstance(found, stampede.Channel):
                raise SystemExit(f"{INPUTS + name} is a queue: choose another name") from None
            channel = found
        composite = wait_for(rt, COMPOSITE, WAIT_FOR_MIXER_S)
        self.camera_task = common.task(rt, frame_now(fps), f"{name}/camera")
        self.out = self.camera_task.attach_output(channel)
        self.display_task = common.task(rt, INFINITY, f"{name}/display")
        self.inp = self.display_task.attach_input(composite)
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.frames = self.late = self.dropped = 0
        self.displayed = self.own_tile = self.mismatched = self.wrong = self.displayed_bytes = 0
        self.first_put: float | None = None
        self.first_own: float | None = None
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=10_000)
        self.displayed_ts: list[int] = []
        #: Composites displayed, and those showing this participant's own frame, in each second
        #: since the display started (what a benchmark takes its steady rate from).
        self.displayed_per_s: list[int] = []
        self.own_per_s: list[int] = []
        self.seen_participants = 0
        self.error: str | None = None

    def run_camera(self) -> None:
        try:
            with self.camera_task:
                t = frame_now(self.fps) + 1
                while not self.stop.is_set():
                    if self.stop.wait(max(0.0, t / self.fps - time.time())):
                        break
                    now = frame_now(self.fps)
                    if now > t:  # late: the frames between are never taken (a camera does not queue)
                        self.late += now - t
                        t = now
                    try:
                        self.out.put(t, self.camera.render(t), timeout=0)
                        self.frames += 1
                        if self.first_put is None:
                            self.first_put = time.monotonic()
                    except stampede.Full:
                        self.dropped += 1
                    self.camera_task.set_virtual_time(t + 1)
                    t += 1
        except stampede.StampedeError as e:  # the node went away: say so, end the participant
            self.error = f"camera: {e!r}"
            self.stop.set()

    def run_display(self) -> None:
        try:
            with self.display_task:
                while not self.stop.is_set():
                    try:
                        item = self.inp.get(NEWEST_UNSEEN, timeout=common.GET_TIMEOUT_S)
                    except stampede.NotAvailable:
                        continue
                    try:
                        self.show(item.ts, item.array())
                    except ValueError:  # not an image at all
                        self.wrong += 1
                    self.inp.consume_until(item.ts)
        except stampede.StampedeError as e:
            self.error = f"display: {e!r}"
            self.stop.set()

    def show(self, ts: int, composite: np.ndarray) -> None:
        """Counts a composite and checks this participant's tile in it (the exact join, the truth)."""
        self.displayed += 1
        second = int(time.monotonic() - self.started)
        while len(self.displayed_per_s) <= second:
            self.displayed_per_s.append(0)
            self.own_per_s.append(0)
        self.displayed_per_s[second] += 1
        self.displayed_bytes += composite.nbytes
        self.latencies_ms.append((time.time() - ts / self.fps) * 1e3)
        if self.record_ts:
            self.displayed_ts.append(ts)
        if (
            composite.ndim != 3
            or composite.shape[0] == 0
            or composite.shape[2] != 3
            or composite.dtype != np.uint8
        ):
            self.wrong += 1
            return
        seen = 0
        for x in range(0, composite.shape[1] - TILE_WIDTH + 1, TILE_WIDTH):
            tile = composite[:, x : x + TILE_WIDTH]
            stamped = read_stamp(tile)
            if stamped is None:
                continue
            seen += 1
            if stamped[0] != self.camera.id:
                continue
            if stamped[1] != ts:
                self.mismatched += 1
            elif not self.camera.shows(tile, ts):
                self.wrong += 1
            else:
                self.own_tile += 1
                self.own_per_s[second] += 1
                if self.first_own is None:
                    self.first_own = time.monotonic()
        self.seen_participants = seen

    def progress(self, elapsed: float) -> str:
        return (
            f"{self.name}: camera {self.frames / elapsed:.1f}/s (late {self.late}, dropped {self.dropped}) | "
            f"display {self.displayed / elapsed:.1f}/s, {self.seen_participants} participants, "
            f"own tile {self.own_tile}"
        )

    def run(self, seconds: float | None, progress: bool) -> dict:
        threads = [
            threading.Thread(target=self.run_camera, name=f"{self.name}/camera"),
            threading.Thread(target=self.run_display, name=f"{self.name}/display"),
        ]
        for t in threads:
            t.start()
        elapsed = until_stopped(self.stop, seconds, self.progress if progress else None)
        for t in threads:
            t.join(common.JOIN_S)
        rejoin = None
        if self.first_put is not None and self.first_own is not None:
            rejoin = round(self.first_own - self.first_put, 3)
        latencies = list(self.latencies_ms)
        result = {
            "role": "participant",
            "name": self.name,
            "seconds": round(elapsed, 3),
            "frame_bytes": self.camera.nbytes,
            "frames": self.frames,
            "camera_fps": round(self.frames / elapsed, 2),
            "camera_late": self.late,
            "dropped": self.dropped,
            "displayed": self.displayed,
            "display_fps": round(self.displayed / elapsed, 2),
            "display_MBps": round(self.displayed_bytes / elapsed / 1e6, 2),
            "own_tile": self.own_tile,
            "displayed_per_s": self.displayed_per_s,
            "own_per_s": self.own_per_s,
            "mismatched": self.mismatched,
            "wrong": self.wrong,
            "first_own_tile_s": rejoin,
            "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
            "error": self.error,
        }
        if self.record_ts:
            result["displayed_ts"] = self.displayed_ts
        return result


def wait_for(rt: stampede.Runtime, name: str, timeout: float) -> stampede.Channel:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = rt.lookup(name)
        except stampede.NotFound:
            if time.monotonic() >= deadline:
                raise SystemExit(f"no {name} after {timeout:.0f} s: start the mixer first") from None
            time.sleep(0.1)
            continue
        if not isinstance(found, stampede.Channel):
            raise SystemExit(f"{name} is a queue, not the mixer's channel")
        return found


# --- mixer ---------------------------------------------------------------------------------------


@dataclass
class Seat:
    """What the mixer knows of one participant."""

    name: str
    inp: stampede.ChannelInput
    present: bool = False
    height: int = 0
    #: Timestamps missed in a row.
    misses: int = 0
    joined: int = 0
    #: Timestamps it missed while in the composite (its tile was blank).
    skipped: int = 0
    #: Timestamps it was left out of the composite.
    absent: int = 0
    #: Times it came back into the composite.
    arrivals: int = 0
    #: Frames that were not a ``TILE_WIDTH``-wide RGB ``uint8`` image.
    bad: int = 0
    recent: collections.deque[int] = field(default_factory=collections.deque)

    def summary(self) -> dict:
        return {
            "joined": self.joined,
            "skipped": self.skipped,
            "absent": self.absent,
            "arrivals": self.arrivals,
            "bad": self.bad,
        }


class Directory:
    """Names of participants' channels on every node of the mesh: a client runtime lists only the
    nodes it has sessions on, so this keeps a session on each other node (opened once)."""

    def __init__(self, rt: stampede.Runtime, endpoint: str | None) -> None:
        self.rt, self.endpoint = rt, endpoint
        self.others: dict[str, stampede.Runtime] = {}

    def names(self) -> list[str]:
        names = set(self.rt.names(INPUTS))
        if self.endpoint is not None:
            for node in self.rt.nodes():
                if node != self.rt.node and node not in self.others:
                    with contextlib.suppress(stampede.StampedeError):
                        self.others[node] = stampede.connect(self.endpoint, timeout=5, node=node)
            for node, there in list(self.others.items()):
                try:
                    names.update(there.names(INPUTS))
                except stampede.StampedeError:
                    self.others.pop(node).close()
        return sorted(names)

    def close(self) -> None:
        for there in self.others.values():
            there.close()


class Mixer:
    """The mixer on ``rt`` (see the module's doc)."""

    def __init__(
        self, rt: stampede.Runtime, fps: float, budget: float, threads: bool, endpoint: str | None = None
    ) -> None:
        self.rt, self.fps, self.budget, self.threaded = rt, fps, budget, threads
        self.composite = rt.create_channel(
            COMPOSITE, capacity=COMPOSITE_CAPACITY, codec="npy", description="the conference's composite"
        )
        self.tiles = rt.create_channel(
            TILES, capacity=COMPOSITE_CAPACITY, codec="json", description="who is in which tile"
        )
        self.task = common.task(rt, frame_now(fps), "mixer")
        self.out = self.task.attach_output(self.composite)
        self.tiles_out = self.task.attach_output(self.tiles)
        self.directory = Directory(rt, endpoint)
        self.seats: dict[str, Seat] = {}
        self.absent_after = max(1, round(ABSENT_AFTER_S * fps))
        self.pool = ThreadPoolExecutor(PARTICIPANTS_MAX, thread_name_prefix="mixer/tile") if threads else None
        self.stop = threading.Event()
        self.ticks = self.composites = self.dropped = self.behind = self.overflow = 0
        self.started = time.monotonic()
        #: Frames skipped (over every participant) in each second since the mixer started.
        self.skipped_per_s: list[int] = []
        self.last_tiles = 0
        self.error: str | None = None

    def discover(self) -> None:
        for name in self.directory.names():
            participant = name[len(INPUTS) :]
            if participant in self.seats or "/" in participant:
                continue
            if len(self.seats) >= PARTICIPANTS_MAX:
                self.overflow += 1
                continue
            try:
                channel = self.rt.lookup(name)
                if isinstance(channel, stampede.Channel):
                    self.seats[participant] = Seat(participant, self.task.attach_input(channel))
            except stampede.StampedeError as e:  # gone again, or not ours to read: not a seat
                print(f"mixer: {name} not joined: {e!r}", file=sys.stderr)

    def fill(self, seat: Seat, ts: int, deadline: float, composite: np.ndarray, slot: int) -> None:
        """Gets ``seat``'s frame ``ts`` (waiting until ``deadline`` at most) into its tile."""
        try:
            frame = seat.inp.get(ts, timeout=max(0.0, deadline - time.time())).array()
        except MISSED:
            seat.misses += 1
            seat.skipped += 1
            return
        if not is_tile(frame):
            seat.bad += 1
            return
        rows = min(frame.shape[0], composite.shape[0])
        composite[:rows, slot * TILE_WIDTH : (slot + 1) * TILE_WIDTH] = frame[:rows]
        seat.height, seat.misses = frame.shape[0], 0
        self.joined(seat, ts)

    def joined(self, seat: Seat, ts: int) -> None:
        seat.joined += 1
        seat.recent.append(ts)
        while seat.recent[0] <= ts - self.fps:
            seat.recent.popleft()

    def poll(self, seat: Seat, ts: int) -> None:
        """An absent seat's frame ``ts - 1`` if it is there now (frame ``ts`` is not due yet): it is
        back in the next composite."""
        try:
            frame = seat.inp.get(ts - 1, timeout=0).array()
        except MISSED:
            seat.absent += 1
            return
        if is_tile(frame):
            seat.present, seat.height, seat.misses = True, frame.shape[0], 0
            seat.arrivals += 1
        else:
            seat.bad += 1

    def tick(self, ts: int) -> None:
        deadline = ts / self.fps + self.budget
        layout = [s for _, s in sorted(self.seats.items()) if s.present]
        composite = None
        skipped_before = sum(s.skipped for s in layout)
        if layout:
            height = max(s.height for s in layout)
            composite = np.full((height, len(layout) * TILE_WIDTH, 3), BLANK, dtype=np.uint8)
            if self.pool is not None:
                futures = [
                    self.pool.submit(self.fill, s, ts, deadline, composite, k) for k, s in enumerate(layout)
                ]
                for f in futures:
                    f.result()
            else:
                for k, s in enumerate(layout):
                    self.fill(s, ts, deadline, composite, k)
        second = int(time.monotonic() - self.started)
        self.skipped_per_s.extend([0] * (second + 1 - len(self.skipped_per_s)))
        self.skipped_per_s[second] += sum(s.skipped for s in layout) - skipped_before
        for seat in self.seats.values():
            if not seat.present:
                self.poll(seat, ts)
            elif seat.misses >= self.absent_after:
                seat.present = False
        if composite is not None:
            try:
                self.out.put(ts, composite, timeout=0)
                self.composites += 1
            except stampede.Full:
                self.dropped += 1
            boxes = [
                {
                    "x": k * TILE_WIDTH,
                    "y": 0,
                    "w": TILE_WIDTH,
                    "h": s.height,
                    "label": f"{s.name} {len(s.recent)} fps, {s.skipped} skipped",
                    "color": common.hex_colour(PALETTE[participant_id(s.name) % len(PALETTE)]),
                }
                for k, s in enumerate(layout)
            ]
            with contextlib.suppress(stampede.Full):
                self.tiles_out.put(ts, json.dumps({"boxes": boxes}), timeout=0, codec="json")
        self.last_tiles = len(layout)
        for seat in self.seats.values():  # an absent seat's frame ts is polled at the next tick
            seat.inp.consume_until(ts if seat.present else ts - 1)
        # ts, not ts + 1: an absent seat's frame ts stays there to be polled at the next tick.
        self.task.set_virtual_time(ts)
        self.ticks += 1

    def run_loop(self) -> None:
        try:
            with self.task:
                t = frame_now(self.fps)
                next_discovery = 0.0
                while not self.stop.is_set():
                    if self.stop.wait(max(0.0, t / self.fps - time.time())):
                        break
                    if time.time() > t / self.fps + self.budget:  # behind: mix what is current
                        now = frame_now(self.fps)
                        self.behind += now - t
                        t = now
                    if time.monotonic() >= next_discovery:
                        self.discover()
                        next_discovery = time.monotonic() + DISCOVER_EVERY_S
                    self.tick(t)
                    t += 1
        except stampede.StampedeError as e:
            self.error = repr(e)
            self.stop.set()

    def progress(self, elapsed: float) -> str:
        seats = ", ".join(
            f"{s.name} {len(s.recent)}/s skipped {s.skipped}" + ("" if s.present else " (absent)")
            for _, s in sorted(self.seats.items())
        )
        return f"mixer: {self.composites / elapsed:.1f} composites/s, {self.last_tiles} tiles | {seats}"

    def run(self, seconds: float | None, progress: bool) -> dict:
        thread = threading.Thread(target=self.run_loop, name="mixer")
        thread.start()
        elapsed = until_stopped(self.stop, seconds, self.progress if progress else None)
        thread.join(common.JOIN_S)
        if self.pool is not None:
            self.pool.shutdown()
        self.directory.close()
        return {
            "role": "mixer",
            "threads": self.threaded,
            "seconds": round(elapsed, 3),
            "ticks": self.ticks,
            "composites": self.composites,
            "composite_fps": round(self.composites / elapsed, 2),
            "dropped": self.dropped,
            "behind": self.behind,
            "overflow": self.overflow,
            "skipped_per_s": self.skipped_per_s,
            "participants": {name: s.summary() for name, s in sorted(self.seats.items())},
            "error": self.error,
        }


# --- a conference on this machine ----------------------------------------------------------------

NODE_CODE = """
import signal, sys, stampede
listen, name, join = sys.argv[1], sys.argv[2], sys.argv[3] or None
with stampede.Runtime(listen=listen, name=name, connect=join):
    print("listening on", listen, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
"""


class Conference:
    """A conference's processes on this machine, all on Unix sockets in a directory of its own: a
    mixer serving its node (one node), or three nodes sharing ts_min with the mixer a client of
    the first and participants spread over them in turn (``mesh``). Every process is ended on
    ``close``; :meth:`leave` ends one participant and returns its summary. With ``dashboard``,
    the mixer serves its dashboard on a free port, at :attr:`dashboard_url`."""

    def __init__(
        self,
        fps: float,
        size_kb: float,
        threads: bool,
        mesh: bool,
        budget: float = BUDGET_S,
        dashboard: bool = False,
    ) -> None:
        self.fps, self.size_kb, self.threads, self.mesh, self.budget = fps, size_kb, threads, mesh, budget
        self.dir = tempfile.TemporaryDirectory(prefix="stampede-conference-")
        self.nodes: list[subprocess.Popen[str]] = []
        self.endpoints = [
            f"unixsock-stream/{self.dir.name}/{n}.sock" for n in ("a", "b", "c")[: 3 if mesh else 1]
        ]
        self.participants: dict[str, subprocess.Popen[str]] = {}
        self.joined = 0
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.env = env
        if mesh:
            for k, endpoint in enumerate(self.endpoints):
                join = self.endpoints[k - 1] if k else ""
                node = subprocess.Popen(
                    [sys.executable, "-c", NODE_CODE, endpoint, "abc"[k], join],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                self.nodes.append(node)
                assert node.stdout is not None
                node.stdout.readline()
        mixer = [sys.executable, "-m", "stampede.apps.conference", "mixer", "--quiet"]
        mixer += [
            "--connect" if mesh else "--listen",
            self.endpoints[0],
            "--fps",
            str(fps),
            "--budget",
            str(budget),
        ]
        mixer += ["--threads"] if threads else []
        mixer += ["--dashboard", "0"] if dashboard else []
        self.mixer = subprocess.Popen(mixer, stdout=subprocess.PIPE, text=True, env=env)
        assert self.mixer.stdout is not None
        started = self.mixer.stdout.readline()
        if not started.startswith("mixing"):
            self.close()
            raise RuntimeError("the mixer did not start (see its error above)")
        self.dashboard_url = started.split("dashboard on ")[-1].strip() if dashboard else None

    def join(self, name: str, record_ts: bool = False) -> subprocess.Popen[str]:
        endpoint = self.endpoints[self.joined % len(self.endpoints)]
        self.joined += 1
        args = [sys.executable, "-m", "stampede.apps.conference", "participant", "--quiet", "--name", name]
        args += ["--connect", endpoint, "--fps", str(self.fps), "--size-kb", str(self.size_kb)]
        args += ["--record-ts"] if record_ts else []
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=self.env)
        self.participants[name] = proc
        return proc

    def kill(self, name: str) -> None:
        proc = self.participants.pop(name)
        proc.kill()
        proc.wait()

    def leave(self, name: str) -> dict:
        return finish(self.participants.pop(name))

    def leave_all(self) -> list[dict]:
        """Every participant's summary, all told to end at once (so none sees the others leave)."""
        for proc in self.participants.values():
            proc.terminate()
        results = [finish(proc, told=True) for proc in self.participants.values()]
        self.participants.clear()
        return results

    def mixer_summary(self) -> dict:
        return finish(self.mixer)

    def close(self) -> None:
        for proc in [*self.participants.values(), self.mixer, *self.nodes]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.dir.cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


#: Longest a conference process may take to end once told to.
END_S = 30.0


def finish(proc: subprocess.Popen[str], told: bool = False) -> dict:
    """Ends ``proc`` (SIGTERM, unless it was ``told`` already: a second one, once its handler is
    gone, would kill it before its summary) and returns the JSON line it ends with."""
    if not told:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=END_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(
            f"a conference process ended ({proc.returncode}) without its summary: {out[-500:]}"
        )
    result: dict = json.loads(lines[-1])
    return result


# --- command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m stampede.apps.conference", description=__doc__.splitlines()[0]
    )
    roles = parser.add_subparsers(dest="role", required=True)

    def common_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--fps", type=float, default=30.0, help="frame rate of the conference (default 30)")
        p.add_argument("--seconds", type=float, default=None, help="bound the run (default: until Ctrl-C)")
        p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    mixer = roles.add_parser("mixer", help="the mixer (serving the node, or a client of one)")
    where = mixer.add_mutually_exclusive_group(required=True)
    where.add_argument("--listen", metavar="ENDPOINT", help="serve the node here (e.g. tcp/127.0.0.1:7447)")
    where.add_argument("--connect", metavar="ENDPOINT", help="be a client of the node there")
    mixer.add_argument("--threads", action="store_true", help="one thread per participant")
    mixer.add_argument("--budget", type=float, default=BUDGET_S, help="seconds to wait past a frame's time")
    mixer.add_argument("--dashboard", type=int, metavar="PORT", help="serve the dashboard (0: any free port)")
    common_options(mixer)

    part = roles.add_parser("participant", help="a camera and a display")
    part.add_argument("--connect", metavar="ENDPOINT", required=True, help="a node of the conference")
    part.add_argument("--name", required=True, help="the participant's name (one name segment)")
    part.add_argument(
        "--size-kb", type=float, default=74.0, help="frame size in KB of 1000 bytes (default 74)"
    )
    part.add_argument(
        "--record-ts", action="store_true", help="list every displayed timestamp in the summary"
    )
    common_options(part)

    run = roles.add_parser("run", help="a mixer and participants on this machine, one command")
    run.add_argument("--participants", type=int, default=3, help="how many (default 3)")
    run.add_argument("--size-kb", type=float, default=74.0, help="frame size in KB (default 74)")
    run.add_argument("--threads", action="store_true", help="the multi-threaded mixer")
    run.add_argument("--mesh", action="store_true", help="three nodes, participants spread over them")
    common_options(run)

    args = parser.parse_args(argv)
    if args.fps <= 0 or args.fps > 1000:
        parser.error("--fps must be in (0, 1000]")
    if args.role == "mixer":
        result = run_mixer(args)
    elif args.role == "participant":
        if args.size_kb <= 0 or args.size_kb > 10_000:
            parser.error("--size-kb must be in (0, 10000]")
        if not args.name or "/" in args.name:
            parser.error("--name must be one name segment: not empty, no '/'")
        with stampede.connect(args.connect, timeout=10) as rt:
            p = Participant(rt, args.name, int(args.size_kb * 1000), args.fps, args.record_ts)
            print(f"{args.name} joined: {p.camera.nbytes} bytes a frame", file=sys.stderr, flush=True)
            result = p.run(args.seconds, not args.quiet)
    else:
        if not 1 <= args.participants <= PARTICIPANTS_MAX:
            parser.error(f"--participants must be in 1..{PARTICIPANTS_MAX}")
        result = run_conference(args)
    print(json.dumps(result), flush=True)
    return result


def run_mixer(args: argparse.Namespace) -> dict:
    if args.listen is not None:
        rt = stampede.Runtime(listen=args.listen, name="conference")
    else:
        rt = stampede.connect(args.connect, timeout=10)
    with rt:
        mixer = Mixer(rt, args.fps, args.budget, args.threads, args.connect)
        dash = None
        if args.dashboard is not None:
            dash = stampede.Dashboard(rt, port=args.dashboard, image=COMPOSITE, overlays=[TILES])
        where = args.listen or args.connect
        print(f"mixing on {where}" + (f"; dashboard on {dash.url}" if dash else ""), flush=True)
        try:
            result = mixer.run(args.seconds, not args.quiet)
        finally:
            if dash is not None:
                dash.close()
    return result


def run_conference(args: argparse.Namespace) -> dict:
    """``run``: a mixer and ``args.participants`` participants, until ``--seconds`` or Ctrl-C."""
    names = [f"p{k}" for k in range(args.participants)]
    with Conference(args.fps, args.size_kb, args.threads, args.mesh) as c:
        print(f"conference on {c.endpoints[0]}", flush=True)
        for name in names:
            c.join(name)
        stop = threading.Event()
        until_stopped(
            stop, args.seconds, None if args.quiet else lambda _: f"{len(c.participants)} participants"
        )
        participants = c.leave_all()
        mixer = c.mixer_summary()
    for p in participants:
        print(
            f"{p['name']}: camera {p['camera_fps']} fps, display {p['display_fps']} fps "
            f"({p['display_MBps']} MB/s), own tile {p['own_tile']}, mismatched {p['mismatched']}, "
            f"latency p50 {p['latency_ms']['p50']} ms"
        )
    print(f"mixer: {mixer['composite_fps']} composites/s, behind {mixer['behind']}")
    for name, seat in mixer["participants"].items():
        print(f"  {name}: joined {seat['joined']}, skipped {seat['skipped']}, absent {seat['absent']}")
    return {"role": "run", "mixer": mixer, "participants": participants}


def cli() -> None:
    """``python -m stampede.apps.conference``: Ctrl-C exits 130; a node not there or a refused
    endpoint is one line on stderr and exit 1, not a traceback."""
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        sys.exit(130)
    except stampede.StampedeError as e:
        sys.exit(f"conference: {e}")


if __name__ == "__main__":
    cli()
