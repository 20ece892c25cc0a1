//! Multi-threaded stress tests of the embedded runtime: many producers and consumers, blocking
//! gets and puts, bounded channels whose puts wait for GC, queues with several workers,
//! concurrent attach/detach and `set_virtual_time`, and `Runtime::close` waking blocked callers.
//!
//! Every test does a bounded amount of work and runs under a watchdog that aborts the process
//! with a message naming the test if it has not finished in [`WATCHDOG`](support::WATCHDOG) (a deadlock or a lost
//! wake-up); nothing asserts on wall-clock speed. Each test ends by checking the GC invariants:
//! once every consumer has consumed everything and every producer has advanced, every container
//! is empty, ts_min is where the rules put it, live items and bytes are zero and every put item
//! was reclaimed exactly once.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use stampede::{
    Channel, ChannelInput, ChannelOutput, Error, Gather, Item, Limits, PutOptions, Queue, Runtime, Selector, Task,
    Timestamp, INFINITY, NEWEST_UNSEEN, OLDEST_UNSEEN,
};
use support::with_watchdog;

/// A short timeout for gets and puts that retry (exercises the timed wait path).
const SHORT: Option<Duration> = Some(Duration::from_millis(2));

/// The payload stored at `ts` by every producer here, so any reader can check what it got.
fn payload(ts: Timestamp) -> Vec<u8> {
    ts.to_le_bytes().to_vec()
}

fn check_payload(item: &Item) {
    assert_eq!(item.data().as_ref(), payload(item.ts).as_slice(), "payload of ts={} is not the one put", item.ts);
}

/// Counts reclaimed items per channel through a GC handler, and fails if any timestamp is
/// reclaimed twice.
#[derive(Clone, Default)]
struct ReclaimCounter {
    seen: Arc<Mutex<BTreeSet<Timestamp>>>,
}

impl ReclaimCounter {
    fn watch(ch: &Channel) -> ReclaimCounter {
        let counter = ReclaimCounter::default();
        let seen = counter.seen.clone();
        let name = ch.name().to_owned();
        ch.on_reclaim(move |item| {
            assert!(seen.lock().unwrap().insert(item.ts), "{name}: ts={} reclaimed twice", item.ts);
        })
        .unwrap();
        counter
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// GC end state of a channel into which `puts` items were put and that everyone is done with.
fn assert_drained(ch: &Channel, puts: u64, reclaims: &ReclaimCounter) {
    assert_eq!(ch.timestamps(), Vec::<Timestamp>::new(), "{} still holds items", ch.name());
    let stats = ch.stats();
    assert_eq!(stats.live_items, 0, "{}: {stats:?}", ch.name());
    assert_eq!(stats.live_bytes, 0, "{}: {stats:?}", ch.name());
    assert_eq!(stats.puts, puts, "{}: {stats:?}", ch.name());
    assert_eq!(stats.reclaimed, puts, "{}: {stats:?}", ch.name());
    assert_eq!(stats.tombstones, 0, "{}: {stats:?}", ch.name());
    assert_eq!(stats.claim, None, "{}: {stats:?}", ch.name());
    assert_eq!(reclaims.count() as u64, puts, "{}: GC handler calls", ch.name());
}

/// Producer `p` of `producers` puts timestamps `p, p + producers, p + 2*producers, ...` (`count`
/// of them), advancing its virtual time to its next timestamp after each put so ts_min can
/// follow, then advances to `end`.
fn interleaved_producer(task: &Task, out: &ChannelOutput, p: usize, producers: usize, count: usize, end: Timestamp) {
    for i in 0..count {
        let ts = (i * producers + p) as Timestamp;
        out.put(ts, payload(ts)).expect("put");
        task.set_virtual_time(ts + producers as Timestamp).expect("advance");
    }
    task.set_virtual_time(end).expect("advance to the end");
}

/// Reads every one of `expected` timestamps once with OLDEST_UNSEEN and consumes it. With
/// `timeout == None` it blocks; otherwise it retries after each `NotAvailable`.
fn drain_oldest_unseen(inp: &ChannelInput, expected: usize, timeout: Option<Duration>) -> BTreeSet<Timestamp> {
    let mut got = BTreeSet::new();
    while got.len() < expected {
        match inp.get(OLDEST_UNSEEN, timeout) {
            Ok(item) => {
                check_payload(&item);
                assert!(got.insert(item.ts), "ts={} delivered twice on one connection", item.ts);
                inp.consume(item.ts).expect("consume");
            }
            Err(Error::NotAvailable { .. }) if timeout.is_some() => {}
            Err(e) => panic!("get failed: {e}"),
        }
    }
    got
}

/// Proves that with several producers putting out of order and several consumers on one channel
/// (blocking and timed gets), every consumer receives every item exactly once with its payload,
/// no wake-up is lost, and once all is consumed and producers advanced, GC reclaimed every item
/// exactly once and ts_min sits at the producers' final virtual time.
#[test]
fn many_producers_many_consumers_one_channel() {
    with_watchdog("many_producers_many_consumers_one_channel", || {
        const PRODUCERS: usize = 4;
        const CONSUMERS: usize = 3;
        const PER_PRODUCER: usize = 1500;
        const TOTAL: usize = PRODUCERS * PER_PRODUCER;
        const END: Timestamp = (TOTAL + PRODUCERS) as Timestamp;
        let rt = Runtime::new();
        let ch = rt.create_channel("stress/frames", Limits::unbounded()).unwrap();
        let reclaims = ReclaimCounter::watch(&ch);
        // Tasks at finite virtual times first: with only INFINITY tasks, ts_min would be
        // INFINITY and no root task could start below it.
        let producer_tasks: Vec<Task> = (0..PRODUCERS).map(|p| rt.task(p as Timestamp).unwrap()).collect();
        // Consumers attach before anything is put, so they see every item.
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|c| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&ch).unwrap();
                let timeout = if c == 0 { None } else { SHORT };
                thread::spawn(move || {
                    let got = drain_oldest_unseen(&inp, TOTAL, timeout);
                    drop(inp);
                    task.close();
                    got
                })
            })
            .collect();
        let producers: Vec<_> = producer_tasks
            .iter()
            .enumerate()
            .map(|(p, task)| {
                let task = task.clone();
                let out = task.attach_output(&ch).unwrap();
                thread::spawn(move || interleaved_producer(&task, &out, p, PRODUCERS, PER_PRODUCER, END))
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        for consumer in consumers {
            let got = consumer.join().unwrap();
            assert_eq!(got, (0..TOTAL as Timestamp).collect::<BTreeSet<_>>());
        }
        // Consumers are gone and every producer sits at END: nothing is left.
        // ts_min stops at 1 + the highest timestamp put, below END.
        assert_eq!(rt.ts_min(), TOTAL as Timestamp);
        assert_drained(&ch, TOTAL as u64, &reclaims);
        for task in producer_tasks {
            task.close();
        }
        assert_eq!(rt.ts_min(), TOTAL as Timestamp, "with no claims left, ts_min is 1 + the highest timestamp put");
        assert_eq!(rt.collect(), 0);
    });
}

/// Proves the tracker pattern under concurrency: consumers reading NEWEST_UNSEEN and consuming
/// everything up to what they got see strictly increasing timestamps (never a reclaimed or
/// skipped-back item), each ends on the last frame, and GC then leaves the channel empty with
/// ts_min at the producer's final virtual time.
#[test]
fn newest_unseen_trackers_with_consume_until() {
    with_watchdog("newest_unseen_trackers_with_consume_until", || {
        const FRAMES: usize = 5000;
        const TRACKERS: usize = 3;
        let last = FRAMES as Timestamp - 1;
        let rt = Runtime::new();
        let ch = rt.create_channel("stress/camera", Limits::unbounded()).unwrap();
        let reclaims = ReclaimCounter::watch(&ch);
        let digitizer = rt.task(0).unwrap();
        let out = digitizer.attach_output(&ch).unwrap();
        let trackers: Vec<_> = (0..TRACKERS)
            .map(|t| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&ch).unwrap();
                let timeout = if t == 0 { None } else { SHORT };
                thread::spawn(move || {
                    let mut previous = -1;
                    let mut frames_seen = 0usize;
                    while previous < last {
                        match inp.get(NEWEST_UNSEEN, timeout) {
                            Ok(item) => {
                                check_payload(&item);
                                assert!(item.ts > previous, "NEWEST_UNSEEN went back: {} after {previous}", item.ts);
                                previous = item.ts;
                                frames_seen += 1;
                                inp.consume_until(item.ts).expect("consume_until");
                            }
                            Err(Error::NotAvailable { .. }) if timeout.is_some() => {}
                            Err(e) => panic!("get failed: {e}"),
                        }
                    }
                    task.close();
                    frames_seen
                })
            })
            .collect();
        for ts in 0..FRAMES as Timestamp {
            out.put(ts, payload(ts)).unwrap();
            digitizer.set_virtual_time(ts + 1).unwrap();
        }
        for tracker in trackers {
            let frames_seen = tracker.join().unwrap();
            assert!((1..=FRAMES).contains(&frames_seen));
        }
        assert_eq!(rt.ts_min(), FRAMES as Timestamp);
        assert_drained(&ch, FRAMES as u64, &reclaims);
    });
}

/// Proves that a bounded channel makes puts wait until GC frees space (TGC: the consumers
/// consume and the producer advances), never holds more than its capacity, and loses nothing:
/// an in-order consumer sees every item, a NEWEST_UNSEEN consumer ends on the last one, and all
/// items are reclaimed at the end.
#[test]
fn bounded_channel_puts_wait_for_gc() {
    with_watchdog("bounded_channel_puts_wait_for_gc", || {
        const CAPACITY: usize = 2;
        const ITEMS: usize = 3000;
        let last = ITEMS as Timestamp - 1;
        let rt = Runtime::new();
        let ch = rt.create_channel("stress/bounded", Limits::items(CAPACITY)).unwrap();
        let reclaims = ReclaimCounter::watch(&ch);
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        let in_order = rt.task(INFINITY).unwrap();
        let in_order_input = in_order.attach_input(&ch).unwrap();
        let skipper = rt.task(INFINITY).unwrap();
        let skipper_input = skipper.attach_input(&ch).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let monitor = {
            let (ch, done) = (ch.clone(), done.clone());
            thread::spawn(move || {
                let mut samples = 0u64;
                while !done.load(Ordering::Acquire) {
                    let live = ch.stats().live_items;
                    assert!(live <= CAPACITY, "bounded channel holds {live} items > capacity {CAPACITY}");
                    samples += 1;
                    thread::yield_now();
                }
                samples
            })
        };
        let reader = thread::spawn(move || {
            let got = drain_oldest_unseen(&in_order_input, ITEMS, None);
            in_order.close();
            got
        });
        let skipping = thread::spawn(move || {
            let mut previous = -1;
            while previous < last {
                let item = skipper_input.get(NEWEST_UNSEEN, None).expect("blocking get");
                assert!(item.ts > previous);
                previous = item.ts;
                skipper_input.consume_until(item.ts).unwrap();
            }
            skipper.close();
        });
        let mut timed_out = 0u64;
        for ts in 0..ITEMS as Timestamp {
            // Half the puts block as long as needed, half retry with a short timeout.
            if ts % 2 == 0 {
                out.put(ts, payload(ts)).unwrap();
            } else {
                let options = PutOptions { refcount: None, timeout: SHORT };
                loop {
                    match out.put_with(ts, payload(ts), options) {
                        Ok(()) => break,
                        Err(Error::Full { .. }) => timed_out += 1,
                        Err(e) => panic!("put failed: {e}"),
                    }
                }
            }
            producer.set_virtual_time(ts + 1).unwrap();
        }
        assert_eq!(reader.join().unwrap(), (0..ITEMS as Timestamp).collect::<BTreeSet<_>>());
        skipping.join().unwrap();
        done.store(true, Ordering::Release);
        assert!(monitor.join().unwrap() > 0);
        let _ = timed_out; // How often a timed put found the channel full: load-dependent, not asserted.
        assert_eq!(rt.ts_min(), ITEMS as Timestamp);
        assert_drained(&ch, ITEMS as u64, &reclaims);
    });
}

/// Proves reference counts (REF) under concurrency: with producers whose virtual times lag (so
/// ts_min cannot free space), a bounded channel still drains because each item is reclaimed
/// after as many consumptions as it declared; every consumer gets every item exactly once, and at
/// the end no item, byte or tombstone is left.
#[test]
fn bounded_channel_with_reference_counts() {
    with_watchdog("bounded_channel_with_reference_counts", || {
        const PRODUCERS: usize = 3;
        const CONSUMERS: usize = 2;
        const PER_PRODUCER: usize = 800;
        const TOTAL: usize = PRODUCERS * PER_PRODUCER;
        const END: Timestamp = (TOTAL + PRODUCERS) as Timestamp;
        let rt = Runtime::new();
        let limits = Limits::items(3).with_bytes(3 * 8);
        let ch = rt.create_channel("stress/refcounted", limits).unwrap();
        let reclaims = ReclaimCounter::watch(&ch);
        // A task that holds ts_min at 0 until the end: only reference counts can free space.
        let anchor = rt.task(0).unwrap();
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|c| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&ch).unwrap();
                thread::spawn(move || {
                    let got = drain_oldest_unseen(&inp, TOTAL, if c == 0 { None } else { SHORT });
                    task.close();
                    got
                })
            })
            .collect();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let task = rt.task(p as Timestamp).unwrap();
                let out = task.attach_output(&ch).unwrap();
                thread::spawn(move || {
                    for i in 0..PER_PRODUCER {
                        let ts = (i * PRODUCERS + p) as Timestamp;
                        let refcount = Some(CONSUMERS as u32);
                        let timeout = if p == 0 { SHORT } else { None };
                        loop {
                            match out.put_with(ts, payload(ts), PutOptions { refcount, timeout }) {
                                Ok(()) => break,
                                Err(Error::Full { .. }) if timeout.is_some() => {}
                                Err(e) => panic!("put failed: {e}"),
                            }
                        }
                        task.set_virtual_time(ts + PRODUCERS as Timestamp).unwrap();
                    }
                    task.set_virtual_time(END).unwrap();
                    task
                })
            })
            .collect();
        let producer_tasks: Vec<Task> = producers.into_iter().map(|h| h.join().unwrap()).collect();
        for consumer in consumers {
            assert_eq!(consumer.join().unwrap(), (0..TOTAL as Timestamp).collect::<BTreeSet<_>>());
        }
        // Everything went by reference count; the tombstones wait for ts_min.
        assert_eq!(rt.ts_min(), 0);
        assert_eq!(ch.stats().live_items, 0);
        assert_eq!(ch.stats().tombstones, TOTAL);
        assert_eq!(ch.stats().claim, None);
        anchor.set_virtual_time(END).unwrap();
        // ts_min stops at 1 + the highest timestamp put, below END.
        assert_eq!(rt.ts_min(), TOTAL as Timestamp);
        assert_drained(&ch, TOTAL as u64, &reclaims);
        drop(producer_tasks);
    });
}

/// Proves GC safety while tasks come and go: on several channels fed by several producers, churn
/// threads repeatedly create tasks (root at INFINITY, or children at a producer's visibility),
/// attach, get, move their virtual time and detach, while a monitor watches ts_min. Every item a
/// get returns is at or above the ts_min seen before the call and carries its own payload; an
/// exact get fails `Reclaimed` only below ts_min; ts_min never moves back; and at the end all
/// channels are empty.
#[test]
fn churn_of_tasks_and_connections_keeps_gc_safe() {
    with_watchdog("churn_of_tasks_and_connections_keeps_gc_safe", || {
        const CHANNELS: usize = 3;
        const PRODUCERS: usize = 2;
        const PER_PRODUCER: usize = 1000;
        const TOTAL: usize = PRODUCERS * PER_PRODUCER;
        const END: Timestamp = (TOTAL + PRODUCERS) as Timestamp;
        const CHURNERS: usize = 3;
        const ROUNDS: usize = 500;
        let rt = Runtime::new();
        let channels: Vec<Channel> = (0..CHANNELS)
            .map(|c| rt.create_channel(&format!("stress/churn{c}"), Limits::unbounded()).unwrap())
            .collect();
        let reclaims: Vec<ReclaimCounter> = channels.iter().map(ReclaimCounter::watch).collect();
        let producer_tasks: Vec<Task> = (0..PRODUCERS).map(|p| rt.task(p as Timestamp).unwrap()).collect();
        // One sink per channel consumes everything, so GC can advance.
        let sinks: Vec<_> = channels
            .iter()
            .map(|ch| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(ch).unwrap();
                thread::spawn(move || {
                    drain_oldest_unseen(&inp, TOTAL, None);
                    task.close();
                })
            })
            .collect();
        let done = Arc::new(AtomicBool::new(false));
        let monitor = {
            let (rt, done) = (rt.clone(), done.clone());
            thread::spawn(move || {
                let mut previous = rt.ts_min();
                while !done.load(Ordering::Acquire) {
                    let now = rt.ts_min();
                    assert!(now >= previous, "ts_min moved back from {previous} to {now}");
                    previous = now;
                    thread::yield_now();
                }
            })
        };
        let producers: Vec<_> = producer_tasks
            .iter()
            .enumerate()
            .map(|(p, task)| {
                let task = task.clone();
                let outs: Vec<_> = channels.iter().map(|ch| task.attach_output(ch).unwrap()).collect();
                thread::spawn(move || {
                    for i in 0..PER_PRODUCER {
                        let ts = (i * PRODUCERS + p) as Timestamp;
                        for out in &outs {
                            out.put(ts, payload(ts)).unwrap();
                        }
                        task.set_virtual_time(ts + PRODUCERS as Timestamp).unwrap();
                    }
                    task.set_virtual_time(END).unwrap();
                })
            })
            .collect();
        let churners: Vec<_> = (0..CHURNERS)
            .map(|c| {
                let (rt, channels, parent) = (rt.clone(), channels.clone(), producer_tasks[c % PRODUCERS].clone());
                thread::spawn(move || {
                    for round in 0..ROUNDS {
                        let ch = &channels[(round + c) % CHANNELS];
                        let task = if round % 2 == 0 {
                            rt.task(INFINITY).unwrap()
                        } else {
                            // The parent advances concurrently: spawning at a visibility read a
                            // moment ago may legally fail, never with a limit below the request.
                            let v = parent.visibility();
                            match parent.spawn(v) {
                                Ok(child) => child,
                                Err(Error::BelowVisibility { limit, .. }) => {
                                    assert!(limit > v);
                                    continue;
                                }
                                Err(e) => panic!("spawn failed: {e}"),
                            }
                        };
                        let inp = task.attach_input(ch).unwrap();
                        let floor = rt.ts_min();
                        let selector = [Selector::Oldest, Selector::Newest, OLDEST_UNSEEN][round % 3];
                        match inp.get(selector, SHORT) {
                            Ok(item) => {
                                check_payload(&item);
                                assert!(item.ts >= floor, "got ts={} below an earlier ts_min {floor}", item.ts);
                                // An open item holds the task's visibility at its timestamp.
                                assert!(task.visibility() <= item.ts);
                                let again =
                                    inp.get(item.ts, Some(Duration::ZERO)).expect("an open item stays gettable");
                                assert_eq!(again, item);
                            }
                            Err(Error::NotAvailable { .. }) => {}
                            Err(e) => panic!("get failed: {e}"),
                        }
                        // An exact get of some earlier timestamp: either served, or refused for
                        // a reason that holds.
                        let ts = (round * 4) as Timestamp % END;
                        match inp.get(ts, Some(Duration::ZERO)) {
                            Ok(item) => check_payload(&item),
                            Err(Error::Reclaimed { .. }) => assert!(ts < rt.ts_min(), "Reclaimed above ts_min"),
                            Err(Error::NotAvailable { .. } | Error::AlreadyConsumed { .. }) => {}
                            Err(e) => panic!("exact get failed: {e}"),
                        }
                        let v = task.visibility();
                        if v < INFINITY - 1 {
                            task.set_virtual_time(v + 1).expect("advance from own visibility");
                        }
                        if round % 3 == 0 {
                            inp.detach();
                            task.close();
                        } else {
                            // Closing with the connection still attached detaches it too.
                            task.close();
                            assert!(matches!(
                                inp.get(Selector::Oldest, Some(Duration::ZERO)),
                                Err(Error::Closed { .. })
                            ));
                        }
                    }
                })
            })
            .collect();
        for handle in producers.into_iter().chain(churners).chain(sinks) {
            handle.join().unwrap();
        }
        done.store(true, Ordering::Release);
        monitor.join().unwrap();
        // ts_min stops at 1 + the highest timestamp put, below END.
        assert_eq!(rt.ts_min(), TOTAL as Timestamp);
        for (ch, reclaims) in channels.iter().zip(&reclaims) {
            assert_drained(ch, TOTAL as u64, reclaims);
        }
        assert_eq!(rt.collect(), 0);
    });
}

/// Proves queue delivery under concurrency (docs/SEMANTICS.md, "Queues"): a splitter splits frames
/// into fragments on a bounded work queue (its puts wait for room), several workers process them
/// while a quitter takes fragments and detaches without consuming them (they go back to the queue),
/// and a joiner gathers K results per frame. Every fragment is consumed exactly once, every frame
/// is gathered complete exactly once, and both queues end empty with everything reclaimed.
#[test]
fn queue_workers_deliver_each_item_exactly_once() {
    with_watchdog("queue_workers_deliver_each_item_exactly_once", || {
        const FRAMES: usize = 500;
        const K: usize = 4;
        const WORKERS: usize = 3;
        const QUITS: usize = 20;
        let rt = Runtime::new();
        let work = rt.create_queue("stress/work", Limits::items(6)).unwrap();
        let results = rt.create_queue("stress/results", Limits::unbounded()).unwrap();
        // The splitter first: a root task must start at or above ts_min.
        let splitter = rt.task(0).unwrap();
        let out = splitter.attach_output(&work).unwrap();
        let work_reclaimed = Arc::new(AtomicUsize::new(0));
        {
            let count = work_reclaimed.clone();
            work.on_reclaim(move |_| {
                count.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        let consumed: Arc<Vec<AtomicU32>> = Arc::new((0..FRAMES * K).map(|_| AtomicU32::new(0)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let worker = |rt: &Runtime, work: &Queue, results: &Queue| {
            let task = rt.task(INFINITY).unwrap();
            let inp = task.attach_input(work).unwrap();
            let out = task.attach_output(results).unwrap();
            let (consumed, done) = (consumed.clone(), done.clone());
            thread::spawn(move || {
                let mut handled = 0usize;
                while !done.load(Ordering::Acquire) {
                    let job = match inp.get(SHORT) {
                        Ok(job) => job,
                        Err(Error::NotAvailable { .. }) => continue,
                        Err(e) => panic!("worker get failed: {e}"),
                    };
                    // The open fragment holds the worker's visibility at the frame's timestamp,
                    // so it may put its result there.
                    assert_eq!(task.visibility(), job.item.ts);
                    let fragment = u64::from_le_bytes(job.item.data()[..8].try_into().unwrap()) as usize;
                    out.put(job.item.ts, (fragment as u64).to_le_bytes().to_vec(), None).unwrap();
                    inp.consume(&job).unwrap();
                    consumed[fragment].fetch_add(1, Ordering::Relaxed);
                    handled += 1;
                }
                task.close();
                handled
            })
        };
        let workers: Vec<_> = (0..WORKERS).map(|_| worker(&rt, &work, &results)).collect();
        let quitter = {
            let (rt, work) = (rt.clone(), work.clone());
            thread::spawn(move || {
                let task = rt.task(INFINITY).unwrap();
                let mut taken = 0usize;
                for _ in 0..QUITS {
                    let inp = task.attach_input(&work).unwrap();
                    if inp.get(SHORT).is_ok() {
                        taken += 1;
                    }
                    inp.detach(); // The fragment, unconsumed, goes back to the head of the queue.
                }
                task.close();
                taken
            })
        };
        let joiner = {
            let (rt, results) = (rt.clone(), results.clone());
            thread::spawn(move || {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&results).unwrap();
                let mut gather = Gather::new(K).unwrap();
                let mut frames = BTreeSet::new();
                while frames.len() < FRAMES {
                    let (ts, parts) = gather.next(&inp, None).expect("gather");
                    let mut fragments: Vec<usize> = parts
                        .iter()
                        .map(|q| u64::from_le_bytes(q.item.data()[..8].try_into().unwrap()) as usize)
                        .collect();
                    fragments.sort_unstable();
                    let base = ts as usize * K;
                    assert_eq!(fragments, (base..base + K).collect::<Vec<_>>(), "frame {ts} gathered wrong parts");
                    assert!(frames.insert(ts), "frame {ts} gathered twice");
                    for part in &parts {
                        inp.consume(part).unwrap();
                    }
                }
                assert!(gather.pending().is_empty());
                task.close();
            })
        };
        for frame in 0..FRAMES {
            let ts = frame as Timestamp;
            let fragments = (0..K).map(|k| ((frame * K + k) as u64).to_le_bytes().to_vec());
            assert_eq!(stampede::split(&out, ts, fragments).unwrap(), K);
            splitter.set_virtual_time(ts + 1).unwrap();
        }
        joiner.join().unwrap();
        done.store(true, Ordering::Release);
        let handled: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let _taken_by_quitter = quitter.join().unwrap();
        assert_eq!(handled, FRAMES * K);
        for (fragment, count) in consumed.iter().enumerate() {
            assert_eq!(count.load(Ordering::Relaxed), 1, "fragment {fragment} consumed {count:?} times");
        }
        for queue in [&work, &results] {
            let stats = queue.stats();
            assert_eq!(stats.live_items, 0, "{}: {stats:?}", queue.name());
            assert_eq!(stats.live_bytes, 0, "{}: {stats:?}", queue.name());
            assert_eq!(stats.puts, (FRAMES * K) as u64, "{}: {stats:?}", queue.name());
            assert_eq!(stats.reclaimed, (FRAMES * K) as u64, "{}: {stats:?}", queue.name());
            assert_eq!(stats.claim, None, "{}: {stats:?}", queue.name());
        }
        assert_eq!(work_reclaimed.load(Ordering::Relaxed), FRAMES * K);
        // Only the splitter is left, at FRAMES.
        assert_eq!(rt.ts_min(), FRAMES as Timestamp);
    });
}

/// Proves that `Runtime::close` wakes every blocked caller with `Closed` — blocking gets of every
/// selector kind, an exact get of a future timestamp, a queue get and a put waiting for room in
/// a full channel — and that operations after the close fail `Closed` at once.
#[test]
fn runtime_close_wakes_blocked_callers() {
    with_watchdog("runtime_close_wakes_blocked_callers", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("stress/close", Limits::unbounded()).unwrap();
        let full = rt.create_channel("stress/full", Limits::items(1)).unwrap();
        let queue = rt.create_queue("stress/close-queue", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        let blocked_put_out = producer.attach_output(&full).unwrap();
        blocked_put_out.put(0, payload(0)).unwrap();
        let selectors = [Selector::At(1_000), Selector::Oldest, Selector::Newest, OLDEST_UNSEEN, NEWEST_UNSEEN];
        const PER_SELECTOR: usize = 3;
        let waiters = selectors.len() * PER_SELECTOR + 2;
        let ready = Arc::new(Barrier::new(waiters + 1));
        let mut handles = Vec::new();
        for selector in selectors {
            for _ in 0..PER_SELECTOR {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&ch).unwrap();
                let ready = ready.clone();
                handles.push(thread::spawn(move || {
                    ready.wait();
                    inp.get(selector, None).map(|_| ())
                }));
            }
        }
        {
            let task = rt.task(INFINITY).unwrap();
            let inp = task.attach_input(&queue).unwrap();
            let ready = ready.clone();
            handles.push(thread::spawn(move || {
                ready.wait();
                inp.get(None).map(|_| ())
            }));
        }
        {
            let ready = ready.clone();
            handles.push(thread::spawn(move || {
                ready.wait();
                // The channel holds its one item and nobody will consume it: only close ends this.
                blocked_put_out.put(1, payload(1))
            }));
        }
        ready.wait();
        // Let the callers park. Not needed for correctness: a call that starts after the close
        // fails Closed at once, which this test accepts just the same.
        thread::sleep(Duration::from_millis(50));
        rt.close();
        for handle in handles {
            let result = handle.join().unwrap();
            assert!(matches!(result, Err(Error::Closed { .. })), "expected Closed, got {result:?}");
        }
        assert!(rt.is_closed());
        assert!(matches!(rt.task(0), Err(Error::Closed { .. })));
        assert!(matches!(rt.create_channel("stress/after", Limits::unbounded()), Err(Error::Closed { .. })));
        assert_eq!(ch.stats().live_items, 0);
        assert_eq!(full.stats().live_items, 0);
        rt.close(); // Idempotent.
    });
}

/// Proves that destroying one channel wakes exactly its blocked getters with `Closed` while a
/// getter blocked on another channel keeps waiting and is then served normally.
#[test]
fn destroy_wakes_only_that_channels_getters() {
    with_watchdog("destroy_wakes_only_that_channels_getters", || {
        let rt = Runtime::new();
        let doomed = rt.create_channel("stress/doomed", Limits::unbounded()).unwrap();
        let kept = rt.create_channel("stress/kept", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&kept).unwrap();
        let ready = Arc::new(Barrier::new(5));
        let doomed_getters: Vec<_> = (0..3)
            .map(|_| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&doomed).unwrap();
                let ready = ready.clone();
                thread::spawn(move || {
                    ready.wait();
                    inp.get(OLDEST_UNSEEN, None)
                })
            })
            .collect();
        let kept_getter = {
            let task = rt.task(INFINITY).unwrap();
            let inp = task.attach_input(&kept).unwrap();
            let ready = ready.clone();
            thread::spawn(move || {
                ready.wait();
                inp.get(OLDEST_UNSEEN, None)
            })
        };
        ready.wait();
        doomed.destroy().unwrap();
        for getter in doomed_getters {
            let result = getter.join().unwrap();
            assert!(matches!(result, Err(Error::Closed { .. })), "expected Closed, got {result:?}");
        }
        out.put(7, payload(7)).unwrap();
        let item = kept_getter.join().unwrap().expect("the other channel still works");
        assert_eq!(item.ts, 7);
        check_payload(&item);
        assert!(rt.channel("stress/doomed").is_err());
    });
}

/// Proves that many blocking getters woken by one put each receive it (no lost or stolen
/// wake-ups on a channel: every input connection sees every item) across many rounds.
#[test]
fn every_blocked_getter_wakes_on_each_put() {
    with_watchdog("every_blocked_getter_wakes_on_each_put", || {
        const GETTERS: usize = 6;
        const ROUNDS: usize = 1000;
        let rt = Runtime::new();
        let ch = rt.create_channel("stress/broadcast", Limits::unbounded()).unwrap();
        let reclaims = ReclaimCounter::watch(&ch);
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let getters: Vec<_> = (0..GETTERS)
            .map(|_| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&ch).unwrap();
                let received = received.clone();
                thread::spawn(move || {
                    for round in 0..ROUNDS as Timestamp {
                        // Wait for exactly the next round's item.
                        let item = inp.get(round, None).expect("blocking exact get");
                        check_payload(&item);
                        inp.consume(round).unwrap();
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    task.close();
                })
            })
            .collect();
        for ts in 0..ROUNDS as Timestamp {
            out.put(ts, payload(ts)).unwrap();
            producer.set_virtual_time(ts + 1).unwrap();
        }
        for getter in getters {
            getter.join().unwrap();
        }
        assert_eq!(received.load(Ordering::Relaxed), (GETTERS * ROUNDS) as u64);
        assert_eq!(rt.ts_min(), ROUNDS as Timestamp);
        assert_drained(&ch, ROUNDS as u64, &reclaims);
    });
}
