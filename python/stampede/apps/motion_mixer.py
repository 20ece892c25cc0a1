"""Motion-detector mixer: several synthetic cameras, a motion detector per camera, a mixer that
joins the detectors by timestamp and shows the camera with the most motion (docs/APPLICATIONS.md,
"Motion-detector mixer"; docs/CORRELATION.md).

Stages, each a Stampede task on its own thread:

``camera/<k>``
    ``--cameras`` paced :class:`~stampede.apps.scenes.Camera`\\ s, each its own scene (its own seed
    and its own rate of people: camera k sees a person every ``1.2 * (1 + k/2)`` seconds), put
    frames into ``mixer/cam/<k>``, all at the same timestamps (frame numbers).
``motion/<k>``
    Gets the freshest frame (``NEWEST_UNSEEN``: skips when slow), subtracts a running background
    and puts ``{"motion": foreground pixels, "box": [x, y, w, h] | null}`` into ``mixer/motion/<k>``.
``mixer``
    ``ExactJoin(motions, policy="partial")``: the detectors' results with the same timestamp; a
    detector that skipped that frame gives ``None`` once the timestamp is settled (it moved past
    it), so the mixer never waits for a result that will not come, and counts it. It picks the
    camera with the most motion, gets *that camera's frame at that timestamp* on its own input
    connection (the frames it did not pick are consumed unread), draws the motion box and a
    border, and puts the annotated frame into ``mixer/output``.
``viewer``
    Consumes ``mixer/output`` (``NEWEST_UNSEEN``) and counts.

The pick is checked against the ground truth: the camera whose visible people cover the most
pixels (timestamps where the two best are within 25 % of each other are not scored, nor those
where a detector skipped the frame: the mixer could not see that camera). Ctrl-C stops
the cameras; the pipeline drains; the summary ends with one JSON line on stdout.

    python -m stampede.apps.motion_mixer --headless --seconds 10 --cameras 3
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import dataclass

import numpy as np

import stampede
from stampede import INFINITY, NEWEST_UNSEEN

from . import common
from .scenes import PALETTE, Camera, Scene
from .vision import Background, blobs

#: Ground-truth picks closer than this ratio (second best / best) are ambiguous: not scored.
AMBIGUOUS_RATIO = 0.75


@dataclass
class MixerConfig(common.RunConfig):
    cameras: int = 3


class MotionMixer:
    def __init__(self, rt: stampede.Runtime, config: MixerConfig) -> None:
        if config.cameras < 2:
            raise ValueError("a mixer needs at least two cameras")
        self.rt, self.config = rt, config
        k_range = range(config.cameras)
        self.scenes = [
            Scene(config.seed + 101 * k, config.height, config.width, config.fps, period_s=1.2 * (1 + k / 2))
            for k in k_range
        ]
        self.cameras = [Camera(s) for s in self.scenes]
        self.frames = [rt.create_channel(f"mixer/cam/{k}", codec="npy") for k in k_range]
        self.motion = [rt.create_channel(f"mixer/motion/{k}", codec="json") for k in k_range]
        self.output = rt.create_channel(
            "mixer/output", codec="npy", description="the camera with most motion"
        )
        self.stop = threading.Event()
        self.mixer_done = threading.Event()
        self.stages = {n: common.Stage(n) for n in ("cameras", "motion", "mixer", "viewer")}
        self.picks = {"scored": 0, "agree": 0, "ambiguous": 0, "partial": 0}
        self.picked = [0] * config.cameras
        self.step = max(1, config.width // 160)
        # Producers attach every connection before their channels' producer sets close
        # (docs/CORRELATION.md, "Settled timestamps"): the mixer's "partial" join then settles a
        # missing result as soon as its detector moved on.
        self.camera_tasks = [common.task(rt, 0, f"camera/{k}") for k in k_range]
        self.camera_outs = [t.attach_output(c) for t, c in zip(self.camera_tasks, self.frames)]
        self.detectors = [common.task(rt, INFINITY, f"motion/{k}") for k in k_range]
        self.detector_ins = [t.attach_input(c) for t, c in zip(self.detectors, self.frames)]
        self.detector_outs = [t.attach_output(c) for t, c in zip(self.detectors, self.motion)]
        for c in [*self.frames, *self.motion]:
            c.close_producers()
        self.mixer = common.task(rt, INFINITY, "mixer")
        self.join = stampede.ExactJoin([self.mixer.attach_input(c) for c in self.motion], policy="partial")
        self.mixer_frames = [self.mixer.attach_input(c) for c in self.frames]
        self.mixer_out = self.mixer.attach_output(self.output)
        self.viewer = common.task(rt, INFINITY, "viewer")
        self.viewer_in = self.viewer.attach_input(self.output)

    def run_camera(self, k: int) -> None:
        with self.camera_tasks[k]:
            on_put = self.stages["cameras"].done
            self.cameras[k].run(
                self.camera_tasks[k], self.camera_outs[k], self.stop, self.config.max_frames, on_put
            )

    def run_detector(self, k: int) -> None:
        stage, background, last = self.stages["motion"], Background(step=self.step), -1
        inp, out = self.detector_ins[k], self.detector_outs[k]
        with self.detectors[k]:
            while True:
                try:
                    item = inp.get(NEWEST_UNSEEN, timeout=common.GET_TIMEOUT_S)
                except stampede.NotAvailable as e:
                    if e.settled:
                        return  # the camera ended
                    continue
                except stampede.Closed:
                    return
                mask = background.foreground(item.array())
                found = blobs(mask, self.step)
                box = None
                if found:  # the box around every moving region
                    x0, y0 = min(b.x for b in found), min(b.y for b in found)
                    x1, y1 = max(b.x + b.w for b in found), max(b.y + b.h for b in found)
                    box = [x0, y0, x1 - x0, y1 - y0]
                doc = {"ts": item.ts, "camera": k, "motion": int(mask.sum()) * self.step**2, "box": box}
                out.put(item.ts, json.dumps(doc), codec="json")
                inp.consume_until(item.ts)
                stage.done(skipped=max(0, item.ts - last - 1) if last >= 0 else 0)
                last = item.ts

    def run_mixer(self) -> None:
        stage = self.stages["mixer"]
        try:
            with self.mixer:
                for joined in self.join.stream(timeout=None):  # ends when every detector ended
                    docs = [None if it is None else json.loads(it.text()) for it in joined.items]
                    best = max(
                        (d for d in docs if d is not None),
                        key=lambda d: d["motion"],
                        default=None,
                    )
                    if best is not None:
                        k = best["camera"]
                        frame = self._pick(k, joined.ts, best["box"])
                        if frame is not None:
                            self.mixer_out.put(joined.ts, frame)
                            self.picked[k] += 1
                            if all(d is not None for d in docs):
                                self._score(k, joined.ts)
                            else:  # a detector skipped this frame: the pick could not see its camera
                                self.picks["partial"] += 1
                            stage.done()
                    for inp in self.mixer_frames:  # every camera's frames up to ts: garbage to the mixer
                        inp.consume_until(joined.ts)
                stats = self.join.stats()
                stage.skipped = stats["partial"]
                self.join.close()
        finally:
            self.mixer_done.set()

    def _pick(self, k: int, ts: int, box: list[int] | None) -> np.ndarray | None:
        """Camera ``k``'s frame at ``ts``, got by timestamp, annotated (a copy: items are read-only)."""
        try:
            frame = self.mixer_frames[k].get(ts, timeout=0).array().copy()
        except stampede.StampedeError:
            return None  # cannot happen while the mixer's input holds the frame unseen; be safe
        colour = np.array(PALETTE[k % len(PALETTE)], dtype=np.uint8)
        frame[:3, :], frame[-3:, :], frame[:, :3], frame[:, -3:] = colour, colour, colour, colour
        if box is not None:
            x, y, w, h = box
            x1, y1 = min(x + w, frame.shape[1]) - 1, min(y + h, frame.shape[0]) - 1
            frame[y, x : x1 + 1] = frame[y1, x : x1 + 1] = 255
            frame[y : y1 + 1, x] = frame[y : y1 + 1, x1] = 255
        return frame

    def _score(self, k: int, ts: int) -> None:
        areas = sorted(
            ((sum(f.visible_area for f in s.truth(ts)), i) for i, s in enumerate(self.scenes)), reverse=True
        )
        (best, best_k), (second, _) = areas[0], areas[1]
        if best == 0 or second > AMBIGUOUS_RATIO * best:
            self.picks["ambiguous"] += 1
            return
        self.picks["scored"] += 1
        self.picks["agree"] += best_k == k

    def run_viewer(self) -> None:
        common.display(self.viewer, self.viewer_in, self.stages["viewer"], self.mixer_done)

    def run(self) -> dict:
        n = self.config.cameras
        threads = [threading.Thread(target=self.run_camera, args=(k,), name=f"camera/{k}") for k in range(n)]
        threads += [
            threading.Thread(target=self.run_detector, args=(k,), name=f"motion/{k}") for k in range(n)
        ]
        threads += [
            threading.Thread(target=self.run_mixer, name="mixer"),
            threading.Thread(target=self.run_viewer, name="viewer"),
        ]
        monitor = common.Monitor(self.rt, "mixer/")
        elapsed, interrupted = common.run(
            threads,
            self.stop,
            monitor,
            self.stages.values(),
            self.config.seconds,
            self.config.progress,
            sources=n,
        )
        scored = self.picks["scored"]
        return common.summary(
            "motion_mixer",
            self.cameras,
            self.stages,
            elapsed,
            monitor,
            interrupted,
            cameras=n,
            picked=self.picked,
            pick_agreement=round(self.picks["agree"] / scored, 4) if scored else None,
            picks_scored=scored,
            picks_ambiguous=self.picks["ambiguous"],
            picks_partial=self.picks["partial"],
        )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m stampede.apps.motion_mixer", description=__doc__.splitlines()[0]
    )
    common.add_run_arguments(parser)
    parser.add_argument("--cameras", type=int, default=3, help="number of cameras (at least 2)")
    args = parser.parse_args(argv)
    if args.cameras < 2:
        parser.error("--cameras must be at least 2")
    config = MixerConfig(cameras=args.cameras, **common.run_options(args))
    result = common.run_embedded(MotionMixer, config, "mixer/output", [])
    common.print_summary(
        [
            f"{result['cameras']} cameras",
            f"skipped (NEWEST_UNSEEN; partial tuples in the mixer): {result['skipped']}",
            f"picked per camera {result['picked']}; agreement with the ground truth "
            f"{result['pick_agreement']} over {result['picks_scored']} scored frames "
            f"({result['picks_ambiguous']} ambiguous)",
        ],
        result,
    )
    return result


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        sys.exit(130)
