//! Waiting for a condition that another thread's operation may make true — blocking or async.
//!
//! Both forms follow the same lost-wake-up-free pattern: try; register a listener on the event;
//! try again; only then sleep. Whoever changes the state notifies the event after releasing its
//! lock, so a change between the two tries is never missed. `retry` says which errors mean "not
//! yet" (e.g. `NotAvailable`, `Full` while the item could still fit); every other result returns.

use std::time::{Duration, Instant};

use event_listener::{Event, Listener};
use stampede_core::{Error, Result};

/// Blocks until `attempt` succeeds or fails for good, or `timeout` (None = forever) expires,
/// in which case the last "not yet" error is returned.
pub(crate) fn blocking<T>(
    event: &Event,
    timeout: Option<Duration>,
    mut attempt: impl FnMut() -> Result<T>,
    retry: impl Fn(&Error) -> bool,
) -> Result<T> {
    let deadline = timeout.map(|d| Instant::now() + d);
    loop {
        match attempt() {
            Err(e) if retry(&e) && deadline.is_none_or(|d| Instant::now() < d) => {}
            other => return other,
        }
        let listener = event.listen();
        match attempt() {
            Err(e) if retry(&e) => {}
            other => return other,
        }
        match deadline {
            None => listener.wait(),
            Some(deadline) => {
                if listener.wait_deadline(deadline).is_none() {
                    return attempt();
                }
            }
        }
    }
}

/// The async form of [`blocking`]: the waiting task yields to its executor instead of blocking
/// a thread. Timeouts use tokio's timer, so a timeout needs a tokio runtime with time enabled.
pub(crate) async fn asynchronous<T>(
    event: &Event,
    timeout: Option<Duration>,
    mut attempt: impl FnMut() -> Result<T>,
    retry: impl Fn(&Error) -> bool,
) -> Result<T> {
    let deadline = timeout.map(|d| tokio::time::Instant::now() + d);
    loop {
        match attempt() {
            Err(e) if retry(&e) && deadline.is_none_or(|d| tokio::time::Instant::now() < d) => {}
            other => return other,
        }
        let listener = event.listen();
        match attempt() {
            Err(e) if retry(&e) => {}
            other => return other,
        }
        match deadline {
            None => listener.await,
            Some(deadline) => {
                if tokio::time::timeout_at(deadline, listener).await.is_err() {
                    return attempt();
                }
            }
        }
    }
}

/// "Nothing suitable yet": worth waiting for.
pub(crate) fn not_available(e: &Error) -> bool {
    matches!(e, Error::NotAvailable { .. })
}
