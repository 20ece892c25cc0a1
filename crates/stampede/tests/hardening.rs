//! Issue 8, "no crash, no hang, no silent loss": one test per defect, each named after what it
//! proves and the defect's number in the issue.
//!
//! Blocking tests run under a watchdog that aborts the process, naming the test, if it has not
//! finished within [`WATCHDOG`](support::WATCHDOG) (a lost wake-up or a deadlock); nothing
//! asserts on wall-clock speed.

mod support;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use stampede::payload::Buffers;
use stampede::{
    Codec, Error, ExactJoin, IntoPayload, JoinPolicy, Limits, Payload, PutOptions, Runtime, Selector, DETACHED,
    INFINITY,
};
use support::{with_watchdog, Rng};

/// A zero timeout: never wait.
const NOW: Option<Duration> = Some(Duration::ZERO);

/// A current-thread tokio runtime for the async tests.
fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("tokio runtime")
}

/// Readiness API: `changed()` / `freed()` are owned `'static + Send` futures registered when
/// created, so "create; try with a zero timeout; await if not yet" loses no wake-up: they
/// complete on an arrival, on room freed, and on the connection being detached from another
/// thread (after which the retry fails `Closed`).
#[test]
fn readiness_futures_complete_on_arrival_room_and_detach() {
    fn owned<F: std::future::Future<Output = ()> + Send + 'static>(f: F) -> F {
        f
    }
    with_watchdog("readiness_futures_complete_on_arrival_room_and_detach", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("ready/frames", Limits::items(1)).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = Arc::new(reader.attach_input(&ch).unwrap());
        let tokio = tokio();

        // Arrival: registered before the failed try, put after it.
        let changed = owned(inp.changed(Selector::OldestUnseen));
        assert!(matches!(inp.get(Selector::OldestUnseen, NOW), Err(e) if e.is_transient()));
        let putter = thread::spawn(move || {
            out.put(0, &b"frame"[..]).unwrap();
            out
        });
        tokio.block_on(changed);
        let out = putter.join().unwrap();
        assert_eq!(inp.get(Selector::OldestUnseen, NOW).unwrap().ts, 0);

        // Room: the channel is full until the reader consumes and the producer moves on.
        let freed = owned(out.freed());
        assert!(matches!(out.put_with(1, &b"x"[..], PutOptions { timeout: NOW, ..Default::default() }),
            Err(e) if e.is_transient()));
        let consumer = {
            let inp = inp.clone();
            thread::spawn(move || inp.consume(0).unwrap())
        };
        producer.set_virtual_time(1).unwrap();
        tokio.block_on(freed);
        consumer.join().unwrap();
        out.put_with(1, &b"x"[..], PutOptions { timeout: NOW, ..Default::default() }).unwrap();

        // Detach from another thread wakes a waiter on that connection; the retry fails Closed.
        let changed = inp.changed(Selector::OldestUnseen);
        let detacher = {
            let inp = inp.clone();
            thread::spawn(move || inp.detach())
        };
        tokio.block_on(changed);
        detacher.join().unwrap();
        assert!(matches!(inp.get(Selector::OldestUnseen, NOW), Err(Error::Closed { .. })));
    });
}

/// How long [`blocked`] gives a new thread to reach its blocking wait. Nothing observable says a
/// thread is blocked, so this only makes it likely that the test exercises the wake-up of a
/// sleeping call rather than a call that starts after the event; no result depends on it.
const BLOCK_GRACE: Duration = Duration::from_millis(50);

/// Runs `call` on a new thread and returns its handle once the call has (very likely) blocked:
/// for a call expected to wait until the main thread does something.
fn blocked<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> thread::JoinHandle<T> {
    let handle = thread::spawn(call);
    // No hook observes a call parked inside the runtime: the pause only makes the wake-up path likely (see BLOCK_GRACE).
    thread::sleep(BLOCK_GRACE);
    handle
}

/// Defect 6: `detach(&self)` from another thread wakes a get blocked on that connection, on a
/// channel and on a queue, with `Closed` ("the connection was detached"); every later call fails
/// `Closed` too, and detaching again is a no-op.
#[test]
fn detach_wakes_blocked_gets_with_closed() {
    with_watchdog("detach_wakes_blocked_gets_with_closed", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("detach/frames", Limits::unbounded()).unwrap();
        let q = rt.create_queue("detach/work", Limits::unbounded()).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = Arc::new(reader.attach_input(&ch).unwrap());
        let qin = Arc::new(reader.attach_input(&q).unwrap());
        let get = blocked({
            let inp = inp.clone();
            move || inp.get(Selector::OldestUnseen, None)
        });
        let qget = blocked({
            let qin = qin.clone();
            move || qin.get(None)
        });
        inp.detach();
        qin.detach();
        assert!(matches!(get.join().unwrap(), Err(Error::Closed { reason: DETACHED, .. })));
        assert!(matches!(qget.join().unwrap(), Err(Error::Closed { reason: DETACHED, .. })));
        inp.detach();
        assert!(matches!(inp.get(Selector::OldestUnseen, NOW), Err(Error::Closed { .. })));
        assert!(matches!(inp.consume_until(5), Err(Error::Closed { .. })));
        assert!(matches!(qin.get(NOW), Err(Error::Closed { .. })));
        assert_eq!(ch.stats().inputs, 0);
    });
}

/// Defect 6: `detach(&self)` wakes a put blocked on a full channel or queue with `Closed`, and a
/// detached output never stores anything again (before, a put through it still succeeded).
#[test]
fn detach_wakes_blocked_puts_and_later_puts_fail_closed() {
    with_watchdog("detach_wakes_blocked_puts_and_later_puts_fail_closed", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("detach/full", Limits::items(1)).unwrap();
        let q = rt.create_queue("detach/full-queue", Limits::items(1)).unwrap();
        let producer = rt.task(0).unwrap();
        let out = Arc::new(producer.attach_output(&ch).unwrap());
        let qout = Arc::new(producer.attach_output(&q).unwrap());
        out.put(0, &b"a"[..]).unwrap();
        qout.put(0, &b"a"[..], None).unwrap();
        let put = blocked({
            let out = out.clone();
            move || out.put(1, &b"b"[..])
        });
        let qput = blocked({
            let qout = qout.clone();
            move || qout.put(1, &b"b"[..], None)
        });
        out.detach();
        qout.detach();
        assert!(matches!(put.join().unwrap(), Err(Error::Closed { reason: DETACHED, .. })));
        assert!(matches!(qput.join().unwrap(), Err(Error::Closed { reason: DETACHED, .. })));
        let options = PutOptions { timeout: NOW, ..Default::default() };
        assert!(matches!(out.put_with(7, &b"c"[..], options), Err(Error::Closed { .. })));
        assert_eq!((ch.timestamps(), ch.stats().outputs), (vec![0], 0));
    });
}

/// Defect 6: `Task::close` from another thread wakes the task's blocked get and put with
/// `Closed`.
#[test]
fn task_close_wakes_its_blocked_calls() {
    with_watchdog("task_close_wakes_its_blocked_calls", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("close/frames", Limits::items(1)).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        out.put(0, &b"a"[..]).unwrap();
        inp.get(0, NOW).unwrap();
        let get = blocked(move || inp.get(Selector::OldestUnseen, None));
        let put = blocked(move || out.put(1, &b"b"[..]));
        reader.close();
        producer.close();
        assert!(matches!(get.join().unwrap(), Err(Error::Closed { .. })));
        assert!(matches!(put.join().unwrap(), Err(Error::Closed { .. })));
    });
}

/// Defect 7: dropping a producer's output connection moves settledness (the progress machine
/// learns the producer left) and wakes a join waiting on it: a `Partial` join blocked with no
/// timeout returns the partial tuple instead of waiting forever.
#[test]
fn dropping_a_producer_output_wakes_a_partial_join() {
    with_watchdog("dropping_a_producer_output_wakes_a_partial_join", || {
        let rt = Runtime::new();
        let left = rt.create_channel("join/left", Limits::unbounded()).unwrap();
        let right = rt.create_channel("join/right", Limits::unbounded()).unwrap();
        let (camera_left, camera_right) = (rt.task(0).unwrap(), rt.task(0).unwrap());
        let shoot_left = camera_left.attach_output(&left).unwrap();
        let shoot_right = camera_right.attach_output(&right).unwrap();
        left.close_producers().unwrap();
        right.close_producers().unwrap();
        let mixer = rt.task(INFINITY).unwrap();
        let inputs = vec![mixer.attach_input(&left).unwrap(), mixer.attach_input(&right).unwrap()];
        let mut join = ExactJoin::new(inputs, JoinPolicy::Partial).unwrap();
        shoot_left.put(0, &b"l"[..]).unwrap();
        camera_left.set_virtual_time(1).unwrap();
        let next = blocked(move || join.next(None).map(|joined| (joined.ts, joined.items[1].is_none())));
        // The right camera's task lives on; only its output connection goes.
        drop(shoot_right);
        assert_eq!(next.join().unwrap().unwrap(), (0, true));
        assert_eq!(right.settled_below(), INFINITY);
        drop(camera_right);
    });
}

/// Defect 8: a wildcard get on a channel where nothing can arrive any more (producer set closed,
/// its producer gone, everything read) fails at once with a final `NotAvailable`, and a get
/// already blocked there wakes with it, so a reading loop ends instead of waiting forever.
#[test]
fn wildcard_get_on_a_settled_channel_fails_for_good() {
    with_watchdog("wildcard_get_on_a_settled_channel_fails_for_good", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("settled/frames", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        let shoot = camera.attach_output(&ch).unwrap();
        ch.close_producers().unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        let stream = blocked(move || {
            let mut got = Vec::new();
            loop {
                match inp.get(Selector::OldestUnseen, None) {
                    Ok(item) => {
                        got.push(item.ts);
                        inp.consume(item.ts).unwrap();
                    }
                    Err(e) => return (got, e, inp),
                }
            }
        });
        shoot.put(0, &b"0"[..]).unwrap();
        shoot.put(1, &b"1"[..]).unwrap();
        camera.close();
        drop(shoot);
        let (got, error, inp) = stream.join().unwrap();
        assert_eq!(got, vec![0, 1]);
        assert!(matches!(error, Error::NotAvailable { settled: true, .. }), "{error}");
        assert!(!error.is_transient());
        assert!(error.to_string().contains("nothing more can arrive"), "{error}");
        let again = inp.get(Selector::NewestUnseen, None).unwrap_err();
        assert!(matches!(again, Error::NotAvailable { settled: true, .. }), "{again}");
    });
}

/// Defect 8: an exact get of a timestamp that is settled and absent (the producer moved past it
/// without putting it) fails at once with a final `NotAvailable`; a get blocked on it wakes when
/// the producer moves past.
#[test]
fn exact_get_of_a_settled_absent_timestamp_fails_for_good() {
    with_watchdog("exact_get_of_a_settled_absent_timestamp_fails_for_good", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("settled/exact", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        let shoot = camera.attach_output(&ch).unwrap();
        ch.close_producers().unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        shoot.put(0, &b"0"[..]).unwrap();
        let waiting = blocked(move || (inp.get(5, None), inp));
        camera.set_virtual_time(10).unwrap();
        let (result, inp) = waiting.join().unwrap();
        let error = result.unwrap_err();
        assert!(matches!(error, Error::NotAvailable { settled: true, selector: Selector::At(5), .. }), "{error}");
        assert!(error.to_string().contains("ts=5 is settled"), "{error}");
        assert!(matches!(inp.get(7, None), Err(Error::NotAvailable { settled: true, .. })));
        assert!(matches!(inp.get(12, NOW), Err(Error::NotAvailable { settled: false, .. })));
        drop(shoot);
    });
}

/// Defect 1: a task of one runtime attaching to another runtime's channel or queue (input or
/// output) is refused with `InvalidArgument` saying they belong to different runtimes; before,
/// the attach succeeded and a later put panicked ("claim reported below ts_min").
#[test]
fn attaching_across_runtimes_is_refused() {
    let (a, b) = (Runtime::new(), Runtime::new());
    let ch = b.create_channel("foreign/frames", Limits::unbounded()).unwrap();
    let q = b.create_queue("foreign/work", Limits::unbounded()).unwrap();
    let task = a.task(0).unwrap();
    let refused =
        |e: Error| matches!(&e, Error::InvalidArgument { .. }) && e.to_string().contains("different runtimes");
    assert!(refused(task.attach_output(&ch).err().expect("refused")));
    assert!(refused(task.attach_input(&ch).err().expect("refused")));
    assert!(refused(task.attach_output(&q).err().expect("refused")));
    assert!(refused(task.attach_input(&q).err().expect("refused")));
    assert_eq!((ch.stats().inputs, ch.stats().outputs, q.stats().inputs), (0, 0, 0));
}

/// Defect 12: a bound nothing fits in (`capacity` or `max_bytes` of 0) is refused at creation
/// with `InvalidArgument`, for channels and queues; before, creation succeeded and every put
/// failed.
#[test]
fn zero_bounds_are_refused_at_creation() {
    let rt = Runtime::new();
    for limits in [Limits::items(0), Limits::unbounded().with_bytes(0), Limits::items(3).with_bytes(0)] {
        let error = rt.create_channel("zero/channel", limits).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains("=0"), "{error}");
        assert!(matches!(rt.create_queue("zero/queue", limits), Err(Error::InvalidArgument { .. })));
    }
    assert!(rt.names("").unwrap().is_empty());
}

/// Defect 13: names follow docs/SEMANTICS.md, "Names" (segments of letters, digits and `_ - . :`,
/// no `.`/`..`, at most `NAME_BYTES_MAX` bytes) in `create_channel`, `create_queue` and `lookup`,
/// each refusal an `InvalidArgument` naming the rule; and `names(prefix)` selects whole segments.
#[test]
fn names_are_checked_and_selected_hierarchically() {
    let rt = Runtime::new();
    let long = "a".repeat(stampede::NAME_BYTES_MAX + 1);
    for bad in ["", "/a", "a/", "a//b", "a/../b", "cam era", "cam*", "a$b", "a?", "a#", "tab\t", "é", long.as_str()] {
        let error = rt.create_channel(bad, Limits::unbounded()).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { .. }), "{bad:?}: {error}");
        assert!(matches!(rt.create_queue(bad, Limits::unbounded()), Err(Error::InvalidArgument { .. })), "{bad:?}");
        assert!(matches!(rt.lookup(bad), Err(Error::InvalidArgument { .. })), "{bad:?}");
    }
    for name in ["camera", "camera/left", "camera/left/raw", "cameraX", "cameras", "mic:0/a-b_c.d"] {
        rt.create_channel(name, Limits::unbounded()).unwrap();
    }
    assert_eq!(rt.names("camera/").unwrap(), ["camera/left", "camera/left/raw"]);
    assert_eq!(rt.names("camera").unwrap(), ["camera", "camera/left", "camera/left/raw"]);
    assert_eq!(rt.names("camera/left").unwrap(), ["camera/left", "camera/left/raw"]);
    assert_eq!(rt.names("").unwrap().len(), 6);
    assert!(rt.names("cam").unwrap().is_empty());
}

/// A payload that counts how often it was copied, to prove a put refuses before copying.
struct Counted<'a>(&'a [u8], &'a std::sync::atomic::AtomicUsize);

impl IntoPayload for Counted<'_> {
    fn payload_bytes(&self) -> usize {
        self.0.len()
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.into_payload(buffers)
    }
}

/// Defect 14: a put of an item larger than `max_bytes` fails `Full { can_never_fit: true }`
/// without copying the payload (blocking, async, channel and queue), and `check_fits` gives the
/// same error up front for callers that copy themselves.
#[test]
fn oversized_puts_fail_before_copying() {
    let rt = Runtime::new();
    let ch = rt.create_channel("big/frames", Limits::unbounded().with_bytes(16)).unwrap();
    let q = rt.create_queue("big/work", Limits::unbounded().with_bytes(16)).unwrap();
    let task = rt.task(0).unwrap();
    let (out, qout) = (task.attach_output(&ch).unwrap(), task.attach_output(&q).unwrap());
    let copies = std::sync::atomic::AtomicUsize::new(0);
    let frame = vec![0u8; 1_000];
    let never = |r: stampede::Result<()>| matches!(r, Err(Error::Full { can_never_fit: true, .. }));
    assert!(never(out.put_with(0, Counted(&frame, &copies), PutOptions::default())));
    assert!(never(qout.put(0, Counted(&frame, &copies), None)));
    let tokio = tokio();
    assert!(never(tokio.block_on(out.put_async(0, Counted(&frame, &copies), PutOptions::default()))));
    assert!(never(tokio.block_on(qout.put_async(0, Counted(&frame, &copies), None))));
    assert_eq!(copies.load(std::sync::atomic::Ordering::SeqCst), 0, "an oversized payload was copied");
    assert!(never(out.check_fits(0, 17)) && never(qout.check_fits(0, 17)));
    assert!(out.check_fits(0, 16).is_ok() && qout.check_fits(0, 16).is_ok());
    out.put(0, Counted(&frame[..16], &copies)).unwrap();
    assert_eq!(copies.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Defect 15: error messages name what the user did. `consume` of a timestamp never put is worded
/// as a consume (not a get with get's advice); `lookup`, `create_*` and `task` after `close()`
/// say the runtime was closed (`Closed`, not `NotFound`); a root task below ts_min talks about
/// `rt.task(virtual_time=…)`, not a task named "runtime".
#[test]
fn messages_name_the_operation_the_user_called() {
    let rt = Runtime::new();
    let ch = rt.create_channel("words/frames", Limits::unbounded()).unwrap();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let reader = rt.task(0).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    out.put(3, &b"x"[..]).unwrap();
    let consume = inp.consume(5).unwrap_err().to_string();
    assert!(consume.starts_with("consume ts=5") && !consume.contains("wait with a timeout"), "{consume}");
    producer.set_virtual_time(20).unwrap();
    reader.set_virtual_time(20).unwrap();
    let task = rt.task(1).unwrap_err().to_string();
    assert!(task.contains("rt.task(virtual_time=1)") && !task.contains("\"runtime\""), "{task}");
    let spawn = producer.spawn(-1).unwrap_err().to_string();
    assert!(spawn.contains("task.spawn(virtual_time=-1)"), "{spawn}");
    rt.close();
    for error in [
        rt.lookup("words/frames").map(|_| ()).unwrap_err(),
        rt.create_channel("words/new", Limits::unbounded()).map(|_| ()).unwrap_err(),
        rt.create_queue("words/queue", Limits::unbounded()).map(|_| ()).unwrap_err(),
        rt.task(INFINITY).map(|_| ()).unwrap_err(),
    ] {
        assert!(matches!(error, Error::Closed { reason: "the runtime was closed", .. }), "{error}");
    }
}

/// Items the fairness test hands out.
const FAIR_ITEMS: usize = 4_000;
/// Workers sharing the queue in the fairness test.
const FAIR_WORKERS: usize = 4;

/// Defect 17: four workers blocked in `QueueInput::get` on one queue are served first come,
/// first served: each gets within a generous band around a fair share of 4 000 items (before,
/// the worker that had just consumed took almost every item: it asked again before the
/// sleeping ones woke). The queue holds one item at a time, so every put finds the others
/// already waiting.
#[test]
fn blocked_queue_getters_are_served_fairly() {
    with_watchdog("blocked_queue_getters_are_served_fairly", || {
        let rt = Runtime::new();
        let q = rt.create_queue("fair/work", Limits::items(1)).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&q).unwrap();
        let workers: Vec<_> = (0..FAIR_WORKERS)
            .map(|_| {
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&q).unwrap();
                blocked(move || {
                    let mut taken = 0usize;
                    loop {
                        let item = inp.get(None).unwrap();
                        inp.consume(&item).unwrap();
                        if item.item.data().as_ref() == b"stop" {
                            return taken;
                        }
                        taken += 1;
                    }
                })
            })
            .collect();
        for ts in 0..FAIR_ITEMS {
            out.put(ts as i64, &b"work"[..], None).unwrap();
        }
        for _ in 0..FAIR_WORKERS {
            out.put(FAIR_ITEMS as i64, &b"stop"[..], None).unwrap();
        }
        let taken: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(taken.iter().sum::<usize>(), FAIR_ITEMS);
        let fair = FAIR_ITEMS / FAIR_WORKERS;
        assert!(taken.iter().all(|&n| n >= fair / 2 && n <= fair * 2), "unfair shares: {taken:?}");
    });
}

/// Seeds of the stranding test.
const STRAND_SEEDS: u64 = 20;
/// Items put per seed.
const STRAND_ITEMS: usize = 200;
/// Getters per seed.
const STRAND_GETTERS: usize = 3;
/// Get attempts per getter per seed.
const STRAND_ATTEMPTS: usize = 150;

/// Defect 17: a getter that times out or is cancelled (an async get dropped mid-wait) gives its
/// turn up without stranding an item: with getters that block, time out and are cancelled at
/// random (seeded) while a producer puts, every item is taken exactly once, and whatever is left
/// at the end a fresh zero-timeout get can still take.
#[test]
fn timed_out_or_cancelled_getters_strand_nothing() {
    with_watchdog("timed_out_or_cancelled_getters_strand_nothing", || {
        for seed in 0..STRAND_SEEDS {
            let rt = Runtime::new();
            let q = rt.create_queue("strand/work", Limits::unbounded()).unwrap();
            let producer = rt.task(0).unwrap();
            let out = producer.attach_output(&q).unwrap();
            let getters: Vec<_> = (0..STRAND_GETTERS as u64)
                .map(|g| {
                    let inp = rt.task(INFINITY).unwrap().attach_input(&q).unwrap();
                    let mut rng = Rng(seed * 1_000 + g);
                    blocked(move || {
                        let tokio = tokio();
                        let mut taken = Vec::new();
                        for _ in 0..STRAND_ATTEMPTS {
                            let wait = Duration::from_micros(rng.below(300));
                            let got = match rng.below(3) {
                                0 => inp.get(NOW),
                                1 => inp.get(Some(wait)),
                                _ => tokio
                                    .block_on(async { tokio::time::timeout(wait, inp.get_async(None)).await })
                                    .unwrap_or(Err(Error::Closed { name: String::new(), reason: "cancelled" })),
                            };
                            match got {
                                Ok(item) => {
                                    inp.consume(&item).unwrap();
                                    taken.push(item.item.ts);
                                }
                                Err(e) => assert!(e.is_transient() || e.to_string().contains("cancelled"), "{e}"),
                            }
                        }
                        taken
                    })
                })
                .collect();
            let mut rng = Rng(seed);
            for ts in 0..STRAND_ITEMS {
                out.put(ts as i64, &b"w"[..], None).unwrap();
                if rng.below(4) == 0 {
                    thread::yield_now();
                }
            }
            let mut taken: Vec<i64> = getters.into_iter().flat_map(|g| g.join().unwrap()).collect();
            let late = rt.task(INFINITY).unwrap().attach_input(&q).unwrap();
            while let Ok(item) = late.get(NOW) {
                late.consume(&item).unwrap();
                taken.push(item.item.ts);
            }
            taken.sort_unstable();
            assert_eq!(taken, (0..STRAND_ITEMS as i64).collect::<Vec<_>>(), "seed {seed}: items lost or doubled");
            assert_eq!(q.stats().live_items, 0, "seed {seed}");
        }
    });
}

/// A timeout too large to be a deadline.
const FOREVER: Option<Duration> = Some(Duration::MAX);

/// Defect 3: a timeout of `Duration::MAX` (too far away to be an `Instant`) means "wait as long
/// as needed" in `get`, `put_with`, `get_async` and `ExactJoin::next`; before, computing the
/// deadline panicked ("overflow when adding duration to instant").
#[test]
fn huge_timeouts_wait_instead_of_panicking() {
    with_watchdog("huge_timeouts_wait_instead_of_panicking", || {
        let rt = Runtime::new();
        let ch = rt.create_channel("forever/frames", Limits::items(1)).unwrap();
        let producer = rt.task(0).unwrap();
        let out = Arc::new(producer.attach_output(&ch).unwrap());
        let reader = rt.task(INFINITY).unwrap();
        let inp = Arc::new(reader.attach_input(&ch).unwrap());
        let get = blocked({
            let inp = inp.clone();
            move || inp.get(Selector::OldestUnseen, FOREVER).map(|item| item.ts)
        });
        out.put(0, &b"0"[..]).unwrap();
        assert_eq!(get.join().unwrap().unwrap(), 0);
        let put = blocked({
            let out = out.clone();
            move || out.put_with(1, &b"1"[..], PutOptions { timeout: FOREVER, ..Default::default() })
        });
        inp.consume(0).unwrap();
        producer.set_virtual_time(1).unwrap();
        put.join().unwrap().unwrap();
        let tokio = tokio();
        assert_eq!(tokio.block_on(inp.get_async(Selector::OldestUnseen, FOREVER)).unwrap().ts, 1);

        let left = rt.create_channel("forever/left", Limits::unbounded()).unwrap();
        let camera = rt.task(2).unwrap();
        let shoot = camera.attach_output(&left).unwrap();
        let mixer = rt.task(INFINITY).unwrap();
        let mut join = ExactJoin::new(vec![mixer.attach_input(&left).unwrap()], JoinPolicy::WaitAll).unwrap();
        let next = blocked(move || join.next(FOREVER).map(|joined| joined.ts));
        shoot.put(2, &b"2"[..]).unwrap();
        assert_eq!(next.join().unwrap().unwrap(), 2);
    });
}

/// Defect 3: other hostile arguments that panicked: `Gather::new(0)` (an assertion) is
/// `InvalidArgument`; a timed async get awaited outside tokio is `InvalidArgument`, not tokio's
/// "no reactor" panic; a pacer with a `Duration::MAX` tick and huge virtual times computes
/// without overflow (the arithmetic itself is proved in `stampede_core::pacer`).
#[test]
fn hostile_helper_arguments_are_typed_errors() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    assert!(matches!(stampede::Gather::new(0), Err(Error::InvalidArgument { .. })));
    let rt = Runtime::new();
    let ch = rt.create_channel("hostile/frames", Limits::unbounded()).unwrap();
    let inp = rt.task(INFINITY).unwrap().attach_input(&ch).unwrap();
    let waker = Waker::from(Arc::new(Noop));
    let mut get = std::pin::pin!(inp.get_async(Selector::OldestUnseen, Some(Duration::from_secs(1))));
    let polled = get.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(matches!(polled, Poll::Ready(Err(Error::InvalidArgument { .. }))), "{polled:?}");
    let mut pacer = stampede::Pacer::new(Duration::MAX, Duration::MAX).unwrap();
    assert!(matches!(pacer.sync(0), stampede::Pace::OnTime(_)));
    assert_eq!(pacer.vt_now(), 0);
}

/// Defect 2 (Rust puts): an `npy` payload whose header declares object data, or is malformed, is
/// refused at put with `InvalidArgument`, on channels and queues alike; a valid one is stored.
#[test]
fn npy_payloads_with_object_or_malformed_headers_are_refused_at_put() {
    fn npy(descr: &str, data: &[u8]) -> Payload {
        let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}");
        let mut header = dict.into_bytes();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(data);
        Payload { data: bytes.into(), codec: Codec::Npy }
    }
    let rt = Runtime::new();
    let ch = rt.create_channel("arrays", Limits::unbounded()).unwrap();
    let q = rt.create_queue("work", Limits::unbounded()).unwrap();
    let task = rt.task(0).unwrap();
    let (out, qout) = (task.attach_output(&ch).unwrap(), task.attach_output(&q).unwrap());
    for bad in [npy("'|O'", &[0; 8]), npy("[('a', '|O')]", &[0; 8]), npy("'<f4'", &[0; 3])] {
        assert!(matches!(out.put(1, bad.clone()), Err(Error::InvalidArgument { .. })));
        assert!(matches!(qout.put(1, bad, None), Err(Error::InvalidArgument { .. })));
    }
    assert_eq!(ch.stats().live_items, 0);
    out.put(1, npy("'<f4'", &[0; 4])).unwrap();
    assert_eq!(ch.timestamps(), vec![1]);
}

/// `connect` honours its timeout whatever the peer does: against a TCP listener that accepts and
/// never speaks (no zenoh handshake, no hello) it fails `Unreachable` when its 2 s are up — not
/// after zenoh's own 10 s open timeout. The watchdog (4× the timeout) only catches a call that
/// does not return; the overshoot is measured by no test.
#[test]
fn connect_returns_by_its_timeout_against_a_silent_listener() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("tcp/{}", listener.local_addr().unwrap());
    // Accepted connections are held open, silent, until the test ends.
    thread::spawn(move || {
        let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let e = support::with_watchdog_for(
        "connect_returns_by_its_timeout_against_a_silent_listener",
        TIMEOUT * 4,
        || {},
        || stampede::connect(&endpoint, Some(TIMEOUT)).map(drop).unwrap_err(),
    );
    assert!(matches!(e, stampede::Error::Unreachable { .. }), "{e}");
}
