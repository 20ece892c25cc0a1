"""Fault injection: a mesh of three `stampede serve` nodes (a ← b ← c) with paced producer and
consumer client processes on each node, while a seeded chaos loop SIGKILLs and restarts clients
and, less often, whole nodes (a producer can always join: docs/SEMANTICS.md,
"Virtual time, visibility, GC"; failures: docs/NODES.md, "Failures and liveliness"; no hang:
docs/SEMANTICS.md, "Errors").

Per node X: one producer puts 30 fps frames (alternately raw bytes and a small NumPy array, each
carrying its timestamp and a CRC-32 of a body derived from it) into ``faults/X``; two consumers
(tasks at INFINITY, one reading NEWEST_UNSEEN, one OLDEST_UNSEEN, ``consume_until`` after each
item) check every item is intact and timestamps increase. The OLDEST_UNSEEN consumer reaches its
node through another node (``connect(..., node=X)``), so a node's death also cuts sessions that
merely pass through it. Timestamps are milliseconds since the run started (CLOCK_MONOTONIC, one
clock for every process), so a restarted producer starts above everything ever put on its node.

Clients report on stdout, one JSON line at least every ``HEARTBEAT_S``: a process silent for
``HANG_S`` is hung (killed, counted). A client that gets ``Unreachable`` or ``Closed`` reconnects
with a bounded retry and recreates or looks up its channel. At the end: every client recovers
(makes progress after the chaos), each node's ts_min advances above that node's last start, its
channel's live items stay below ``LIVE_ITEMS_MAX``, every node process is alive, and every client
exits within ``STOP_S`` when asked. One JSON summary line goes to stdout.

    .venv/bin/python python/tests/faults.py --seconds 20 [--seed N]    # short mode (the test)
    .venv/bin/python python/tests/faults.py --seconds 600 [--seed N]   # long mode (docs/CHECKS.md)
    sudo .venv/bin/python python/tests/faults.py --netns --seconds 60  # a network of hosts

With ``--netns`` every node is a host of its own (a network namespace, netns.py) reached over TCP
at its own address, the links between nodes carry ``LINK_DELAY_S`` each way (a userspace relay:
the kernel here has no netem), and the chaos also cuts a node's link for a while and
heals it (a partition); each node's resident memory must stay within ``RSS_GROWTH_MAX`` times
what it was after warming up.

The schedule of kills (times, kinds, targets) is a function of the seed and the duration only:
``--seed`` replays it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import netns

REPO = Path(__file__).resolve().parents[2]
NODES = ("a", "b", "c")
#: Each node's --connect parent: a ← b ← c.
PARENT = {"a": None, "b": "a", "c": "b"}
#: The node an OLDEST_UNSEEN consumer of X connects through (its session is on X).
VIA = {"a": "b", "b": "c", "c": "a"}
FPS = 30
#: Call timeouts: a get or put waits at most this long for its item or space.
CALL_S = 1.0
#: One connect attempt; a client retries until it is told to stop.
CONNECT_S = 2.0
#: A client prints at least this often while it is not inside a call.
HEARTBEAT_S = 0.5
#: Documented bound of a remote call on a dead fabric: wait slice (1 s) + QUERY_MARGIN (5 s).
REMOTE_MARGIN_S = 6.0
#: A client silent this long is hung: longer than the longest legal call plus a process start.
HANG_S = 15.0
#: A node that does not say it listens within this long failed to start.
NODE_START_S = 30.0
#: How long every client has, after the chaos, to make progress again.
RECOVER_S = 15.0
#: How long every client has to exit once asked to stop.
STOP_S = 15.0
#: A channel holding more live items than this is not reclaiming (5 s of frames).
LIVE_ITEMS_MAX = 150
#: With --netns: a consumer cut off by a partition (up to PARTITION_S) catches up through delayed
#: links at a few items a frame, so its backlog may take as long again to drain; and since the
#: nodes share one ts_min, a node cut off holds every node's until the liveliness timeout (3 s)
#: declares it dead, and rejoins after the heal (15 s of frames).
LIVE_ITEMS_MAX_NETWORK = 450
#: Clients and nodes killed per chaos event: the time between events, in seconds.
CHAOS_GAP_S = (1.0, 2.0)
#: Every NODE_EVERY-th chaos event (from a seeded offset) kills a whole node, down for a while.
NODE_EVERY = 6
NODE_DOWN_S = (0.5, 1.5)
#: How often the harness samples the nodes' resident memory (reported, first and last sample of
#: each node's current process).
RSS_EVERY_S = 5.0
#: With --netns: every PARTITION_EVERY-th chaos event (from a seeded offset) cuts a node's link.
PARTITION_EVERY = 5
PARTITION_S = (1.0, 3.0)
#: With --netns: the delay of each link between nodes, each way.
LINK_DELAY_S = 0.005
#: With --netns: the port every node listens on, at its own address.
NODE_PORT = 7447
#: A node's resident memory may grow to this many times its size after WARMUP_S.
RSS_GROWTH_MAX = 2.0
WARMUP_S = 10.0
BODY_BYTES = 188
EXPECTED_ERRORS = {"Unreachable", "Closed", "NotFound", "AlreadyExists"}


def now_ms(t0: float) -> int:
    """The run's clock in milliseconds: CLOCK_MONOTONIC is one clock for every process on Linux."""
    return int((time.monotonic() - t0) * 1000) + 1


# ----------------------------------------------------------------------------------- payloads


def body(ts: int) -> bytes:
    seed = hashlib.blake2b(ts.to_bytes(8, "little"), digest_size=64).digest()
    return (seed * (BODY_BYTES // 64 + 1))[:BODY_BYTES]


def frame(ts: int) -> Any:
    """Frame `ts`: header (ts, CRC-32 of the body) then the body; as a NumPy array on odd ts."""
    data = body(ts)
    raw = struct.pack("<qI", ts, zlib.crc32(data)) + data
    if ts % 2:
        import numpy as np

        return np.frombuffer(raw, dtype=np.uint8).reshape(-1, 8).copy()
    return raw


def check_frame(item: Any) -> str | None:
    """None if `item` is the intact frame its timestamp names, else what is wrong."""
    if item.codec == "npy":
        arr = item.array()
        if arr.dtype.name != "uint8" or arr.ndim != 2 or arr.shape[1] != 8:
            return f"array {arr.dtype}{arr.shape}"
        raw = arr.tobytes()
    else:
        raw = bytes(item.data)
    if len(raw) != 12 + BODY_BYTES:
        return f"{len(raw)} bytes"
    ts, crc = struct.unpack_from("<qI", raw)
    data = raw[12:]
    if ts != item.ts:
        return f"carries ts {ts}"
    if zlib.crc32(data) != crc or data != body(ts):
        return "checksum"
    if (item.codec == "npy") != bool(ts % 2):
        return f"codec {item.codec}"
    return None


# ------------------------------------------------------------------------------------ clients


class Client:
    """One client process's loop: counters, heartbeats, bounded reconnects."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import stampede

        self.st = stampede
        self.spec = spec
        self.role: str = spec["role"]
        self.t0: float = spec["t0"]
        self.stop_path = Path(spec["stop"])
        self.counts: dict[str, Any] = {
            "put": 0,
            "got": 0,
            "timeouts": 0,
            "sessions": 0,
            "errors": {},
            "unexpected": {},
            "corrupt": 0,
            "disorder": 0,
            "join_refused": 0,
            "joins": 0,
            "live_max": 0,
            "max_call_s": 0.0,
            "max_error_s": 0.0,
            "slowest": {},
            "ts_min": 0,
            "last_ts": 0,
        }
        self.last_hb = 0.0
        self.rt: Any = None

    def stopped(self) -> bool:
        return self.stop_path.exists()

    def emit(self, event: str, **extra: Any) -> None:
        line = {"ev": event, **self.counts, **extra}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        self.last_hb = time.monotonic()

    def heartbeat(self) -> None:
        if time.monotonic() - self.last_hb >= HEARTBEAT_S:
            self.emit("hb")

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)`, timed; a StampedeError is counted by type and raised again."""
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        except self.st.StampedeError as e:
            took = time.monotonic() - start
            self.counts["max_error_s"] = max(self.counts["max_error_s"], round(took, 3))
            if not isinstance(e, self.st.NotAvailable):
                kind = type(e).__name__
                bucket = "errors" if kind in EXPECTED_ERRORS else "unexpected"
                self.counts[bucket][kind] = self.counts[bucket].get(kind, 0) + 1
                if bucket == "unexpected":
                    self.emit("fail", what=f"{kind}: {e}")
            raise
        finally:
            took = round(time.monotonic() - start, 3)
            op = getattr(fn, "__name__", "call")
            # The bound is a timed call's (slice + margin); `close` takes no timeout: it waits for
            # the node's acknowledgement (QUERY_MARGIN) and then leaves the fabric — on a cut link
            # up to 8 s (seen in the namespaced runs). It is in `slowest` as itself.
            if op != "close":
                self.counts["max_call_s"] = max(self.counts["max_call_s"], took)
            self.counts["slowest"][op] = max(self.counts["slowest"].get(op, 0.0), took)

    def drop_session(self) -> None:
        rt, self.rt = self.rt, None
        if rt is not None:
            with contextlib.suppress(self.st.StampedeError):
                self.call(rt.close)

    def open_session(self) -> Any:
        """Connects (bounded attempts, until stopped) and creates or looks up the channel."""
        st = self.st
        name = f"faults/{self.spec['node']}"
        while not self.stopped():
            self.drop_session()
            try:
                self.rt = self.call(
                    st.connect, self.spec["endpoint"], timeout=CONNECT_S, node=self.spec["node"]
                )
                try:
                    channel = self.call(self.rt.create_channel, name)
                except st.AlreadyExists:
                    channel = self.call(self.rt.lookup, name)
                self.counts["sessions"] += 1
                return channel
            except (st.Unreachable, st.Closed, st.NotFound):
                self.emit("hb")
                time.sleep(0.2)
        return None

    def observe(self, channel: Any) -> None:
        """Live items and ts_min, at most once per heartbeat."""
        if time.monotonic() - self.last_hb < HEARTBEAT_S:
            return
        live = self.call(channel.stats)["live_items"]
        self.counts["live_max"] = max(self.counts["live_max"], live)
        self.counts["ts_min"] = self.call(self.ts_min)
        self.emit("hb", live=live)

    def ts_min(self) -> int:
        return self.rt.ts_min

    def run(self) -> None:
        self.emit("started")
        try:
            if self.role == "producer":
                self.produce()
            else:
                self.consume()
        finally:
            self.drop_session()
            self.emit("stopped")

    def produce(self) -> None:
        st = self.st
        while not self.stopped():
            channel = self.open_session()
            if channel is None:
                return
            start = max(now_ms(self.t0), self.counts["last_ts"] + 1)
            try:
                try:
                    task = self.call(self.rt.task, start)  # a root task: a producer can always join
                except st.BelowVisibility as e:
                    self.counts["join_refused"] += 1
                    self.emit("fail", what=f"root task at {start} refused: {e}")
                    time.sleep(0.2)
                    continue
                self.counts["joins"] += 1
                out = self.call(task.attach_output, channel)
                self.emit("up")
                tick = time.monotonic()
                while not self.stopped():
                    tick += 1 / FPS
                    time.sleep(max(0.0, tick - time.monotonic()))
                    if time.monotonic() - tick > 1.0:
                        tick = time.monotonic()  # late by more than a second (machine busy): skip ahead
                    ts = max(now_ms(self.t0), self.counts["last_ts"] + 1)
                    self.call(out.put, ts, frame(ts), timeout=CALL_S)
                    self.counts["put"] += 1
                    self.counts["last_ts"] = ts
                    self.call(task.set_virtual_time, ts + 1)
                    self.observe(channel)
            except (st.Unreachable, st.Closed, st.NotFound):
                continue
            except st.StampedeError:
                time.sleep(0.2)  # counted as unexpected by `call`; start a new session
                continue

    def consume(self) -> None:
        st = self.st
        selector = st.NEWEST_UNSEEN if self.spec["mode"] == "newest" else st.OLDEST_UNSEEN
        while not self.stopped():
            channel = self.open_session()
            if channel is None:
                return
            try:
                task = self.call(self.rt.task, st.INFINITY)
                inp = self.call(task.attach_input, channel)
                self.emit("up")
                while not self.stopped():
                    self.heartbeat()
                    try:
                        item = self.call(inp.get, selector, timeout=CALL_S)
                    except st.NotAvailable:
                        self.counts["timeouts"] += 1
                        continue
                    wrong = check_frame(item)
                    if wrong is not None:
                        self.counts["corrupt"] += 1
                        self.emit("fail", what=f"item {item.ts} not intact: {wrong}")
                    if item.ts <= self.counts["last_ts"]:
                        self.counts["disorder"] += 1
                        self.emit("fail", what=f"item {item.ts} after {self.counts['last_ts']}")
                    self.counts["got"] += 1
                    self.counts["last_ts"] = max(self.counts["last_ts"], item.ts)
                    self.call(inp.consume_until, item.ts)
                    self.observe(channel)
            except (st.Unreachable, st.Closed, st.NotFound):
                continue
            except st.StampedeError:
                time.sleep(0.2)
                continue


def client_main(spec_json: str) -> None:
    Client(json.loads(spec_json)).run()


def probe_main(spec_json: str) -> None:
    """Prints one node's ts_min twice, a second apart, and its channel's live items."""
    import stampede

    spec = json.loads(spec_json)
    with stampede.connect(spec["endpoint"], timeout=CONNECT_S * 5) as rt:
        first = rt.ts_min
        time.sleep(1.0)
        second = rt.ts_min
        live = rt.lookup(f"faults/{spec['node']}").stats()["live_items"]
    print(json.dumps({"ts_min": [first, second], "live": live}), flush=True)


# ----------------------------------------------------------------------------------- schedule


def schedule(
    seed: int, seconds: float, clients: list[str], partitions: bool = False
) -> list[tuple[float, str, str]]:
    """The chaos events (time from the start, kind, target): a function of its arguments only.
    Kinds: "client" (SIGKILL, restarted at once), "node" (SIGKILL) and "node-up" (restart); with
    `partitions`, "cut" (a node's link down) and "heal"."""
    rng = random.Random(seed)
    # Drawn from a generator of its own, so the schedule without partitions is what it always was.
    cuts = random.Random(seed ^ 0x5EED)
    cut_offset = cuts.randrange(1, PARTITION_EVERY)
    cut_until = {node: 0.0 for node in NODES}
    # Client kills cycle through the roles (producer, consumers), so every role dies in a short run.
    roles = sorted({c.split("/")[-1] for c in clients})
    kills = 0
    events: list[tuple[float, str, str]] = []
    down_until = {node: 0.0 for node in NODES}
    at, index, offset = rng.uniform(*CHAOS_GAP_S), 0, rng.randrange(2, NODE_EVERY)
    while at < seconds:
        up = [n for n in NODES if down_until[n] <= at]
        linked = [n for n in up if cut_until[n] <= at]
        if partitions and index % PARTITION_EVERY == cut_offset and index % NODE_EVERY != offset and linked:
            node = cuts.choice(linked)
            cut_until[node] = at + cuts.uniform(*PARTITION_S)
            events += [(round(at, 3), "cut", node), (round(cut_until[node], 3), "heal", node)]
        elif index % NODE_EVERY == offset and up:
            node = rng.choice(up)
            down_until[node] = at + rng.uniform(*NODE_DOWN_S)
            events += [(round(at, 3), "node", node), (round(down_until[node], 3), "node-up", node)]
        else:
            role = roles[kills % len(roles)]
            events.append((round(at, 3), "client", rng.choice([c for c in clients if c.endswith(role)])))
            kills += 1
        at += rng.uniform(*CHAOS_GAP_S)
        index += 1
    return sorted(events)


# ------------------------------------------------------------------------------------ harness


@dataclass
class Proc:
    """A node or client process and what its stdout said."""

    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen[str] | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    last_line: float = 0.0
    #: The last heartbeat of every earlier incarnation (killed or exited).
    finished: list[dict[str, Any]] = field(default_factory=list)
    starts: int = 0
    started_at: float = 0.0
    ready: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.retire()
        self.ready = threading.Event()
        with open(self.log, "a") as err:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=err, text=True)
        self.starts += 1
        self.started_at = self.last_line = time.monotonic()
        threading.Thread(target=self._read, args=(self.proc, self.ready), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            ready.set()
            if proc is not self.proc:
                continue
            self.last_line = time.monotonic()
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(text))
        ready.set()

    def last(self) -> dict[str, Any]:
        return next((line for line in reversed(self.lines) if "put" in line), {})

    def retire(self) -> None:
        """Kills the current incarnation (if any) and keeps its last counters."""
        if self.proc is None:
            return
        kill(self.proc)
        self.finished.append(self.last())
        self.proc, self.lines = None, []

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def stampede_bin() -> str:
    path = os.environ.get("STAMPEDE_BIN") or str(REPO / "target" / "debug" / "stampede")
    if not Path(path).exists():
        subprocess.run(["cargo", "build", "-q", "-p", "stampede-cli"], cwd=REPO, check=True)
    return path


class Harness:
    def __init__(self, seconds: float, seed: int, tmp: Path, network: bool = False) -> None:
        self.seconds, self.seed, self.tmp = seconds, seed, tmp
        self.t0 = time.monotonic()
        self.stop = tmp / "stop"
        self.network: netns.Network | None = None
        self.relays: netns.Relays | None = None
        #: What the summary says of the network.
        self.delay_by = "one host, Unix sockets"
        self.partitions = 0
        self.live_items_max = LIVE_ITEMS_MAX_NETWORK if network else LIVE_ITEMS_MAX
        if network:
            self.network = netns.Network(NODES)
            self.endpoint = {n: f"tcp/{self.network.addresses[n]}:{NODE_PORT}" for n in NODES}
        else:
            self.endpoint = {n: f"unixsock-stream/{tmp}/{n}.sock" for n in NODES}
        self.node_started_ms = {n: 0 for n in NODES}
        self.down: set[str] = set()
        self.failures: list[str] = []
        self.kills = {"client": 0, "node": 0}
        self.hangs = 0
        self.producer_kills = 0
        #: Per node: (its RSS after WARMUP_S, its largest since, its pid), MiB.
        self.rss: dict[str, tuple[int, int, int]] = {}
        self.rss_at = 0.0
        self.crashes = 0
        binary = stampede_bin()
        self.nodes: dict[str, Proc] = {}
        for n in NODES:
            args = [binary, "serve", "--listen", self.endpoint[n], "--name", n]
            parent = PARENT[n]
            if parent is not None:
                args += ["--connect", self.link_to(parent)]
            if self.network is not None:
                # Namespaced test hosts on a private bridge: nobody else can reach them.
                args = [*self.network.inside(n), *args, "--allow-anonymous"]
            self.nodes[n] = Proc(n, args, tmp / f"node-{n}.log")
        self.clients: dict[str, Proc] = {}
        for n in NODES:
            for name, spec in (
                (f"{n}/producer", {"role": "producer", "endpoint": self.endpoint[n]}),
                (f"{n}/newest", {"role": "consumer", "mode": "newest", "endpoint": self.endpoint[n]}),
                (f"{n}/oldest", {"role": "consumer", "mode": "oldest", "endpoint": self.endpoint[VIA[n]]}),
            ):
                spec |= {"node": n, "t0": self.t0, "stop": str(self.stop), "name": name}
                args = [sys.executable, str(Path(__file__).resolve()), "client", json.dumps(spec)]
                self.clients[name] = Proc(name, args, tmp / f"client-{name.replace('/', '-')}.log")

    def link_to(self, parent: str) -> str:
        """The endpoint a node connects to its parent by: with a network, through a relay adding
        LINK_DELAY_S each way (the kernel here has no netem to delay the link itself)."""
        if self.network is None:
            return self.endpoint[parent]
        if self.relays is None:
            self.relays = netns.Relays(self.network.host, LINK_DELAY_S)
            delay_ms = f"{LINK_DELAY_S * 1000:g}"
            self.delay_by = f"namespaces over TCP; node links through a userspace relay, {delay_ms} ms a way"
        return f"tcp/{self.network.host}:{self.relays.add(self.network.addresses[parent], NODE_PORT)}"

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"faults: FAIL {what}", file=sys.stderr, flush=True)

    def start_node(self, n: str) -> None:
        node = self.nodes[n]
        node.start()
        if not node.ready.wait(NODE_START_S):
            stacks = self.dump_stacks(node)
            self.fail(f"node {n} did not say it listens within {NODE_START_S} s (its stacks: {stacks})")
        self.node_started_ms[n] = now_ms(self.t0)
        self.down.discard(n)

    def dump_stacks(self, proc: Proc) -> str:
        """Every thread's stack of a process that is stuck (gdb, where installed), into a file of
        the run's directory: what a node that does not start is waiting for. The file's path, or
        why there is none."""
        if not proc.alive() or proc.proc is None:
            return "the process had exited"
        out = self.tmp / f"{proc.name}-stuck-{proc.starts}.txt"
        command = ["gdb", "-batch", "-p", str(proc.proc.pid), "-ex", "thread apply all bt"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"none: gdb failed ({e})"
        out.write_text(done.stdout + done.stderr)
        return str(out)

    def sample_rss(self) -> None:
        """Each node process's resident memory (MiB), every RSS_EVERY_S once it has run WARMUP_S:
        its first such sample (warm) and the largest since; growing past RSS_GROWTH_MAX times the
        warm size is a failure."""
        if time.monotonic() - self.rss_at < RSS_EVERY_S:
            return
        self.rss_at = time.monotonic()
        for n, node in self.nodes.items():
            if not node.alive() or node.proc is None or time.monotonic() - node.started_at < WARMUP_S:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
                status = Path(f"/proc/{node.proc.pid}/status").read_text()
                mib = int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1]) // 1024
                warm, largest, pid = self.rss.get(n, (mib, 0, node.proc.pid))
                if pid != node.proc.pid:  # restarted: warm again
                    warm, largest = mib, 0
                self.rss[n] = (warm, max(largest, mib), node.proc.pid)
                if mib > RSS_GROWTH_MAX * warm:
                    self.fail(f"node {n} grew to {mib} MiB from {warm} MiB after warming up")

    def watch(self) -> None:
        """Restarts what died on its own (a failure) and kills clients silent for HANG_S (hangs)."""
        self.sample_rss()
        for n, node in self.nodes.items():
            if n not in self.down and not node.alive():
                tail = node.log.read_text(errors="replace")[-600:] if node.log.exists() else ""
                self.fail(f"node {n} exited on its own (status {node.proc and node.proc.returncode}): {tail}")
                self.start_node(n)
        for name, client in self.clients.items():
            if client.proc is None:
                continue
            if client.proc.poll() is not None:
                self.crashes += 1
                self.fail(
                    f"client {name} exited on its own (status {client.proc.returncode}); log {client.log}"
                )
                client.start()
            elif time.monotonic() - client.last_line > HANG_S:
                self.hangs += 1
                self.fail(f"client {name} silent for {HANG_S} s: hung (killed); log {client.log}")
                client.start()

    def pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.watch()
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def chaos(self) -> list[tuple[float, str, str]]:
        events = schedule(self.seed, self.seconds, sorted(self.clients), partitions=self.network is not None)
        start = time.monotonic()
        for at, kind, target in events:
            self.pause(start + at - time.monotonic())
            if kind == "client":
                self.kills["client"] += 1
                self.producer_kills += target.endswith("producer")
                self.clients[target].start()  # SIGKILL the running one, then start it again
            elif kind == "node":
                self.kills["node"] += 1
                self.down.add(target)
                kill(self.nodes[target].proc)  # type: ignore[arg-type]
            elif kind == "cut":
                assert self.network is not None
                self.partitions += 1
                self.network.cut(target)
            elif kind == "heal":
                assert self.network is not None
                self.network.heal(target)
            else:
                self.start_node(target)
        self.pause(start + self.seconds - time.monotonic())
        return events

    def recovered(self) -> list[str]:
        """Waits (at most RECOVER_S) until every client made progress after the chaos; the laggards."""
        base = {name: c.last().get("put", 0) + c.last().get("got", 0) for name, c in self.clients.items()}
        base = {name: (c.proc, base[name]) for name, c in self.clients.items()}  # type: ignore[misc]
        end = time.monotonic() + RECOVER_S
        while True:
            lagging = [
                name
                for name, c in self.clients.items()
                if c.proc is base[name][0]
                and c.last().get("put", 0) + c.last().get("got", 0) <= base[name][1]
            ]
            if not lagging or time.monotonic() > end:
                return lagging
            self.pause(0.2)

    def probe(self, n: str) -> dict[str, Any]:
        spec = json.dumps({"endpoint": self.endpoint[n], "node": n})
        try:
            out = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "probe", spec],
                capture_output=True,
                text=True,
                timeout=CONNECT_S * 5 + 10,
            )
        except subprocess.TimeoutExpired:
            self.hangs += 1
            self.fail(f"probe of node {n} hung")
            return {}
        if out.returncode != 0:
            self.fail(f"probe of node {n} failed: {out.stderr.strip()[-400:]}")
            return {}
        return json.loads(out.stdout)

    def run(self) -> dict[str, Any]:
        wall = time.monotonic()
        print(f"faults: seed={self.seed} seconds={self.seconds} dir={self.tmp}", file=sys.stderr, flush=True)
        try:
            for n in NODES:
                self.start_node(n)
            for client in self.clients.values():
                client.start()
            self.pause(2.0)
            events = self.chaos()
            lagging = self.recovered()
            for name in lagging:
                self.fail(f"client {name} made no progress within {RECOVER_S} s after the chaos")
            probes = {n: self.probe(n) for n in NODES}
            for n, p in probes.items():
                if not p:
                    continue
                first, second = p["ts_min"]
                started = self.node_started_ms[n]
                if not started < first < second:
                    self.fail(f"ts_min on {n} did not advance: {p['ts_min']}, node started at {started}")
                if (live := p["live"]) > self.live_items_max:
                    self.fail(f"faults/{n} holds {live} live items at the end (bound {self.live_items_max})")
            nodes_alive = all(node.alive() for node in self.nodes.values())
            if not nodes_alive:
                self.fail("a node process is not alive at the end")
            self.stop.touch()
            end = time.monotonic() + STOP_S
            for name, client in self.clients.items():
                assert client.proc is not None
                try:
                    client.proc.wait(timeout=max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.hangs += 1
                    self.fail(f"client {name} did not exit within {STOP_S} s of being asked (killed)")
                if client.proc.returncode not in (0, None):
                    self.crashes += 1
                    self.fail(f"client {name} exited with status {client.proc.returncode}; log {client.log}")
            time.sleep(0.2)  # let the readers take the last lines
            return self.summary(events, probes, nodes_alive, time.monotonic() - wall)
        finally:
            for proc in [*self.clients.values(), *self.nodes.values()]:
                if proc.proc is not None:
                    kill(proc.proc)
            if self.relays is not None:
                self.relays.close()
            if self.network is not None:
                self.network.close()

    def summary(
        self, events: list[tuple[float, str, str]], probes: dict[str, Any], nodes_alive: bool, wall: float
    ) -> dict[str, Any]:
        summed = ("put", "got", "timeouts", "sessions", "corrupt", "disorder", "joins", "join_refused")
        total: dict[str, Any] = {key: 0 for key in summed}
        total |= {"live_max": 0, "max_call_s": 0.0, "max_error_s": 0.0}
        errors: dict[str, int] = {}
        unexpected: dict[str, int] = {}
        slowest: dict[str, float] = {}
        for client in self.clients.values():
            for counts in [*client.finished, client.last()]:
                for key in summed:
                    total[key] += counts.get(key, 0)
                for key in ("live_max", "max_call_s", "max_error_s"):
                    total[key] = max(total[key], counts.get(key, 0))
                for kind, n in counts.get("errors", {}).items():
                    errors[kind] = errors.get(kind, 0) + n
                for kind, n in counts.get("unexpected", {}).items():
                    unexpected[kind] = unexpected.get(kind, 0) + n
                for op, took in counts.get("slowest", {}).items():
                    slowest[op] = max(slowest.get(op, 0.0), took)
        digest = hashlib.sha256(json.dumps(events).encode()).hexdigest()[:12]
        restarts = {
            "client": sum(c.starts - 1 for c in self.clients.values()),
            "node": sum(n.starts - 1 for n in self.nodes.values()),
        }
        return {
            "check": "faults",
            "seed": self.seed,
            "seconds": self.seconds,
            "schedule": digest,
            "clients": len(self.clients),
            "kills": self.kills,
            "restarts": restarts,
            "sessions": total["sessions"],
            "items_put": total["put"],
            "items_got": total["got"],
            "get_timeouts": total["timeouts"],
            "errors": dict(sorted(errors.items())),
            "unexpected_errors": dict(sorted(unexpected.items())),
            "corrupt": total["corrupt"],
            "disorder": total["disorder"],
            "producer_kills": self.producer_kills,
            "producer_joins": total["joins"],
            "join_refused": total["join_refused"],
            "max_live_items": max([total["live_max"], *(p.get("live", 0) for p in probes.values())]),
            "ts_min_end": {n: p.get("ts_min") for n, p in probes.items()},
            "max_call_s": total["max_call_s"],
            "max_error_s": total["max_error_s"],
            "slowest_call_s": dict(sorted(slowest.items())),
            "hangs": self.hangs,
            "crashes": self.crashes,
            "nodes_alive": nodes_alive,
            "node_rss_mib": {n: [warm, largest] for n, (warm, largest, _) in sorted(self.rss.items())},
            "network": self.delay_by,
            "partitions": self.partitions,
            "live_items_bound": self.live_items_max,
            "failures": self.failures,
            "wall_s": round(wall, 1),
        }


def run(
    seconds: float,
    seed: int | None = None,
    keep: Path | None = None,
    network: bool = False,
) -> dict[str, Any]:
    """One fault run; returns its summary (see the module's doc); the nodes share one ts_min, as
    every mesh does. `keep`: a directory for the sockets and the processes'
    logs, kept afterwards (default: a temporary one, removed). `network`: every node a host of its
    own, with partitions (needs root: netns.unavailable() says why not)."""
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return Harness(seconds, seed, keep, network).run()
    with tempfile.TemporaryDirectory(prefix="stampede-faults-") as tmp:
        return Harness(seconds, seed, Path(tmp), network).run()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        client_main(argv[1])
        return 0
    if argv[:1] == ["probe"]:
        probe_main(argv[1])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the chaos lasts (default 20)")
    parser.add_argument("--seed", type=int, default=None, help="replays the schedule of kills of that seed")
    parser.add_argument("--keep", type=Path, default=None, help="keep the processes' logs in this directory")
    parser.add_argument(
        "--netns", action="store_true", help="every node a host of its own, links delayed and cut (root)"
    )
    args = parser.parse_args(argv)
    if args.netns and (reason := netns.unavailable()):
        print(f"faults: --netns: {reason}", file=sys.stderr)
        return 2
    summary = run(args.seconds, args.seed, args.keep, args.netns)
    print(json.dumps(summary), flush=True)
    return 0 if not summary["failures"] and summary["hangs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
