//! One test per rule of docs/SEMANTICS.md, "Virtual time, visibility, GC": virtual time,
//! visibility, ts_min, reference counts, GC handlers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stampede::{Error, InputOptions, Limits, PutOptions, INFINITY, NEWEST_UNSEEN, OLDEST_UNSEEN};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);

/// visibility = min(virtual time, timestamps of items open on the task's input connections).
#[test]
fn visibility_is_min_of_vt_and_open_items() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(4, &b"."[..]).unwrap();
    out.put(6, &b"."[..]).unwrap();
    let t = rt.task(0).unwrap();
    let a = t.attach_input(&ch).unwrap();
    let b = t.attach_input(&ch).unwrap();
    t.set_virtual_time(INFINITY).unwrap();
    assert_eq!(t.visibility(), INFINITY);
    a.get(6, NOW).unwrap();
    b.get(4, NOW).unwrap();
    assert_eq!(t.visibility(), 4);
    b.consume(4).unwrap();
    assert_eq!(t.visibility(), 6);
    a.consume(6).unwrap();
    assert_eq!(t.visibility(), INFINITY);
}

/// A task may put at the timestamp of an item it holds open, even with virtual time INFINITY:
/// outputs inherit the input's timestamp.
#[test]
fn open_item_lets_task_put_at_its_timestamp() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let locations = rt.create_channel("locations", Limits::unbounded()).unwrap();
    let d = rt.task(0).unwrap();
    d.attach_output(&frames).unwrap().put(7, &b"f"[..]).unwrap();
    let tracker = rt.task(0).unwrap();
    let inp = tracker.attach_input(&frames).unwrap();
    tracker.set_virtual_time(INFINITY).unwrap();
    let out = tracker.attach_output(&locations).unwrap();
    assert!(matches!(out.put(7, &b"loc"[..]), Err(Error::BelowVisibility { .. })));
    let item = inp.get(NEWEST_UNSEEN, NOW).unwrap();
    out.put(item.ts, &b"loc"[..]).unwrap();
    inp.consume_until(item.ts).unwrap();
    assert!(matches!(out.put(8, &b"loc"[..]), Err(Error::BelowVisibility { .. })));
}

/// set_virtual_time requires v >= visibility.
#[test]
fn set_virtual_time_not_below_visibility() {
    let rt = configuration::runtime();
    let t = rt.task(10).unwrap();
    let err = t.set_virtual_time(9).unwrap_err();
    assert!(matches!(err, Error::BelowVisibility { ts: 9, limit: 10, .. }), "{err:?}");
    t.set_virtual_time(10).unwrap();
    t.set_virtual_time(INFINITY).unwrap();
    assert_eq!(t.virtual_time(), INFINITY);
}

/// A child's initial virtual time must be >= its parent's visibility; a root task's >= ts_min.
#[test]
fn spawn_and_root_rules() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let parent = rt.task(5).unwrap();
    assert!(matches!(parent.spawn(4), Err(Error::BelowVisibility { ts: 4, limit: 5, .. })));
    let child = parent.spawn(5).unwrap();
    assert_eq!(child.virtual_time(), 5);
    drop(child);
    parent.attach_output(&ch).unwrap().put(19, &b"."[..]).unwrap();
    parent.set_virtual_time(20).unwrap();
    assert_eq!(configuration::settled(20, || rt.ts_min()), 20);
    let err = rt.task(19).unwrap_err();
    assert!(matches!(err, Error::BelowVisibility { ts: 19, limit: 20, .. }), "{err:?}");
    // The message names the bound and what to do, and no task the user never created.
    let message = err.to_string();
    assert!(message.contains("below ts_min 20") && message.contains("start it at 20 or later"), "{message}");
    assert!(!message.contains("task 2"), "{message}");
    rt.task(20).unwrap();
}

/// ts_min is the minimum of task visibilities and of unseen/open items on input connections; an
/// unseen item holds ts_min even when every task is at INFINITY.
#[test]
fn ts_min_definition() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let p = rt.task(3).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let r = rt.task(INFINITY).unwrap();
    let inp = r.attach_input(&ch).unwrap();
    assert_eq!(rt.ts_min(), 0, "nothing put yet");
    out.put(5, &b"."[..]).unwrap();
    assert_eq!(configuration::settled(3, || rt.ts_min()), 3);
    p.set_virtual_time(INFINITY).unwrap();
    assert_eq!(configuration::settled(5, || rt.ts_min()), 5, "the unseen item at 5 holds ts_min");
    inp.get(5, NOW).unwrap();
    assert_eq!(configuration::settled(5, || rt.ts_min()), 5, "open holds it too");
    inp.consume(5).unwrap();
    assert_eq!(
        configuration::settled(6, || rt.ts_min()),
        6,
        "ts_min never runs ahead of 1 + the highest timestamp put"
    );
}

/// TGC: items below ts_min are reclaimed within the operation that advances ts_min — stats and
/// GC handlers show it before the call returns; collect() then finds nothing left.
#[test]
fn reclaimed_within_the_operation() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    ch.on_reclaim(move |item| s.lock().unwrap().push(item.ts)).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..5 {
        out.put(ts, vec![0u8; 100]).unwrap();
    }
    assert_eq!(ch.stats().live_items, 5);
    assert_eq!(ch.stats().live_bytes, 500);
    p.set_virtual_time(3).unwrap();
    configuration::settled(3, || ch.stats().reclaimed);
    let stats = ch.stats();
    assert_eq!((stats.live_items, stats.live_bytes, stats.reclaimed, stats.ts_min), (2, 200, 3, 3));
    assert_eq!(configuration::settled(vec![0, 1, 2], || seen.lock().unwrap().clone()), vec![0, 1, 2]);
    assert_eq!(rt.collect(), 0);
}

/// An item with a reference count is reclaimed after that many consumptions even above ts_min;
/// its timestamp stays taken (tombstone) and an exact get of it fails Reclaimed.
#[test]
fn reference_counts() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let a = rt.task(0).unwrap().attach_input(&ch).unwrap();
    let reader = rt.task(0).unwrap();
    let b = reader.attach_input(&ch).unwrap();
    let c = reader.attach_input(&ch).unwrap();
    out.put_with(5, &b"x"[..], PutOptions { refcount: Some(2), ..Default::default() }).unwrap();
    assert_eq!(rt.ts_min(), 0);
    c.get(5, NOW).unwrap();
    assert_eq!(reader.visibility(), 0);
    a.consume(5).unwrap();
    assert_eq!(ch.stats().live_items, 1);
    b.consume(5).unwrap();
    let stats = ch.stats();
    assert_eq!((stats.live_items, stats.reclaimed, stats.tombstones), (0, 1, 1));
    assert!(matches!(c.get(5, NOW), Err(Error::Reclaimed { ts: 5, .. })));
    assert!(matches!(out.put(5, &b"y"[..]), Err(Error::DuplicateTimestamp { ts: 5, .. })));
    assert!(matches!(
        out.put_with(6, &b"y"[..], PutOptions { refcount: Some(0), ..Default::default() }),
        Err(Error::InvalidArgument { .. })
    ));
    // The tombstone goes once ts_min passes it.
    p.set_virtual_time(INFINITY).unwrap();
    drop((a, b, c));
    reader.close();
    assert_eq!(configuration::settled(6, || rt.ts_min()), 6);
    assert_eq!(configuration::settled(0, || ch.stats().tombstones), 0);
}

/// A global GC handler sees every channel's reclaimed items with the channel's name.
#[test]
fn global_handler() {
    let rt = configuration::runtime();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    rt.on_reclaim(move |name, item| s.lock().unwrap().push((name.to_owned(), item.ts))).unwrap();
    let a = rt.create_channel("a", Limits::unbounded()).unwrap();
    let b = rt.create_channel("b", Limits::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    t.attach_output(&a).unwrap().put(0, &b"."[..]).unwrap();
    t.attach_output(&b).unwrap().put(1, &b"."[..]).unwrap();
    t.set_virtual_time(2).unwrap();
    let sorted = || {
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        seen
    };
    let expected = vec![("a".to_owned(), 0), ("b".to_owned(), 1)];
    assert_eq!(configuration::settled(expected.clone(), sorted), expected);
}

/// A closed or dropped task releases its claims, so it never pins ts_min.
#[test]
fn closing_a_task_releases_claims() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, &b"."[..]).unwrap();
    let r = rt.task(0).unwrap();
    let inp = r.attach_input(&ch).unwrap();
    inp.get(0, NOW).unwrap();
    p.close();
    assert!(matches!(out.put(1, &b"."[..]), Err(Error::Closed { .. })));
    assert_eq!(rt.ts_min(), 0, "the open item still holds it");
    r.close();
    assert!(matches!(inp.get(OLDEST_UNSEEN, NOW), Err(Error::Closed { .. })));
    assert_eq!(rt.stats().claims, 0);
    // With no claim left, ts_min is 1 + the highest timestamp put: item 0 goes, and a new root
    // task may start at 1, above everything that exists.
    assert_eq!(configuration::settled((1, 0), || (rt.ts_min(), ch.stats().live_items)), (1, 0));
    let late = rt.task(rt.ts_min()).unwrap();
    assert_eq!(rt.stats().claims, 1);
    let again = late.attach_input(&ch).unwrap();
    let out = late.attach_output(&ch).unwrap();
    out.put(1, &b"."[..]).unwrap();
    assert_eq!(again.get(OLDEST_UNSEEN, NOW).unwrap().ts, 1);
    // Dropping the last handle of a task (and its connections) closes it too.
    late.set_virtual_time(INFINITY).unwrap();
    drop((late, again, out));
    assert_eq!(rt.stats().claims, 0);
    assert_eq!(configuration::settled((2, 0), || (rt.ts_min(), ch.stats().live_items)), (2, 0));
}

/// ts_min never moves backwards, and never runs ahead of 1 + the highest timestamp ever put:
/// with nothing put, a task at 7 leaves it at 0, so a producer can still start at 0.
#[test]
fn ts_min_monotone_and_capped_by_puts() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    assert_eq!(rt.ts_min(), 0);
    let t = rt.task(7).unwrap();
    assert_eq!(rt.ts_min(), 0);
    let out = t.attach_output(&ch).unwrap();
    out.put(8, &b"."[..]).unwrap();
    assert_eq!(configuration::settled(7, || rt.ts_min()), 7);
    drop((t, out));
    assert_eq!(configuration::settled(9, || rt.ts_min()), 9);
    assert!(matches!(rt.task(8), Err(Error::BelowVisibility { limit: 9, .. })));
    let _producer = rt.task(9).unwrap();
    assert_eq!(configuration::settled(9, || rt.ts_min()), 9);
}

/// Stats report live items and bytes, reclaimed count, puts, gets, connections and ts_min.
#[test]
fn stats_fields() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    out.put(0, vec![0u8; 3]).unwrap();
    inp.get(OLDEST_UNSEEN, NOW).unwrap();
    let s = ch.stats();
    assert_eq!((s.live_items, s.live_bytes, s.puts, s.gets, s.inputs, s.outputs, s.claim), (1, 3, 1, 1, 1, 1, Some(0)));
    assert_eq!(rt.stats().containers, 1);
}

/// A slow reader with a bound on lag cannot hold ts_min back: beyond `max_lag_items` unseen items
/// (or `max_lag_ts` below the newest), the oldest unseen ones are consumed for it and counted as
/// skipped; what it has gotten stays open until it consumes it. Without the bound, the same
/// reader holds every item.
#[test]
fn a_bound_on_lag_lets_a_slow_reader_fall_behind() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let camera = rt.task(0).unwrap();
    let out = camera.attach_output(&ch).unwrap();
    let slow = rt.task(INFINITY).unwrap();
    let bounded = slow
        .attach_input_with(&ch, InputOptions { max_lag_items: Some(3), max_lag_ts: None, ..Default::default() })
        .unwrap();
    out.put(0, &b"f"[..]).unwrap();
    assert_eq!(bounded.get(OLDEST_UNSEEN, NOW).unwrap().ts, 0);
    for ts in 1..20 {
        out.put(ts, &b"f"[..]).unwrap();
    }
    camera.set_virtual_time(20).unwrap();
    // Item 0 is open, so it holds ts_min; of the rest only the newest three are unseen.
    assert_eq!(rt.ts_min(), 0);
    assert_eq!(bounded.get(OLDEST_UNSEEN, NOW).unwrap().ts, 17);
    bounded.consume_until(17).unwrap();
    assert_eq!(configuration::settled(18, || rt.ts_min()), 18);
    assert_eq!(configuration::settled(vec![18, 19], || ch.timestamps()), vec![18, 19]);
    let slow_view = rt.graph().unwrap().tasks.into_iter().find(|t| t.connections.iter().any(|c| c.items == 2)).unwrap();
    assert_eq!(slow_view.connections[0].skipped, 16, "1 to 16 were let go unseen");

    // By timestamp distance: nothing more than 5 below the newest stays unseen.
    let by_ts = slow
        .attach_input_with(&ch, InputOptions { max_lag_items: None, max_lag_ts: Some(5), ..Default::default() })
        .unwrap();
    for ts in 20..40 {
        out.put(ts, &b"f"[..]).unwrap();
    }
    assert_eq!(by_ts.get(OLDEST_UNSEEN, NOW).unwrap().ts, 34);

    let refused =
        slow.attach_input_with(&ch, InputOptions { max_lag_items: Some(0), max_lag_ts: None, ..Default::default() });
    assert!(matches!(refused.as_ref().err(), Some(Error::InvalidArgument { .. })), "{:?}", refused.err());
}
