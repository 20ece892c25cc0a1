//! Prefetch (docs/PREFETCH.md), in every configuration (`STAMPEDE_CONFIGURATION`, see
//! `configuration/mod.rs`): a skipping reader of a remote channel is pushed the newest item
//! ahead of its get and answered from its cache, with exactly the items a get through the node
//! could have returned; a cache answer opens the item on the node; `off` pushes nothing.
//! Embedded, there is nothing to push: the same readers read the same items.

use std::thread;
use std::time::Duration;

use stampede::prefetch::Pushes;
use stampede::{
    ChannelOptions, ConnectionKind, Error, InputOptions, Limits, Prefetch, PutOptions, Retention, Selector, Task,
    INFINITY,
};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);
const FRAMES: i64 = 60;

/// What the node says it pushed to `task`'s input connection and the cache used (`None`
/// embedded).
fn pushes(rt: &stampede::Runtime, task: &Task) -> Option<Pushes> {
    let graph = rt.graph().unwrap();
    let view = graph.tasks.iter().find(|t| t.id == task.id()).expect("the task is in the graph");
    view.connections.iter().find(|c| c.kind == ConnectionKind::Input).expect("its input").prefetch
}

fn with(prefetch: Prefetch) -> InputOptions {
    InputOptions { prefetch: Some(prefetch), ..InputOptions::default() }
}

/// A display reading the freshest frame of a camera that puts one every 4 ms: every frame it
/// gets is newer than the one before, carries its own timestamp, and is the newest put once the
/// camera stops; through a node most of its gets are answered by its cache, each one pushed
/// once.
#[test]
fn a_skipping_reader_is_served_from_its_cache() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/frames", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    let producer = thread::spawn(move || {
        for ts in 0..FRAMES {
            out.put(ts, ts.to_le_bytes().to_vec()).unwrap();
            // A camera's pace: the reader must fall behind it and skip, which no condition paces.
            thread::sleep(Duration::from_millis(4));
        }
    });
    let (mut last, mut gets) = (-1, 0u64);
    while last < FRAMES - 1 {
        let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
        assert!(item.ts > last, "{} after {last}: a skipping reader only goes forward", item.ts);
        assert_eq!(item.data().as_ref(), item.ts.to_le_bytes(), "the item's own payload");
        input.consume_until(item.ts).unwrap();
        (last, gets) = (item.ts, gets + 1);
    }
    producer.join().unwrap();
    assert!(matches!(input.get(Selector::NewestUnseen, NOW), Err(Error::NotAvailable { .. })));
    let Some(pushed) = pushes(&rt, &display) else { return };
    assert_eq!(pushed.policy, Prefetch::Newest);
    assert!(pushed.used <= pushed.pushed && pushed.used <= gets, "{pushed:?} for {gets} gets");
    assert!(pushed.used > 0, "no get was answered by the cache: {pushed:?} for {gets} gets");
}

/// A camera putting `FRAMES * 4` frames into `frames` at its pace while two other threads of the
/// client keep asking the node (`ts_min`) — their requests carry what the reader's session has to
/// tell the node (its cache answers, its deferred consumes) — and `read` reads, returning the
/// timestamp it read, until it read the last frame.
fn read_beside_busy_threads(rt: &stampede::Runtime, frames: &stampede::Channel, mut read: impl FnMut() -> i64) {
    let out = rt.task(0).unwrap().attach_output(frames).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let (rt, stop) = (rt.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = rt.ts_min();
                }
            })
        })
        .collect();
    let producer = thread::spawn(move || {
        for ts in 0..FRAMES * 4 {
            out.put(ts, vec![0; 64]).unwrap();
            // A camera's pace, as in the skipping reader's test.
            thread::sleep(Duration::from_millis(4));
        }
    });
    let mut last = -1;
    while last < FRAMES * 4 - 1 {
        last = read();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    producer.join().unwrap();
    for thread in busy {
        thread.join().unwrap();
    }
}

/// A tracker at INFINITY puts its result at the timestamp of each frame its cache answered with
/// (the kiosk's trackers do): the frame it holds open keeps its visibility there, whatever the
/// session's other threads send meanwhile. Their requests may be the ones that report the cache's
/// answer to the node and still run after the put (a node runs a session's requests concurrently),
/// so every request reports it until a reply confirms it (`stampede_wire::session::CacheAnswers`);
/// reported once, the put was refused `BelowVisibility` at INFINITY (seen in the kiosk run as a
/// node's client).
#[test]
fn a_put_at_a_cache_answers_timestamp_is_never_below_visibility() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/seen", ChannelOptions::from(Limits::unbounded())).unwrap();
    let results = rt.create_channel("prefetch/tracks", ChannelOptions::from(Limits::unbounded())).unwrap();
    let tracker = rt.task(INFINITY).unwrap();
    let input = tracker.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    let tracks = tracker.attach_output(&results).unwrap();
    read_beside_busy_threads(&rt, &frames, || {
        let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
        tracks.put(item.ts, b"track".to_vec()).unwrap_or_else(|e| panic!("the track at {}: {e}", item.ts));
        input.consume_until(item.ts).unwrap();
        item.ts
    });
}

/// A deferred consume is applied before anything the client asks after it, whichever of its
/// threads' requests carries it: other threads keep asking the node (their requests carry the
/// deferred consumes in their headers), and the reader's get of the timestamp it just consumed
/// must find it consumed. Carried by one request only, the consume could still be on its way in
/// another thread's request when the get ran on the node, which answered with the item (it did
/// at the sixth frame in `serve`); now every request carries it until a reply confirms it
/// (`stampede_wire::session::Deferred`).
#[test]
fn a_deferred_consume_is_seen_by_the_next_get_whichever_thread_carries_it() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/carried", ChannelOptions::from(Limits::unbounded())).unwrap();
    let input = rt.task(INFINITY).unwrap().attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    read_beside_busy_threads(&rt, &frames, || {
        let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
        input.consume_until(item.ts).unwrap();
        let again = input.get(Selector::At(item.ts), NOW);
        assert!(
            matches!(again, Err(Error::AlreadyConsumed { .. } | Error::Reclaimed { .. })),
            "the get of {} after its consume: {again:?}",
            item.ts
        );
        item.ts
    });
}

/// An item the cache answered with is open on the node, as if the get had come there: it can
/// be gotten again by its timestamp until it is consumed, and not after.
#[test]
fn a_cache_answer_opens_the_item_on_the_node() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/open", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    let mut answered = None;
    for ts in 0..20 {
        out.put(ts, vec![ts as u8]).unwrap();
        // Give the push time to arrive: the get then finds it in the cache.
        thread::sleep(Duration::from_millis(20));
        let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(item.ts, ts);
        let used = pushes(&rt, &display).map_or(0, |p| p.used);
        if used > 0 || rt.node().is_none() {
            answered = Some(item.ts);
            break;
        }
    }
    let ts = answered.expect("a get answered by the cache within 20 frames");
    assert_eq!(input.get(Selector::At(ts), NOW).unwrap().ts, ts, "open: it can be gotten again");
    input.consume(ts).unwrap();
    assert!(matches!(input.get(Selector::At(ts), NOW), Err(Error::AlreadyConsumed { .. })));
}

/// With prefetch `off` nothing is pushed; with `auto` the node pushes once the tape shows a
/// skipping reader.
#[test]
fn off_pushes_nothing_and_auto_follows_the_tape() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/policies", ChannelOptions::from(Limits::unbounded())).unwrap();
    let camera = rt.task(0).unwrap();
    let (off, auto) = (rt.task(INFINITY).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let inputs = [
        off.attach_input_with(&frames, with(Prefetch::Off)).unwrap(),
        auto.attach_input_with(&frames, with(Prefetch::Auto)).unwrap(),
    ];
    for ts in 0..20 {
        out.put(ts, vec![1]).unwrap();
        // Time between reads for the tape to see; the test asserts no timing.
        thread::sleep(Duration::from_millis(5));
        for input in &inputs {
            let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
            assert_eq!(item.ts, ts);
            input.consume_until(item.ts).unwrap();
        }
    }
    let (Some(off), Some(auto)) = (pushes(&rt, &off), pushes(&rt, &auto)) else { return };
    assert_eq!((off.policy, off.pushed, off.used), (Prefetch::Off, 0, 0));
    assert_eq!(auto.policy, Prefetch::Auto);
    assert!(auto.pushed > 0, "a skipping reader with auto is pushed items: {auto:?}");
}

/// Waits until the node has pushed to `task`'s input connection at least `pushed` items (at once
/// embedded, where nothing is pushed).
fn pushed_at_least(rt: &stampede::Runtime, task: &Task, pushed: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pushes(rt, task).is_some_and(|p| p.pushed < pushed) {
        assert!(std::time::Instant::now() < deadline, "nothing pushed within 10 s");
        // The push is a message on its way: polled, as the node reports it only when asked.
        thread::sleep(Duration::from_millis(2));
    }
}

/// A channel this client destroyed answers no get from a cache that holds its newest item: the
/// get fails as it does embedded.
#[test]
fn a_destroyed_channel_answers_nothing_from_the_cache() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/destroyed", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    out.put(1, vec![1]).unwrap();
    pushed_at_least(&rt, &display, 1);
    frames.destroy().unwrap();
    let got = input.get(Selector::NewestUnseen, NOW);
    assert!(got.is_err(), "a get after the destroy returned {got:?}");
}

/// An item put with a reference count is never pushed (other readers' consumes may reclaim it
/// before a cache could answer); the reader gets it from the node.
#[test]
fn counted_items_are_never_pushed() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/counted", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    for ts in 0..5 {
        out.put_with(ts, vec![1], PutOptions { refcount: Some(1), ..PutOptions::default() }).unwrap();
        assert_eq!(input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap().ts, ts);
        input.consume(ts).unwrap();
    }
    if let Some(pushed) = pushes(&rt, &display) {
        assert_eq!((pushed.pushed, pushed.used), (0, 0), "{pushed:?}");
    }
}

/// A get never misses a put its own client made before it (read your writes), whatever the
/// cache holds: a frame is put (and, the first time, pushed), a second one put, and the next
/// `NEWEST_UNSEEN` get returns the second, not the pushed first.
#[test]
fn a_client_reads_its_own_puts() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/own", ChannelOptions::from(Limits::unbounded())).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    for round in 0..10 {
        out.put(2 * round, vec![1]).unwrap();
        if round == 0 {
            // The first put is pushed (nothing to predict from yet, `newest` pushes); later ones
            // only when the tape predicts a get before the next put, which this loop's pace
            // does not promise.
            pushed_at_least(&rt, &display, 1);
        }
        out.put(2 * round + 1, vec![2]).unwrap();
        let item = input.get(Selector::NewestUnseen, NOW).unwrap();
        assert_eq!(item.ts, 2 * round + 1, "the get after this client's put of {}", 2 * round + 1);
        input.consume_until(item.ts).unwrap();
    }
}

/// A consume of an item the reader got rides on its session's next request (docs/PREFETCH.md):
/// a later get of the same client sees it applied, and a reader that asks nothing more has it
/// reach the node all the same — a channel of current readers reclaims the consumed items, as
/// embedded. (Only the consume of an item the cache answered, by a reader that consumes often,
/// is deferred: here each follows the one before at once, unless the machine stalls the test or
/// a push comes late — then the consume is sent, and the same holds.)
#[test]
fn a_deferred_consume_reaches_the_node_without_another_request() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("prefetch/deferred", Retention::CurrentReaders).unwrap();
    let (camera, display) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    let out = camera.attach_output(&frames).unwrap();
    let input = display.attach_input_with(&frames, with(Prefetch::Newest)).unwrap();
    let pushed = std::cell::Cell::new(0);
    let read_next = |ts: i64| {
        out.put(ts, vec![ts as u8]).unwrap();
        pushed.set(pushed.get() + 1);
        pushed_at_least(&rt, &display, pushed.get());
        // Give the push time to arrive: the get then finds it in the cache (only the consume of
        // an item the cache answered is deferred; if it comes late, the consume is sent).
        thread::sleep(Duration::from_millis(20));
        let item = input.get(Selector::NewestUnseen, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(item.ts, ts);
    };
    read_next(0);
    input.consume_until(0).unwrap();
    out.put(1, vec![1]).unwrap();
    read_next(2);
    input.consume_until(2).unwrap();
    // The consume is applied before anything this client asks next.
    let skipped = input.get(Selector::At(1), NOW);
    assert!(matches!(skipped, Err(Error::AlreadyConsumed { .. } | Error::Reclaimed { .. })), "{skipped:?}");
    read_next(3);
    input.consume(3).unwrap();
    // Nothing else is asked of the node by this client (another one looks): its consume goes on
    // its own, within the deferral's bound. The reclaim has no signal to the test: poll, bounded.
    let observer = rt.another_client();
    let frames = match &observer {
        Some(observer) => match observer.lookup("prefetch/deferred").unwrap() {
            stampede::Container::Channel(channel) => channel,
            stampede::Container::Queue(_) => panic!("a channel"),
        },
        None => frames,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while frames.stats().live_items > 0 && std::time::Instant::now() < deadline {
        // The node's reclaim has no signal to another client: polled, bounded by the deadline.
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(frames.stats().live_items, 0, "every item consumed is reclaimed: {:?}", frames.stats());
    // What a session sent is counted (what the prefetch benchmark reports), a request each call.
    let before = rt.requests_sent();
    rt.stats();
    assert_eq!(rt.requests_sent(), before.map(|sent| sent + 1), "one request for the stats");
}
