"""Nodes sharing one ts_min (`stampede serve --mesh-ts-min`, docs/PROTOCOL.md), with real
processes: a task held by a client of node b keeps node a from reclaiming what it could still get;
when b is killed (SIGKILL), a drops b's claims and moves on; b restarted comes back as a new
incarnation, is sponsored into the mesh again, and its new tasks hold a's ts_min as before.
Every wait is bounded; every process is stopped in a `finally`.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from conftest import NODE_START_S, listening, stampede_bin

import stampede

#: How long ts_min may take to follow (message rounds on loopback, a dead link noticed): far less.
SETTLE_S = 15.0


def eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@contextmanager
def node(
    name: str, endpoint: str, connect: str | None = None, clock_skew_ms: int = 0
) -> Iterator[subprocess.Popen[str]]:
    args = [stampede_bin(), "serve", "--listen", endpoint, "--name", name, f"--clock-skew-ms={clock_skew_ms}"]
    args += ["--connect", connect] if connect else []
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert listening(proc), f"stampede serve ({name}) did not say it listens"
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=NODE_START_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def fill(rt: stampede.Runtime, start: int, stop: int) -> None:
    """A producer on `rt` puts start..stop into `frames`, then steps aside (virtual time INFINITY)."""
    producer = rt.task(start)
    out = producer.attach_output(rt.lookup("frames"))
    for ts in range(start, stop):
        out.put(ts, b"x")
    producer.set_virtual_time(stampede.INFINITY)


def test_a_killed_node_releases_its_claims_and_comes_back(tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("mesh")
    a_ep, b_ep = f"unixsock-stream/{tmp}/a.sock", f"unixsock-stream/{tmp}/b.sock"
    with node("a", a_ep), stampede.connect(a_ep, timeout=NODE_START_S) as on_a:
        on_a.create_channel("frames")
        with node("b", b_ep, connect=a_ep) as b:
            on_b = stampede.connect(b_ep, timeout=NODE_START_S)
            held = on_b.task(5)  # holds 5 on b, so everywhere
            fill(on_a, 5, 10)
            assert eventually(lambda: on_a.ts_min == 5), on_a.ts_min
            time.sleep(0.3)
            assert on_a.ts_min == 5, "the task of b's client holds a's ts_min"

            b.send_signal(signal.SIGKILL)
            b.wait(timeout=NODE_START_S)
            assert eventually(lambda: on_a.ts_min == 10), f"b's claims went with b: {on_a.ts_min}"
            del held, on_b  # their node is gone: closing them has nothing to release

        with node("b", b_ep, connect=a_ep):
            with stampede.connect(b_ep, timeout=NODE_START_S) as again:
                with pytest.raises(stampede.BelowVisibility):
                    again.task(5)  # below b's new door: a has moved past it
                holder = again.task(10)
                fill(on_a, 10, 13)
                assert eventually(lambda: on_a.ts_min == 10), on_a.ts_min
                time.sleep(0.3)
                assert on_a.ts_min == 10, "the restarted b's task holds a's ts_min again"
                holder.close()
                assert eventually(lambda: on_a.ts_min == 13), on_a.ts_min


def test_embedded_nodes_share_ts_min() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a_ep, b_ep = f"unixsock-stream/{tmp}/a.sock", f"unixsock-stream/{tmp}/b.sock"
        with stampede.Runtime(listen=a_ep, name="a") as a:
            with stampede.Runtime(listen=b_ep, name="b", connect=a_ep) as b:
                a.create_channel("frames")
                held = b.task(3)
                fill(a, 3, 6)
                assert eventually(lambda: a.ts_min == 3), a.ts_min
                held.set_virtual_time(5)
                assert eventually(lambda: a.ts_min == 5), a.ts_min
    # Every node of a mesh shares one ts_min: a node can no longer keep its own.
    with pytest.raises(stampede.InvalidArgument, match="shares one ts_min"):
        stampede.Runtime(listen=f"unixsock-stream/{tmp}/c.sock", mesh_ts_min=False)


def test_paced_cameras_on_two_nodes_number_frames_alike(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Time across hosts (docs/NODES.md): node b's clock is 5 s ahead (injected); pacers made from
    each node's `epoch()` still give the same frame number at the same instant (150 frames apart
    without mesh time), and the mesh's epoch is a's start, not b's."""
    tmp = tmp_path_factory.mktemp("time")
    a_ep, b_ep = f"unixsock-stream/{tmp}/a.sock", f"unixsock-stream/{tmp}/b.sock"
    with node("a", a_ep), stampede.connect(a_ep, timeout=NODE_START_S) as on_a:
        time.sleep(1.0)
        with (
            node("b", b_ep, connect=a_ep, clock_skew_ms=5000),
            stampede.connect(b_ep, timeout=NODE_START_S) as on_b,
        ):
            tick = 1 / 30

            def agree() -> bool:
                camera_a = stampede.Pacer(tick, epoch=on_a.epoch())
                camera_b = stampede.Pacer(tick, epoch=on_b.epoch())
                return abs(camera_a.vt_now() - camera_b.vt_now()) <= 1

            assert eventually(agree)
            epoch_a, epoch_b = on_a.epoch(), on_b.epoch()
            # Read back to back: the two estimates of one epoch, far closer than a frame apart.
            elapsed_a, elapsed_b = epoch_a.elapsed, epoch_b.elapsed
            assert elapsed_a > 1.0, "b took a's epoch (a started a second before b)"
            assert abs(elapsed_a - elapsed_b) < 0.02
