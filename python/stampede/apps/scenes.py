"""Synthetic cameras with known ground truth (SPEC §14): deterministic scenes of moving people.

A :class:`Scene` is a pure function of ``(seed, ts)``: :meth:`Scene.render` draws frame ``ts`` and
:meth:`Scene.truth` lists the figures in it, so any frame can be re-rendered at any time, by any
task, and a tracker's output is *checked* against the truth instead of eyeballed. Nothing is
downloaded; only NumPy is used.

What a scene guarantees:

- **People** ("figures") enter the field of view from the left or right edge, walk across it with
  a small vertical bob and leave at the other edge. Each has an id (0, 1, 2, ... in order of
  entry) and a saturated colour from :data:`PALETTE`; figures present at the same time have
  distinct colours, and the palette's values sit in the middle of 32-wide bins so that a colour
  histogram with 8 bins per channel sees each figure in one bin despite the noise.
- Figures walk in **lanes** (horizontal bands) and a lane is free again before the next figure
  enters it, so figures never overlap (trackers are measured, not occlusion handling).
- The **background** is a textured, low-saturation grey (never in a figure's colour bins) with
  per-frame sensor noise of at most ``NOISE_MAX`` per channel, drawn from a seeded bank.
- :meth:`Scene.truth` gives, per figure present, the *visible* bounding box (clipped to the image)
  and its centre ``((x0 + x1) / 2, (y0 + y1) / 2)`` over the first and last visible pixel — the same
  definition a tracker gets from the extent of the figure's pixels.
- Times are in frames: ``ts / fps`` seconds into the scene. Any resolution and rate work; sizes
  and speeds scale with the image.

:class:`Camera` is the digitizer's half: a loop paced by ``stampede.Pacer`` that renders and puts
frame ``vt`` at timestamp ``vt`` and advances the task's virtual time past it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import stampede

#: Figure colours: saturated, far from grey, each channel at the centre of a 32-wide bin.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (240, 48, 48),
    (48, 208, 80),
    (48, 80, 240),
    (240, 208, 48),
    (208, 48, 208),
    (48, 208, 208),
    (240, 144, 16),
    (144, 80, 240),
)
#: Largest per-channel sensor noise, in grey levels (< 16, so a figure's colour stays in its bin).
NOISE_MAX = 6
#: Noise frames in the seeded bank; frame ``ts`` uses one chosen by a hash of (seed, ts).
NOISE_BANK = 8


@dataclass(frozen=True)
class Figure:
    """One person of the ground truth at one timestamp. Boxes are ``(x, y, w, h)`` in pixels."""

    id: int
    colour: tuple[int, int, int]
    centre: tuple[float, float]
    bbox: tuple[int, int, int, int]
    #: The whole figure's box, partly outside the image while entering or leaving.
    full_bbox: tuple[int, int, int, int]
    #: Visible pixels of the figure.
    area: int

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "colour": list(self.colour),
            "centre": list(self.centre),
            "bbox": list(self.bbox),
        }


@dataclass(frozen=True)
class _Walk:
    """The schedule of figure ``id``: when it enters, its lane, direction, speed and size."""

    id: int
    enter_s: float
    leave_s: float
    lane_y: float
    direction: int
    speed_px_s: float
    width: int
    height: int
    bob_px: float
    bob_hz: float
    phase: float


class Scene:
    """A deterministic scene: ``render(ts)`` and ``truth(ts)`` depend only on the constructor's
    arguments and ``ts``.

    ``period_s`` is the time between two entries, ``crossing_s`` the (longest) time a figure takes
    to cross the image, ``first_entry_s`` when the first one enters (frame 0 is always empty, so a
    background model can start from it); ``lanes * period_s`` must exceed ``crossing_s`` so that a
    lane is free before its next figure enters.
    """

    def __init__(
        self,
        seed: int = 0,
        height: int = 240,
        width: int = 320,
        fps: float = 30.0,
        *,
        lanes: int = 3,
        period_s: float = 1.2,
        crossing_s: float = 3.2,
        first_entry_s: float = 0.4,
        speed: float = 1.0,
    ) -> None:
        if height < 32 or width < 32 or fps <= 0:
            raise ValueError(f"scene of {width}x{height} at {fps} fps: need at least 32x32 and fps > 0")
        if lanes * period_s <= crossing_s / min(speed, 1.0) + 0.2:
            raise ValueError("lanes * period_s must exceed the crossing time: figures would overlap")
        self.seed, self.height, self.width, self.fps = seed, height, width, fps
        self.lanes, self.period_s, self.crossing_s = lanes, period_s, crossing_s
        self.first_entry_s, self.speed = first_entry_s, speed
        self._background = self._texture()
        rng = np.random.default_rng([seed, 0x5EED])
        noise = rng.integers(-NOISE_MAX, NOISE_MAX + 1, size=(NOISE_BANK, height, width, 3), dtype=np.int16)
        self._noise = noise
        self._frames = np.clip(self._background[None] + noise, 0, 255).astype(np.uint8)
        self._walks: dict[int, _Walk] = {}
        self._lock = threading.Lock()  # render() may run on several tasks' threads at once

    def _texture(self) -> np.ndarray:
        """A smooth grey texture: a coarse random grid upsampled, plus a gradient and a faint tint."""
        rng = np.random.default_rng([self.seed, 0x7E47])
        cell = max(4, min(self.height, self.width) // 12)
        gh, gw = -(-self.height // cell) + 1, -(-self.width // cell) + 1
        grid = rng.uniform(80, 160, size=(gh, gw))
        ys = np.linspace(0, gh - 1.001, self.height)
        xs = np.linspace(0, gw - 1.001, self.width)
        y0, x0 = ys.astype(int), xs.astype(int)
        fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
        smooth = (
            grid[y0][:, x0] * (1 - fy) * (1 - fx)
            + grid[y0 + 1][:, x0] * fy * (1 - fx)
            + grid[y0][:, x0 + 1] * (1 - fy) * fx
            + grid[y0 + 1][:, x0 + 1] * fy * fx
        )
        smooth += np.linspace(-12, 12, self.width)[None, :]
        tint = rng.uniform(-5, 5, size=3)
        return np.clip(smooth[:, :, None] + tint[None, None, :], 40, 200).astype(np.int16)

    def walk(self, k: int) -> _Walk:
        """The schedule of figure ``k`` (cached; a pure function of (seed, k))."""
        with self._lock:
            w = self._walks.get(k)
        if w is not None:
            return w
        rng = np.random.default_rng([self.seed, 0xF16, k])
        height = max(6, round(self.height * 0.18 * rng.uniform(0.9, 1.1)))
        width = max(4, round(height * 0.45))
        crossing = self.crossing_s * rng.uniform(0.82, 1.0) / self.speed
        speed = (self.width + width) / crossing
        enter = self.first_entry_s + k * self.period_s + rng.uniform(0.0, 0.15)
        lane = k % self.lanes
        w = _Walk(
            id=k,
            enter_s=enter,
            leave_s=enter + crossing,
            lane_y=self.height * (lane + 1) / (self.lanes + 1),
            direction=1 if rng.random() < 0.5 else -1,
            speed_px_s=speed,
            width=width,
            height=height,
            bob_px=self.height * 0.012,
            bob_hz=rng.uniform(0.8, 1.5),
            phase=rng.uniform(0, 2 * math.pi),
        )
        with self._lock:
            if len(self._walks) > 4096:  # a bound on the cache, whatever the run length
                self._walks.clear()
            self._walks[k] = w
        return w

    def _present(self, ts: int) -> list[_Walk]:
        """The walks whose time span contains ``ts``."""
        t = ts / self.fps
        longest = self.crossing_s / self.speed
        lo = max(0, math.floor((t - longest - self.first_entry_s) / self.period_s) - 1)
        hi = math.floor((t - self.first_entry_s) / self.period_s)
        return [w for w in (self.walk(k) for k in range(lo, hi + 1)) if w.enter_s <= t < w.leave_s]

    def _box(self, w: _Walk, ts: int) -> tuple[int, int, int, int]:
        """The whole figure's box (x, y, w, h) at ``ts``, in integer pixels."""
        dt = ts / self.fps - w.enter_s
        travelled = w.speed_px_s * dt
        x = -w.width + travelled if w.direction > 0 else self.width - travelled
        y = w.lane_y - w.height / 2 + w.bob_px * math.sin(2 * math.pi * w.bob_hz * dt + w.phase)
        return round(x), round(y), w.width, w.height

    def _mask(self, w: _Walk) -> np.ndarray:
        """The figure's silhouette in its own box: a round head over a torso."""
        r = w.width * 0.35
        yy, xx = np.mgrid[0 : w.height, 0 : w.width]
        cx = (w.width - 1) / 2
        head = (xx - cx) ** 2 + (yy - r) ** 2 <= r * r
        torso = yy >= 2 * r
        return head | torso

    def _layout(
        self, ts: int
    ) -> list[tuple[_Walk, tuple[int, int, int, int], np.ndarray, tuple[slice, slice]]]:  # noqa: E501
        """Per figure present: its walk, full box, visible silhouette and the image region it covers."""
        out = []
        for w in self._present(ts):
            x, y, bw, bh = self._box(w, ts)
            x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + bw, self.width), min(y + bh, self.height)
            if x0 >= x1 or y0 >= y1:
                continue
            mask = self._mask(w)[y0 - y : y1 - y, x0 - x : x1 - x]
            if mask.any():
                out.append((w, (x, y, bw, bh), mask, (slice(y0, y1), slice(x0, x1))))
        return out

    def render(self, ts: int) -> np.ndarray:
        """Frame ``ts`` as an (H, W, 3) uint8 RGB array (a new array the caller owns)."""
        k = (ts * 2654435761 + self.seed * 97) % NOISE_BANK
        frame = self._frames[k].copy()
        for w, _, mask, region in self._layout(ts):
            colour = np.array(PALETTE[w.id % len(PALETTE)], dtype=np.int16)
            painted = np.clip(colour + self._noise[k][region], 0, 255).astype(np.uint8)
            frame[region][mask] = painted[mask]
        return frame

    def truth(self, ts: int) -> list[Figure]:
        """The figures visible in frame ``ts``, by id."""
        figures = []
        for w, full, mask, (rows, cols) in self._layout(ts):
            ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
            x0, x1 = cols.start + int(xs[0]), cols.start + int(xs[-1])
            y0, y1 = rows.start + int(ys[0]), rows.start + int(ys[-1])
            figures.append(
                Figure(
                    id=w.id,
                    colour=PALETTE[w.id % len(PALETTE)],
                    centre=((x0 + x1) / 2, (y0 + y1) / 2),
                    bbox=(x0, y0, x1 - x0 + 1, y1 - y0 + 1),
                    full_bbox=full,
                    area=int(mask.sum()),
                )
            )
        return figures

    def entered(self, ts_end: int) -> list[int]:
        """Ids of the figures that entered at or before frame ``ts_end``."""
        t = ts_end / self.fps
        ids, k = [], 0
        while self.walk(k).enter_s <= t:
            ids.append(k)
            k += 1
        return ids


class Camera:
    """A live synthetic camera: renders ``scene`` frames and puts them, paced at ``scene.fps``.

    Like a real camera it does not fall behind: a frame it is late for by more than the pacer's
    tolerance is skipped (the pacer jumps to the current virtual time), and counted in ``late``.
    """

    def __init__(self, scene: Scene, tolerance_s: float = 0.010) -> None:
        self.scene = scene
        self.tolerance_s = tolerance_s
        #: Frames put, and frames skipped because the camera was late for them.
        self.frames = 0
        self.late = 0
        self.last_ts = -1

    def run(
        self,
        task: stampede.Task,
        out: stampede.ChannelOutput,
        stop: threading.Event,
        max_frames: int | None = None,
        on_put: Callable[[], object] | None = None,
    ) -> None:
        """Puts frames 0, 1, ... at their pace until ``stop`` is set or ``max_frames`` timestamps
        have passed; each put is followed by ``set_virtual_time(ts + 1)``, which settles ``ts``
        (nothing below ts + 1 will be put again) and lets GC reclaim what readers consumed."""
        pacer_box: list[stampede.Pacer] = []

        def on_late(vt: int, lateness_s: float) -> int:
            now = pacer_box[0].vt_now()
            self.late += max(0, now - vt)
            return max(vt, now)

        pacer = stampede.Pacer(tick=1 / self.scene.fps, tolerance=self.tolerance_s, on_late=on_late)
        pacer_box.append(pacer)
        vt = 0
        while not stop.is_set() and (max_frames is None or vt < max_frames):
            vt = pacer.sync(vt)
            if max_frames is not None and vt >= max_frames:
                break
            out.put(vt, self.scene.render(vt))
            task.set_virtual_time(vt + 1)
            self.frames += 1
            self.last_ts = vt
            if on_put is not None:
                on_put()
            vt += 1
