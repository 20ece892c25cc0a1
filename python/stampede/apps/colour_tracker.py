"""Colour tracker (docs/APPLICATIONS.md, "Colour tracker"): digitizer → background subtraction →
histogram → tracker.

Stages, each a Stampede task on its own thread, each stage's result in its own channel at the
frame's timestamp:

``digitizer``
    A paced :class:`~stampede.apps.scenes.Camera` puts scene frames into ``colour/frames``.
``bgsub``
    Gets the freshest frame (``NEWEST_UNSEEN``: skips when slow), subtracts a running background
    and puts the foreground mask (npy, uint8) into ``colour/foreground``.
``histogram``
    ``ExactJoin([frames, foreground], policy="skip")``: each frame with its mask, by timestamp — a
    frame the background subtractor skipped is dropped by the join as soon as it is *settled*
    (the subtractor moved past it), and counted. Puts the colour histogram of the foreground
    (the peaks of the chromaticity histogram of its interior: see :func:`colour_peaks`) as json
    into ``colour/histograms``.
``tracker``
    ``ExactJoin([frames, foreground, histograms], policy="skip")``: for each significant colour,
    the foreground pixels within ``CHROMA_RADIUS`` of its chromaticity, their connected components
    (specks dropped by area), give a figure's box; the colour is its identity. A box that shrank
    because another figure hides part of it is completed to the colour's remembered size
    (:class:`~stampede.apps.vision.BoxMemory`). Puts json tracks into ``colour/tracks`` and checks
    every box against the ground truth's full-figure centre (the figure of that colour).

Every joined tuple is consumed when the next is asked for, every stage consumes what it used, so
the live items of every channel stay bounded (the peak is reported). Ctrl-C stops the camera;
the pipeline drains and the summary — ending with one JSON line on stdout — is printed.

    python -m stampede.apps.colour_tracker --headless --seconds 10

With ``--bag PATH`` a ROS 2 bag's ``/camera/image_raw`` is the camera (:mod:`stampede.apps.bag`):
one made of the same scene by ``python/examples/make_ros2_bag.py`` (with ``rosbags``) is tracked
against the same ground truth.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from dataclasses import dataclass

import numpy as np

import stampede
from stampede import INFINITY, NEWEST_UNSEEN

from . import common
from .bag import BagCamera
from .scenes import Camera, Scene
from .vision import CHROMA, Background, BoxMemory, chroma, chroma_bins, despeckle, mask_box

#: Foreground pixels a colour peak needs to count as a figure (scaled by the image's area).
MIN_PIXELS_320x240 = 40
#: A foreground pixel belongs to a colour peak within this chromaticity distance of its centre.
CHROMA_RADIUS = 0.07
#: A colour's box memory is forgotten after this many frames without the colour.
FORGET_FRAMES = 15


@dataclass
class ColourConfig(common.RunConfig):
    #: A ROS 2 bag whose ``/camera/image_raw`` plays as the camera (None: the synthetic camera).
    bag: str | None = None


class ColourTracker:
    def __init__(self, rt: stampede.Runtime, config: ColourConfig) -> None:
        self.rt, self.config = rt, config
        self.scene = Scene(config.seed, config.height, config.width, config.fps)
        self.camera: Camera | BagCamera = (
            Camera(self.scene) if config.bag is None else BagCamera(rt, config.bag, config.fps)
        )
        self.min_pixels = max(8, round(MIN_PIXELS_320x240 * config.width * config.height / (320 * 240)))
        ch = {
            name: rt.create_channel(f"colour/{name}", codec=codec)
            for name, codec in (
                ("frames", "npy"),
                ("foreground", "npy"),
                ("histograms", "json"),
                ("tracks", "json"),
            )
        }
        self.channels = ch
        self.stop = threading.Event()
        self.stages = {n: common.Stage(n) for n in ("digitizer", "bgsub", "histogram", "tracker")}
        self.errors = common.Errors()
        self.found: dict[int, int] = {}  # truth id -> frames in which the tracker found it
        self.wrong = 0  # boxes whose colour matched no figure of the ground truth
        # Producers attach every connection before their output channel's producer set closes
        # (docs/CORRELATION.md, "Settled timestamps"): the joins then release or skip a timestamp as
        # soon as these tasks moved past it.
        self.digitizer = common.task(rt, 0, "digitizer")
        self.frames_out = self.digitizer.attach_output(ch["frames"])
        ch["frames"].close_producers()
        self.bgsub = common.task(rt, INFINITY, "bgsub")
        self.bgsub_in = self.bgsub.attach_input(ch["frames"])
        self.bgsub_out = self.bgsub.attach_output(ch["foreground"])
        ch["foreground"].close_producers()
        self.histogram = common.task(rt, INFINITY, "histogram")
        self.histogram_join = stampede.ExactJoin(
            [self.histogram.attach_input(ch["frames"]), self.histogram.attach_input(ch["foreground"])],
            policy="skip",
        )
        self.histogram_out = self.histogram.attach_output(ch["histograms"])
        ch["histograms"].close_producers()
        self.tracker = common.task(rt, INFINITY, "tracker")
        self.tracker_join = stampede.ExactJoin(
            [self.tracker.attach_input(ch[n]) for n in ("frames", "foreground", "histograms")], policy="skip"
        )
        self.tracks_out = self.tracker.attach_output(ch["tracks"])

    def run_digitizer(self) -> None:
        with self.digitizer:
            on_put = self.stages["digitizer"].done
            self.camera.run(self.digitizer, self.frames_out, self.stop, self.config.max_frames, on_put)

    def run_bgsub(self) -> None:
        stage, background, last = self.stages["bgsub"], Background(step=1), -1
        with self.bgsub:
            while True:
                try:
                    item = self.bgsub_in.get(NEWEST_UNSEEN, timeout=common.GET_TIMEOUT_S)
                except stampede.NotAvailable as e:
                    if e.settled:
                        return  # the camera ended
                    continue
                except stampede.Closed:
                    return
                mask = background.foreground(item.array()).astype(np.uint8)
                self.bgsub_out.put(item.ts, mask)  # at the frame's timestamp, while the frame is open
                self.bgsub_in.consume_until(item.ts)
                stage.done(skipped=max(0, item.ts - last - 1) if last >= 0 else 0)
                last = item.ts

    def run_histogram(self) -> None:
        stage = self.stages["histogram"]
        with self.histogram, self.histogram_join:
            for pair in self.histogram_join.stream(timeout=None):  # ends when the join is exhausted
                frame_item, mask_item = pair.items
                assert frame_item is not None and mask_item is not None  # "skip" never gives partial tuples
                # The mask's interior only: the soft edges blend a figure's colour with what is behind
                # it, and a figure's outline holds enough such pixels to make a false colour peak.
                interior = despeckle(mask_item.array().astype(bool), neighbours=8)
                colours = colour_peaks(frame_item.array()[interior], self.min_pixels)
                self.histogram_out.put(pair.ts, json.dumps({"ts": pair.ts, "colours": colours}), codec="json")
                stage.done()
            stage.skipped = self.histogram_join.stats()["skipped"]

    def run_tracker(self) -> None:
        stage = self.stages["tracker"]
        memories: list[tuple[tuple[float, float], BoxMemory]] = []  # per colour seen lately
        with self.tracker, self.tracker_join:
            for triple in self.tracker_join.stream(timeout=None):
                frame_item, mask_item, hist_item = triple.items
                assert frame_item is not None and mask_item is not None and hist_item is not None
                frame, mask = frame_item.array(), mask_item.array().astype(bool)
                ys, xs = np.nonzero(mask)
                rc, gc = chroma(frame[ys, xs])
                truth = self.scene.truth(triple.ts)
                memories = [(c, m) for c, m in memories if triple.ts - m.last_ts <= FORGET_FRAMES]
                tracks = []
                for colour in json.loads(hist_item.text())["colours"]:
                    cr, cg = colour["chroma"]
                    near = (rc - cr) ** 2 + (gc - cg) ** 2 < CHROMA_RADIUS**2
                    pixels = np.zeros(mask.shape, dtype=bool)
                    pixels[ys[near], xs[near]] = True
                    found = mask_box(pixels, min_pixels=3)
                    if found is None:
                        continue
                    memory = min(
                        (m for c, m in memories if math.dist(c, (cr, cg)) < CHROMA_RADIUS),
                        key=lambda m: triple.ts - m.last_ts,
                        default=None,
                    )
                    if memory is None:
                        memory = BoxMemory(self.config.width, self.config.height)
                        memories.append(((cr, cg), memory))
                    x, y, w, h = memory.update(found[0], triple.ts)  # completed if partly hidden
                    centre = (x + (w - 1) / 2, y + (h - 1) / 2)
                    tracks.append({"rgb": colour["rgb"], "box": [x, y, w, h], "centre": centre})
                    figure = _figure_of(truth, (cr, cg))
                    if figure is None:
                        self.wrong += 1
                        continue
                    self.errors.add(math.dist(centre, figure.centre), occluded=figure.occluded)
                    self.found[figure.id] = self.found.get(figure.id, 0) + 1
                self.tracks_out.put(triple.ts, json.dumps({"ts": triple.ts, "tracks": tracks}), codec="json")
                stage.done()
            stage.skipped = self.tracker_join.stats()["skipped"]

    def run(self) -> dict:
        threads = [
            threading.Thread(target=self.run_digitizer, name="digitizer"),
            threading.Thread(target=self.run_bgsub, name="bgsub"),
            threading.Thread(target=self.run_histogram, name="histogram"),
            threading.Thread(target=self.run_tracker, name="tracker"),
        ]
        monitor = common.Monitor(self.rt, "colour/")
        elapsed, interrupted = common.run(
            threads, self.stop, monitor, self.stages.values(), self.config.seconds, self.config.progress
        )
        last_ts = self.camera.last_ts
        expected = self.scene.must_be_found(last_ts)
        return common.summary(
            "colour_tracker",
            [self.camera],
            self.stages,
            elapsed,
            monitor,
            interrupted,
            tracking_error_px=self.errors.summary(),
            persons_detected=len(self.found),
            persons_in_scene=len(expected),
            persons_missed=sorted(set(expected) - set(self.found)),
            false_tracks=self.wrong,
        )


def colour_peaks(pixels: np.ndarray, min_pixels: int) -> list[dict]:
    """The significant colours of ``pixels`` (N, 3) uint8: local maxima of their chromaticity
    histogram smoothed over 3x3 bins, with at least ``min_pixels`` pixels, at least two bins
    apart (the strongest first); each with its centre (mean chromaticity and RGB of the pixels
    within one bin of the peak) and how many pixels that is."""
    bins = chroma_bins(pixels)
    grid = np.bincount(bins, minlength=CHROMA * CHROMA + 1)[:-1].reshape(CHROMA, CHROMA)
    padded = np.zeros((CHROMA + 2, CHROMA + 2), dtype=np.int64)
    padded[1:-1, 1:-1] = grid
    smooth = np.zeros((CHROMA, CHROMA), dtype=np.int64)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            smooth += padded[dy : dy + CHROMA, dx : dx + CHROMA]
    candidates = np.argwhere(smooth >= min_pixels)
    order = sorted(candidates.tolist(), key=lambda rc: -int(smooth[rc[0], rc[1]]))
    peaks: list[tuple[int, int]] = []
    for r, g in order:
        if all(max(abs(r - pr), abs(g - pg)) > 2 for pr, pg in peaks):
            peaks.append((r, g))
    out = []
    br, bg = np.divmod(np.where(bins < CHROMA * CHROMA, bins, -10 * CHROMA), CHROMA)
    for r, g in peaks:
        near = (np.abs(br - r) <= 1) & (np.abs(bg - g) <= 1)
        members = pixels[near]
        rc, gc = chroma(members)
        out.append(
            {
                "bin": r * CHROMA + g,
                "rgb": [int(c) for c in members.mean(axis=0)],
                "chroma": [round(float(rc.mean()), 4), round(float(gc.mean()), 4)],
                "pixels": len(members),
            }
        )
    return out


def _figure_of(truth: list, centre: tuple[float, float]):
    """For checking only: the figure of the ground truth whose palette colour has this chromaticity."""
    best, best_d = None, CHROMA_RADIUS
    for f in truth:
        s = sum(f.colour) + 1
        d = math.dist((f.colour[0] / s, f.colour[1] / s), centre)
        if d < best_d:
            best, best_d = f, d
    return best


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m stampede.apps.colour_tracker", description=__doc__.splitlines()[0]
    )
    common.add_run_arguments(parser)
    parser.add_argument(
        "--bag",
        metavar="PATH",
        default=None,
        help="play this ROS 2 bag's /camera/image_raw as the camera (python/examples/make_ros2_bag.py)",
    )
    args = parser.parse_args(argv)
    config = ColourConfig(**common.run_options(args), bag=args.bag)
    result = common.run_embedded(ColourTracker, config, "colour/frames", ["colour/tracks"])
    err = result["tracking_error_px"]
    common.print_summary(
        [
            f"skipped (NEWEST_UNSEEN, then by the joins once settled): {result['skipped']}",
            f"persons found {result['persons_detected']} (in scene {result['persons_in_scene']}, "
            f"missed {result['persons_missed']}), false tracks {result['false_tracks']}",
            common.error_line("tracking error", err, "boxes"),
        ],
        result,
    )
    return result


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        sys.exit(130)
