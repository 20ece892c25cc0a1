"""Channel semantics (docs/SEMANTICS.md, "Channels"), exercised from Python: put rules, selectors,
item states, get_range, consume, attach/detach, copy-in and copy-out, errors with their messages."""

from __future__ import annotations

import pytest
from conftest import placement, settled

import stampede
from stampede import INFINITY, NEWEST, NEWEST_UNSEEN, OLDEST, OLDEST_UNSEEN


def pipeline(rt: stampede.Runtime, name: str = "camera/left", **limits):
    """A channel, a producer task at vt 0 with an output, a consumer at INFINITY with an input."""
    ch = rt.create_channel(name, **limits)
    producer = rt.task(virtual_time=0)
    consumer = rt.task(virtual_time=INFINITY)
    return ch, producer, producer.attach_output(ch), consumer, consumer.attach_input(ch)


def test_put_get_exact_and_any_order(rt):
    """Items may be put in any timestamp order and are got back by exact timestamp."""
    _, _, out, _, inp = pipeline(rt)
    for ts in (5, 1, 3):
        out.put(ts, f"frame {ts}")
    assert [inp.get(ts).text() for ts in (1, 3, 5)] == ["frame 1", "frame 3", "frame 5"]
    assert inp.get(3).ts == 3


def test_put_is_copy_in(rt):
    """After put returns, the caller may mutate its buffer: the stored item does not change."""
    _, _, out, _, inp = pipeline(rt)
    buf = bytearray(b"abc")
    out.put(0, buf)
    buf[0] = ord("z")
    assert bytes(inp.get(0).data) == b"abc"


def test_get_is_read_only_copy_out(rt):
    """Nobody can change what others see: the memoryview is read-only."""
    _, _, out, _, inp = pipeline(rt)
    out.put(0, b"abc")
    view = inp.get(0).data
    assert view.readonly
    with pytest.raises(TypeError):
        view[0] = 1


def test_below_visibility(rt):
    """A put below the task's visibility raises BelowVisibility naming the channel and ts."""
    _, producer, out, _, _ = pipeline(rt)
    producer.set_virtual_time(42)
    with pytest.raises(stampede.BelowVisibility) as e:
        out.put(41, b"late")
    assert str(e.value) == 'put ts=41 on "camera/left" is below the task\'s visibility 42'
    assert (e.value.name, e.value.ts, e.value.limit) == ("camera/left", 41, 42)


def test_duplicate_timestamp(rt):
    """At most one item per timestamp."""
    _, _, out, _, _ = pipeline(rt)
    out.put(7, b"a")
    with pytest.raises(stampede.DuplicateTimestamp, match='put ts=7 on "camera/left"'):
        out.put(7, b"b")


def test_duplicate_after_refcount_reclaim_and_reclaimed_get(rt):
    """An item reclaimed early by its refcount leaves a tombstone: a re-put is a duplicate and an
    exact get fails Reclaimed."""
    ch, _, out, _, inp = pipeline(rt)
    out.put(3, b"x", refcount=1)
    inp.get(3)
    inp.consume(3)
    assert ch.stats()["live_items"] == 0
    with pytest.raises(stampede.DuplicateTimestamp):
        out.put(3, b"again")
    with pytest.raises(stampede.Reclaimed, match="reference count"):
        inp.get(3)


@pytest.mark.parametrize("ts", [-1, INFINITY])
def test_invalid_timestamp(rt, ts):
    """Negative timestamps and INFINITY are not item timestamps."""
    _, _, out, _, inp = pipeline(rt)
    with pytest.raises(stampede.InvalidTimestamp, match="not a valid item timestamp"):
        out.put(ts, b"x")
    with pytest.raises(stampede.InvalidTimestamp):
        inp.get(ts)


def test_full_timeout_zero_and_wait(rt):
    """A full bounded channel raises Full at once with timeout 0 and after the timeout otherwise."""
    ch, _, out, _, _ = pipeline(rt, capacity=2)
    out.put(0, b"a")
    out.put(1, b"b")
    with pytest.raises(stampede.Full, match="capacity=2") as e:
        out.put(2, b"c", timeout=0)
    assert e.value.ts == 2
    with pytest.raises(stampede.Full):
        out.put(2, b"c", timeout=0.05)
    assert ch.capacity == 2 and ch.max_bytes is None


def test_full_byte_bound_never_fits(rt):
    """An item larger than max_bytes can never fit: Full at once even without a timeout."""
    _, _, out, _, _ = pipeline(rt, max_bytes=4)
    with pytest.raises(stampede.Full, match="can never fit"):
        out.put(0, b"too large")


def test_full_put_waits_for_gc(rt):
    """A put blocked on a full channel proceeds once GC frees space."""
    import threading

    _, producer, out, _, inp = pipeline(rt, capacity=1)
    out.put(0, b"a")
    done = threading.Event()

    def put_next() -> None:
        out.put(1, b"b", timeout=10)
        done.set()

    t = threading.Thread(target=put_next)
    t.start()
    assert not done.wait(0.05)
    inp.consume_until(0)
    producer.set_virtual_time(1)  # ts_min passes 0: item 0 is reclaimed, the put proceeds
    t.join(10)
    assert done.is_set()


def test_selectors(rt):
    """OLDEST/NEWEST consider present, unconsumed items; *_UNSEEN only those not yet gotten."""
    _, _, out, _, inp = pipeline(rt)
    for ts in (1, 2, 3, 4):
        out.put(ts, b"")
    assert inp.get(OLDEST_UNSEEN).ts == 1
    assert inp.get(OLDEST_UNSEEN).ts == 2
    assert inp.get(NEWEST_UNSEEN).ts == 4
    assert inp.get(NEWEST_UNSEEN).ts == 3
    with pytest.raises(stampede.NotAvailable):
        inp.get(NEWEST_UNSEEN, timeout=0)
    assert inp.get(OLDEST).ts == 1
    assert inp.get(NEWEST).ts == 4
    inp.consume(1)
    assert inp.get(OLDEST).ts == 2
    assert repr(OLDEST) == "Selector.OLDEST" and OLDEST != NEWEST


def test_not_available_carries_neighbours(rt):
    """NotAvailable tells the neighbouring timestamps present on this connection."""
    _, _, out, _, inp = pipeline(rt)
    out.put(10, b"")
    out.put(20, b"")
    with pytest.raises(stampede.NotAvailable) as e:
        inp.get(15, timeout=0)
    assert (e.value.previous, e.value.next) == (10, 20)
    assert e.value.name == "camera/left"
    assert 'get ts=15 on "camera/left": not available' in str(e.value)


def test_get_waits_for_arrival_with_timeout(rt):
    """A get with a timeout fails NotAvailable when nothing arrives, and returns when it does."""
    import threading

    _, _, out, _, inp = pipeline(rt)
    with pytest.raises(stampede.NotAvailable):
        inp.get(NEWEST_UNSEEN, timeout=0.05)
    timer = threading.Timer(0.05, lambda: out.put(1, b"late"))
    timer.start()
    assert inp.get(1, timeout=10).ts == 1
    timer.join()


def test_already_consumed_and_reopen(rt):
    """Getting an open item again is allowed; an exact get of a consumed one is AlreadyConsumed."""
    _, producer, out, _, inp = pipeline(rt)
    out.put(1, b"")
    out.put(2, b"")
    assert inp.get(1).ts == 1
    assert inp.get(1).ts == 1
    inp.consume(1)
    with pytest.raises(stampede.AlreadyConsumed, match='get ts=1 on "camera/left": already consumed'):
        inp.get(1)


def test_reclaimed_below_ts_min(rt):
    """An exact get below ts_min fails Reclaimed."""
    _, producer, out, _, inp = pipeline(rt)
    out.put(1, b"")
    out.put(4, b"")
    inp.consume_until(4)
    producer.set_virtual_time(5)
    assert settled(5, lambda: rt.ts_min) == 5
    with pytest.raises(stampede.Reclaimed, match="ts_min is 5"):
        inp.get(2)


def test_get_range(rt):
    """get_range returns every present, unconsumed item in [t0, t1], in order; each becomes open."""
    _, _, out, consumer, inp = pipeline(rt)
    for ts in (1, 3, 5, 7):
        out.put(ts, str(ts))
    inp.consume(3)
    items = inp.get_range(2, 7)
    assert [i.ts for i in items] == [5, 7]
    assert consumer.visibility == 5
    assert inp.get_range(7, 2) == []


def test_consume_until_includes_unseen(rt):
    """consume_until marks every present item <= ts consumed, unseen ones included."""
    ch, _, out, _, inp = pipeline(rt)
    for ts in range(5):
        out.put(ts, b"")
    inp.consume_until(3)
    assert inp.get(OLDEST_UNSEEN).ts == 4
    with pytest.raises(stampede.AlreadyConsumed):
        inp.get(2)


def test_consume_never_put(rt):
    """Consuming a timestamp that was never put fails NotAvailable; a consumed one is a no-op."""
    _, _, out, _, inp = pipeline(rt)
    out.put(1, b"")
    inp.consume(1)
    inp.consume(1)
    with pytest.raises(stampede.NotAvailable):
        inp.consume(9)


def test_attach_consumes_below_visibility(rt):
    """Attaching an input consumes, on it, the items present below the task's visibility; items
    put later are unseen whatever their timestamp."""
    ch, producer, out, _, _ = pipeline(rt)
    for ts in (1, 2, 3):
        out.put(ts, b"")
    late = producer.spawn(virtual_time=2)
    inp = late.attach_input(ch)
    with pytest.raises(stampede.AlreadyConsumed):
        inp.get(1)
    assert inp.get(OLDEST_UNSEEN).ts == 2
    tracker = rt.task(virtual_time=INFINITY)
    tin = tracker.attach_input(ch)
    out.put(4, b"")
    assert tin.get(NEWEST_UNSEEN).ts == 4


def test_several_connections_same_channel(rt):
    """A task may hold several input connections to one channel; states are per connection."""
    ch, _, out, consumer, a = pipeline(rt)
    b = consumer.attach_input(ch)
    out.put(1, b"")
    a.get(1)
    a.consume(1)
    assert b.get(OLDEST_UNSEEN).ts == 1


def test_detach_drops_claims_and_closes(rt):
    """Detaching an input drops its claims (GC proceeds); later use raises Closed."""
    ch, producer, out, _, inp = pipeline(rt)
    out.put(0, b"")
    producer.set_virtual_time(10)
    assert settled(1, lambda: ch.stats()["live_items"]) == 1
    inp.detach()
    assert settled(0, lambda: ch.stats()["live_items"]) == 0
    with pytest.raises(stampede.Closed, match="the connection was detached"):
        inp.get(OLDEST)
    inp.detach()  # idempotent


def test_connection_context_managers(rt):
    """Connections and tasks are context managers: leaving detaches / closes."""
    ch = rt.create_channel("c")
    with rt.task(0) as t:
        with t.attach_output(ch) as out:
            out.put(0, b"")
        with pytest.raises(stampede.Closed):
            out.put(1, b"")
        inp = t.attach_input(ch)
    with pytest.raises(stampede.Closed):
        inp.get(0)
    assert ch.stats()["inputs"] == 0 and ch.stats()["outputs"] == 0


def test_destroy_wakes_blocked_get(rt):
    """A blocked get wakes with Closed when the channel is destroyed."""
    import threading

    ch, _, _, _, inp = pipeline(rt)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            inp.get(NEWEST_UNSEEN, timeout=30)
        except stampede.StampedeError as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    threading.Event().wait(0.05)
    ch.destroy()
    t.join(10)
    assert len(errors) == 1 and isinstance(errors[0], stampede.Closed)
    assert "destroyed" in str(errors[0])
    assert "camera/left" not in rt.names()


def test_runtime_close_wakes_blocked_get():
    """Runtime shutdown wakes blocked gets with Closed."""
    import threading

    rt = stampede.Runtime()
    _, _, _, _, inp = pipeline(rt)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            inp.get(NEWEST_UNSEEN)
        except stampede.StampedeError as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    threading.Event().wait(0.05)
    rt.close()
    t.join(10)
    assert rt.closed
    assert isinstance(errors[0], stampede.Closed) and "runtime was closed" in str(errors[0])


def test_serial_order_under_threads(rt):
    """Operations on one channel are atomic: concurrent puts from several threads each land once."""
    import threading

    ch = rt.create_channel("c")
    producer = rt.task(0)
    outs = [producer.attach_output(ch) for _ in range(4)]
    dupes: list[int] = []

    def put_all(out) -> None:
        for ts in range(200):
            try:
                out.put(ts, b"x")
            except stampede.DuplicateTimestamp:
                dupes.append(ts)

    threads = [threading.Thread(target=put_all, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ch.stats()["puts"] == 200 and len(dupes) == 600
    assert ch.timestamps() == list(range(200))


def test_info_codec_and_placement(rt):
    """The name service (docs/NODES.md, "The name service"): info() tells name, kind, node, bounds,
    codec and description; a put of another codec is refused; a node that does not exist is refused
    saying so."""
    ch = rt.create_channel("camera/left", capacity=4, codec="utf8", description="left camera")
    info = ch.info()
    assert info == {
        "name": "camera/left",
        "kind": "channel",
        "node": placement(rt),
        "capacity": 4,
        "max_bytes": None,
        "codec": "utf8",
        "description": "left camera",
    }
    assert rt.lookup("camera/left").info() == info
    out = rt.task(0).attach_output(ch)
    out.put(0, "text")
    with pytest.raises(stampede.InvalidArgument, match="declares codec"):
        out.put(1, b"bytes")
    assert rt.create_queue("jobs", description="work").info()["kind"] == "queue"
    # Embedded: containers stay in this process; a client: no node of that name answers.
    refused = stampede.InvalidArgument if rt.node is None else stampede.Unreachable
    with pytest.raises(refused, match="node nowhere"):
        rt.create_channel("x", node="nowhere")
    assert rt.nodes() == ([] if rt.node is None else sorted(rt.nodes()))
    if rt.node is not None:
        assert rt.node in rt.nodes()


def test_watch_reports_the_names_under_a_prefix(rt):
    """watch(prefix, timeout): the names there, then each creation and destruction under it, as
    WatchEvent objects named as in docs/NODES.md (kind, name, container_kind, node, missed)."""
    rt.create_channel("camera/left")
    rt.create_channel("audio")
    watch = rt.watch("camera/", timeout=20)
    names = (e for e in watch if e.kind in ("created", "destroyed"))
    node = placement(rt)

    def seen(event: stampede.WatchEvent) -> tuple[object, ...]:
        return (event.kind, event.name, event.container_kind, event.node, event.missed)

    first = next(names)
    assert isinstance(first, stampede.WatchEvent)
    assert seen(first) == ("created", "camera/left", "channel", node, None)
    assert repr(first).startswith("WatchEvent(kind='created', name='camera/left', container_kind='channel'")
    right = rt.create_queue("camera/right")
    rt.create_channel("audio/mic")
    assert seen(next(names)) == ("created", "camera/right", "queue", node, None)
    right.destroy()
    destroyed = next(names)
    assert seen(destroyed) == ("destroyed", "camera/right", "queue", node, None)
    assert destroyed != first


def test_watch_ends_after_its_timeout(rt):
    """Iterating a watch ends when nothing happens for its timeout."""
    events = list(rt.watch("nothing/", timeout=0.2))
    assert [e for e in events if e.kind != "node_up"] == []
    # Through a client, the watch starts with a node_up for each node reached, its own included.
    assert all(e.name is None and e.container_kind is None and e.node for e in events)
    assert rt.node is None or rt.node in {e.node for e in events}


def test_put_log_notes_puts_once_asked_for(rt):
    """A channel's put log (what ``stampede hz`` reads): empty until first asked for, then each
    put's time, timestamp and size, oldest first."""
    ch = rt.create_channel("logged")
    out = rt.task(0).attach_output(ch)
    out.put(0, b"abc")
    assert ch.put_log() == []
    for ts in (1, 2, 3):
        out.put(ts, b"x" * ts * 10)
    log = ch.put_log()
    assert [(ts, size) for _, ts, size in log] == [(1, 10), (2, 20), (3, 30)]
    assert [at for at, _, _ in log] == sorted(at for at, _, _ in log)
