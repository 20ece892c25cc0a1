//! Issue 8, "no crash, no hang, no silent loss": one test per defect, each named after what it
//! proves and the defect's number in the issue.
//!
//! Blocking tests run under a watchdog that aborts the process, naming the test, if it has not
//! finished within [`WATCHDOG`](support::WATCHDOG) (a lost wake-up or a deadlock); nothing asserts on wall-clock
//! speed.

mod support;

use std::thread;
use std::time::Duration;

use support::with_watchdog;

use stampede::{Error, Limits, Runtime, Selector, INFINITY};

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
        let inp = std::sync::Arc::new(reader.attach_input(&ch).unwrap());
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
        assert!(matches!(out.put_with(1, &b"x"[..], stampede::PutOptions { timeout: NOW, ..Default::default() }),
            Err(e) if e.is_transient()));
        let consumer = {
            let inp = inp.clone();
            thread::spawn(move || inp.consume(0).unwrap())
        };
        producer.set_virtual_time(1).unwrap();
        tokio.block_on(freed);
        consumer.join().unwrap();
        out.put_with(1, &b"x"[..], stampede::PutOptions { timeout: NOW, ..Default::default() }).unwrap();

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
