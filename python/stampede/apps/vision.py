"""Small, pure NumPy vision pieces the applications share: no I/O, no Stampede, no clock.

- :class:`Background` — a running-average background model and foreground masks by background
  subtraction (the low-fi, downsampled view of a frame), robust to sensor noise and flicker: the
  frame's global gain is estimated (median ratio) and divided out, the threshold is a multiple of
  the noise measured in the same frame (median absolute deviation), isolated pixels are dropped.
- :func:`blobs` — connected components of a foreground mask (run-length union-find, 8-connected),
  as boxes in full-resolution pixels.
- :func:`chroma_bins` / :class:`ColourModel` — 16x16 chromaticity histograms ((r, g) / (r+g+b):
  a global illumination gain does not move a pixel's bin), a figure's model learnt from a box
  against the ring around it and widened by one bin (noise spills a colour into its neighbours),
  back-projection, and the box of a figure's pixels in a search window from their connected
  components (small specks dropped by area).
- :class:`BoxMemory` — a target's full size, to complete a box that shrank because something in
  front of the target hides part of it.

Boxes are ``(x, y, w, h)`` in pixels; a box's centre is the middle of its first and last pixel,
the definition :meth:`stampede.apps.scenes.Scene.truth` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bits kept per colour channel by the RGB histograms (8 bins of 32 grey levels each).
BIN_BITS = 3
N_BINS = 1 << (3 * BIN_BITS)
#: Chromaticity bins per axis; the last bin of the N_CHROMA holds the pixels too dark to tell.
CHROMA = 16
N_CHROMA = CHROMA * CHROMA + 1
DARK_BIN = N_CHROMA - 1
#: A pixel with r + g + b at or below this is "dark" (its chromaticity is mostly noise).
DARK_SUM = 60


@dataclass
class Blob:
    """A connected foreground region, in full-resolution pixels."""

    x: int
    y: int
    w: int
    h: int
    area: int

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x + (self.w - 1) / 2, self.y + (self.h - 1) / 2)

    def as_dict(self) -> dict:
        return {"x": self.x, "y": self.y, "w": self.w, "h": self.h, "area": self.area}


class Background:
    """Running-average background of a downsampled view (every ``step``-th pixel).

    Foreground is any pixel farther than ``threshold`` from the background on its worst channel,
    where ``threshold = max(min_threshold, k * sigma)`` and ``sigma`` is the noise of this frame
    against the model (1.4826 x the median absolute difference, on a subsample: the figures are a
    minority of the pixels, so the median sees background). The frame is first divided by its
    global gain against the model (ratio of medians), so an illumination flicker is not motion.
    Pixels with fewer than two foreground neighbours (8-connected) are dropped. The model learns
    fast where the image is background and slowly where it is foreground, so a figure present in
    the first frame fades out of the model in a few seconds while walking people are not absorbed.
    """

    def __init__(
        self,
        step: int = 1,
        k: float = 4.5,
        min_threshold: float = 15.0,
        rate: float = 0.1,
        rate_fg: float = 0.01,
    ):
        self.step, self.k, self.min_threshold, self.rate, self.rate_fg = step, k, min_threshold, rate, rate_fg
        self.model: np.ndarray | None = None
        #: The last frame's gain, noise estimate and threshold (for reports and tests).
        self.gain, self.sigma, self.threshold = 1.0, 0.0, min_threshold

    def view(self, frame: np.ndarray) -> np.ndarray:
        return frame[:: self.step, :: self.step].astype(np.float32)

    def foreground(self, frame: np.ndarray) -> np.ndarray:
        """The foreground mask of ``frame`` (downsampled), and the model updated with it."""
        small = self.view(frame)
        if self.model is None:
            self.model = small.copy()
        sub = (slice(None, None, 3), slice(None, None, 3))
        gain = float(np.median(small[sub])) / max(1.0, float(np.median(self.model[sub])))
        small /= np.float32(gain)
        d = small - self.model
        self.sigma = 1.4826 * float(np.median(np.abs(d[sub][..., 1])))
        self.gain, self.threshold = gain, max(self.min_threshold, self.k * self.sigma)
        mask = despeckle(np.abs(d).max(axis=2) > self.threshold)
        rate = np.where(mask, np.float32(self.rate_fg), np.float32(self.rate))[:, :, None]
        d *= rate
        self.model += d
        return mask


def despeckle(mask: np.ndarray, neighbours: int = 2) -> np.ndarray:
    """``mask`` without the pixels that have fewer than ``neighbours`` set 8-neighbours."""
    h, w = mask.shape
    padded = np.zeros((h + 2, w + 2), dtype=np.uint8)
    padded[1:-1, 1:-1] = mask
    count = np.zeros((h, w), dtype=np.uint8)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy != 1 or dx != 1:
                count += padded[dy : dy + h, dx : dx + w]
    return mask & (count >= neighbours)


def blobs(mask: np.ndarray, step: int = 1, min_pixels: int = 4) -> list[Blob]:
    """8-connected components of ``mask`` with at least ``min_pixels`` pixels, as boxes scaled by
    ``step`` back to full resolution, largest first.

    Runs of foreground per row are found with NumPy; runs of consecutive rows that touch are joined
    by union-find. The work is proportional to the number of runs, not to the image size."""
    padded = np.zeros((mask.shape[0], mask.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = mask
    d = np.diff(padded, axis=1)
    rs, starts = np.nonzero(d == 1)
    _, ends = np.nonzero(d == -1)  # exclusive; same row-major order as the starts
    n = len(rs)
    if n == 0:
        return []
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, s_list, e_list = rs.tolist(), starts.tolist(), ends.tolist()
    prev_lo = prev_hi = 0  # runs of the previous row: indices [prev_lo, prev_hi)
    i = 0
    while i < n:
        row = rows[i]
        j = i
        while j < n and rows[j] == row:
            j += 1
        if prev_hi > prev_lo and rows[prev_lo] == row - 1:
            k = prev_lo
            for r in range(i, j):
                # skip previous-row runs that end before this run (8-connected: touching corners join)
                while k < prev_hi and e_list[k] < s_list[r]:
                    k += 1
                m = k
                while m < prev_hi and s_list[m] <= e_list[r]:
                    a, b = find(r), find(m)
                    if a != b:
                        parent[a] = b
                    m += 1
        prev_lo, prev_hi = i, j
        i = j
    boxes: dict[int, list[int]] = {}
    for r in range(n):
        root = find(r)
        x0, x1, y = s_list[r], e_list[r] - 1, rows[r]
        box = boxes.get(root)
        if box is None:
            boxes[root] = [x0, y, x1, y, x1 - x0 + 1]
        else:
            box[0], box[1], box[2], box[3] = min(box[0], x0), min(box[1], y), max(box[2], x1), max(box[3], y)
            box[4] += x1 - x0 + 1
    out = [
        Blob(x=x0 * step, y=y0 * step, w=(x1 - x0 + 1) * step, h=(y1 - y0 + 1) * step, area=px * step * step)
        for x0, y0, x1, y1, px in boxes.values()
        if px >= min_pixels
    ]
    out.sort(key=lambda b: -b.area)
    return out


def colour_bins(pixels: np.ndarray) -> np.ndarray:
    """The 8x8x8 RGB histogram bin (0..511) of each RGB pixel of ``pixels`` (..., 3) uint8."""
    p = pixels >> (8 - BIN_BITS)
    r, g, b = (p[..., k].astype(np.int32) for k in range(3))
    return (r << (2 * BIN_BITS)) | (g << BIN_BITS) | b


def bin_colour(b: int) -> tuple[int, int, int]:
    """The RGB centre of 8x8x8 histogram bin ``b``."""
    half = 1 << (7 - BIN_BITS)
    mask = (1 << BIN_BITS) - 1
    r, g, bl = (b >> (2 * BIN_BITS)) & mask, (b >> BIN_BITS) & mask, b & mask
    return tuple(int(c) << (8 - BIN_BITS) | half for c in (r, g, bl))  # type: ignore[return-value]


def chroma(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chromaticity (r, g) / (r + g + b) of each pixel of ``pixels`` (..., 3), as float32."""
    p = pixels.astype(np.float32)
    s = p.sum(axis=-1) + np.float32(1.0)
    return p[..., 0] / s, p[..., 1] / s


def chroma_bins(pixels: np.ndarray) -> np.ndarray:
    """The chromaticity bin (0 .. CHROMA**2 - 1) of each pixel of ``pixels`` (..., 3) uint8, or
    ``DARK_BIN`` where the pixel is too dark for its chromaticity to mean anything."""
    p = pixels.astype(np.int32)
    r, g, b = p[..., 0], p[..., 1], p[..., 2]
    s = r + g + b + 1
    bins = (r * CHROMA // s) * CHROMA + g * CHROMA // s
    return np.where(s > DARK_SUM, bins, DARK_BIN)


def chroma_histogram(pixels: np.ndarray) -> np.ndarray:
    """Normalised chromaticity histogram (N_CHROMA bins) of ``pixels`` (..., 3) uint8."""
    counts = np.bincount(chroma_bins(pixels).ravel(), minlength=N_CHROMA).astype(np.float64)
    total = counts.sum()
    return counts / total if total else counts


def dilate_bins(weights: np.ndarray) -> np.ndarray:
    """``weights`` (N_CHROMA bools) grown by one bin in every direction of the chromaticity grid."""
    grid = np.zeros((CHROMA + 2, CHROMA + 2), dtype=bool)
    grid[1:-1, 1:-1] = weights[:-1].reshape(CHROMA, CHROMA)
    grown = np.zeros((CHROMA, CHROMA), dtype=bool)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            grown |= grid[dy : dy + CHROMA, dx : dx + CHROMA]
    return np.append(grown.ravel(), weights[-1])


def mask_box(
    mask: np.ndarray, min_pixels: int = 3, keep: float = 0.2
) -> tuple[tuple[int, int, int, int], int] | None:
    """The box around the connected components of ``mask`` of at least ``min_pixels`` pixels and
    ``keep`` times the largest one (specks of noise dropped, the parts of a figure split by an
    occluder kept), and how many pixels they hold; None if there are none."""
    found = blobs(mask, 1, min_pixels=min_pixels)
    if not found:
        return None
    kept = [b for b in found if b.area >= keep * found[0].area]
    x0, y0 = min(b.x for b in kept), min(b.y for b in kept)
    x1, y1 = max(b.x + b.w for b in kept), max(b.y + b.h for b in kept)
    return (x0, y0, x1 - x0, y1 - y0), sum(b.area for b in kept)


def clip_box(x: int, y: int, w: int, h: int, width: int, height: int) -> tuple[int, int, int, int]:
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(width, x + w), min(height, y + h)
    return x0, y0, max(0, x1 - x0), max(0, y1 - y0)


class ColourModel:
    """A figure's colour model: the chromaticity bins that are much more frequent inside its box
    than in the ring of background around it, widened by one bin where the background is not.
    Back-projecting the model marks the figure's pixels; the extent of the marked pixels' connected
    components in a search window is the figure's box."""

    def __init__(self, weights: np.ndarray) -> None:
        #: Per bin: True when a pixel of that chromaticity belongs to the figure.
        self.weights = weights
        self.colour: tuple[int, int, int] = (255, 255, 255)

    @classmethod
    def learn(cls, frame: np.ndarray, box: tuple[int, int, int, int]) -> ColourModel:
        """The model of the figure in ``box`` of ``frame``: bins that fill at least 3 % of the box,
        are at least four times denser there than in the ring around it (the figure, not the
        background next to it) and ten times denser than in the whole frame (not a patch of
        background texture that happens to be rare in the ring); then their neighbours in the
        chromaticity grid that are rare in the ring and in the frame (the figure's noise)."""
        height, width = frame.shape[:2]
        x, y, w, h = clip_box(*box, width, height)
        margin = max(4, max(w, h) // 2)
        rx, ry, rw, rh = clip_box(x - margin, y - margin, w + 2 * margin, h + 2 * margin, width, height)
        outer = frame[ry : ry + rh, rx : rx + rw]
        inner_mask = np.zeros(outer.shape[:2], dtype=bool)
        inner_mask[y - ry : y - ry + h, x - rx : x - rx + w] = True
        inside = outer[inner_mask]
        p_in = chroma_histogram(inside)
        p_ring = chroma_histogram(outer[~inner_mask])
        p_frame = chroma_histogram(frame[::3, ::3])
        core = (p_in >= 0.03) & (p_in >= 4 * p_ring) & (p_in >= 10 * p_frame)
        core[DARK_BIN] = False
        weights = core | (dilate_bins(core) & (p_ring <= 0.01) & (p_frame <= 0.004))
        weights[DARK_BIN] = False
        model = cls(weights)
        if core.any():  # the colour shown for the figure: the mean of its pixels
            member = core[chroma_bins(inside)]
            model.colour = tuple(int(c) for c in inside[member].mean(axis=0))  # type: ignore[assignment]
        return model

    def project(self, pixels: np.ndarray) -> np.ndarray:
        """Back-projection: True where a pixel has the figure's colour."""
        return self.weights[chroma_bins(pixels)]

    def locate(
        self, frame: np.ndarray, window: tuple[int, int, int, int]
    ) -> tuple[tuple[int, int, int, int], int] | None:
        """The box of the figure's pixels inside ``window`` and how many there are, or None if the
        window holds none."""
        height, width = frame.shape[:2]
        x, y, w, h = clip_box(*window, width, height)
        if w == 0 or h == 0:
            return None
        found = mask_box(self.project(frame[y : y + h, x : x + w]))
        if found is None:
            return None
        (bx, by, bw, bh), count = found
        return (x + bx, y + by, bw, bh), count


class BoxMemory:
    """A target's full size, to complete its box when something in front hides part of it.

    :meth:`update` takes the box of the target's visible pixels at ``ts``. On an axis where the
    box does not touch the image border: if it is at least ``shrink`` times the remembered size,
    it is the target's (the size is updated); if it is smaller, the target is taken as partly
    hidden and the box is given the remembered size, anchored at its edge nearest to where the
    previous box's edge was predicted (the visible side moves with the target, the hidden side
    jumps). Boxes touching the image border (entering or leaving) are returned as they are."""

    def __init__(self, width: int, height: int, shrink: float = 0.85) -> None:
        self.width, self.height, self.shrink = width, height, shrink
        self.size: list[int] = [0, 0]
        self.last: tuple[int, int, int, int] | None = None
        self.last_ts = 0
        self.velocity = (0.0, 0.0)
        #: Boxes completed so far.
        self.completed = 0

    def update(self, box: tuple[int, int, int, int], ts: int) -> tuple[int, int, int, int]:
        pos, size = [box[0], box[1]], [box[2], box[3]]
        limits = (self.width, self.height)
        done = False
        # A box clipped by the border (entering or leaving) changes shape on both axes: as it is.
        at_border = any(pos[a] <= 0 or pos[a] + size[a] >= limits[a] for a in (0, 1))
        for axis in (0, 1):
            if at_border or self.last is None or size[axis] >= self.shrink * self.size[axis]:
                if not at_border:
                    self.size[axis] = size[axis]
                continue
            dt = ts - self.last_ts
            lo = self.last[axis] + self.velocity[axis] * dt
            hi = lo + self.last[axis + 2]
            if abs(pos[axis] - lo) > abs(pos[axis] + size[axis] - hi):  # the low edge is hidden
                pos[axis] = pos[axis] + size[axis] - self.size[axis]
            size[axis] = self.size[axis]
            done = True
        out = (pos[0], pos[1], size[0], size[1])
        if self.last is not None and ts > self.last_ts:
            (ox, oy), (nx, ny) = centre(self.last), centre(out)
            dt = ts - self.last_ts
            vx, vy = self.velocity
            self.velocity = (0.5 * vx + 0.5 * (nx - ox) / dt, 0.5 * vy + 0.5 * (ny - oy) / dt)
        self.last, self.last_ts = out, ts
        self.completed += done
        return out


def centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    x, y, w, h = box
    return (x + (w - 1) / 2, y + (h - 1) / 2)
