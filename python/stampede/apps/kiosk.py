"""The Smart Kiosk (docs/APPLICATIONS.md): digitizer → low-fi blob tracker → dynamically created
hi-fi trackers that re-analyse the past by timestamp → decision (a temporal join) → display.

Stages, each a Stampede task driven by its own thread:

``digitizer``
    A :class:`~stampede.apps.scenes.Camera` paced by ``stampede.Pacer`` (default 30 fps) puts the
    frames of a synthetic scene (people walking across a textured background, known ground truth)
    into ``kiosk/frames`` (codec npy) and advances its virtual time past each one.
``lowfi``
    Gets the freshest frame with ``NEWEST_UNSEEN`` — when it is slow it skips frames instead of
    falling behind (counted as skipped) — subtracts a running background from a downsampled view,
    puts the blobs as json into ``kiosk/blobs`` at the frame's timestamp and ``consume_until``\\ s
    the frame. A blob that persists over ``HYPOTHESIS_FRAMES`` processed frames is a person.
``hifi/<id>``
    Created *at run time* for each person, one thread each. It FIRST re-analyses the frames that
    led to the hypothesis — every frame since the blob was first seen, including those the low-fi
    tracker skipped — fetched by timestamp (``get_range`` and exact gets on its own input
    connection), then follows live with ``NEWEST_UNSEEN``, using a colour histogram model of the
    figure. It puts json tracks into ``kiosk/tracks/<id>`` and ends when the person leaves.
``decision``
    Joins the low-fi blobs with every live hi-fi track by timestamp (``stampede.ApproxJoin``, blobs
    as pivot) and puts one overlay per blob frame into ``kiosk/decisions``:
    ``{"boxes": [{"x", "y", "w", "h", "label", "color"}], ...}`` at the frame's timestamp — the
    dashboard's overlay format.
``display``
    Consumes the decisions (``NEWEST_UNSEEN``); headless it counts them, otherwise
    ``stampede.Dashboard`` (when this build has it) shows ``kiosk/frames`` with the overlays.

Why the re-analysis works, and why memory stays bounded (docs/SEMANTICS.md,
"Virtual time, visibility, GC"): the low-fi tracker consumes each frame at once, so by itself it
would let GC reclaim the frames a hypothesis was built on. A ``retainer`` task holds a claim
instead: its virtual time trails the low-fi tracker by ``RETAIN_FRAMES`` processed frames, so ts_min
— and every channel's reclamation — stops there and no further back. A hi-fi tracker is spawned
*from the retainer* at virtual time = the timestamp of the hypothesis' first frame (legal: it is at
or above the retainer's visibility) and attaches its input then, so those frames are unseen on its
own connection and stay live until it consumes them, whatever the low-fi tracker does. Everything
else is consumed as soon as it is used, so the live items of every channel stay below a bound that
does not grow with the run's length; the monitor reports the peak.

Run: ``python -m stampede.apps.kiosk --headless --seconds 10``. The summary ends with one JSON line
on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from collections import deque
from dataclasses import dataclass, field

import numpy as np

import stampede
from stampede import INFINITY, NEWEST_UNSEEN

from . import common
from .scenes import Camera, Scene
from .vision import Background, Blob, BoxMemory, ColourModel, blobs, centre, clip_box

#: Processed frames a blob must persist over before the low-fi tracker hypothesises a person.
HYPOTHESIS_FRAMES = 4
#: Processed frames the retainer keeps live behind the low-fi tracker (>= HYPOTHESIS_FRAMES).
RETAIN_FRAMES = HYPOTHESIS_FRAMES + 2
#: A blob further than this (times the frames elapsed, at least 1) from a candidate's predicted
#: centre starts a new candidate. In pixels per frame at 30 fps per 320 pixels of width.
GATE_PX = 12.0
#: Consecutive processed frames without a blob after which the low-fi tracker drops a candidate.
CANDIDATE_MISSES = 3
#: Consecutive frames without the figure's colour after which a hi-fi tracker ends (person left).
HIFI_MISSES = 2
#: Tolerance of the decision join, in frames: a track this close to a blob frame belongs to it.
JOIN_TOLERANCE = 3


@dataclass
class KioskConfig(common.RunConfig):
    #: Scene speed factor (people cross the image in ~3 s / speed).
    speed: float = 1.0
    #: Extra analysis time per low-fi frame, in seconds: a slower low-fi tracker, to watch it skip.
    lowfi_work_s: float = 0.0


@dataclass
class Candidate:
    """A blob the low-fi tracker follows across processed frames (a person hypothesis in the making)."""

    history: deque  # of (ts, Blob), the most recent last
    misses: int = 0
    person: int | None = None


@dataclass
class Person:
    """What the kiosk knows of a person: its hi-fi tracker's latest box and colour."""

    id: int
    truth_id: int | None
    box: tuple[int, int, int, int]
    colour: tuple[int, int, int] = (255, 255, 255)
    ended: bool = False
    reanalysed: int = 0
    tracked: int = 0
    first_ts: int = 0
    hypothesis_ts: int = 0


@dataclass
class KioskState:
    """Shared between the stages' threads (guarded by ``lock``): persons and hi-fi threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    persons: dict[int, Person] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: common.Errors = field(default_factory=common.Errors)
    next_id: int = 0

    def active(self) -> list[int]:
        with self.lock:
            return sorted(p.id for p in self.persons.values() if not p.ended)


class Kiosk:
    """One run of the Smart Kiosk on runtime ``rt`` (channels ``kiosk/...``)."""

    def __init__(self, rt: stampede.Runtime, config: KioskConfig) -> None:
        self.rt, self.config = rt, config
        self.scene = Scene(config.seed, config.height, config.width, config.fps, speed=config.speed)
        self.camera = Camera(self.scene)
        self.frames = rt.create_channel("kiosk/frames", codec="npy", description="digitizer frames (RGB)")
        self.blobs = rt.create_channel("kiosk/blobs", codec="json", description="low-fi blob detections")
        self.decisions = rt.create_channel(
            "kiosk/decisions", codec="json", description="overlay boxes at each frame's timestamp"
        )
        self.state = KioskState()
        self.stop = threading.Event()
        self.decision_done = threading.Event()
        self.stages = {
            name: common.Stage(name) for name in ("digitizer", "lowfi", "hifi", "decision", "display")
        }
        # Producers attach their outputs (and inputs) before their channels' producer sets close:
        # settledness then follows these tasks only, which is what lets the decision join release
        # a blob frame as soon as the trackers have moved past it (docs/CORRELATION.md,
        # "Settled timestamps").
        self.digitizer = common.task(rt, 0, "digitizer")
        self.frames_out = self.digitizer.attach_output(self.frames)
        self.frames.close_producers()
        self.lowfi = common.task(rt, INFINITY, "lowfi")
        self.lowfi_in = self.lowfi.attach_input(self.frames)
        self.blobs_out = self.lowfi.attach_output(self.blobs)
        self.blobs.close_producers()
        # The claim that keeps the frames of a hypothesis live (see the module's doc).
        self.retainer = common.task(rt, 0, "retainer")
        self.decision = common.task(rt, 0, "decision")
        self.display = common.task(rt, INFINITY, "display")
        self.display_in = self.display.attach_input(self.decisions)
        self.gate_px = GATE_PX * config.width / 320 * 30 / config.fps * config.speed
        self.step = max(1, config.width // 160)

    # --- digitizer -------------------------------------------------------------------------------

    def run_digitizer(self) -> None:
        with self.digitizer:
            on_put = self.stages["digitizer"].done
            self.camera.run(self.digitizer, self.frames_out, self.stop, self.config.max_frames, on_put)

    # --- low-fi tracker --------------------------------------------------------------------------

    def run_lowfi(self) -> None:
        stage = self.stages["lowfi"]
        background = Background(step=self.step)
        candidates: list[Candidate] = []
        processed: deque[int] = deque()  # timestamps of the frames processed, most recent last
        last = -1
        try:
            while True:
                try:
                    item = self.lowfi_in.get(NEWEST_UNSEEN, timeout=common.GET_TIMEOUT_S)
                except stampede.NotAvailable as e:
                    if e.settled:
                        break  # the digitizer ended: no frame will ever come
                    continue
                except stampede.Closed:
                    break
                frame = item.array()
                found = blobs(background.foreground(frame), self.step, min_pixels=max(4, 24 // self.step**2))
                self._associate(candidates, found, item.ts, last)
                for cand in candidates:
                    if cand.person is None and cand.misses == 0 and len(cand.history) >= HYPOTHESIS_FRAMES:
                        self._hypothesise(cand, item.ts, processed, frame)
                doc = {
                    "ts": item.ts,
                    "blobs": [b.as_dict() for b in found],
                    "persons": self.state.active(),
                }
                self.blobs_out.put(item.ts, json.dumps(doc), codec="json")
                self.lowfi_in.consume_until(item.ts)  # this frame and every skipped one: garbage to us
                stage.done(skipped=item.ts - last - 1 if last >= 0 else 0)
                last = item.ts
                processed.append(item.ts)
                if self.config.lowfi_work_s > 0:
                    self.stop.wait(self.config.lowfi_work_s)  # a heavier analysis (not a busy wait)
                if len(processed) > RETAIN_FRAMES:
                    # The claim moves on: frames before the oldest retained may be reclaimed now.
                    oldest = processed.popleft()
                    self.retainer.set_virtual_time(processed[0] if processed else oldest + 1)
        finally:
            self.retainer.close()
            self.lowfi.close()

    def _associate(self, candidates: list[Candidate], found: list[Blob], ts: int, last: int) -> None:
        """Greedy nearest-neighbour association of this frame's blobs with the candidates."""
        free = list(found)
        for cand in sorted(candidates, key=lambda c: -len(c.history)):
            (t_prev, prev) = cand.history[-1]
            px, py = prev.centre
            if len(cand.history) >= 2:  # predict with the candidate's velocity
                t_pp, pprev = cand.history[-2]
                vx = (px - pprev.centre[0]) / max(1, t_prev - t_pp)
                vy = (py - pprev.centre[1]) / max(1, t_prev - t_pp)
                px, py = px + vx * (ts - t_prev), py + vy * (ts - t_prev)
            best, best_d = None, self.gate_px * max(1, ts - t_prev) + prev.w / 2
            for b in free:
                d = math.dist((px, py), b.centre)
                if d < best_d:
                    best, best_d = b, d
            if best is None:
                cand.misses += 1
            else:
                free.remove(best)
                cand.history.append((ts, best))
                cand.misses = 0
        candidates[:] = [c for c in candidates if c.misses <= CANDIDATE_MISSES]
        for b in free:
            candidates.append(Candidate(history=deque([(ts, b)], maxlen=RETAIN_FRAMES)))

    def _hypothesise(self, cand: Candidate, ts: int, processed: deque[int], frame: np.ndarray) -> None:
        """A person: unless a live hi-fi tracker already follows this blob, spawn one."""
        blob = cand.history[-1][1]
        with self.state.lock:
            for p in self.state.persons.values():
                bx, by, bw, bh = p.box
                cx, cy = blob.centre
                if not p.ended and bx - bw / 2 <= cx <= bx + 1.5 * bw and by - bh / 2 <= cy <= by + 1.5 * bh:
                    cand.person = p.id  # the same person, already tracked
                    return
            pid = self.state.next_id
            self.state.next_id += 1
        # The earliest frame of the hypothesis still live under the retainer's claim.
        first_ts = cand.history[0][0]
        if processed:
            first_ts = max(first_ts, processed[0])
        truth_id = self._truth_id(ts, blob)
        person = Person(pid, truth_id, (blob.x, blob.y, blob.w, blob.h), first_ts=first_ts, hypothesis_ts=ts)
        tracks = self.rt.create_channel(
            f"kiosk/tracks/{pid}", codec="json", description=f"hi-fi track of person {pid}"
        )
        # Spawned from the retainer, whose visibility is at or below first_ts; the input attached
        # now holds frames first_ts.. as unseen, so they outlive the low-fi tracker's consumption.
        hifi = common.spawn(self.retainer, first_ts, f"hifi/{pid}")
        hifi_in = hifi.attach_input(self.frames)
        tracks_out = hifi.attach_output(tracks)
        tracks.close_producers()
        # Its own claim is its input connection now; at INFINITY its visibility is the frame it
        # holds open, so it may put a track at any frame it gets.
        hifi.set_virtual_time(INFINITY)
        cand.person = pid
        hypothesis = [(t, (b.x, b.y, b.w, b.h)) for t, b in cand.history if t >= first_ts]
        thread = threading.Thread(
            target=self.run_hifi,
            args=(person, hifi, hifi_in, tracks_out, hypothesis, ts),
            name=f"hifi/{pid}",
        )
        with self.state.lock:
            self.state.persons[pid] = person
            self.state.threads.append(thread)
        thread.start()

    def _truth_id(self, ts: int, blob: Blob) -> int | None:
        """For checking only: the ground-truth figure nearest the hypothesis' blob."""
        figures = self.scene.truth(ts)
        if not figures:
            return None
        return min(figures, key=lambda f: math.dist(f.centre, blob.centre)).id

    # --- hi-fi tracker ---------------------------------------------------------------------------

    def run_hifi(
        self,
        person: Person,
        task: stampede.Task,
        inp: stampede.ChannelInput,
        out: stampede.ChannelOutput,
        hypothesis: list[tuple[int, tuple[int, int, int, int]]],
        hypothesis_ts: int,
    ) -> None:
        """Re-analyse the hypothesis' frames by timestamp, then follow live until the person leaves."""
        stage = self.stages["hifi"]
        try:
            # The model is learnt on the hypothesis' latest frame (the figure most visible), got by
            # its exact timestamp; the earlier frames are then re-analysed in timestamp order.
            last_ts, last_box = hypothesis[-1]
            model = ColourModel.learn(inp.get(last_ts, timeout=0).array(), last_box)
            person.colour = model.colour
            if not model.weights.any():
                return  # no distinctive colour in the blob: not a person we can follow
            first_ts, first_box = hypothesis[0]
            tracker = _Follower(model, first_box, first_ts, self.config.width, self.config.height)
            for item in inp.get_range(hypothesis[0][0], hypothesis_ts):
                if not self._hifi_step(person, tracker, item, out):
                    return
                person.reanalysed += 1
                stage.done()
            inp.consume_until(hypothesis_ts)
            last = hypothesis_ts
            while True:  # ends when the person leaves or no frame can come
                try:
                    item = inp.get(NEWEST_UNSEEN, timeout=common.GET_TIMEOUT_S)
                except stampede.NotAvailable as e:
                    if e.settled:
                        return  # the digitizer ended
                    continue
                except stampede.Closed:
                    return
                alive = self._hifi_step(person, tracker, item, out)
                inp.consume_until(item.ts)
                stage.done(skipped=max(0, item.ts - last - 1))
                last = item.ts
                if not alive:
                    return  # the person left
        finally:
            with self.state.lock:
                person.ended = True
            task.close()

    def _hifi_step(self, person: Person, tracker: _Follower, item: stampede.Item, out) -> bool:
        """Track the person in one frame, check against the truth, put the track. False when lost."""
        found = tracker.step(item.array(), item.ts)
        if found is None:
            return tracker.misses < HIFI_MISSES
        box = found
        with self.state.lock:
            person.box = box
            person.tracked += 1
        cx, cy = centre(box)
        if person.truth_id is not None:
            for f in self.scene.truth(item.ts):
                if f.id == person.truth_id:  # the full figure's centre, even while partly hidden
                    self.state.errors.add(math.dist((cx, cy), f.centre), occluded=f.occluded)
        doc = {"ts": item.ts, "id": person.id, "box": list(box), "centre": [cx, cy], "colour": person.colour}
        out.put(item.ts, json.dumps(doc), codec="json")
        return True

    # --- decision --------------------------------------------------------------------------------

    def _join(self, persons: list[int]) -> tuple[_Join, list[int]]:
        """A join of the blobs (pivot) with the tracks of ``persons`` whose channels still exist."""
        pivot = self.decision.attach_input(self.blobs)
        inputs: list[stampede.ChannelInput] = []
        joined: list[int] = []
        for pid in persons:
            try:
                ch = self.rt.lookup(f"kiosk/tracks/{pid}")
            except stampede.NotFound:
                continue
            assert isinstance(ch, stampede.Channel), "the kiosk's tracks are channels"
            inputs.append(self.decision.attach_input(ch))
            joined.append(pid)
        return _Join(pivot, inputs), joined

    def run_decision(self) -> None:
        stage = self.stages["decision"]
        try:
            out = self.decision.attach_output(self.decisions)
            join, persons = self._join([])
            self.decision.set_virtual_time(INFINITY)  # its claims are the join's open items from now on
            while True:
                match = join.next(common.GET_TIMEOUT_S)
                if match is None:
                    continue  # nothing released yet
                if match is _Join.EXHAUSTED:
                    break  # every input is settled everywhere: the low-fi tracker ended
                doc = json.loads(match.pivot.text())
                boxes = [
                    {"x": b["x"], "y": b["y"], "w": b["w"], "h": b["h"], "label": "blob", "color": "#c0c0c0"}
                    for b in doc["blobs"]
                ]
                tracks = []
                for pid, item in zip(persons, match.matches):
                    if item is None:
                        continue
                    t = json.loads(item.text())
                    x, y, w, h = t["box"]
                    colour = common.hex_colour(t["colour"])
                    boxes.append({"x": x, "y": y, "w": w, "h": h, "label": f"person {pid}", "color": colour})
                    tracks.append({"id": pid, "ts": item.ts, "centre": t["centre"]})
                decision = {"boxes": boxes, "ts": match.ts, "persons": [t["id"] for t in tracks]}
                decision["tracks"] = tracks
                out.put(match.ts, json.dumps(decision), codec="json")  # at the frame's timestamp
                stage.done()
                wanted = doc["persons"]
                if wanted != persons:
                    join, persons = self._rejoin(join, persons, wanted, match.ts)
            join.close()
        finally:
            self.decision.close()
            self.decision_done.set()

    def _rejoin(self, join: _Join, persons: list[int], wanted: list[int], ts: int) -> tuple[_Join, list[int]]:
        """The set of persons changed at blob frame ``ts``: a new join with their tracks, from ts+1.

        The decision task's virtual time drops to ts + 1 (legal: its visibility is ts, the open
        pivot) so that, between closing the old join and attaching the new one, nothing at or
        above ts + 1 is reclaimed; attaching then consumes, on the new connections, everything
        below ts + 1 (docs/SEMANTICS.md, "Channels"), so no blob frame is joined twice. Then back to
        INFINITY."""
        self.decision.set_virtual_time(ts + 1)
        join.close()
        for pid in set(persons) - set(wanted):
            try:
                self.rt.lookup(f"kiosk/tracks/{pid}").destroy()  # its tracker ended: nobody reads it
            except stampede.StampedeError:
                pass
        join, joined = self._join(wanted)
        self.decision.set_virtual_time(INFINITY)
        return join, joined

    # --- display ---------------------------------------------------------------------------------

    def run_display(self) -> None:
        common.display(self.display, self.display_in, self.stages["display"], self.decision_done)

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> dict:
        threads = [
            threading.Thread(target=self.run_digitizer, name="digitizer"),
            threading.Thread(target=self.run_lowfi, name="lowfi"),
            threading.Thread(target=self.run_decision, name="decision"),
            threading.Thread(target=self.run_display, name="display"),
        ]
        monitor = common.Monitor(self.rt, "kiosk/")
        stages = list(self.stages.values())

        def extra() -> str:
            return f"persons {len(self.state.active())} active, {self.state.next_id} detected"

        elapsed, interrupted = common.run(
            threads, self.stop, monitor, stages, self.config.seconds, self.config.progress, extra
        )
        with self.state.lock:
            hifi_threads = list(self.state.threads)
        for t in hifi_threads:
            t.join(common.JOIN_S)
        monitor.sample()
        return self._summary(elapsed, interrupted, monitor)

    def _summary(self, elapsed: float, interrupted: bool, monitor: common.Monitor) -> dict:
        last_ts = self.camera.last_ts
        persons = list(self.state.persons.values())
        detected_truth = sorted({p.truth_id for p in persons if p.truth_id is not None})
        expected = self.scene.must_be_found(last_ts)
        return common.summary(
            "kiosk",
            [self.camera],
            self.stages,
            elapsed,
            monitor,
            interrupted,
            tracking_error_px=self.state.errors.summary(),
            persons_detected=len(persons),
            persons_in_scene=len(expected),
            persons_missed=sorted(set(expected) - set(detected_truth)),
            reanalysed_frames=sum(p.reanalysed for p in persons),
            decisions=self.stages["decision"].processed,
        )


class _Join:
    """The decision's join: ``stampede.ApproxJoin`` of the blobs (pivot) with the live tracks; with
    no track to join (ApproxJoin needs two channels) an in-order read of the blobs alone, which
    yields the same shape (a pivot and no matches)."""

    #: Returned by :meth:`next` once nothing more can ever be released.
    EXHAUSTED = object()

    @dataclass
    class Alone:
        pivot: stampede.Item
        ts: int
        matches: tuple = ()

    def __init__(self, pivot: stampede.ChannelInput, others: list[stampede.ChannelInput]) -> None:
        self.pivot: stampede.ChannelInput | None = None
        self.join: stampede.ApproxJoin | None = None
        if others:
            self.join = stampede.ApproxJoin([pivot, *others], tolerance=JOIN_TOLERANCE)
        else:
            self.pivot = pivot
        self.open_ts: int | None = None

    def next(self, timeout: float):
        """The next match, None if none within ``timeout``, or EXHAUSTED. Like ApproxJoin, the
        previous pivot stays open until this call, so the caller may put at its timestamp."""
        if self.join is not None:
            try:
                return self.join.next(timeout=timeout)
            except stampede.NotAvailable:
                return None
            except stampede.Closed:
                return self.EXHAUSTED
        assert self.pivot is not None
        if self.open_ts is not None:
            self.pivot.consume(self.open_ts)
            self.open_ts = None
        try:
            item = self.pivot.get(stampede.OLDEST_UNSEEN, timeout=timeout)
        except stampede.NotAvailable as e:
            return self.EXHAUSTED if e.settled else None
        except stampede.Closed:
            return self.EXHAUSTED
        self.open_ts = item.ts
        return self.Alone(item, item.ts)

    def close(self) -> None:
        """Detaches the join's input connections (their claims go with them)."""
        if self.join is not None:
            self.join.close()
        if self.pivot is not None:
            self.pivot.detach()


class _Follower:
    """The hi-fi tracker's state for one person: last box, velocity, misses."""

    def __init__(self, model: ColourModel, box: tuple[int, int, int, int], ts: int, width: int, height: int):
        self.model, self.box, self.ts = model, box, ts
        self.width, self.height = width, height
        self.velocity = (0.0, 0.0)
        self.misses = 0
        self.max_count = 0
        self.memory = BoxMemory(width, height)

    def step(self, frame: np.ndarray, ts: int) -> tuple[int, int, int, int] | None:
        """The person's box in ``frame`` (searched around the prediction), or None if not there."""
        x, y, w, h = self.box
        dt = max(0, ts - self.ts)
        vx, vy = self.velocity
        # Search window: the last box moved by the velocity, grown by half its size plus the motion
        # it may hide (a figure entering grows by up to its width between two looks).
        mx = int(w / 2 + abs(vx) * dt + 6 + 2 * dt)
        my = int(h / 2 + abs(vy) * dt + 6 + dt)
        wx, wy = int(round(x + vx * dt)) - mx, int(round(y + vy * dt)) - my
        window = clip_box(wx, wy, w + 2 * mx, h + 2 * my, self.width, self.height)
        found = self.model.locate(frame, window)
        if found is None or found[1] < max(6, 0.08 * self.max_count):
            self.misses += 1
            return None
        box, count = found
        box = self.memory.update(box, ts)  # completed to the figure's size if partly hidden
        self.max_count = max(self.max_count, count)
        if dt > 0:
            (ox, oy), (nx, ny) = centre(self.box), centre(box)
            # Smoothed velocity of the box's centre, in pixels per frame.
            self.velocity = (0.5 * vx + 0.5 * (nx - ox) / dt, 0.5 * vy + 0.5 * (ny - oy) / dt)
        self.box, self.ts, self.misses = box, ts, 0
        return box


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m stampede.apps.kiosk", description=__doc__.splitlines()[0] if __doc__ else None
    )
    common.add_run_arguments(parser)
    parser.add_argument(
        "--lowfi-work-ms",
        type=float,
        default=0.0,
        help="extra low-fi analysis time per frame (to see it skip)",
    )
    args = parser.parse_args(argv)
    config = KioskConfig(lowfi_work_s=args.lowfi_work_ms / 1000, **common.run_options(args))
    result = common.run_embedded(Kiosk, config, "kiosk/frames", ["kiosk/decisions"])
    err = result["tracking_error_px"]
    common.print_summary(
        [
            f"skipped by NEWEST_UNSEEN: {result['skipped']}; camera late for {result['camera_late']}",
            f"persons detected {result['persons_detected']} (in scene {result['persons_in_scene']}, "
            f"missed {result['persons_missed']}); "
            f"re-analysed by timestamp {result['reanalysed_frames']} frames",
            common.error_line("hi-fi tracking error", err, "frames"),
        ],
        result,
    )
    return result


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:  # a Ctrl-C outside the run loop (e.g. during start-up)
        sys.exit(130)
