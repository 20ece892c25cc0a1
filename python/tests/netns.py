"""A network of hosts on one machine, for the fault harness (faults.py ``--netns``): each node in
a network namespace of its own, joined to the harness's namespace by a veth pair on one bridge,
so every node has an address of its own and its link can be taken down (a partition) and up
again. The delay of the links between nodes comes from a userspace relay in the harness (the
kernel of the machines this runs on has no ``netem`` queueing discipline): a node connects to its
parent through a relay that holds every chunk for the delay before passing it on, each way.

Everything made here is named after the harness's process id and removed by ``close``; the
namespaces' processes are the harness's to kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import Sequence

#: What a relay holds in flight each way before it stops reading (backpressure to the sender).
RELAY_CHUNKS_MAX = 1024
RELAY_CHUNK_BYTES = 65536


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``, a kernel without them), or None."""
    probe = f"stp-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        return f"cannot make a network namespace (`ip netns add`: {detail})"
    _ip("netns", "del", probe)
    return None


class Network:
    """Namespaces ``nodes`` on a bridge in the harness's namespace (which has ``host``)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        tag = os.getpid() % 100000
        self.subnet = f"10.199.{os.getpid() % 250}"
        self.bridge = f"stpbr{tag}"
        self.host = f"{self.subnet}.254"
        self.ns = {n: f"stp-{tag}-{n}" for n in nodes}
        self.veth = {n: f"stp{tag}{n}" for n in nodes}
        self.addresses = {n: f"{self.subnet}.{i + 1}" for i, n in enumerate(nodes)}
        self.made: list[str] = []
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self.made.append("bridge")
            _ip("addr", "add", f"{self.host}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for n in nodes:
                self._add(n)
        except BaseException:
            self.close()
            raise

    def _add(self, n: str) -> None:
        ns, outside, inside = self.ns[n], self.veth[n], self.veth[n] + "i"
        _ip("netns", "add", ns)
        self.made.append(ns)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", ns)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("-n", ns, "addr", "add", f"{self.addresses[n]}/24", "dev", inside)
        _ip("-n", ns, "link", "set", inside, "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def inside(self, n: str) -> list[str]:
        """The command prefix that runs a program in node ``n``'s namespace."""
        return ["ip", "netns", "exec", self.ns[n]]

    def cut(self, n: str) -> None:
        """Takes node ``n``'s link down: it reaches nobody, and nobody reaches it."""
        _ip("link", "set", self.veth[n], "down")

    def heal(self, n: str) -> None:
        _ip("link", "set", self.veth[n], "up")

    def close(self) -> None:
        for made in reversed(self.made):
            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                if made == "bridge":
                    _ip("link", "del", self.bridge)
                else:
                    _ip("netns", "del", made)  # its veth pair goes with it
        self.made.clear()


class Relays:
    """TCP relays in the harness's namespace that add ``delay_s`` each way: ``add`` one towards a
    target, get its port. One event loop thread for all of them."""

    def __init__(self, host: str, delay_s: float) -> None:
        self.host, self.delay_s = host, delay_s
        self.loop = asyncio.new_event_loop()
        self.servers: list[asyncio.base_events.Server] = []
        self.thread = threading.Thread(target=self.loop.run_forever, name="relays", daemon=True)
        self.thread.start()

    def add(self, target_host: str, target_port: int) -> int:
        async def start() -> asyncio.base_events.Server:
            async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await self._relay(reader, writer, target_host, target_port)

            return await asyncio.start_server(accept, self.host, 0)

        server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(timeout=10)
        self.servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int
    ) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, upstream_writer), self._pump(upstream_reader, writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Passes what ``reader`` gives to ``writer``, each chunk ``delay_s`` after it came."""
        held: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(RELAY_CHUNKS_MAX)

        async def send() -> None:
            with contextlib.suppress(OSError):
                while (chunk := await held.get()) is not None:
                    due, data = chunk
                    await asyncio.sleep(max(0.0, due - self.loop.time()))
                    writer.write(data)
                    await writer.drain()
            writer.close()

        sender = asyncio.create_task(send())
        with contextlib.suppress(OSError):
            while data := await reader.read(RELAY_CHUNK_BYTES):
                await held.put((self.loop.time() + self.delay_s, data))
        await held.put(None)
        with contextlib.suppress(OSError):
            await sender

    def close(self) -> None:
        for server in self.servers:
            self.loop.call_soon_threadsafe(server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
