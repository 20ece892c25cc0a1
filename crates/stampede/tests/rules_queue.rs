//! One test per rule of docs/SEMANTICS.md, "Queues", and the splitter/joiner helpers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stampede::{split, Error, Gather, Limits, INFINITY};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);

/// FIFO by insertion (not by timestamp); duplicate timestamps allowed.
#[test]
fn fifo_by_insertion() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&q).unwrap();
    let inp = t.attach_input(&q).unwrap();
    for (ts, v) in [(5, 1u8), (2, 2), (5, 3)] {
        out.put(ts, vec![v], None).unwrap();
    }
    let got: Vec<(i64, u8)> = (0..3).map(|_| inp.get(NOW).unwrap()).map(|q| (q.item.ts, q.item.data()[0])).collect();
    assert_eq!(got, vec![(5, 1), (2, 2), (5, 3)]);
    assert!(matches!(inp.get(NOW), Err(Error::NotAvailable { .. })));
}

/// Each item goes to exactly one getter, across connections and threads.
#[test]
fn each_item_to_exactly_one_getter() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    const N: i64 = 2_000;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let inp = rt.task(0).unwrap().attach_input(&q).unwrap();
            let seen = seen.clone();
            std::thread::spawn(move || {
                while let Ok(item) = inp.get(Some(Duration::from_millis(200))) {
                    seen.lock().unwrap().push(item.item.ts);
                    inp.consume(&item).unwrap();
                }
            })
        })
        .collect();
    for ts in 0..N {
        out.put(ts, vec![0u8; 8], None).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N as usize);
    assert_eq!(seen.iter().copied().collect::<HashSet<_>>().len(), N as usize);
    assert_eq!(q.stats().reclaimed, N as u64);
}

/// An item is reclaimed when its getter consumes it (by item or by timestamp); GC handlers see it.
#[test]
fn reclaimed_on_consume() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    q.on_reclaim(move |item| s.lock().unwrap().push(item.ts)).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&q).unwrap();
    let inp = t.attach_input(&q).unwrap();
    out.put(1, &b"a"[..], None).unwrap();
    out.put(2, &b"b"[..], None).unwrap();
    let a = inp.get(NOW).unwrap();
    inp.get(NOW).unwrap();
    assert_eq!(q.stats().live_items, 2);
    inp.consume(&a).unwrap();
    inp.consume_ts(2).unwrap();
    assert_eq!(q.stats().live_items, 0);
    assert_eq!(*seen.lock().unwrap(), vec![1, 2]);
    assert!(matches!(inp.consume(&a), Err(Error::NotAvailable { .. })));
}

/// An open queue item counts in its task's visibility, and a waiting item holds ts_min, so a
/// worker can always put its result at the item's timestamp.
#[test]
fn open_item_counts_in_visibility_and_holds_ts_min() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    out.put(4, &b"a"[..], None).unwrap();
    p.set_virtual_time(INFINITY).unwrap();
    assert_eq!(configuration::settled(4, || rt.ts_min()), 4, "the waiting item holds ts_min");
    let worker = rt.task(4).unwrap();
    let inp = worker.attach_input(&q).unwrap();
    worker.set_virtual_time(INFINITY).unwrap();
    let item = inp.get(NOW).unwrap();
    assert_eq!(worker.visibility(), 4);
    inp.consume(&item).unwrap();
    assert_eq!(worker.visibility(), INFINITY);
    assert_eq!(configuration::settled(5, || rt.ts_min()), 5, "1 + the highest timestamp put");
}

/// Items a getter still holds open when it detaches go back to the head of the queue: a worker
/// that quits never loses a frame.
#[test]
fn detach_returns_open_items() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&q).unwrap();
    for ts in 0..3 {
        out.put(ts, &b"."[..], None).unwrap();
    }
    let quitter = t.attach_input(&q).unwrap();
    quitter.get(NOW).unwrap();
    quitter.get(NOW).unwrap();
    quitter.detach();
    let inp = t.attach_input(&q).unwrap();
    let order: Vec<i64> = (0..3).map(|_| inp.get(NOW).unwrap().item.ts).collect();
    assert_eq!(order, vec![0, 1, 2]);
}

/// A bounded queue fails Full at once with timeout 0.
#[test]
fn bounded_queue() {
    let rt = configuration::runtime();
    let q = rt.create_queue("work", Limits::items(1)).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&q).unwrap();
    out.put(0, &b"."[..], None).unwrap();
    assert!(matches!(out.put(0, &b"."[..], NOW), Err(Error::Full { .. })));
}

/// Splitter → K workers → joiner: every frame's K fragments are processed and gathered under the
/// frame's timestamp; the joiner can put the joined result at that timestamp before consuming.
#[test]
fn split_and_gather() {
    const K: usize = 4;
    const FRAMES: i64 = 50;
    let rt = configuration::runtime();
    let work = rt.create_queue("split/work", Limits::unbounded()).unwrap();
    let results = rt.create_queue("split/results", Limits::unbounded()).unwrap();
    let joined = rt.create_channel("split/joined", Limits::unbounded()).unwrap();
    let splitter = rt.task(0).unwrap();
    let work_out = splitter.attach_output(&work).unwrap();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let task = rt.task(0).unwrap();
            let inp = task.attach_input(&work).unwrap();
            let out = task.attach_output(&results).unwrap();
            task.set_virtual_time(INFINITY).unwrap();
            std::thread::spawn(move || {
                while let Ok(fragment) = inp.get(Some(Duration::from_millis(300))) {
                    let doubled: Vec<u8> = fragment.item.data().iter().map(|b| b * 2).collect();
                    out.put(fragment.item.ts, doubled, None).unwrap();
                    inp.consume(&fragment).unwrap();
                }
                drop(task);
            })
        })
        .collect();
    let joiner = rt.task(0).unwrap();
    let results_in = joiner.attach_input(&results).unwrap();
    let joined_out = joiner.attach_output(&joined).unwrap();
    joiner.set_virtual_time(INFINITY).unwrap();
    for ts in 0..FRAMES {
        let n = split(&work_out, ts, (0..K as u8).map(|k| vec![k + ts as u8])).unwrap();
        assert_eq!(n, K);
        splitter.set_virtual_time(ts + 1).unwrap();
    }
    let mut gather = Gather::new(K).unwrap();
    let mut frames = HashSet::new();
    for _ in 0..FRAMES {
        let (ts, parts) = gather.next(&results_in, Some(Duration::from_secs(5))).unwrap();
        let mut values: Vec<u8> = parts.iter().map(|p| p.item.data()[0]).collect();
        values.sort();
        assert_eq!(values, (0..K as u8).map(|k| 2 * (k + ts as u8)).collect::<Vec<_>>());
        joined_out.put(ts, values).unwrap();
        for part in &parts {
            results_in.consume(part).unwrap();
        }
        frames.insert(ts);
    }
    assert_eq!(frames.len(), FRAMES as usize);
    assert!(gather.pending().is_empty());
    for w in workers {
        w.join().unwrap();
    }
}
