"""Small, pure NumPy vision pieces the applications share: no I/O, no Stampede, no clock.

- :class:`Background` — a running-average background model and foreground masks by background
  subtraction (the low-fi, downsampled view of a frame).
- :func:`blobs` — connected components of a foreground mask (run-length union-find, 8-connected),
  as boxes in full-resolution pixels.
- :func:`colour_bins` / :class:`ColourModel` — 8x8x8 RGB colour histograms, a figure's model
  learnt from a box against the ring around it, back-projection and one tracking step in a
  search window.

Boxes are ``(x, y, w, h)`` in pixels; a box's centre is the middle of its first and last pixel,
the definition :meth:`stampede.apps.scenes.Scene.truth` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bits kept per colour channel by the histograms (8 bins of 32 grey levels each).
BIN_BITS = 3
N_BINS = 1 << (3 * BIN_BITS)


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

    Foreground is any pixel farther than ``threshold`` grey levels (on its worst channel) from the
    background. The model learns fast where the image is background and slowly where it is
    foreground, so a figure present in the first frame fades out of the model in a few seconds
    while walking people are not absorbed.
    """

    def __init__(self, step: int = 1, threshold: float = 35.0, rate: float = 0.1, rate_fg: float = 0.01):
        self.step, self.threshold, self.rate, self.rate_fg = step, threshold, rate, rate_fg
        self.model: np.ndarray | None = None

    def view(self, frame: np.ndarray) -> np.ndarray:
        return frame[:: self.step, :: self.step].astype(np.float32)

    def foreground(self, frame: np.ndarray) -> np.ndarray:
        """The foreground mask of ``frame`` (downsampled), and the model updated with it."""
        small = self.view(frame)
        if self.model is None:
            self.model = small.copy()
        diff = np.abs(small - self.model).max(axis=2)
        mask = diff > self.threshold
        rate = np.where(mask, self.rate_fg, self.rate)[:, :, None]
        self.model += rate * (small - self.model)
        return mask


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
    """The 3D histogram bin (0..511) of each RGB pixel of ``pixels`` (..., 3) uint8."""
    p = pixels >> (8 - BIN_BITS)
    r, g, b = (p[..., k].astype(np.int32) for k in range(3))
    return (r << (2 * BIN_BITS)) | (g << BIN_BITS) | b


def histogram(pixels: np.ndarray) -> np.ndarray:
    """Normalised 512-bin colour histogram of ``pixels`` (..., 3) uint8 (zeros if empty)."""
    counts = np.bincount(colour_bins(pixels).ravel(), minlength=N_BINS).astype(np.float64)
    total = counts.sum()
    return counts / total if total else counts


def bin_colour(b: int) -> tuple[int, int, int]:
    """The RGB centre of histogram bin ``b``."""
    half = 1 << (7 - BIN_BITS)
    mask = (1 << BIN_BITS) - 1
    r, g, bl = (b >> (2 * BIN_BITS)) & mask, (b >> BIN_BITS) & mask, b & mask
    return tuple(int(c) << (8 - BIN_BITS) | half for c in (r, g, bl))  # type: ignore[return-value]


def clip_box(x: int, y: int, w: int, h: int, width: int, height: int) -> tuple[int, int, int, int]:
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(width, x + w), min(height, y + h)
    return x0, y0, max(0, x1 - x0), max(0, y1 - y0)


class ColourModel:
    """A figure's colour model: the histogram bins that are much more frequent inside its box than
    in the ring of background around it. Back-projecting the model marks the figure's pixels; the
    extent of the marked pixels in a search window is the figure's box."""

    def __init__(self, weights: np.ndarray) -> None:
        #: Per bin: True when a pixel of that colour belongs to the figure.
        self.weights = weights
        bins = np.flatnonzero(weights)
        self.colour = bin_colour(int(bins[0])) if len(bins) else (255, 255, 255)

    @classmethod
    def learn(cls, frame: np.ndarray, box: tuple[int, int, int, int]) -> ColourModel:
        """The model of the figure in ``box`` of ``frame``: bins that fill at least 3 % of the box,
        are at least four times denser there than in the ring around it (the figure, not the
        background next to it) and ten times denser than in the whole frame (not a patch of
        background texture that happens to be rare in the ring)."""
        height, width = frame.shape[:2]
        x, y, w, h = clip_box(*box, width, height)
        margin = max(4, max(w, h) // 2)
        rx, ry, rw, rh = clip_box(x - margin, y - margin, w + 2 * margin, h + 2 * margin, width, height)
        outer = frame[ry : ry + rh, rx : rx + rw]
        inner_mask = np.zeros(outer.shape[:2], dtype=bool)
        inner_mask[y - ry : y - ry + h, x - rx : x - rx + w] = True
        p_in = histogram(outer[inner_mask])
        p_ring = histogram(outer[~inner_mask])
        p_frame = histogram(frame[::3, ::3])
        weights = (p_in >= 0.03) & (p_in >= 4 * p_ring) & (p_in >= 10 * p_frame)
        model = cls(weights)
        if weights.any():  # the colour shown for the figure: its most frequent bin
            model.colour = bin_colour(int(np.argmax(np.where(weights, p_in, 0))))
        return model

    def project(self, pixels: np.ndarray) -> np.ndarray:
        """Back-projection: True where a pixel has the figure's colour."""
        return self.weights[colour_bins(pixels)]

    def locate(
        self, frame: np.ndarray, window: tuple[int, int, int, int]
    ) -> tuple[tuple[int, int, int, int], int] | None:
        """The box of the figure's pixels inside ``window`` and how many there are, or None if the
        window holds none."""
        height, width = frame.shape[:2]
        x, y, w, h = clip_box(*window, width, height)
        if w == 0 or h == 0:
            return None
        mask = self.project(frame[y : y + h, x : x + w])
        count = int(mask.sum())
        if count == 0:
            return None
        ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        return (x + int(xs[0]), y + int(ys[0]), int(xs[-1] - xs[0]) + 1, int(ys[-1] - ys[0]) + 1), count


def centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    x, y, w, h = box
    return (x + (w - 1) / 2, y + (h - 1) / 2)
