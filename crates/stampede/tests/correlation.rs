//! docs/CORRELATION.md: settled timestamps, exact and approximate joins, demand, and the
//! current-readers retention policy.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use stampede::{ApproxJoin, ChannelOptions, Error, ExactJoin, Incomplete, JoinPolicy, Limits, Retention, INFINITY};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);
const SOON: Option<Duration> = Some(Duration::from_secs(5));

/// With an open producer set a timestamp is settled only below ts_min; once the set is closed,
/// settledness follows the producers' visibility — lowered by items they may still open on their
/// inputs — and no new producer may attach.
#[test]
fn settled_timestamps() {
    let rt = configuration::runtime();
    let up = rt.create_channel("up", Limits::unbounded()).unwrap();
    let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
    let slow = rt.task(0).unwrap(); // some unrelated task holds ts_min at 0
    let feeder = rt.task(6).unwrap();
    let feed = feeder.attach_output(&up).unwrap();
    let producer = rt.task(5).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let upstream = producer.attach_input(&up).unwrap();
    assert_eq!(ch.settled_below(), 0);
    assert!(!ch.is_settled(3));
    ch.close_producers().unwrap();
    // `up` still has an open producer set: any task may put 0 there, and the producer relay it.
    assert_eq!(ch.settled_below(), 0);
    up.close_producers().unwrap();
    assert_eq!(ch.settled_below(), 5);
    assert!(ch.is_settled(4) && !ch.is_settled(5));
    producer.set_virtual_time(9).unwrap();
    // What can still arrive on the producer's input counts: the feeder may still put 6.
    assert_eq!(ch.settled_below(), 6);
    // An unseen item at 7 on the producer's input could still be opened and inherited.
    feed.put(7, &b"."[..]).unwrap();
    feeder.set_virtual_time(10).unwrap();
    assert_eq!(ch.settled_below(), 7);
    upstream.get(7, NOW).unwrap();
    out.put(7, &b"derived"[..]).unwrap();
    upstream.consume(7).unwrap();
    assert_eq!(ch.settled_below(), 9);
    let err = rt.task(0).unwrap().attach_output(&ch).map(|_| ()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }) && err.to_string().contains("producer set is closed"));
    // The last producer ends: nothing can be put any more.
    drop((out, upstream));
    producer.close();
    assert_eq!(ch.settled_below(), INFINITY);
    drop((slow, feeder, feed));
}

/// Exact join, wait-for-all: items put out of order by several producers per channel come out
/// as complete tuples in timestamp order; each tuple stays open (the joiner can put at its
/// timestamp) until the next call.
#[test]
fn exact_join_wait_all_out_of_order() {
    let rt = configuration::runtime();
    let names = ["cam/0", "cam/1", "cam/2"];
    let channels: Vec<_> = names.iter().map(|n| rt.create_channel(n, Limits::unbounded()).unwrap()).collect();
    let producers: Vec<_> = (0..2).map(|_| rt.task(0).unwrap()).collect();
    let joiner = rt.task(0).unwrap();
    let inputs = channels.iter().map(|c| joiner.attach_input(c).unwrap()).collect();
    joiner.set_virtual_time(INFINITY).unwrap();
    let mut join = ExactJoin::new(inputs, JoinPolicy::WaitAll).unwrap();
    // Producer k puts the timestamps with ts % 2 == k, in reverse order, into every channel.
    for (k, p) in producers.iter().enumerate() {
        for c in &channels {
            let out = p.attach_output(c).unwrap();
            for ts in (0..10).rev().filter(|ts| ts % 2 == k as i64) {
                out.put(ts, vec![ts as u8]).unwrap();
            }
        }
    }
    let out = joiner.attach_output(&rt.create_channel("mix", Limits::unbounded()).unwrap()).unwrap();
    for ts in 0..10 {
        let tuple = join.next(SOON).unwrap();
        assert_eq!(tuple.ts, ts);
        assert!(tuple.items.iter().all(|i| i.as_ref().unwrap().data()[0] == ts as u8));
        out.put(tuple.ts, &b"composite"[..]).unwrap();
    }
    assert_eq!(join.stats().complete, 10);
    assert!(matches!(join.next(NOW), Err(Error::NotAvailable { .. })));
}

/// Exact join with Skip / Partial: a camera that dies never stalls the join; every missing
/// timestamp is settled once its producer is gone, and is counted and reported.
#[test]
fn exact_join_dead_camera_partial_and_skip() {
    for policy in [JoinPolicy::Partial, JoinPolicy::Skip] {
        let rt = configuration::runtime();
        let a = rt.create_channel("cam/a", Limits::unbounded()).unwrap();
        let b = rt.create_channel("cam/b", Limits::unbounded()).unwrap();
        let cam_a = rt.task(0).unwrap();
        let cam_b = rt.task(0).unwrap();
        let out_a = cam_a.attach_output(&a).unwrap();
        let out_b = cam_b.attach_output(&b).unwrap();
        a.close_producers().unwrap();
        b.close_producers().unwrap();
        let joiner = rt.task(INFINITY).unwrap();
        let mut join =
            ExactJoin::new(vec![joiner.attach_input(&a).unwrap(), joiner.attach_input(&b).unwrap()], policy).unwrap();
        let reports = Arc::new(Mutex::new(Vec::new()));
        let r = reports.clone();
        join.on_incomplete(move |ts, present, what| r.lock().unwrap().push((ts, present.to_vec(), what)));
        for ts in 0..6 {
            out_a.put(ts, &b"a"[..]).unwrap();
            cam_a.set_virtual_time(ts + 1).unwrap();
            if ts < 3 {
                out_b.put(ts, &b"b"[..]).unwrap();
                cam_b.set_virtual_time(ts + 1).unwrap();
            }
        }
        // Camera b stalls at virtual time 3: timestamps 3.. are not settled on b yet.
        for ts in 0..3 {
            assert_eq!(join.next(SOON).unwrap().ts, ts);
        }
        assert!(matches!(join.next(Some(Duration::from_millis(20))), Err(Error::NotAvailable { .. })));
        // Camera b dies: its timestamps are settled, the join moves on.
        drop(out_b);
        cam_b.close();
        match policy {
            JoinPolicy::Partial => {
                for ts in 3..6 {
                    let tuple = join.next(SOON).unwrap();
                    assert_eq!(tuple.ts, ts);
                    assert!(tuple.items[0].is_some() && tuple.items[1].is_none());
                }
                assert_eq!(join.stats().partial, 3);
            }
            _ => {
                assert!(matches!(join.next(Some(Duration::from_millis(20))), Err(Error::NotAvailable { .. })));
                assert_eq!(join.stats().skipped, 3);
            }
        }
        let reports = reports.lock().unwrap();
        assert_eq!(reports.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert!(reports.iter().all(|r| r.1 == vec![true, false]));
        assert_eq!(join.stats().complete, 3);
        drop(out_a);
    }
}

/// A producer that advances its virtual time past a timestamp without putting it settles that
/// timestamp: Skip drops it at once instead of waiting.
#[test]
fn exact_join_producer_skips_ahead() {
    let rt = configuration::runtime();
    let a = rt.create_channel("a", Limits::unbounded()).unwrap();
    let b = rt.create_channel("b", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let (oa, ob) = (p.attach_output(&a).unwrap(), p.attach_output(&b).unwrap());
    a.close_producers().unwrap();
    b.close_producers().unwrap();
    let j = rt.task(INFINITY).unwrap();
    let mut join =
        ExactJoin::new(vec![j.attach_input(&a).unwrap(), j.attach_input(&b).unwrap()], JoinPolicy::Skip).unwrap();
    oa.put(0, &b"."[..]).unwrap();
    oa.put(1, &b"."[..]).unwrap();
    ob.put(1, &b"."[..]).unwrap();
    assert!(matches!(join.next(NOW), Err(Error::NotAvailable { .. })), "0 is not settled on b yet");
    p.set_virtual_time(2).unwrap();
    assert_eq!(join.next(NOW).unwrap().ts, 1);
    assert_eq!(join.stats().skipped, 1);
}

/// An approximate join releases a distance-0 match at once: nothing can beat it, even while the
/// other channel's producer could still put timestamps around it.
#[test]
fn approx_join_releases_an_exact_match_at_once() {
    let rt = configuration::runtime();
    let (video, audio) = (
        rt.create_channel("video", Limits::unbounded()).unwrap(),
        rt.create_channel("audio", Limits::unbounded()).unwrap(),
    );
    let camera = rt.task(0).unwrap();
    let microphone = rt.task(0).unwrap();
    let (ov, oa) = (camera.attach_output(&video).unwrap(), microphone.attach_output(&audio).unwrap());
    video.close_producers().unwrap();
    audio.close_producers().unwrap();
    let j = rt.task(INFINITY).unwrap();
    let mut join = ApproxJoin::new(vec![j.attach_input(&video).unwrap(), j.attach_input(&audio).unwrap()], 5).unwrap();
    oa.put(10, &b"a"[..]).unwrap();
    ov.put(10, &b"v"[..]).unwrap();
    camera.set_virtual_time(11).unwrap();
    // The microphone is still at 0 (it may put 9 or 11), yet 10 matches 10 exactly.
    assert_eq!(audio.settled_below(), 0);
    let matched = join.next(NOW).unwrap();
    assert_eq!((matched.pivot.ts, matched.matches[0].as_ref().map(|i| i.ts)), (10, Some(10)));
}

/// Joins with Partial/Skip refuse channels whose producer set is open: their missing parts
/// could never be settled.
#[test]
fn joins_need_closed_producer_sets() {
    let rt = configuration::runtime();
    let a = rt.create_channel("a", Limits::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let err = ExactJoin::new(vec![t.attach_input(&a).unwrap()], JoinPolicy::Skip).err().unwrap();
    assert!(err.to_string().contains("close_producers()"), "{err}");
    assert!(ApproxJoin::new(vec![t.attach_input(&a).unwrap(), t.attach_input(&a).unwrap()], 1).is_err());
}

/// Brute-force optimum of the approximate join: per pivot timestamp, the closest timestamp of
/// `other` within `tolerance`, the earlier one on a tie.
fn brute_force(pivot: &BTreeSet<i64>, other: &BTreeSet<i64>, tolerance: i64) -> Vec<(i64, Option<i64>)> {
    pivot
        .iter()
        .map(|&t| {
            let best = other.iter().filter(|&&o| (o - t).abs() <= tolerance).min_by_key(|&&o| ((o - t).abs(), o));
            (t, best.copied())
        })
        .collect()
}

proptest! {
    // Through a node each case starts a node of its own: fewer cases there.
    #![proptest_config(ProptestConfig { cases: if configuration::embedded() { 64 } else { 8 }, ..ProptestConfig::default() })]

    /// On random streams of two rates, put in random interleavings, the approximate join
    /// releases exactly the brute-force optimum for every pivot item.
    #[test]
    fn approx_join_matches_brute_force(
        video in proptest::collection::btree_set(0i64..200, 1..40),
        audio in proptest::collection::btree_set(0i64..200, 0..60),
        tolerance in 0i64..8,
        interleave in proptest::collection::vec(any::<bool>(), 100),
    ) {
        let rt = configuration::runtime();
        let v = rt.create_channel("video", Limits::unbounded()).unwrap();
        let a = rt.create_channel("audio", Limits::unbounded()).unwrap();
        let (pv, pa) = (rt.task(0).unwrap(), rt.task(0).unwrap());
        let (ov, oa) = (pv.attach_output(&v).unwrap(), pa.attach_output(&a).unwrap());
        v.close_producers().unwrap();
        a.close_producers().unwrap();
        let j = rt.task(INFINITY).unwrap();
        let mut join = ApproxJoin::new(vec![j.attach_input(&v).unwrap(), j.attach_input(&a).unwrap()], tolerance).unwrap();
        let mut released = Vec::new();
        let (mut vi, mut ai) = (video.iter().peekable(), audio.iter().peekable());
        let mut choice = interleave.iter().cycle();
        // Each producer puts in order and advances its virtual time; the join is polled
        // between puts, so it must never release a match that a later put would improve.
        while vi.peek().is_some() || ai.peek().is_some() {
            let take_video = ai.peek().is_none() || (vi.peek().is_some() && *choice.next().unwrap());
            if take_video {
                let ts = *vi.next().unwrap();
                ov.put(ts, &b"v"[..]).unwrap();
                pv.set_virtual_time(ts + 1).unwrap();
            } else {
                let ts = *ai.next().unwrap();
                oa.put(ts, &b"a"[..]).unwrap();
                pa.set_virtual_time(ts + 1).unwrap();
            }
            while let Ok(m) = join.next(NOW) {
                released.push((m.pivot.ts, m.matches[0].as_ref().map(|i| i.ts)));
            }
        }
        pv.set_virtual_time(INFINITY).unwrap();
        pa.set_virtual_time(INFINITY).unwrap();
        while let Ok(m) = join.next(NOW) {
            released.push((m.pivot.ts, m.matches[0].as_ref().map(|i| i.ts)));
        }
        prop_assert_eq!(released, brute_force(&video, &audio, tolerance));
    }
}

/// Demand: on a current-readers channel it follows the readers' consume_until floors
/// (INFINITY with no reader); on a history channel it is ts_min, since a late joiner may read
/// anything from there.
#[test]
fn demand_feedback() {
    let rt = configuration::runtime();
    let live = rt.create_channel("live", Retention::CurrentReaders).unwrap();
    let kept = rt.create_channel("kept", Limits::unbounded()).unwrap();
    let source = rt.task(0).unwrap();
    let out = source.attach_output(&live).unwrap();
    let out_kept = source.attach_output(&kept).unwrap();
    assert_eq!(out.demand(), INFINITY, "nobody reads: skip everything");
    let reader = rt.task(INFINITY).unwrap();
    let inp = reader.attach_input(&live).unwrap();
    assert_eq!(out.demand(), 0);
    inp.consume_until(10).unwrap();
    assert_eq!(out.demand(), 11);
    assert_eq!(out_kept.demand(), rt.ts_min());
    // A source that honours demand skips straight to 11.
    let next = out.demand().max(source.visibility());
    out.put(next, &b"frame"[..]).unwrap();
    assert_eq!(inp.get(stampede::OLDEST_UNSEEN, NOW).unwrap().ts, 11);
}

/// CurrentReaders retention: an item is reclaimed as soon as every current reader consumed it,
/// even far above ts_min; with no reader it is reclaimed at once; its timestamp stays taken.
#[test]
fn current_readers_retention() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("frames", ChannelOptions::from(Retention::CurrentReaders)).unwrap();
    let reclaimed = Arc::new(Mutex::new(Vec::new()));
    let r = reclaimed.clone();
    ch.on_reclaim(move |item| r.lock().unwrap().push(item.ts)).unwrap();
    let pinned = rt.task(0).unwrap(); // holds ts_min at 0 throughout
    let source = rt.task(0).unwrap();
    let out = source.attach_output(&ch).unwrap();
    out.put(0, &b"nobody"[..]).unwrap();
    assert_eq!(ch.stats().live_items, 0);
    assert!(matches!(out.put(0, &b"again"[..]), Err(Error::DuplicateTimestamp { .. })));
    let a = rt.task(INFINITY).unwrap().attach_input(&ch).unwrap();
    let b = rt.task(INFINITY).unwrap().attach_input(&ch).unwrap();
    for ts in 1..=5 {
        out.put(ts, &b"f"[..]).unwrap();
    }
    a.consume_until(3).unwrap();
    assert_eq!(ch.stats().live_items, 5);
    b.get(2, NOW).unwrap();
    b.consume_until(2).unwrap();
    assert_eq!(ch.timestamps(), vec![3, 4, 5]);
    drop(b); // detaching the other reader releases what only it held
    assert_eq!(ch.timestamps(), vec![4, 5]);
    assert_eq!(rt.ts_min(), 0);
    assert_eq!(*reclaimed.lock().unwrap(), vec![0, 1, 2, 3]);
    drop(pinned);
}

/// Incomplete is reported for late items under WaitAll: an item put below a released timestamp.
#[test]
fn late_items_are_reported() {
    let rt = configuration::runtime();
    let a = rt.create_channel("a", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&a).unwrap();
    let j = rt.task(INFINITY).unwrap();
    let mut join = ExactJoin::new(vec![j.attach_input(&a).unwrap()], JoinPolicy::WaitAll).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    join.on_incomplete(move |ts, _, what| s.lock().unwrap().push((ts, what)));
    out.put(5, &b"."[..]).unwrap();
    assert_eq!(join.next(NOW).unwrap().ts, 5);
    out.put(3, &b"."[..]).unwrap();
    assert!(join.next(NOW).is_err());
    assert_eq!(*seen.lock().unwrap(), vec![(3, Incomplete::Late)]);
    assert_eq!(join.stats().late, 1);
}

/// A skipping consumer (NEWEST_UNSEEN + consume_until) on the same channels never takes items
/// away from a join: the join's own connection holds every item until it is released, on both
/// retention policies; afterwards everything is reclaimed.
#[test]
fn skipping_consumer_beside_a_join() {
    for retention in [Retention::History, Retention::CurrentReaders] {
        let rt = configuration::runtime();
        let a = rt.create_channel("a", retention).unwrap();
        let b = rt.create_channel("b", retention).unwrap();
        let cams = (rt.task(0).unwrap(), rt.task(0).unwrap());
        let (oa, ob) = (cams.0.attach_output(&a).unwrap(), cams.1.attach_output(&b).unwrap());
        a.close_producers().unwrap();
        b.close_producers().unwrap();
        let joiner = rt.task(INFINITY).unwrap();
        let mut join =
            ExactJoin::new(vec![joiner.attach_input(&a).unwrap(), joiner.attach_input(&b).unwrap()], JoinPolicy::Skip)
                .unwrap();
        let skipper = rt.task(INFINITY).unwrap();
        let fast = skipper.attach_input(&a).unwrap();
        let mut joined = Vec::new();
        for ts in 0..20 {
            oa.put(ts, &b"a"[..]).unwrap();
            ob.put(ts, &b"b"[..]).unwrap();
            cams.0.set_virtual_time(ts + 1).unwrap();
            cams.1.set_virtual_time(ts + 1).unwrap();
            if ts % 5 == 4 {
                let newest = fast.get(stampede::NEWEST_UNSEEN, NOW).unwrap();
                fast.consume_until(newest.ts).unwrap();
                while let Ok(tuple) = join.next(NOW) {
                    joined.push(tuple.ts);
                }
            }
        }
        assert_eq!(joined, (0..20).collect::<Vec<_>>(), "{retention:?}");
        assert_eq!(join.stats().complete, 20);
        drop(join);
        drop((fast, oa, ob));
        cams.0.close();
        cams.1.close();
        // Split: the cameras' release reaches channel a's node through the mesh's ts_min.
        let live = configuration::settled((0, 0), || (a.stats().live_items, b.stats().live_items));
        assert_eq!(live, (0, 0), "{retention:?}");
        assert_eq!(a.stats().reclaimed, 20);
    }
}
