//! [`Runtime::graph`]: tasks with their names, virtual times and connections, containers with
//! their bounds and counters, and per-connection counts of items and skips — the same embedded
//! and through a node (`STAMPEDE_CONFIGURATION`, see `configuration/mod.rs`).

use std::time::Duration;

use stampede::graph::Holder;
use stampede::tape::Pattern;
use stampede::{ChannelOptions, ConnectionKind, Error, Limits, PutOptions, Selector, INFINITY};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);

#[test]
fn a_pipeline_as_its_graph_shows_it() {
    let rt = configuration::runtime();
    let frames =
        rt.create_channel("camera/frames", ChannelOptions::from(Limits::items(8).with_bytes(1 << 20))).unwrap();
    let work = rt.create_queue("tracker/work", Limits::unbounded()).unwrap();
    let digitizer = rt.task(0).unwrap();
    digitizer.set_name("digitizer").unwrap();
    let tracker = rt.task(INFINITY).unwrap();
    tracker.set_name("tracker 1").unwrap();
    assert_eq!(tracker.name().as_deref(), Some("tracker 1"));
    let out = digitizer.attach_output(&frames).unwrap();
    let inp = tracker.attach_input(&frames).unwrap();
    let qout = tracker.attach_output(&work).unwrap();
    for ts in 0..5 {
        out.put(ts, vec![ts as u8; 10]).unwrap();
    }
    digitizer.set_virtual_time(5).unwrap();
    // The freshest frame, skipping the four stale ones: what a NEWEST_UNSEEN reader does.
    let item = inp.get(Selector::NewestUnseen, NOW).unwrap();
    qout.put(item.ts, "job", None).unwrap(); // while frame 4 is open: the task's visibility is 4
    inp.consume_until(item.ts).unwrap();

    // The queued job at 4 holds ts_min at 4 (across nodes, once reclamation settled).
    configuration::settled(4, || rt.ts_min());
    let graph = rt.graph().unwrap();
    assert_eq!(graph.node.as_deref(), rt.node());
    assert_eq!(graph.ts_min, rt.ts_min());
    let names: Vec<_> = graph.tasks.iter().map(|t| t.name.as_deref()).collect();
    assert_eq!(names, [Some("digitizer"), Some("tracker 1")]);
    let d = &graph.tasks[0];
    assert_eq!((d.id, d.virtual_time, d.visibility), (digitizer.id(), 5, 5));
    assert_eq!(d.connections.len(), 1);
    let c = &d.connections[0];
    assert_eq!((c.container.as_str(), c.kind, c.items, c.skipped), ("camera/frames", ConnectionKind::Output, 5, 0));
    let t = &graph.tasks[1];
    let counts: Vec<_> = t.connections.iter().map(|c| (c.container.as_str(), c.kind, c.items, c.skipped)).collect();
    assert_eq!(
        counts,
        [("camera/frames", ConnectionKind::Input, 1, 4), ("tracker/work", ConnectionKind::Output, 1, 0)]
    );

    let names: Vec<_> = graph.containers.iter().map(|c| (c.name.as_str(), c.kind.as_str())).collect();
    assert_eq!(names, [("camera/frames", "channel"), ("tracker/work", "queue")]);
    let ch = &graph.containers[0];
    let stats = frames.stats();
    assert_eq!((ch.capacity, ch.max_bytes), (Some(8), Some(1 << 20)));
    assert_eq!((ch.live_items, ch.puts, ch.gets, ch.reclaimed), (stats.live_items as u64, 5, 1, stats.reclaimed));
    assert_eq!((graph.ts_min, ch.live_items, ch.reclaimed), (4, 1, 4), "the queued job at 4 holds ts_min at 4");
    assert_eq!(graph.containers[1].live_items, 1);
    assert_eq!(ch.dropped, 0);
    // What holds ts_min: the queue's job. (Split: the graph is of the tasks' node, where the
    // queue's claim reaches ts_min through the mesh, as another node's.)
    if configuration::configuration() != configuration::Configuration::Split {
        assert_eq!(graph.held_by, [Holder::Queue { name: "tracker/work".into() }]);
    } else {
        assert!(graph.held_by.iter().all(|h| matches!(h, Holder::Node { .. })), "{:?}", graph.held_by);
    }
    let holder = rt.task(rt.ts_min()).unwrap();
    let graph = rt.graph().unwrap();
    if configuration::embedded() {
        let both = [Holder::Task { id: holder.id() }, Holder::Queue { name: "tracker/work".into() }];
        assert_eq!(graph.held_by, both, "a new task at ts_min holds it too");
    }
    holder.close();

    // A put that ends Full is a drop, counted whatever the producer does next.
    let small = rt.create_channel("small", ChannelOptions::from(Limits::items(1))).unwrap();
    let producer = rt.task(rt.ts_min()).unwrap();
    let out = producer.attach_output(&small).unwrap();
    out.put(5, "kept").unwrap();
    for ts in 6..9 {
        let full = out.put_with(ts, "dropped", PutOptions { timeout: NOW, ..PutOptions::default() });
        assert!(matches!(full, Err(Error::Full { .. })), "{full:?}");
    }
    let graph = rt.graph().unwrap();
    let small = graph.containers.iter().find(|c| c.name == "small").unwrap();
    assert_eq!((small.puts, small.dropped, small.live_items), (1, 3, 1));
    producer.close();

    // A closed task and a detached connection leave the graph.
    inp.detach();
    digitizer.close();
    let graph = rt.graph().unwrap();
    assert_eq!(graph.tasks.len(), 1);
    assert_eq!(graph.tasks[0].connections.len(), 1, "only the queue output is left");
}

/// Through a node, each input connection of a client's task carries its tape: what it asked for,
/// and the pattern that shows (docs/NODES.md, "Tapes") — a display reading the freshest frame
/// skips, a tracker reads in order; embedded, nothing is recorded.
#[test]
fn a_remote_readers_tape_shows_how_it_reads() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("tape/frames", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display, tracker) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let (newest, oldest) = (display.attach_input(&frames).unwrap(), tracker.attach_input(&frames).unwrap());
    for ts in 0..8 {
        out.put(ts, vec![1]).unwrap();
        if ts % 2 == 1 {
            let item = newest.get(Selector::NewestUnseen, NOW).unwrap();
            newest.consume_until(item.ts).unwrap();
        }
        let item = oldest.get(Selector::OldestUnseen, NOW).unwrap();
        oldest.consume_until(item.ts).unwrap();
    }
    assert!(matches!(newest.get(Selector::NewestUnseen, NOW), Err(Error::NotAvailable { .. })));
    let graph = rt.graph().unwrap();
    let tape = |task: &stampede::Task| {
        let view = graph.tasks.iter().find(|t| t.id == task.id()).expect("the task is in the graph");
        view.connections.iter().find(|c| c.kind == ConnectionKind::Input).expect("its input").tape.clone()
    };
    if rt.node().is_none() {
        assert_eq!((tape(&display), tape(&tracker)), (None, None), "an embedded runtime records no tape");
        return;
    }
    let shown = tape(&display).expect("a remote input connection's tape");
    assert_eq!(shown.pattern(), Pattern::Skipping, "{shown:?}");
    assert_eq!((shown.gets, shown.misses, shown.consumes), (5, 1, 4));
    let read = tape(&tracker).expect("a remote input connection's tape");
    assert_eq!(read.pattern(), Pattern::InOrder { stride: None }, "{read:?}");
    assert_eq!((read.gets, read.misses, read.consumes), (8, 0, 8));
    assert!(read.recent.len() <= stampede::tape::TAPE_RECENT_MAX);
}

#[test]
fn a_task_name_is_bounded_text() {
    let rt = configuration::runtime();
    let task = rt.task(0).unwrap();
    for bad in ["line\nbreak".to_owned(), "x".repeat(stampede::NAME_BYTES_MAX + 1)] {
        assert!(matches!(task.set_name(&bad), Err(Error::InvalidArgument { .. })), "{bad:?}");
    }
    assert_eq!(task.name(), None, "a refused name is not kept");
    task.set_name("hi-fi tracker (person 3)").unwrap();
    assert_eq!(rt.graph().unwrap().tasks[0].name.as_deref(), Some("hi-fi tracker (person 3)"));
}
