"""The videoconference (docs/APPLICATIONS.md, "Videoconference"): the mixer's exact join and skips,
in one process and step by step; then a conference of real processes in which a participant is
killed and restarted.

No test asserts a duration: the process test checks *which* composites the survivors got (their
timestamps are frame numbers of the wall clock, so "while the participant was gone" is a range of
timestamps), and reports how long the rejoin took.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import stampede
from stampede.apps.conference import (
    BLANK,
    COMPOSITE,
    INPUTS,
    TILE_WIDTH,
    Conference,
    Mixer,
    Participant,
    SyntheticCamera,
    frame_now,
    main,
    read_stamp,
)

FPS = 30.0


def tiles(composite: np.ndarray) -> list[tuple[int, int] | None]:
    return [read_stamp(composite[:, x : x + TILE_WIDTH]) for x in range(0, composite.shape[1], TILE_WIDTH)]


def test_a_synthetic_frame_carries_its_stamp_and_its_ground_truth():
    camera = SyntheticCamera("alice", 74_000)
    frame = camera.render(1234)
    assert frame.shape == (154, TILE_WIDTH, 3) and frame.dtype == np.uint8
    assert read_stamp(frame) == (camera.id, 1234)
    assert camera.shows(frame, 1234)
    assert not camera.shows(camera.render(1240), 1234)  # the square moved
    assert read_stamp(np.full_like(frame, BLANK)) is None


@pytest.mark.parametrize("threads", [False, True], ids=["single", "threads"])
def test_the_mixer_joins_by_exact_timestamp_and_skips_whoever_is_missing(threads):
    """Three participants; c stops after two frames, b puts one frame that is not an image. Every
    composite's tiles are the frames of its own timestamp, in name order; a missing frame leaves
    its tile blank and is counted, a bad one too, and the mixer never waits past its deadline."""
    with stampede.Runtime() as rt:
        mixer = Mixer(rt, FPS, budget=0.0, threads=threads)
        t0 = frame_now(FPS) + 3
        cameras = {n: SyntheticCamera(n, 20_000) for n in ("a", "b", "c")}
        outs = {}
        for name in cameras:
            channel = rt.create_channel(INPUTS + name, codec="npy")
            outs[name] = rt.task(t0).attach_output(channel)
        for ts in range(t0, t0 + 6):
            for name, camera in cameras.items():
                if name == "c" and ts > t0 + 1:
                    continue
                frame = camera.render(ts)
                outs[name].put(ts, frame[:, :10] if (name, ts) == ("b", t0 + 3) else frame)
        display = rt.task(stampede.INFINITY).attach_input(rt.lookup(COMPOSITE))
        mixer.discover()
        assert sorted(mixer.seats) == ["a", "b", "c"]
        for ts in range(t0 + 1, t0 + 6):  # t0 + 1 finds them all there (polled): present from t0 + 2
            mixer.tick(ts)
        ids = {n: c.id for n, c in cameras.items()}
        got = {item.ts: tiles(item.array()) for item in display.get_range(t0, t0 + 6)}
        assert sorted(got) == [t0 + 2, t0 + 3, t0 + 4, t0 + 5]  # nobody present at t0 + 1: no composite
        assert got[t0 + 2] == [(ids["a"], t0 + 2), (ids["b"], t0 + 2), None]  # c stopped after t0 + 1
        assert got[t0 + 3] == [(ids["a"], t0 + 3), None, None]  # b's frame was no image
        assert got[t0 + 5] == [(ids["a"], t0 + 5), (ids["b"], t0 + 5), None]
        seats = {n: s.summary() for n, s in mixer.seats.items()}
        assert seats["a"] == {"joined": 4, "skipped": 0, "absent": 0, "arrivals": 1, "bad": 0}
        assert seats["b"]["bad"] == 1 and seats["b"]["joined"] == 3
        assert seats["c"]["skipped"] == 4 and seats["c"]["joined"] == 0
        if mixer.pool is not None:
            mixer.pool.shutdown()


@pytest.mark.parametrize("threads", [False, True], ids=["single", "threads"])
def test_a_participant_killed_and_restarted_is_back_and_the_others_never_stopped(threads):
    """K=3 processes and a mixer serving the node: carol is killed (SIGKILL) and started again. The
    other two displays get composites all the while, the mixer counts carol's missing frames, and
    the restarted carol sees herself in the composite again; every tile any display checked was
    the frame of the composite's own timestamp and showed its ground truth."""
    with Conference(FPS, 20, threads=threads, mesh=False) as c:
        c.join("alice", record_ts=True)
        c.join("bob", record_ts=True)
        c.join("carol")
        time.sleep(2.0)
        c.kill("carol")
        killed = frame_now(FPS)
        time.sleep(1.5)
        restarted = frame_now(FPS)
        c.join("carol")
        time.sleep(2.5)
        carol = c.leave("carol")
        survivors = c.leave_all()
        mixer = c.mixer_summary()
    for p in [*survivors, carol]:
        assert p["error"] is None, p
        assert p["mismatched"] == 0 and p["wrong"] == 0, p
        assert p["own_tile"] > 0, p
    for p in survivors:
        gone = [ts for ts in p["displayed_ts"] if killed < ts < restarted]
        # Carol was gone for ~45 frame times: composites kept coming (most of them, not one or two).
        assert len(gone) >= (restarted - killed) // 3, (p["name"], len(gone), restarted - killed)
    seat = mixer["participants"]["carol"]
    assert seat["skipped"] + seat["absent"] > 0 and seat["arrivals"] >= 2, seat
    assert mixer["error"] is None
    print(f"carol rejoined: her first own tile {carol['first_own_tile_s']} s after her first frame")


def test_the_square_never_covers_the_stamp():
    """The stamp is in row 0: a square there would make a correct tile look wrong (found by the
    process test's threaded run)."""
    camera = SyntheticCamera("alice", 20_000)
    for ts in range(2 * camera.height):
        assert camera.truth(ts)[1] >= 1
        assert camera.shows(camera.render(ts), ts)


#: Longest the dashboard may take to show a composite of every participant (a bound on a wait,
#: not a figure: it ends a stuck test).
DASHBOARD_WAIT_S = 30.0


def test_the_dashboard_shows_the_composite_and_every_participants_fps_and_skips():
    """The mixer's dashboard: the composite as its image (one tile per participant) and, per
    tile, a box labelled with the participant's fps and skips; each participant's channel and
    camera task (its fps) in the snapshot."""
    with Conference(FPS, 20, threads=True, mesh=False, dashboard=True) as c:
        c.join("alice")
        c.join("bob")
        assert c.dashboard_url is not None
        deadline = time.monotonic() + DASHBOARD_WAIT_S
        while True:
            with urllib.request.urlopen(c.dashboard_url + "api/snapshot", timeout=5) as r:
                snapshot = json.load(r)
            image = snapshot["image"]
            boxes = image["overlays"][0]["boxes"] if image["overlays"] else []
            if image["status"] == "ok" and image["width"] == 2 * TILE_WIDTH and len(boxes) == 2:
                break
            assert time.monotonic() < deadline, snapshot["image"]
            time.sleep(0.2)
    assert image["channel"] == COMPOSITE
    for box, name in zip(boxes, ["alice", "bob"]):
        assert re.fullmatch(rf"{name} \d+ fps, \d+ skipped", box["label"]), box
    assert {f"{INPUTS}alice", f"{INPUTS}bob", COMPOSITE} <= {ch["name"] for ch in snapshot["channels"]}
    assert {"alice/camera", "bob/camera", "mixer"} <= {t["name"] for t in snapshot["tasks"]}


def test_a_display_counts_a_composite_it_cannot_read_and_a_tile_of_another_timestamp():
    """What a display may meet on a node others can write to: a composite that is no RGB image, or
    whose own tile carries another timestamp (a broken join). Counted, never raised."""
    with stampede.Runtime() as rt:
        Mixer(rt, FPS, budget=0.0, threads=False)
        alice = Participant(rt, "alice", 20_000, FPS)
        good = alice.camera.render(500)
        alice.show(500, good)
        assert (alice.own_tile, alice.mismatched, alice.wrong) == (1, 0, 0)
        alice.show(501, good)  # her frame 500 in the composite of 501
        assert alice.mismatched == 1
        for hostile in [
            np.zeros((0, TILE_WIDTH, 3), np.uint8),
            np.zeros((10, TILE_WIDTH, 1), np.uint8),
            np.zeros((10, TILE_WIDTH, 3), np.float32),
            np.zeros((10, 7, 3), np.uint8),  # narrower than a tile: no tile to read
        ]:
            alice.show(502, hostile)
        assert (alice.own_tile, alice.mismatched, alice.wrong) == (1, 1, 3)


def test_bad_arguments_and_an_absent_node_are_one_line_errors():
    """A name that is not one segment is a usage error (exit 2) before any connection; a node that
    is not there is one line naming the endpoint (exit 1), not a traceback."""
    with pytest.raises(SystemExit) as usage:
        main(["participant", "--connect", "tcp/127.0.0.1:1", "--name", "a/b"])
    assert usage.value.code == 2
    absent = subprocess.run(
        [
            sys.executable,
            "-m",
            "stampede.apps.conference",
            "participant",
            "--connect",
            "nonsense",
            "--name",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert absent.returncode == 1, absent.stderr
    assert absent.stderr.startswith("conference: ") and "nonsense" in absent.stderr, absent.stderr
    assert "Traceback" not in absent.stderr, absent.stderr
