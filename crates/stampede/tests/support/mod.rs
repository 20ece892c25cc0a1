//! What several test files share: the watchdog that turns a hang into a named failure, a bounded
//! wait for a condition, a seeded pseudo-random stream, and a line a passing run shows (`say`). (Each test file compiles its own copy
//! and uses part of it.)
#![allow(dead_code)]

use std::io::Write as _;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Writes `line` to stderr past the test harness's capture (which takes `print!` and `eprint!`
/// only): what a passing run must show, such as how many seeds a simulation ran.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Longest any one test may run before the watchdog declares it hung.
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `body` under a watchdog that aborts the whole process, naming `test`, if `body` has not
/// returned (or panicked) within [`WATCHDOG`]. A panic in a watchdog thread would not stop a
/// test blocked forever, so it aborts instead.
pub fn with_watchdog<T>(test: &'static str, body: impl FnOnce() -> T) -> T {
    with_watchdog_for(test, WATCHDOG, || {}, body)
}

/// Waits (bounded by `limit`) until `condition` holds; `false` if it never did.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        // The poll interval of `eventually`: the condition has no signal to wait on.
        thread::sleep(Duration::from_millis(10));
    }
    condition()
}

/// [`with_watchdog`] with another limit (tests that start processes or a fabric need longer on a
/// loaded machine), running `before_abort` first (e.g. to kill the processes the test started).
pub fn with_watchdog_for<T>(test: &'static str, limit: Duration, before_abort: fn(), body: impl FnOnce() -> T) -> T {
    let (done, finished) = mpsc::channel::<()>();
    let dog = thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(limit) {
            before_abort();
            // Straight to stderr: the test harness captures `eprintln!` and an abort loses it.
            let message = format!("watchdog: `{test}` did not finish within {limit:?}: deadlock or lost wake-up\n");
            let _ = std::io::stderr().write_all(message.as_bytes());
            std::process::abort();
        }
    });
    let value = body();
    drop(done);
    dog.join().expect("watchdog thread");
    value
}

/// A deterministic pseudo-random stream (splitmix64): a seed fixes every choice a test makes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
