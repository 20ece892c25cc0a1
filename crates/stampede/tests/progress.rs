//! One test per defect and rule of the progress-tracking rebuild (a producer can always join:
//! docs/SEMANTICS.md, "Virtual time, visibility, GC"; settledness: docs/CORRELATION.md,
//! "Settled timestamps"): the hand-over of an early-reclaimed item's claim, settledness of relaying
//! producers, dynamic join and leave of producers, bounded tombstones, and the refusal that keeps
//! settled horizons from going back. The interleavings themselves are explored by
//! `tests/interleavings.rs` (feature `shuttle`).

use std::time::Duration;

use stampede::{Error, ExactJoin, JoinPolicy, Limits, PutOptions, Selector, INFINITY, OLDEST_UNSEEN};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);

/// Defect 1: when task B's consume reclaims (by reference count) an item task A holds open, A's
/// visibility rises with it and A may legally set its virtual time to its visibility — no panic,
/// and ts_min never passes what A reports.
#[test]
fn early_reclamation_hands_the_claim_over() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let camera = rt.task(0).unwrap();
    let out = camera.attach_output(&ch).unwrap();
    let (a, b) = (rt.task(INFINITY).unwrap(), rt.task(INFINITY).unwrap());
    let (ia, ib) = (a.attach_input(&ch).unwrap(), b.attach_input(&ch).unwrap());
    out.put_with(0, &b"f"[..], PutOptions { refcount: Some(1), ..Default::default() }).unwrap();
    camera.set_virtual_time(1).unwrap();
    ia.get(0, NOW).unwrap();
    ib.get(0, NOW).unwrap();
    assert_eq!(a.visibility(), 0);
    ib.consume(0).unwrap();
    assert_eq!(ch.stats().live_items, 0, "reclaimed by its reference count");
    assert_eq!(a.visibility(), INFINITY, "no longer open on A's connection");
    rt.check_invariants();
    a.set_virtual_time(a.visibility()).unwrap();
    assert_eq!(configuration::settled(1, || rt.ts_min()), 1);
    rt.check_invariants();
}

/// Defect 2: a tracker at INFINITY turning frame t into result t keeps `results` unsettled at t
/// until frame t has gone through it, so a Skip join over frames and results never skips t.
#[test]
fn relaying_producer_keeps_results_unsettled() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let results = rt.create_channel("results", Limits::unbounded()).unwrap();
    let camera = rt.task(0).unwrap();
    let shoot = camera.attach_output(&frames).unwrap();
    frames.close_producers().unwrap();
    let tracker = rt.task(INFINITY).unwrap();
    let seen = tracker.attach_input(&frames).unwrap();
    let found = tracker.attach_output(&results).unwrap();
    results.close_producers().unwrap();
    let joiner = rt.task(INFINITY).unwrap();
    let mut join = ExactJoin::new(
        vec![joiner.attach_input(&frames).unwrap(), joiner.attach_input(&results).unwrap()],
        JoinPolicy::Skip,
    )
    .unwrap();
    assert_eq!(results.settled_below(), 0, "frame 0 may still come, and with it result 0");
    for t in 0..3 {
        shoot.put(t, &b"frame"[..]).unwrap();
        camera.set_virtual_time(t + 1).unwrap();
        assert_eq!(results.settled_below(), t, "frame {t} waits, unseen, at the tracker");
        assert!(matches!(join.next(NOW), Err(Error::NotAvailable { .. })), "t={t} must not be skipped");
        let frame = seen.get(OLDEST_UNSEEN, NOW).unwrap();
        found.put(frame.ts, &b"blob"[..]).unwrap();
        seen.consume(frame.ts).unwrap();
        let pair = join.next(NOW).unwrap();
        assert_eq!((pair.ts, pair.items.iter().all(Option::is_some)), (t, true));
    }
    assert_eq!(join.stats().skipped, 0);
}

/// Rule "a producer can always join": readers at INFINITY attached before any producer exists,
/// then a producer at 0, from a fresh runtime.
#[test]
fn readers_first_then_a_producer_at_zero() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("camera", Limits::unbounded()).unwrap();
    let display = rt.task(INFINITY).unwrap();
    let inp = display.attach_input(&ch).unwrap();
    assert_eq!(rt.ts_min(), 0, "nothing was ever put, so ts_min stays at 0");
    let camera = rt.task(0).unwrap();
    camera.attach_output(&ch).unwrap().put(0, &b"hello"[..]).unwrap();
    assert_eq!(inp.get(Selector::NewestUnseen, NOW).unwrap().ts, 0);
}

/// Rule "a producer can always join": the only producer closes, everything is consumed, and a new
/// producer starts just above its last timestamp; below that, a root task is refused with a
/// message naming the bound and what to do.
#[test]
fn a_restarted_producer_starts_above_everything_that_exists() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("camera", Limits::unbounded()).unwrap();
    let display = rt.task(INFINITY).unwrap();
    let inp = display.attach_input(&ch).unwrap();
    let camera = rt.task(0).unwrap();
    let out = camera.attach_output(&ch).unwrap();
    for t in 0..10 {
        out.put(t, &b"f"[..]).unwrap();
    }
    drop(out);
    camera.close();
    inp.consume_until(9).unwrap();
    assert_eq!(configuration::settled(10, || rt.ts_min()), 10, "1 + the highest timestamp put, not INFINITY");
    let err = rt.task(9).unwrap_err();
    assert!(matches!(err, Error::BelowVisibility { ts: 9, limit: 10, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("below ts_min 10") && message.contains("start it at 10 or later"), "{message}");
    let restarted = rt.task(10).unwrap();
    restarted.attach_output(&ch).unwrap().put(10, &b"again"[..]).unwrap();
    assert_eq!(inp.get(OLDEST_UNSEEN, NOW).unwrap().ts, 10);
}

/// Tombstones of consecutive early-reclaimed timestamps cost one run: 100 000 items reclaimed
/// by reference count behind an idle task (which holds ts_min at 0) leave one run, not 100 000
/// entries; they go once ts_min passes them.
#[test]
fn tombstones_of_consecutive_timestamps_are_one_run() {
    // Through a node each put and consume is a round trip: fewer items show the same runs.
    let items: i64 = if configuration::embedded() { 100_000 } else { 2_000 };
    let rt = configuration::runtime();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let idle = rt.task(0).unwrap();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let reader = rt.task(INFINITY).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    for t in 0..items {
        out.put_with(t, &b"."[..], PutOptions { refcount: Some(1), ..Default::default() }).unwrap();
        inp.consume(t).unwrap();
    }
    let stats = ch.stats();
    assert_eq!((stats.live_items, stats.tombstones, stats.tombstone_runs), (0, items as usize, 1));
    assert!(matches!(out.put(items / 2, &b"."[..]), Err(Error::DuplicateTimestamp { .. })));
    idle.close();
    producer.set_virtual_time(INFINITY).unwrap();
    assert_eq!(configuration::settled(items, || rt.ts_min()), items);
    let tombstones = || (ch.stats().tombstones, ch.stats().tombstone_runs);
    assert_eq!(configuration::settled((0, 0), tombstones), (0, 0));
}

/// Settledness never goes back: a producer of a channel whose producer set is closed may not
/// attach an input that could deliver something older than that channel's settled horizon
/// (`InvalidArgument`, saying to attach inputs before `close_producers`); attached first, it may.
#[test]
fn settled_horizons_never_go_back() {
    let rt = configuration::runtime();
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let results = rt.create_channel("results", Limits::unbounded()).unwrap();
    let camera = rt.task(0).unwrap();
    let _shoot = camera.attach_output(&frames).unwrap();
    let late = rt.task(INFINITY).unwrap();
    let _out = late.attach_output(&results).unwrap();
    results.close_producers().unwrap();
    assert_eq!(results.settled_below(), INFINITY, "its only producer can put nothing");
    let err = late.attach_input(&frames).map(|_| ()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("before close_producers()"), "{err}");
    assert_eq!(results.settled_below(), INFINITY);
    // In the documented order it works, and the horizon follows the camera.
    let relay = rt.task(INFINITY).unwrap();
    let _inp = relay.attach_input(&frames).unwrap();
    let other = rt.create_channel("other", Limits::unbounded()).unwrap();
    let _relay_out = relay.attach_output(&other).unwrap();
    other.close_producers().unwrap();
    assert_eq!(other.settled_below(), 0);
}

/// Defect 1, other doors: a channel or queue destroyed while another task holds one of its items
/// open hands that claim over too — the holder's legal `set_virtual_time(visibility)` never
/// panics, and nothing is left pinning ts_min afterwards.
#[test]
fn destroying_a_container_hands_open_items_over() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let producer = rt.task(0).unwrap();
    let (out, qout) = (producer.attach_output(&ch).unwrap(), producer.attach_output(&q).unwrap());
    let holder = rt.task(INFINITY).unwrap();
    let (inp, qin) = (holder.attach_input(&ch).unwrap(), holder.attach_input(&q).unwrap());
    out.put(3, &b"f"[..]).unwrap();
    qout.put(4, &b"w"[..], None).unwrap();
    producer.set_virtual_time(10).unwrap();
    inp.get(3, NOW).unwrap();
    qin.get(NOW).unwrap();
    assert_eq!(holder.visibility(), 3);
    ch.destroy().unwrap();
    rt.check_invariants();
    assert_eq!(holder.visibility(), 4, "the channel's item is no longer open");
    q.destroy().unwrap();
    rt.check_invariants();
    holder.set_virtual_time(holder.visibility()).unwrap();
    assert_eq!(holder.visibility(), INFINITY);
    assert_eq!(configuration::settled(5, || rt.ts_min()), 5, "1 + the highest timestamp put; nothing pins it");
}
