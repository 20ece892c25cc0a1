"""`rt.graph()` and task names: what tools (the dashboard) see of a runtime — the same embedded and
through a node (STAMPEDE_CONFIGURATION)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from conftest import CONFIGURATION, settled

import stampede


def test_graph_shows_named_tasks_connections_and_counters(rt: stampede.Runtime) -> None:
    frames = rt.create_channel("camera/frames", capacity=8)
    with rt.task(0, name="digitizer") as cam, rt.task(stampede.INFINITY, name="tracker") as trk:
        out, inp = cam.attach_output(frames), trk.attach_input(frames)
        for ts in range(5):
            out.put(ts, b"x" * 10)
        cam.set_virtual_time(5)
        item = inp.get(stampede.NEWEST_UNSEEN, timeout=0)
        inp.consume_until(item.ts)  # the four older frames are skipped, never gotten
        settled(5, lambda: rt.ts_min)  # across nodes (split), once reclamation settled
        graph = rt.graph()
        assert graph["ts_min"] == rt.ts_min == 5
        assert [(t["name"], t["virtual_time"]) for t in graph["tasks"]] == [
            ("digitizer", 5),
            ("tracker", stampede.INFINITY),
        ]
        [sent] = graph["tasks"][0]["connections"]
        [got] = graph["tasks"][1]["connections"]
        assert (sent["kind"], sent["items"], sent["skipped"]) == ("output", 5, 0)
        got_counts = (got["container"], got["kind"], got["items"], got["skipped"])
        assert got_counts == ("camera/frames", "input", 1, 4)
        [channel] = graph["containers"]
        assert (channel["name"], channel["capacity"], channel["puts"], channel["reclaimed"]) == (
            "camera/frames",
            8,
            5,
            5,
        )
        # What holds ts_min: the digitizer's virtual time. (Split: the graph is of the tasks'
        # node, which sees the channel's claims as another node's.)
        if CONFIGURATION != "split":
            assert graph["held_by"] == [{"task": {"id": cam.id}}]
        # Through a node, each task names the client session that owns it.
        assert [t["session"] is None for t in graph["tasks"]] == [CONFIGURATION == "embedded"] * 2
        trk.name = "tracker 2"
        assert trk.name == "tracker 2"
        assert rt.graph()["tasks"][1]["name"] == "tracker 2"
        json.dumps(graph)  # plain data all the way down


def test_task_names_are_bounded_text(rt: stampede.Runtime) -> None:
    with pytest.raises(stampede.InvalidArgument):
        rt.task(0, name="two\nlines")
    assert rt.graph()["tasks"] == [], "a task refused its name is closed"
    with rt.task(0) as t:
        assert t.name is None
        with pytest.raises(stampede.InvalidArgument):
            t.spawn(0, name="x" * 10_000)
        assert [task["id"] for task in rt.graph()["tasks"]] == [t.id]


def test_a_dashboard_serves_the_graph(rt: stampede.Runtime) -> None:
    rt.create_channel("camera/frames")
    with rt.task(0, name="digitizer"), stampede.Dashboard(rt, port=0) as dash:
        assert dash.url == f"http://127.0.0.1:{dash.port}/"
        with urllib.request.urlopen(dash.url + "api/snapshot", timeout=10) as response:
            snapshot = json.load(response)
        assert "digitizer" in [t["name"] for t in snapshot["tasks"]]
        assert "camera/frames" in [c["name"] for c in snapshot["channels"]]
    hostile = ({"host": "no address"}, {"port": -1}, {"port": 1 << 16}, {"refresh": 0}, {"refresh": 1e300})
    for bad in hostile:
        with pytest.raises(stampede.InvalidArgument):
            stampede.Dashboard(rt, **bad)  # type: ignore[arg-type]
