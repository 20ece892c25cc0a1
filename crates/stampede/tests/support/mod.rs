//! What several test files share: the watchdog that turns a hang into a named failure.

use std::io::Write as _;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// Longest any one test may run before the watchdog declares it hung.
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `body` under a watchdog that aborts the whole process, naming `test`, if `body` has not
/// returned (or panicked) within [`WATCHDOG`]. A panic in a watchdog thread would not stop a
/// test blocked forever, so it aborts instead.
pub fn with_watchdog<T>(test: &'static str, body: impl FnOnce() -> T) -> T {
    let (done, finished) = mpsc::channel::<()>();
    let dog = thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(WATCHDOG) {
            // Straight to stderr: the test harness captures `eprintln!` and an abort loses it.
            let message = format!("watchdog: `{test}` did not finish within {WATCHDOG:?}: deadlock or lost wake-up\n");
            let _ = std::io::stderr().write_all(message.as_bytes());
            std::process::abort();
        }
    });
    let value = body();
    drop(done);
    dog.join().expect("watchdog thread");
    value
}
