//! Real-time pacing (docs/SEMANTICS.md, "Pacing"). Only lower bounds on elapsed time are asserted
//! (a loaded CI machine may be late; it can never be early); the wake-up error is measured by the
//! benchmarks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stampede::{Pace, Pacer};

/// Early: sync(vt) sleeps until start + vt * tick, never less.
#[test]
fn early_sleeps_until_due() {
    // The clock starts before the pacer's, so elapsed time is a lower bound of the pacer's.
    let start = Instant::now();
    let mut pacer = Pacer::new(Duration::from_millis(10), Duration::from_millis(5)).unwrap();
    for vt in 1..=5 {
        assert!(matches!(pacer.sync(vt), Pace::Early(_)));
    }
    assert!(start.elapsed() >= Duration::from_millis(50));
}

/// Late beyond the tolerance: on_late(vt, lateness) is called; the handler may skip ahead to the
/// virtual time that is due now.
#[test]
fn late_calls_on_late() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let mut pacer = Pacer::new(Duration::from_millis(1), Duration::from_millis(2))
        .unwrap()
        .on_late(move |vt, lateness| c.lock().unwrap().push((vt, lateness)));
    // Lateness is the subject: real time must pass the pacer's deadline, there is no condition to await.
    std::thread::sleep(Duration::from_millis(20));
    assert!(matches!(pacer.sync(1), Pace::Late(l) if l >= Duration::from_millis(17)));
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, 1);
    assert!(pacer.vt_now() >= 20);
}

/// A 30 fps source written with the pacer takes at least 1/30 s per frame, and reset() restarts
/// the clock.
#[test]
fn thirty_fps_source() {
    let start = Instant::now();
    let mut pacer = Pacer::new(Duration::from_secs_f64(1.0 / 30.0), Duration::from_millis(5)).unwrap();
    for vt in 1..=9 {
        pacer.sync(vt);
    }
    assert!(start.elapsed() >= Duration::from_millis(300));
    pacer.reset();
    assert!(matches!(pacer.sync(0), Pace::OnTime(_)));
    assert!(Pacer::new(Duration::ZERO, Duration::ZERO).is_err());
}

/// `until(vt)`: how long until vt is due, without sleeping — at most vt * tick for a future vt,
/// `None` once it is due.
#[test]
fn until_says_how_long_without_sleeping() {
    let pacer = Pacer::new(Duration::from_secs(10), Duration::from_millis(5)).unwrap();
    let wait = pacer.until(3).expect("30 s away");
    assert!(wait <= Duration::from_secs(30) && wait > Duration::from_secs(20), "{wait:?}");
    assert_eq!(pacer.until(0), None);
}

/// From an epoch: virtual time 0 is due at the epoch, not at the pacer's making, so pacers made
/// at different times from one epoch number the same instant alike (docs/NODES.md, "Time across
/// hosts"); an epoch still to come makes frame 0 due then.
#[test]
fn a_pacer_from_an_epoch_counts_from_it() {
    let tick = Duration::from_millis(10);
    let now = Instant::now();
    let past = stampede::Epoch { at: now, since_ns: 1_000_000_000 };
    let pacer = Pacer::since(past, tick, Duration::ZERO).unwrap();
    assert!(pacer.vt_now() >= 100, "a second after the epoch: {}", pacer.vt_now());
    assert_eq!(pacer.due_at(100), Some(now), "frame 100 was due a second after the epoch");
    assert_eq!(pacer.due_at(150), Some(now + Duration::from_millis(500)));
    let later = Pacer::since(past, tick, Duration::ZERO).unwrap();
    assert_eq!(later.due_at(120), pacer.due_at(120), "one epoch, one numbering");

    let future = stampede::Epoch { at: now, since_ns: -200_000_000 };
    let mut waiting = Pacer::since(future, tick, Duration::ZERO).unwrap();
    assert_eq!(waiting.due_at(0), Some(now + Duration::from_millis(200)));
    assert!(matches!(waiting.sync(1), Pace::Early(_)));
    assert!(Instant::now() >= now + Duration::from_millis(210), "frame 1 is due 10 ms after the epoch");
}

/// A runtime's epoch is its own while it is open, and `Closed` once it is closed (like every
/// other call on it).
#[test]
fn a_closed_runtime_has_no_epoch() {
    let rt = stampede::Runtime::new();
    let epoch = rt.epoch().expect("an open runtime's epoch");
    assert!(epoch.at <= Instant::now(), "embedded, the epoch is the runtime's making");
    rt.close();
    assert!(matches!(rt.epoch(), Err(stampede::Error::Closed { .. })));
}
