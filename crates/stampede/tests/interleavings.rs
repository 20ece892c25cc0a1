//! Interleaving exploration of the embedded runtime's real driver code (GC safety:
//! docs/SEMANTICS.md, "Virtual time, visibility, GC").
//!
//! Built only with the `shuttle` feature, which swaps the driver's locks and atomics for
//! [shuttle](https://docs.rs/shuttle)'s (see `stampede-engine`'s `src/sync.rs`): a seeded
//! scheduler then decides which thread runs at every lock and atomic operation. Each seed is one schedule of one
//! scenario whose operations are also drawn from the seed, so a failure replays exactly:
//!
//! ```text
//! cargo test -p stampede --features shuttle --test interleavings            # STAMPEDE_SEEDS (default 2000)
//! STAMPEDE_SEED=1234 cargo test -p stampede --features shuttle --test interleavings   # one seed
//! ```
//!
//! Scenario one: several threads drive tasks through puts, gets, consumes, reference-counted early
//! reclamation, `set_virtual_time` to the current visibility, spawns, attach/detach and task
//! close, with zero timeouts (nothing blocks). After every step the thread checks the invariants
//! through `Runtime::check_invariants` (every live task's visibility >= ts_min, under locks), and
//! that ts_min never decreases as it observes it; the driver itself asserts the rest. At the end
//! every task is closed and every channel must be empty. Scenario two: a camera, a tracker relaying
//! frames into results and a watcher race on settledness (docs/CORRELATION.md,
//! "Settled timestamps"): whoever is about to put `t` must find it unsettled, and no horizon may go
//! back. Scenario three: getters of one queue take places in its line of waiting getters and give
//! them up (timeouts of a microsecond: a real sleep would stall the scheduler) while a producer
//! puts: no item is lost, doubled or stranded behind a place nobody holds. Scenario one runs again
//! on a channel with a disk tier (every put moves the previous item to disk, racing its
//! reclamation; every read checks the bytes; nothing is left on disk at the end), and scenario four
//! races a put moving an item to disk with the consume that reclaims it: its record must be dead
//! once both return.
#![cfg(feature = "shuttle")]

mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use shuttle::scheduler::RandomScheduler;
use shuttle::{Config, Runner};
use stampede::{
    Channel, ChannelInput, ChannelOptions, DiskTier, Error, Item, Limits, PutOptions, Runtime, Selector, Task,
    Timestamp, INFINITY, OLDEST_UNSEEN,
};
use support::Rng;

/// Seeds run by default (each is one schedule); `STAMPEDE_SEEDS` overrides.
const SEEDS_DEFAULT: u64 = 2000;
/// Steps each thread takes per schedule.
const STEPS_PER_THREAD: usize = 12;
/// Timestamps the producer puts.
const PUTS: Timestamp = 3;

const NOW: Option<Duration> = Some(Duration::ZERO);

/// Errors a legal call may return in these scenarios; anything else (or a panic) fails the seed.
fn expected(result: Result<(), Error>) {
    match result {
        Ok(())
        | Err(Error::NotAvailable { .. })
        | Err(Error::AlreadyConsumed { .. })
        | Err(Error::Reclaimed { .. })
        | Err(Error::BelowVisibility { .. })
        | Err(Error::Closed { .. }) => {}
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// One reader thread: a task at `INFINITY` (or a child of it) reading `channel`, doing what a
/// tracker does — getting, consuming, holding items open, lowering nothing but legally moving its
/// virtual time to its visibility, spawning at its visibility.
fn reader(rt: &Runtime, task: Task, input: ChannelInput, mut rng: Rng, last_ts_min: &mut Timestamp) {
    let mut input = Some(input);
    let mut held: Vec<Timestamp> = Vec::new();
    let mut children = Vec::new();
    for _ in 0..STEPS_PER_THREAD {
        match (rng.below(12), input.as_ref()) {
            (0 | 1, Some(inp)) => {
                let selector = if rng.below(2) == 0 { Selector::OldestUnseen } else { Selector::NewestUnseen };
                match inp.get(selector, NOW) {
                    Ok(item) => held.push(intact(item)),
                    Err(e) => expected(Err(e)),
                }
            }
            (2, Some(inp)) => {
                expected(inp.get(rng.below(PUTS as u64) as Timestamp, NOW).map(|item| held.push(intact(item))))
            }
            (3 | 4, Some(inp)) if !held.is_empty() => {
                let ts = held.swap_remove(rng.below(held.len() as u64) as usize);
                expected(inp.consume(ts));
            }
            (5, Some(inp)) => expected(inp.consume_until(rng.below(PUTS as u64) as Timestamp)),
            // The legal move that panicked the tracker: set the virtual time to the visibility.
            (6..=8, _) => expected(task.set_virtual_time(task.visibility())),
            (9, _) => match task.spawn(task.visibility()) {
                Ok(child) => children.push(child),
                Err(e) => expected(Err(e)),
            },
            (10, _) if rng.below(3) == 0 => {
                input = None;
                held.clear();
            }
            _ => {}
        }
        rt.check_invariants();
        let ts_min = rt.ts_min();
        assert!(ts_min >= *last_ts_min, "ts_min went back from {last_ts_min} to {ts_min}");
        *last_ts_min = ts_min;
    }
    for child in children {
        child.close();
    }
    drop(input);
    task.close();
}

/// The timestamp of an item whose bytes are what the producer put (`ts` repeated), wherever
/// they live.
fn intact(item: Item) -> Timestamp {
    assert!(item.data().iter().all(|&b| b == item.ts as u8), "ts={}: bytes changed: {:?}", item.ts, item.data());
    item.ts
}

/// The scenario of one seed: a producer puts items (some with reference counts, so a reader's
/// consume reclaims an item another reader holds open) while two or three readers work.
fn scenario(seed: u64) {
    scenario_on(seed, None);
}

/// The same with a disk tier keeping one item in memory: every put first moves the previous
/// item to disk, racing the readers' reclamation of it.
fn disk_scenario(seed: u64) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let tier =
        DiskTier { dirs: vec![dir.path().to_path_buf()], extent_bytes: DiskTier::EXTENT_BYTES_MIN, memory_items: 1 };
    scenario_on(seed, Some(tier));
}

fn scenario_on(seed: u64, disk: Option<DiskTier>) {
    let mut rng = Rng(seed);
    let rt = Runtime::new();
    let extents_dir = disk.as_ref().map(|tier| tier.dirs[0].join("frames"));
    let channel = rt.create_channel("frames", ChannelOptions { disk, ..ChannelOptions::default() }).expect("create");
    let producer = rt.task(0).expect("producer");
    let out = producer.attach_output(&channel).expect("attach output");
    // Readers attach before anything is put (a reader at INFINITY attached later would find
    // every present item consumed on arrival).
    let readers: Vec<(Task, ChannelInput)> = (0..2 + rng.below(2))
        .map(|_| {
            let task = rt.task(INFINITY).expect("reader");
            let input = task.attach_input(&channel).expect("attach input");
            (task, input)
        })
        .collect();
    let refcounts: Vec<Option<u32>> = (0..PUTS)
        .map(|_| match rng.below(3) {
            0 => None,
            1 => Some(1),
            _ => Some(2),
        })
        .collect();
    let mut last_ts_min = 0;
    let mut put = |ts: Timestamp| {
        let options = PutOptions { refcount: refcounts[ts as usize], timeout: NOW };
        expected(out.put_with(ts, vec![ts as u8; 8], options));
        expected(producer.set_virtual_time(ts + 1));
        rt.check_invariants();
        let ts_min = rt.ts_min();
        assert!(ts_min >= last_ts_min, "ts_min went back from {last_ts_min} to {ts_min}");
        last_ts_min = ts_min;
    };
    // Some items exist before the readers run, the rest arrive while they do.
    let early = rng.below(PUTS as u64 + 1) as Timestamp;
    (0..early).for_each(&mut put);
    let mut threads = Vec::new();
    for (task, input) in readers {
        let (rt, rng) = (rt.clone(), Rng(rng.next()));
        threads.push(shuttle::thread::spawn(move || reader(&rt, task, input, rng, &mut 0)));
    }
    (early..PUTS).for_each(&mut put);
    drop(out);
    producer.close();
    for thread in threads {
        thread.join().expect("reader thread");
    }
    rt.check_invariants();
    assert_eq!(channel.stats().live_items, 0, "every task closed, yet items remain: {:?}", channel.timestamps());
    if let Some(dir) = extents_dir {
        // Read before anything locks the tier again: every reclaimed item was freed by whoever
        // held the tier last, and its extent deleted.
        let files = std::fs::read_dir(&dir).expect("the channel's directory").flatten();
        let extents = files.filter(|f| f.path().extension().is_some_and(|e| e == "extent")).count();
        assert!(extents <= 1, "{extents} extents are left, yet everything was reclaimed");
    }
    if let Some(disk) = channel.disk_stats() {
        assert_eq!((disk.items, disk.bytes), (0, 0), "everything was reclaimed, yet the disk holds some: {disk:?}");
        assert!(disk.extents <= 1, "only the extent being written may stay: {disk:?}");
    }
}

/// Runs `scenario` under one PCT schedule per seed; a failing seed is named for replay.
fn explore(name: &str, scenario: fn(u64)) {
    let seeds: Vec<u64> = match std::env::var("STAMPEDE_SEED") {
        Ok(seed) => vec![seed.parse().expect("STAMPEDE_SEED is a number")],
        Err(_) => {
            let count = std::env::var("STAMPEDE_SEEDS").map_or(SEEDS_DEFAULT, |n| n.parse().expect("a number"));
            (0..count).collect()
        }
    };
    for &seed in &seeds {
        let mut config = Config::new();
        config.silence_warnings = true;
        let run = catch_unwind(AssertUnwindSafe(|| {
            Runner::new(RandomScheduler::new_from_seed(seed, 1), config).run(move || scenario(seed));
        }));
        if let Err(panic) = run {
            eprintln!("{name}: seed {seed} failed; replay with STAMPEDE_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
    support::say(&format!("interleavings, {name}: {} seeds passed", seeds.len()));
}

/// Reads both channels' settled horizons until told to stop, asserting they never decrease.
fn watch_horizons(channels: &[Channel], steps: usize) {
    let mut last = vec![0; channels.len()];
    for _ in 0..steps {
        for (channel, last) in channels.iter().zip(&mut last) {
            let horizon = channel.settled_below();
            assert!(horizon >= *last, "{}: settled horizon went back from {last} to {horizon}", channel.name());
            *last = horizon;
        }
        shuttle::thread::yield_now();
    }
}

/// The scenario of settledness: a camera puts frames, a tracker at INFINITY relays each into a
/// result, both producer sets closed, while a watcher reads the horizons. Whoever is about to put
/// `t` legally must find `t` not yet settled, and no horizon ever goes back.
fn relay_scenario(seed: u64) {
    let mut rng = Rng(seed);
    let rt = Runtime::new();
    let frames = rt.create_channel("frames", Limits::unbounded()).expect("create");
    let results = rt.create_channel("results", Limits::unbounded()).expect("create");
    let camera = rt.task(0).expect("camera");
    let shoot = camera.attach_output(&frames).expect("attach");
    let tracker = rt.task(INFINITY).expect("tracker");
    let seen = tracker.attach_input(&frames).expect("attach");
    let found = tracker.attach_output(&results).expect("attach");
    frames.close_producers().unwrap();
    results.close_producers().unwrap();
    // The camera skips some timestamps (it advances by 1 or 2): those are settled, never put.
    let shots: Vec<Timestamp> = (0..PUTS)
        .scan(0, |next, _| {
            let t = *next;
            *next += 1 + rng.below(2) as Timestamp;
            Some(t)
        })
        .collect();
    let watched = vec![frames.clone(), results.clone()];
    let watcher = shuttle::thread::spawn(move || watch_horizons(&watched, 2 * PUTS as usize));
    let relay_results = results.clone();
    let relay = shuttle::thread::spawn(move || {
        let mut relayed = 0;
        while relayed < PUTS as usize {
            match seen.get(OLDEST_UNSEEN, NOW) {
                Ok(frame) => {
                    assert!(!relay_results.is_settled(frame.ts), "result {} settled before it was put", frame.ts);
                    found.put(frame.ts, &b"blob"[..]).expect("relay put");
                    seen.consume(frame.ts).expect("consume");
                    relayed += 1;
                }
                Err(Error::NotAvailable { .. }) => shuttle::thread::yield_now(),
                Err(e) => panic!("tracker: {e}"),
            }
        }
        drop((seen, found));
        tracker.close();
    });
    for (i, &t) in shots.iter().enumerate() {
        assert!(!frames.is_settled(t), "frame {t} settled before it was put");
        shoot.put(t, vec![t as u8; 4]).expect("put");
        camera.set_virtual_time(shots.get(i + 1).copied().unwrap_or(INFINITY)).expect("advance");
        rt.check_invariants();
    }
    drop(shoot);
    camera.close();
    relay.join().expect("relay thread");
    watcher.join().expect("watcher thread");
    assert_eq!((frames.settled_below(), results.settled_below()), (INFINITY, INFINITY));
}

/// The scenario of the queue's line: two or three getters alternate zero-timeout gets and
/// gets that take a place in line and time out almost at once, while the producer puts; then a
/// fresh getter must be able to take everything left.
fn queue_line_scenario(seed: u64) {
    let mut rng = Rng(seed);
    let rt = Runtime::new();
    let queue = rt.create_queue("work", Limits::unbounded()).expect("create");
    let producer = rt.task(0).expect("producer");
    let out = producer.attach_output(&queue).expect("attach output");
    let getters: Vec<_> = (0..2 + rng.below(2))
        .map(|_| {
            let input = rt.task(INFINITY).expect("getter").attach_input(&queue).expect("attach input");
            let mut rng = Rng(rng.next());
            shuttle::thread::spawn(move || {
                let mut taken = Vec::new();
                for _ in 0..PUTS {
                    let timeout = if rng.below(2) == 0 { NOW } else { Some(Duration::from_micros(1)) };
                    match input.get(timeout) {
                        Ok(item) => {
                            input.consume(&item).expect("consume");
                            taken.push(item.item.ts);
                        }
                        Err(e) => assert!(e.is_transient(), "getter: {e}"),
                    }
                }
                taken
            })
        })
        .collect();
    for ts in 0..PUTS {
        out.put(ts, vec![ts as u8; 4], NOW).expect("put");
    }
    let mut taken: Vec<Timestamp> = getters.into_iter().flat_map(|g| g.join().expect("getter thread")).collect();
    let late = rt.task(INFINITY).expect("late getter").attach_input(&queue).expect("attach");
    while let Ok(item) = late.get(NOW) {
        late.consume(&item).expect("consume");
        taken.push(item.item.ts);
    }
    taken.sort_unstable();
    assert_eq!(taken, (0..PUTS).collect::<Vec<_>>(), "items lost, doubled or stranded");
}

/// GC safety under every explored interleaving of readers, early reclamation and a producer:
/// no legal call panics, every live task's visibility stays at or above ts_min, ts_min never
/// decreases, and everything is reclaimed at the end.
#[test]
fn readers_and_early_reclamation() {
    explore("readers_and_early_reclamation", scenario);
}

/// The same with a disk tier: moving items to disk races their reclamation, yet every item read
/// has its bytes, and at the end the disk holds nothing.
#[test]
fn readers_and_early_reclamation_on_disk() {
    explore("readers_and_early_reclamation_on_disk", disk_scenario);
}

/// A put moving an item to disk races a reader whose consume reclaims that item (reference
/// count 1): once both return, the item's record on disk is dead — whoever held the tier last
/// freed it, with no later call needed.
#[test]
fn reclaiming_during_a_spill_frees_the_place() {
    explore("reclaiming_during_a_spill_frees_the_place", spill_race_scenario);
}

fn spill_race_scenario(_seed: u64) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let tier =
        DiskTier { dirs: vec![dir.path().to_path_buf()], extent_bytes: DiskTier::EXTENT_BYTES_MIN, memory_items: 1 };
    let rt = Runtime::new();
    let channel = rt.create_channel("frames", ChannelOptions { disk: Some(tier), ..ChannelOptions::default() });
    let channel = channel.expect("create");
    let task = rt.task(0).expect("task");
    let input = task.attach_input(&channel).expect("attach input");
    let out = task.attach_output(&channel).expect("attach output");
    let once = PutOptions { refcount: Some(1), timeout: NOW };
    out.put_with(0, vec![0u8; 64], once).expect("put 0");
    let reader = shuttle::thread::spawn(move || {
        intact(input.get(0, NOW).expect("get 0"));
        input.consume(0).expect("consume 0");
    });
    out.put_with(1, vec![1u8; 64], once).expect("put 1");
    reader.join().expect("reader thread");
    let extents = std::fs::read_dir(dir.path().join("frames")).expect("the channel's directory").flatten();
    for extent in extents.filter(|f| f.path().extension().is_some_and(|e| e == "extent")) {
        let live = stampede::disk::decode_records(&std::fs::read(extent.path()).expect("read the extent"));
        assert!(live.iter().all(|record| record.ts != 0), "ts=0 was reclaimed, yet its record is live");
    }
}

/// Settledness under every explored interleaving of a camera, a relaying tracker and a watcher:
/// nothing is settled before it is put, horizons never go back, and both end at INFINITY.
#[test]
fn relaying_producers_and_settledness() {
    explore("relaying_producers_and_settledness", relay_scenario);
}

/// The queue's line of waiting getters under every explored interleaving of getters taking and
/// giving up places and a producer: every item is taken exactly once, none is stranded.
#[test]
fn queue_line_strands_nothing() {
    explore("queue_line_strands_nothing", queue_line_scenario);
}
