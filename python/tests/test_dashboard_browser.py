"""The dashboard end to end in a real browser: Debian's Chromium driven by Playwright (installed by
`scripts/test.sh`; no browser is downloaded). First a digitizer putting moving frames with an
overlay box, then the main job itself — the Smart Kiosk process with its dashboard, stopped by
Ctrl-C: the page must show changing frames and numbers that update, and the kiosk must print its
summary when interrupted; and the videoconference's mixer. Screenshots are saved for people to
look at (`target/dashboard.png`, `target/kiosk-dashboard.png`, `target/conference-dashboard.png`)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stampede
from stampede.apps.conference import COMPOSITE, Conference

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TARGET = Path(__file__).resolve().parents[2] / "target"
SCREENSHOT = TARGET / "dashboard.png"
WAIT_MS = 15_000


def _playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (scripts/test.sh installs it)")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (scripts/test.sh installs it with apt-get)")
    return sync_playwright


def _digitizer(rt: stampede.Runtime, stop: threading.Event) -> None:
    frames, boxes = rt.lookup("camera/frames"), rt.lookup("camera/boxes")
    pacer = stampede.Pacer(tick=1 / 30)
    with (
        rt.task(0, name="digitizer") as task,
        task.attach_output(frames) as out,
        task.attach_output(boxes) as b,
    ):
        for ts in range(100_000):
            if stop.is_set():
                return
            pacer.sync(ts)
            x = (ts * 4) % 280
            frame = np.zeros((120, 320, 3), dtype=np.uint8)
            frame[40:80, x : x + 40] = (250, 200, 30)
            out.put(ts, frame)
            box = {"x": x, "y": 40, "w": 40, "h": 40, "label": "figure", "color": "#ff0000"}
            b.put(ts, json.dumps({"boxes": [box]}), codec="json")
            task.set_virtual_time(ts + 1)


def test_frames_change_and_numbers_update_in_chromium() -> None:
    sync_playwright = _playwright()
    with stampede.Runtime() as rt:
        rt.create_channel("camera/frames", capacity=64, codec="npy")
        rt.create_channel("camera/boxes", capacity=64, codec="json")
        # A display that keeps up, so GC runs and ts_min moves as it would in a pipeline.
        with rt.task(stampede.INFINITY, name="display") as display:
            inputs = [display.attach_input(rt.lookup(n)) for n in ("camera/frames", "camera/boxes")]
            stop = threading.Event()
            producer = threading.Thread(target=_digitizer, args=(rt, stop))
            drainer = threading.Thread(target=_drain, args=(inputs, stop))
            producer.start()
            drainer.start()
            try:
                with stampede.Dashboard(rt, image="camera/frames", overlays=["camera/boxes"]) as dash:
                    _check_page(sync_playwright, dash.url, "digitizer", "camera/frames", SCREENSHOT)
            finally:
                stop.set()
                producer.join(timeout=10)
                drainer.join(timeout=10)


def _drain(inputs: list[stampede.ChannelInput], stop: threading.Event) -> None:
    while not stop.is_set():
        for inp in inputs:
            try:
                item = inp.get(stampede.NEWEST_UNSEEN, timeout=0.1)
            except (stampede.NotAvailable, stampede.Closed):
                continue
            inp.consume_until(item.ts)


def test_the_kiosk_serves_its_dashboard_and_stops_on_ctrl_c() -> None:
    sync_playwright = _playwright()
    kiosk = subprocess.Popen(
        [sys.executable, "-m", "stampede.apps.kiosk", "--seconds", "60", "--port", "0", "--width", "320"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert kiosk.stdout is not None
        url = None
        for line in kiosk.stdout:  # ends if the kiosk exits before serving
            if line.startswith("dashboard on "):
                url = line.split()[-1]
                break
        assert url is not None, "the kiosk prints its dashboard's URL"
        _check_page(sync_playwright, url, "digitizer", "kiosk/frames", TARGET / "kiosk-dashboard.png")
        kiosk.send_signal(signal.SIGINT)
        out, _ = kiosk.communicate(timeout=30)
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["frames"] > 0, "Ctrl-C stops the pipeline and prints the summary"
        assert kiosk.returncode == 0
    finally:
        if kiosk.poll() is None:
            kiosk.kill()
            kiosk.wait(timeout=10)


def test_the_conference_mixer_serves_the_composite_on_its_dashboard() -> None:
    """The videoconference's mixer with its dashboard, three participant processes: the page shows
    the composite changing and each participant's camera task with its fps
    (`target/conference-dashboard.png`)."""
    sync_playwright = _playwright()
    with Conference(30.0, 74, threads=True, mesh=False, dashboard=True) as conference:
        for name in ("alice", "bob", "carol"):
            conference.join(name)
        assert conference.dashboard_url is not None
        screenshot = TARGET / "conference-dashboard.png"
        _check_page(sync_playwright, conference.dashboard_url, "alice/camera", COMPOSITE, screenshot)


def _check_page(sync_playwright: Any, url: str, producer: str, channel: str, screenshot: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_function("document.getElementById('frame-ts').textContent !== '–'", timeout=WAIT_MS)
            first_ts, first_pixels = _shown(page)
            ts_min = int(page.inner_text("#ts-min"))
            page.wait_for_function(
                f"Number(document.getElementById('frame-ts').textContent) > {first_ts + 5}", timeout=WAIT_MS
            )
            assert _shown(page)[1] != first_pixels, "the image on the canvas changes with the frames"
            page.wait_for_function(
                f"Number(document.getElementById('ts-min').textContent) > {ts_min}", timeout=WAIT_MS
            )
            row = page.locator(f"#channels tbody tr[data-name='{channel}']")
            page.wait_for_function(
                "[...document.querySelectorAll('#tasks tbody tr')]"
                f".some(r => r.textContent.includes('{producer}')"
                " && parseFloat(r.querySelector('.fps').textContent) > 0)",
                timeout=WAIT_MS,
            )
            assert int(row.locator(".live-items").inner_text()) <= 64, "bounded memory: GC keeps up"
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()


#: The frame's timestamp shown and the canvas's pixels, read together: read one after the other, a
#: burst of frames arriving in between (the page catching up under load) made the later check
#: compare two readings of one frame.
SHOWN = """() => [
  Number(document.getElementById('frame-ts').textContent),
  document.getElementById('image').toDataURL(),
]"""


def _shown(page: Any) -> tuple[int, str]:
    ts, pixels = page.evaluate(SHOWN)
    return int(ts), str(pixels)
