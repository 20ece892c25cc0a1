"""Real processes on one host sharing channels through a `stampede serve` node (docs/NODES.md): two
client processes, a queue with workers in separate processes, an exact join fed by producers in
separate processes, a 6 MB NumPy frame crossing between processes through shared memory, a
camera process on one node putting into a channel on another, and a camera process killed and
restarted under a display that keeps running. Every wait is bounded;
every process is killed in a `finally`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import NODE_START_S, served_nodes

import stampede

#: Longest a client process may run.
PROCESS_S = 60.0


@pytest.fixture
def endpoint() -> Iterator[str]:
    with served_nodes("processes") as [endpoint]:
        yield endpoint


@contextmanager
def client(endpoint: str, body: str) -> Iterator[subprocess.Popen[str]]:
    """A Python process running `body` with `rt` connected to `endpoint`; killed on the way out."""
    code = "import sys, numpy as np, stampede\n"
    code += f"rt = stampede.connect({endpoint!r}, timeout={NODE_START_S})\n"
    code += textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def finish(proc: subprocess.Popen[str]) -> str:
    """The process's output once it exited 0 (within PROCESS_S)."""
    out, _ = proc.communicate(timeout=PROCESS_S)
    assert proc.returncode == 0, out
    return out


def test_two_client_processes_share_a_channel(endpoint):
    """A producer process and a consumer process: every frame, in order, and a 6 MB NumPy frame
    that arrives as an equal, read-only array viewing a shared-memory segment (docs/NODES.md,
    "The fabric")."""
    with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
        rt.create_channel("camera/frames")
        consumer_code = """
            inp = rt.task(stampede.INFINITY).attach_input(rt.lookup("camera/frames"))
            print("ready", flush=True)
            for ts in range(20):
                item = inp.get(stampede.OLDEST_UNSEEN, timeout=30)
                assert (item.ts, bytes(item.data)) == (ts, f"frame {ts}".encode()), item
                inp.consume(ts)
            frame = inp.get(stampede.OLDEST_UNSEEN, timeout=30).array()
            expected = np.arange(6 * 1024 * 1024, dtype=np.uint8).reshape(1024, 2048, 3)
            assert frame.shape == expected.shape and not frame.flags.writeable
            assert np.array_equal(frame, expected)
            # On one host the frame is passed as a shared-memory segment and the array views the
            # mapping itself: nothing copied it between the producer's put and this process.
            address = frame.__array_interface__["data"][0]
            mappings = [line.split() for line in open("/proc/self/maps")]
            spans = [(int(m[0].split("-")[0], 16), int(m[0].split("-")[1], 16), m) for m in mappings]
            viewed = [m for lo, hi, m in spans if lo <= address < hi]
            assert viewed and "memfd:stampede-item" in " ".join(viewed[0][5:]), viewed
            print("ok", flush=True)
        """
        producer_code = """
            camera = rt.task(0)
            out = camera.attach_output(rt.lookup("camera/frames"))
            for ts in range(20):
                out.put(ts, f"frame {ts}")
                camera.set_virtual_time(ts + 1)
            out.put(20, np.arange(6 * 1024 * 1024, dtype=np.uint8).reshape(1024, 2048, 3))
        """
        with client(endpoint, consumer_code) as consumer:
            assert consumer.stdout is not None and consumer.stdout.readline().strip() == "ready"
            with client(endpoint, producer_code) as producer:
                finish(producer)
                assert finish(consumer).strip() == "ok"


def test_queue_workers_in_separate_processes(endpoint):
    """Jobs put by this process go to workers in three other processes, each exactly once."""
    jobs = 60
    with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
        queue = rt.create_queue("jobs")
        results = rt.create_channel("results")
        reader = rt.task(stampede.INFINITY).attach_input(results)
        worker_code = """
            inp = rt.task(stampede.INFINITY).attach_input(rt.lookup("jobs"))
            out = rt.task(0).attach_output(rt.lookup("results"))
            while True:
                try:
                    job = inp.get(timeout=2)
                except stampede.NotAvailable:
                    break
                out.put(job.ts, f"{job.ts * job.ts}")
                inp.consume(job)
        """
        source = rt.task(0)
        put = source.attach_output(queue)
        with ExitStack() as stack:
            workers = [stack.enter_context(client(endpoint, worker_code)) for _ in range(3)]
            for ts in range(jobs):
                put.put(ts, b"job")
            got = {}
            for _ in range(jobs):
                item = reader.get(stampede.OLDEST_UNSEEN, timeout=PROCESS_S)
                got[item.ts] = int(bytes(item.data))
            for worker in workers:
                finish(worker)
        assert got == {ts: ts * ts for ts in range(jobs)}
        assert queue.stats()["live_items"] == 0


def test_exact_join_fed_by_producer_processes(endpoint):
    """Two producer processes feed an exact join in this process: every timestamp, once, in order."""
    frames = 20
    with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
        left, right = rt.create_channel("left"), rt.create_channel("right")
        joiner = rt.task(stampede.INFINITY)
        join = stampede.ExactJoin([joiner.attach_input(left), joiner.attach_input(right)])

        def producer(name: str) -> str:
            return f"""
                t = rt.task(0)
                out = t.attach_output(rt.lookup({name!r}))
                for ts in range({frames}):
                    out.put(ts, {name!r} + str(ts))
                    t.set_virtual_time(ts + 1)
            """

        with client(endpoint, producer("left")) as a, client(endpoint, producer("right")) as b:
            joined = [join.next(timeout=PROCESS_S) for _ in range(frames)]
            finish(a)
            finish(b)
        assert [j.ts for j in joined] == list(range(frames))
        assert [bytes(i.data) for i in joined[7].items] == [b"left7", b"right7"]


FRAMES_EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "frames.py")


def frames_example(viewer_endpoint: str, camera_args: list[str]) -> None:
    """Runs README's example: a viewer on `viewer_endpoint` showing 5 frames, intact, that a camera
    process started with `camera_args` (its endpoint and options) puts."""
    viewer = subprocess.Popen(
        [sys.executable, FRAMES_EXAMPLE, "viewer", "--connect", viewer_endpoint]
        + ["--count", "5", "--timeout", "20"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        camera = subprocess.run(
            [sys.executable, FRAMES_EXAMPLE, "camera", *camera_args, "--count", "60", "--fps", "200"],
            capture_output=True,
            text=True,
            timeout=PROCESS_S,
        )
        assert camera.returncode == 0, camera.stderr
        out = finish(viewer)
        assert "(5 shown" in out, out
    finally:
        viewer.kill()
        viewer.wait()


def test_frames_example_camera_and_viewer(endpoint):
    """README's two-terminal example: the viewer shows frames the camera process puts, intact."""
    frames_example(endpoint, ["--connect", endpoint])


def test_frames_example_across_two_nodes():
    """README's example across two nodes sharing ts_min: the camera process is attached to node b
    and puts into a channel it placed on node a, through its task's shadow there; the viewer is
    attached to node a."""
    with served_nodes("a", "b") as [a, b]:
        frames_example(a, ["--connect", b, "--place", "a"])
        with stampede.connect(a, timeout=NODE_START_S) as rt:
            assert rt.lookup("camera/frames").info()["node"] == "a"


def test_an_embedded_runtime_serves_another_process(tmp_path):
    """Runtime(listen=...): this process's runtime, used here, is shared with a client process."""
    endpoint = f"unixsock-stream/{tmp_path}/embedded.sock"
    with stampede.Runtime(listen=endpoint, name="app") as rt:
        assert (rt.node, rt.endpoints, rt.nodes()) == ("app", [endpoint], ["app"])
        results = rt.create_channel("results")
        inp = rt.task(stampede.INFINITY).attach_input(results)
        code = """
            assert rt.node == "app" and rt.names() == ["results"]
            rt.task(0).attach_output(rt.lookup("results")).put(0, "from another process")
        """
        with client(endpoint, code) as other:
            finish(other)
        assert bytes(inp.get(0, timeout=PROCESS_S).data) == b"from another process"
    with pytest.raises(stampede.InvalidArgument):
        stampede.Runtime(name="app")  # serving options without an endpoint


def test_a_session_flooding_a_node_meets_its_byte_budget(tmp_path):
    """max_live_bytes / max_session_live_bytes (docs/LIMITS.md, "Byte budgets"): a session putting
    into a channel nobody reads gets Full naming its budget, and stats() show use against budget."""
    endpoint = f"unixsock-stream/{tmp_path}/budget.sock"
    node_budget, session_budget = 4 << 20, 1 << 20
    with stampede.Runtime(
        listen=endpoint, name="n", max_live_bytes=node_budget, max_session_live_bytes=session_budget
    ) as node:
        with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
            out = rt.task(0).attach_output(rt.create_channel("flood"))
            payload = bytes(64 * 1024)
            with pytest.raises(stampede.Full, match="max_session_live_bytes"):
                for ts in range(100):
                    out.put(ts, payload, timeout=0.2)
            stats = rt.stats()
            session = (stats["session_live_bytes"], stats["max_session_live_bytes"])
            assert session == (session_budget, session_budget)
            assert (stats["live_bytes"], stats["max_live_bytes"]) == (session_budget, node_budget)
        assert node.stats()["max_live_bytes"] is None, "the embedded runtime's own puts are not budgeted"


def test_a_camera_killed_and_restarted_reaches_a_display_that_was_never_restarted(endpoint):
    """A producer can always join (docs/SEMANTICS.md, "Virtual time, visibility, GC"): a display at
    INFINITY connects first; a camera process connects later at virtual time 0 and its frames
    arrive; the camera is killed (SIGKILL, holding its task at virtual time 100) and restarted at
    100, above its last timestamp, and the same display gets the new frames."""
    display_body = """
        frames = rt.create_channel("camera/frames")
        print("ready", flush=True)
        with rt.task(stampede.INFINITY) as task, task.attach_input(frames) as inp:
            seen = []
            while not seen or seen[-1] < 150:
                item = inp.get(stampede.NEWEST_UNSEEN, timeout=30)
                seen.append(item.ts)
                inp.consume_until(item.ts)
        print("display saw", min(seen), max(seen), flush=True)
    """
    camera_body = """
        import time
        start, stop = int(sys.argv[1]), int(sys.argv[2])
        frames = rt.lookup("camera/frames")
        task = rt.task(start)  # a root task: at or above ts_min, which never passes 1 + the last put
        out = task.attach_output(frames)
        for ts in range(start, stop):
            out.put(ts, np.full((4, 4), ts % 256, dtype=np.uint8))
            task.set_virtual_time(ts + 1)
            time.sleep(0.002)
        print("holding", stop, flush=True)
        time.sleep(PROCESS_S)
    """
    code = "import sys, numpy as np, stampede\n"
    code += f"PROCESS_S = {PROCESS_S}\n"
    code += f"rt = stampede.connect({endpoint!r}, timeout={NODE_START_S})\n" + textwrap.dedent(camera_body)
    with client(endpoint, display_body) as display:
        assert display.stdout is not None
        assert display.stdout.readline().strip() == "ready"
        first = subprocess.Popen([sys.executable, "-c", code, "0", "100"], stdout=subprocess.PIPE, text=True)
        try:
            assert first.stdout is not None
            assert first.stdout.readline().split() == ["holding", "100"], "the first camera's frames go in"
        finally:
            first.kill()  # SIGKILL while its task holds virtual time 100: liveliness ends its session
            first.wait()
        again = subprocess.Popen([sys.executable, "-c", code, "100", "200"], stdout=subprocess.PIPE)
        try:
            out = finish(display)
            assert out.split()[:2] == ["display", "saw"], out
            assert int(out.split()[2]) < 100, f"the display got the first camera's frames: {out}"
            assert int(out.split()[3]) >= 150, f"the display got the restarted camera's frames: {out}"
        finally:
            again.kill()
            again.wait()


def test_the_digitizer_tracker_example_runs_one_side_per_process(endpoint):
    """`python/examples/digitizer_tracker.py --connect … --role …` (docs/TRACING.md): the tracker
    process follows the camera process's frames through the node, and finds every square."""
    example = Path(__file__).resolve().parents[1] / "examples" / "digitizer_tracker.py"
    side = [sys.executable, str(example), "--connect", endpoint, "--role"]
    tracker = subprocess.Popen([*side, "tracker"], stdout=subprocess.PIPE, text=True)
    try:
        # The tracker makes the channel, then attaches at once; the camera's 2 s of frames start
        # after the channel exists.
        with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
            deadline = time.monotonic() + NODE_START_S
            while "kiosk/frames" not in rt.names() and time.monotonic() < deadline:
                time.sleep(0.05)
        camera = subprocess.run(
            [*side, "camera", "--frames", "120", "--fps", "60"], timeout=PROCESS_S, check=True
        )
        assert camera.returncode == 0
        out = finish(tracker)
    finally:
        tracker.kill()
        tracker.wait()
    line = next(line for line in out.splitlines() if line.startswith("tracker:"))
    assert "tracking errors 0" in line and not line.startswith("tracker: 0 frames"), out


def test_a_reader_killed_with_pushed_frames_leaves_the_node_serving(endpoint):
    """A display process reading with prefetch "newest" is killed -9 while the node pushes it
    frames (docs/PREFETCH.md): the node stays up, another reader gets every later frame, and the
    killed reader's session and its claims go within the lease, so the channel's items are
    reclaimed."""
    with stampede.connect(endpoint, timeout=NODE_START_S) as rt:
        frames = rt.create_channel("prefetch/frames")
        reader_code = """
            frames = rt.lookup("prefetch/frames")
            display = rt.task(stampede.INFINITY)
            inp = display.attach_input(frames, prefetch="newest")
            print("attached", flush=True)
            item = inp.get(stampede.NEWEST_UNSEEN, timeout=30)
            print("read", item.ts, flush=True)
            while True:
                item = inp.get(stampede.NEWEST_UNSEEN, timeout=30)
        """
        with rt.task(0) as camera, client(endpoint, reader_code) as reader:
            out = camera.attach_output(frames)
            # A reader sees what is put after it attached (its task's visibility is INFINITY).
            assert reader.stdout.readline().strip() == "attached"
            out.put(0, b"\x00" * 230_400)
            assert reader.stdout.readline().strip() == "read 0"
            for ts in range(1, 40):
                out.put(ts, b"\x01" * 230_400)
            reader.kill()
            reader.wait()
            with rt.task(stampede.INFINITY) as other:
                inp = other.attach_input(frames)
                for ts in range(40, 60):
                    out.put(ts, b"\x02" * 230_400)
                    assert inp.get(stampede.NEWEST_UNSEEN, timeout=10).ts == ts
                    inp.consume_until(ts)
                camera.set_virtual_time(60)
                # The killed reader's session ends within the lease (its liveliness token goes):
                # then nothing holds the frames.
                deadline = time.monotonic() + 30
                while rt.ts_min < 60 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert rt.ts_min == 60, f"the killed reader still holds ts_min at {rt.ts_min}"
