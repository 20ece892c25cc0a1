"""Stampede: time-indexed channels shared by threads, processes and machines (Space-Time Memory).

Channels hold at most one item per timestamp and are read by timestamp; tasks hold a virtual
time; everything below the global ts_min is garbage-collected. The surface (docs/SEMANTICS.md,
"The API in every language")::

    import stampede

    with stampede.Runtime() as rt:
        frames = rt.create_channel("camera/frames")
        camera = rt.task(virtual_time=0)
        out = camera.attach_output(frames)
        tracker = rt.task(virtual_time=stampede.INFINITY)
        inp = tracker.attach_input(frames)
        out.put(0, b"frame 0")
        item = inp.get(stampede.NEWEST_UNSEEN, timeout=1.0)
        inp.consume_until(item.ts)

Blocking calls release the GIL and are interrupted by Ctrl-C; ``get_async`` / ``put_async`` are
awaitables for asyncio. Payloads: bytes-like objects (codec "raw"), str ("utf8") and NumPy arrays
("npy"); ``item.data`` is a read-only zero-copy memoryview and ``item.array()`` a read-only
zero-copy ndarray.

Across processes and machines (docs/NODES.md): ``stampede.connect("tcp/127.0.0.1:7447")`` returns a
``Runtime`` with the same API whose channels live on a node (``stampede serve``, or
``Runtime(listen="tcp/127.0.0.1:7447")`` in another process); see docs/NODES.md.

Temporal correlation (docs/CORRELATION.md): ``ExactJoin`` (tuples of items sharing a timestamp,
policies "wait_all", "partial", "skip") and ``ApproxJoin`` (closest match within a tolerance) take
over their input connections; ``Channel.settled_below`` / ``close_producers()``,
``ChannelOutput.demand()`` and ``create_channel(..., retention="current_readers")`` complete the
picture (docs/CORRELATION.md).

Recordings (docs/RECORDING.md): ``Recorder(rt, "camera/", "run.mcap")`` writes every item of the
channels it selects to an MCAP file until ``stop()``; ``replay(rt, "run.mcap", rate=1.0)`` puts them
back at the recorded pace (docs/RECORDING.md).
"""

from __future__ import annotations

# NumPy is imported here, not on the first put of an array: a first import can take long enough
# for a Ctrl-C to land inside it, and the binding needs NumPy's C API loaded before any call.
import numpy as _numpy  # noqa: F401

from ._stampede import (
    BUILD_PROFILE,
    INFINITY,
    NEWEST,
    NEWEST_UNSEEN,
    OLDEST,
    OLDEST_UNSEEN,
    TS_MAX,
    AlreadyConsumed,
    AlreadyExists,
    ApproxJoin,
    BelowVisibility,
    Channel,
    ChannelInput,
    ChannelOutput,
    Closed,
    Dashboard,
    DuplicateTimestamp,
    Epoch,
    ExactJoin,
    Foxglove,
    Full,
    InvalidArgument,
    InvalidTimestamp,
    Item,
    ItemBuffer,
    Joined,
    JoinStream,
    Matched,
    NotAvailable,
    NotFound,
    Pacer,
    PermissionDenied,
    Queue,
    QueueInput,
    QueueOutput,
    Reclaimed,
    Recorder,
    Runtime,
    Selector,
    Span,
    StampedeError,
    Storage,
    Stream,
    Task,
    Unreachable,
    Watch,
    WatchEvent,
    __version__,
    connect,
    replay,
    span,
    trace_flush,
)

__all__ = [
    "BUILD_PROFILE",
    "INFINITY",
    "NEWEST",
    "NEWEST_UNSEEN",
    "OLDEST",
    "OLDEST_UNSEEN",
    "TS_MAX",
    "AlreadyConsumed",
    "AlreadyExists",
    "ApproxJoin",
    "BelowVisibility",
    "Channel",
    "ChannelInput",
    "ChannelOutput",
    "Closed",
    "Dashboard",
    "DuplicateTimestamp",
    "ExactJoin",
    "Foxglove",
    "Full",
    "InvalidArgument",
    "InvalidTimestamp",
    "Item",
    "ItemBuffer",
    "JoinStream",
    "Joined",
    "Matched",
    "NotAvailable",
    "NotFound",
    "Epoch",
    "Pacer",
    "Queue",
    "QueueInput",
    "QueueOutput",
    "Reclaimed",
    "Recorder",
    "Runtime",
    "Selector",
    "Span",
    "StampedeError",
    "Stream",
    "Task",
    "Unreachable",
    "PermissionDenied",
    "Storage",
    "Watch",
    "WatchEvent",
    "__version__",
    "connect",
    "replay",
    "span",
    "trace_flush",
]
