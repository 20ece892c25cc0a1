"""The browser client's demo page end to end in Debian's Chromium, driven by Playwright: a node with
a WebSocket endpoint (`stampede serve --websocket`), the kiosk's camera on it
(`stampede.apps.camera`, from this process), and the page (`browser/demo/viewer.html`, served here
over HTTP, its origin allowed by the node). The page must show changing frames with their boxes,
and its "mark" button must put an annotation at the frame's timestamp that a Python client reads
back. A screenshot is saved for people to look at (`target/browser-viewer.png`)."""

from __future__ import annotations

import functools
import http.server
import json
import re
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from test_dashboard_browser import CHROMIUM, _playwright  # same skip rules: playwright, Chromium

import stampede
from stampede.apps import camera

REPO = Path(__file__).resolve().parents[2]
BROWSER = REPO / "browser"
TARGET = REPO / "target"
WAIT_MS = 20_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Node:
    """`stampede serve` with a WebSocket endpoint whose pages may come from `origin`."""

    def __init__(self, origin: str) -> None:
        binary = REPO / "target" / "debug" / "stampede"
        if not binary.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "stampede-cli"], cwd=REPO, check=True)
        self.dir = tempfile.TemporaryDirectory(prefix="stampede-browser-")
        self.endpoint = f"unixsock-stream/{self.dir.name}/node.sock"
        args = ["serve", "--listen", self.endpoint, "--websocket", "0", "--allow-origin", origin]
        self.process = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.match(r"websocket on (ws://\S+)", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise AssertionError("the node exited before it said where its WebSocket is")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.dir.cleanup()


def test_the_viewer_shows_frames_and_boxes_and_marks_a_frame_in_chromium() -> None:
    sync_playwright = _playwright()
    if not (BROWSER / "dist" / "demo" / "viewer.js").exists():
        pytest.skip("the browser package is not built (cd browser && npm ci && npm run build; test.sh does)")
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(BROWSER))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    node = _Node(origin)
    stop = threading.Event()
    rt = stampede.connect(node.endpoint, timeout=10)
    put: list[int] = []
    feeder = threading.Thread(target=lambda: put.append(camera.run(rt, stop)))
    feeder.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"])
            try:
                _check_page(
                    browser.new_page(viewport={"width": 900, "height": 700}),
                    f"{origin}/demo/viewer.html?ws={node.url}",
                    rt,
                )
            finally:
                browser.close()
    finally:
        stop.set()
        feeder.join(timeout=10)
        rt.close()
        node.close()
        server.shutdown()
    assert put and put[0] > 0, "the camera put frames"


def _check_page(page: Any, url: str, rt: stampede.Runtime) -> None:
    # Attached before the page marks anything: a reader that joins later finds ts_min past it.
    marks = rt.create_channel("kiosk/marks", codec="json")
    with rt.task(stampede.INFINITY) as reader, reader.attach_input(marks) as inp:
        _marked_in(page, url, inp)


def _marked_in(page: Any, url: str, inp: stampede.ChannelInput) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function("document.getElementById('frame-ts').textContent !== '–'", timeout=WAIT_MS)
    first = int(page.inner_text("#frame-ts"))
    pixels = page.evaluate("document.getElementById('image').toDataURL()")
    page.wait_for_function(
        f"Number(document.getElementById('frame-ts').textContent) > {first + 5}", timeout=WAIT_MS
    )
    assert page.evaluate("document.getElementById('image').toDataURL()") != pixels, "the frames change"
    page.wait_for_function("Number(document.getElementById('boxes').textContent) > 0", timeout=WAIT_MS)
    assert page.inner_text("#status") == "live"
    page.click("#mark")
    page.wait_for_selector("#marks li[data-ts]", timeout=WAIT_MS)
    marked = int(page.get_attribute("#marks li[data-ts]", "data-ts") or "-1")
    item = inp.get(marked, timeout=5)
    annotation = json.loads(item.text())
    assert (item.codec, annotation["ts"], annotation["note"]) == (
        "json",
        str(marked),
        "marked in the browser",
    )
    assert annotation["people"] >= 0
    TARGET.mkdir(exist_ok=True)
    page.screenshot(path=str(TARGET / "browser-viewer.png"), full_page=True)
    assert errors == [], f"the page logged errors: {errors}"
