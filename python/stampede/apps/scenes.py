"""Synthetic cameras with known ground truth (docs/APPLICATIONS.md, "The scenes"): deterministic
scenes of moving people.

A :class:`Scene` is a pure function of ``(seed, ts)``: :meth:`Scene.render` draws frame ``ts`` and
:meth:`Scene.truth` lists the figures in it, so any frame can be re-rendered at any time, by any
task, in any order, and a tracker's output is *checked* against the truth instead of eyeballed.
Nothing is downloaded; only NumPy is used.

What a scene guarantees:

- **People** ("figures") enter the field of view from the left or right edge, walk across it with
  a small vertical bob and leave at the other edge. Each has an id (0, 1, 2, ... in order of
  entry) and a saturated colour from :data:`PALETTE`; figures present at the same time have
  distinct colours. Positions are continuous (sub-pixel).
- Figures walk in **lanes** (horizontal bands; a lane is free again before the next figure enters
  it) but each **drifts** off its lane on an arc (up to ``DRIFT`` of the lane spacing at
  mid-walk), and a "crosser" (chance ``CROSSERS``) walks against the previous figure, drifting
  towards its lane by up to ``CROSS_DRIFT``: their paths cross and, now and then, one partly
  occludes the other for a few frames. The one whose centre is lower in the image (nearer the
  camera) is in front; the drifts are bounded so that the one behind is never fully hidden.
- **Soft edges**: a figure is an anti-aliased silhouette (a round head over a torso) whose alpha
  falls from 1 to 0 over ``EDGE_PX`` pixels across its outline, blended over what is behind it.
- The **background** is a textured, low-saturation grey. **Illumination flicker**: the whole frame
  (background and figures) is scaled by a gain ``1 + FLICKER * sin(...) + N(0, FLICKER_JITTER)``.
  **Sensor noise**: Gaussian, ``NOISE_SIGMA`` grey levels per channel and pixel, fresh every frame.
  Both are drawn from a ``numpy.random.Generator`` seeded with ``(seed, ts)``, so a frame is the
  same whenever and however often it is rendered.
- :meth:`Scene.truth` gives, per figure present, from the same geometry: the **silhouette** (pixels
  of alpha >= 0.5) clipped to the image, its box and its centre ``((x0 + x1) / 2, (y0 + y1) / 2)``
  over the first and last silhouette pixel — the *true full-figure centre*, whatever occludes it —
  and, separately, what is actually visible once the figures in front are drawn (``visible_bbox``,
  ``visible_area``), plus who is in front of whom (``occluded_by``, ``in_front_of``).
- Times are in frames: ``ts / fps`` seconds into the scene. Any resolution and rate work; sizes
  and speeds scale with the image.

:class:`Camera` is the digitizer's half: a loop paced by ``stampede.Pacer`` that renders and puts
frame ``vt`` at timestamp ``vt`` and advances the task's virtual time past it.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import stampede

#: Figure colours: saturated, far from grey and from each other in chromaticity (r, g) / (r+g+b).
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
#: Standard deviation of the per-pixel, per-channel Gaussian sensor noise, in grey levels.
NOISE_SIGMA = 8.0
#: Amplitude of the slow illumination flicker (relative gain) and of its per-frame jitter.
FLICKER = 0.04
FLICKER_JITTER = 0.01
FLICKER_HZ = 0.7
#: Width of a figure's soft edge, in pixels (alpha goes from 1 to 0 across it).
EDGE_PX = 1.5
#: Largest drift off a figure's lane at mid-walk, as a fraction of the lane spacing (and smallest).
DRIFT = 0.38
DRIFT_MIN = 0.1
#: Chance that a figure walks against the previous one (of a neighbouring lane) and towards it.
CROSSERS = 0.6
#: A crosser's drift towards the previous figure's lane (fraction of the lane spacing, at most).
CROSS_DRIFT = 0.45


@dataclass(frozen=True)
class Figure:
    """One person of the ground truth at one timestamp. Boxes are ``(x, y, w, h)`` in pixels.

    ``centre``, ``bbox`` and ``area`` are the figure's silhouette clipped to the image, *ignoring
    occlusion* (the truth a tracker is measured against); ``visible_*`` are what remains once the
    figures in front of it are drawn."""

    id: int
    colour: tuple[int, int, int]
    centre: tuple[float, float]
    bbox: tuple[int, int, int, int]
    #: The whole figure's box, partly outside the image while entering or leaving.
    full_bbox: tuple[int, int, int, int]
    #: Silhouette pixels of the figure inside the image.
    area: int
    #: Silhouette pixels not hidden by a figure in front (== area unless occluded).
    visible_area: int = 0
    visible_bbox: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: Ids of the figures in front of this one whose silhouettes overlap it / behind it.
    occluded_by: tuple[int, ...] = ()
    in_front_of: tuple[int, ...] = ()

    @property
    def occluded(self) -> bool:
        return self.visible_area < self.area

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "colour": list(self.colour),
            "centre": list(self.centre),
            "bbox": list(self.bbox),
            "visible_bbox": list(self.visible_bbox),
            "visible_area": self.visible_area,
            "area": self.area,
            "occluded_by": list(self.occluded_by),
            "in_front_of": list(self.in_front_of),
        }


@dataclass(frozen=True)
class _Walk:
    """The schedule of figure ``id``: when it enters, its lane, direction, speed, size and drift."""

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
    drift_px: float


@dataclass
class _Placed:
    """A figure placed in one frame: its walk, alpha matte over ``region`` and silhouette."""

    walk: _Walk
    full: tuple[int, int, int, int]
    cy: float
    alpha: np.ndarray
    region: tuple[slice, slice]
    silhouette: np.ndarray


class Scene:
    """A deterministic scene: ``render(ts)`` and ``truth(ts)`` depend only on the constructor's
    arguments and ``ts``.

    ``period_s`` is the time between two entries, ``crossing_s`` the (longest) time a figure takes
    to cross the image, ``first_entry_s`` when the first one enters (frame 0 is always empty, so a
    background model can start from it); ``lanes * period_s`` must exceed ``crossing_s`` so that a
    lane is free before its next figure enters. ``noise_sigma`` and ``flicker`` scale the sensor
    noise and the illumination flicker (1.0: the defaults above; 0: none, for tests).
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
        noise_sigma: float = NOISE_SIGMA,
        flicker: float = 1.0,
    ) -> None:
        if height < 32 or width < 32 or fps <= 0:
            raise ValueError(f"scene of {width}x{height} at {fps} fps: need at least 32x32 and fps > 0")
        if lanes * period_s <= crossing_s / min(speed, 1.0) + 0.2:
            raise ValueError("lanes * period_s must exceed the crossing time: a lane's figures would overlap")
        self.seed, self.height, self.width, self.fps = seed, height, width, fps
        self.lanes, self.period_s, self.crossing_s = lanes, period_s, crossing_s
        self.first_entry_s, self.speed = first_entry_s, speed
        self.noise_sigma, self.flicker = float(noise_sigma), float(flicker)
        # +0.5: the final conversion to uint8 truncates, so this rounds.
        self._background = self._texture().astype(np.float32) + np.float32(0.5)
        self._flicker_phase = float(np.random.default_rng([seed, 0xF11C]).uniform(0, 2 * math.pi))
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
        spacing = self.height / (self.lanes + 1)
        bob_hz, phase = rng.uniform(0.8, 1.5), rng.uniform(0, 2 * math.pi)
        drift = spacing * rng.uniform(DRIFT_MIN, DRIFT) * (1 if rng.random() < 0.5 else -1)
        direction = self._direction(k)
        previous_lane = (k - 1) % self.lanes
        if k > 0 and abs(previous_lane - lane) == 1 and rng.random() < CROSSERS:
            # A crosser: walks against the previous figure, drifting towards its lane, so that
            # their paths cross near the middle of the image (one may then occlude the other).
            direction = -self._direction(k - 1)
            drift = spacing * rng.uniform(0.8, 1.0) * CROSS_DRIFT * (1 if previous_lane > lane else -1)
        w = _Walk(
            id=k,
            enter_s=enter,
            leave_s=enter + crossing,
            lane_y=spacing * (lane + 1),
            direction=direction,
            speed_px_s=speed,
            width=width,
            height=height,
            bob_px=self.height * 0.012,
            bob_hz=bob_hz,
            phase=phase,
            drift_px=drift,
        )
        with self._lock:
            if len(self._walks) > 4096:  # a bound on the cache, whatever the run length
                self._walks.clear()
            self._walks[k] = w
        return w

    def _direction(self, k: int) -> int:
        """Figure ``k``'s own choice of direction (+1: left to right), before crossers are made."""
        return 1 if np.random.default_rng([self.seed, 0xD1, k]).random() < 0.5 else -1

    def _present(self, ts: int) -> list[_Walk]:
        """The walks whose time span contains ``ts``."""
        t = ts / self.fps
        longest = self.crossing_s / self.speed
        lo = max(0, math.floor((t - longest - self.first_entry_s) / self.period_s) - 1)
        hi = math.floor((t - self.first_entry_s) / self.period_s)
        return [w for w in (self.walk(k) for k in range(lo, hi + 1)) if w.enter_s <= t < w.leave_s]

    def _position(self, w: _Walk, ts: int) -> tuple[float, float]:
        """The whole figure's top-left corner at ``ts``, in (sub-)pixels."""
        dt = ts / self.fps - w.enter_s
        travelled = w.speed_px_s * dt
        progress = travelled / (self.width + w.width)
        x = -w.width + travelled if w.direction > 0 else self.width - travelled
        y = (
            w.lane_y
            - w.height / 2
            + w.drift_px * math.sin(math.pi * progress)
            + w.bob_px * math.sin(2 * math.pi * w.bob_hz * dt + w.phase)
        )
        return x, y

    def _place(self, w: _Walk, ts: int) -> _Placed | None:
        """The figure's alpha matte at ``ts`` over the image region it covers (None if outside).

        Pixel (i, j) has its centre at (x=j, y=i); in the figure's own coordinates (u, v) the torso
        is the rectangle u in [-0.5, w - 0.5], v in [2r - 0.5, h - 0.5] and the head the disc of
        radius r centred at ((w - 1) / 2, r - 0.5). Alpha ramps linearly over EDGE_PX across the
        outline of their union (signed distance, positive inside); the silhouette is alpha >= 0.5."""
        fx, fy = self._position(w, ts)
        x0, x1 = max(0, math.floor(fx) - 2), min(self.width, math.ceil(fx + w.width) + 2)
        y0, y1 = max(0, math.floor(fy) - 2), min(self.height, math.ceil(fy + w.height) + 2)
        if x0 >= x1 or y0 >= y1:
            return None
        u = (np.arange(x0, x1, dtype=np.float32) - np.float32(fx))[None, :]
        v = (np.arange(y0, y1, dtype=np.float32) - np.float32(fy))[:, None]
        r = w.width * 0.35
        cx = (w.width - 1) / 2
        torso = np.minimum(
            np.minimum(u + 0.5, w.width - 0.5 - u), np.minimum(v - (2 * r - 0.5), w.height - 0.5 - v)
        )
        head = r - np.sqrt((u - cx) ** 2 + (v - (r - 0.5)) ** 2)
        sd = np.maximum(torso, head)
        alpha = np.clip(sd / EDGE_PX + 0.5, 0.0, 1.0).astype(np.float32)
        silhouette = sd >= 0
        if not silhouette.any():
            return None
        full = (round(fx), round(fy), w.width, w.height)
        return _Placed(w, full, fy + w.height / 2, alpha, (slice(y0, y1), slice(x0, x1)), silhouette)

    def _layout(self, ts: int) -> list[_Placed]:
        """The figures of frame ``ts``, back to front: the lower a figure's centre, the nearer."""
        placed = [p for p in (self._place(w, ts) for w in self._present(ts)) if p is not None]
        placed.sort(key=lambda p: (p.cy, p.walk.id))
        return placed

    def gain(self, ts: int, rng: np.random.Generator | None = None) -> float:
        """The illumination gain of frame ``ts`` (its flicker)."""
        if rng is None:
            rng = self._rng(ts)
        jitter = rng.normal(0.0, FLICKER_JITTER)
        slow = math.sin(2 * math.pi * FLICKER_HZ * ts / self.fps + self._flicker_phase)
        return 1.0 + self.flicker * (FLICKER * slow + jitter)

    def _rng(self, ts: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, 0x4015E, ts])

    def render(self, ts: int) -> np.ndarray:
        """Frame ``ts`` as an (H, W, 3) uint8 RGB array (a new array the caller owns)."""
        rng = self._rng(ts)
        gain = np.float32(self.gain(ts, rng))
        frame = self._background * gain
        for p in self._layout(ts):
            colour = np.array(PALETTE[p.walk.id % len(PALETTE)], dtype=np.float32) * gain
            a = p.alpha[:, :, None]
            region = frame[p.region]
            region += a * (colour - region)
        if self.noise_sigma > 0:
            noise = rng.standard_normal(frame.shape, dtype=np.float32)
            noise *= np.float32(self.noise_sigma)
            frame += noise
        np.clip(frame, 0, 255, out=frame)
        return frame.astype(np.uint8)

    def truth(self, ts: int) -> list[Figure]:
        """The figures in frame ``ts``, by id, each with its full silhouette's box and centre and
        what of it is visible."""
        placed = self._layout(ts)
        figures = []
        for i, p in enumerate(placed):
            rows, cols = p.region
            sil = p.silhouette
            visible = sil.copy()
            occluders, behind = [], []
            for j, q in enumerate(placed):
                if j == i:
                    continue
                # The overlap of the two regions, in each one's own coordinates.
                oy0, oy1 = max(rows.start, q.region[0].start), min(rows.stop, q.region[0].stop)
                ox0, ox1 = max(cols.start, q.region[1].start), min(cols.stop, q.region[1].stop)
                if oy0 >= oy1 or ox0 >= ox1:
                    continue
                mine = (slice(oy0 - rows.start, oy1 - rows.start), slice(ox0 - cols.start, ox1 - cols.start))
                theirs = q.silhouette[
                    oy0 - q.region[0].start : oy1 - q.region[0].start,
                    ox0 - q.region[1].start : ox1 - q.region[1].start,
                ]
                overlap = sil[mine] & theirs
                if not overlap.any():
                    continue
                if j > i:  # drawn later: in front
                    occluders.append(q.walk.id)
                    visible[mine] &= ~theirs
                else:
                    behind.append(q.walk.id)
            figures.append(
                Figure(
                    id=p.walk.id,
                    colour=PALETTE[p.walk.id % len(PALETTE)],
                    centre=_centre(sil, rows.start, cols.start),
                    bbox=_bbox(sil, rows.start, cols.start),
                    full_bbox=p.full,
                    area=int(sil.sum()),
                    visible_area=int(visible.sum()),
                    visible_bbox=_bbox(visible, rows.start, cols.start),
                    occluded_by=tuple(sorted(occluders)),
                    in_front_of=tuple(sorted(behind)),
                )
            )
        figures.sort(key=lambda f: f.id)
        return figures

    def entered(self, ts_end: int) -> list[int]:
        """Ids of the figures that entered at or before frame ``ts_end``."""
        t = ts_end / self.fps
        ids, k = [], 0
        while self.walk(k).enter_s <= t:
            ids.append(k)
            k += 1
        return ids

    def must_be_found(self, ts_end: int) -> list[int]:
        """Ids of the figures in view for at least a second before frame ``ts_end``: those a
        tracker running until then must have found."""
        return [k for k in self.entered(ts_end) if (self.walk(k).enter_s + 1.0) * self.fps <= ts_end]


def _bbox(mask: np.ndarray, top: int, left: int) -> tuple[int, int, int, int]:
    """The box (x, y, w, h) of ``mask``'s pixels, offset by (left, top); zeros if empty."""
    ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if len(ys) == 0:
        return (0, 0, 0, 0)
    return (left + int(xs[0]), top + int(ys[0]), int(xs[-1] - xs[0]) + 1, int(ys[-1] - ys[0]) + 1)


def _centre(mask: np.ndarray, top: int, left: int) -> tuple[float, float]:
    x, y, w, h = _bbox(mask, top, left)
    return (x + (w - 1) / 2, y + (h - 1) / 2)


#: Ranges of skipped timestamps a ``Camera`` remembers.
SKIPS_REMEMBERED_MAX = 4096


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
        #: The timestamps skipped, as ``(first, end)`` ranges (at most ``SKIPS_REMEMBERED_MAX``,
        #: the oldest forgotten first): what a reader re-analysing by timestamp can never get.
        self.skips: collections.deque[tuple[int, int]] = collections.deque(maxlen=SKIPS_REMEMBERED_MAX)

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
            if now > vt:
                self.skips.append((vt, now))
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

    def frames_put(self, first: int, last: int) -> int:
        """How many timestamps in ``first ..= last`` this camera put (skipped ones excluded; the
        range must be within what it put, and its skips within what it remembers)."""
        skipped = sum(max(0, min(end, last + 1) - max(start, first)) for start, end in self.skips)
        return last - first + 1 - skipped
