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

use stampede::{Error, ExactJoin, JoinPolicy, Limits, PutOptions, Runtime, Selector, DETACHED, INFINITY};
use support::with_watchdog;

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

/// Runs `call` on a new thread and returns its handle: for a call expected to block until the
/// main thread does something.
fn blocked<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> thread::JoinHandle<T> {
    thread::spawn(call)
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
        left.close_producers();
        right.close_producers();
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
        ch.close_producers();
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
        ch.close_producers();
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
