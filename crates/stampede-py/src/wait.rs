//! The one GIL-releasing helper every blocking call goes through (timeouts: python/README.md,
//! "What to know").
//!
//! A blocking operation runs with the GIL released, in slices of at most [`SLICE`]; between
//! slices the helper re-attaches and calls `check_signals`, so Ctrl-C interrupts a blocked `get`
//! or `put` with `KeyboardInterrupt` within about one slice. A slice that ends "not yet" (the
//! error is transient, [`stampede::Error::is_transient`]) is simply repeated until the caller's deadline; the last slice's error
//! is the one raised, so `NotAvailable` still carries the neighbouring timestamps of that moment.
//! Nothing is lost between slices: a slice either completes the operation or changes nothing.

use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::to_pyerr;

/// Longest stretch a blocking call spends without looking at pending signals.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// Runs `op(slice_timeout)` with the GIL released until it succeeds, fails for good, or the
/// `timeout` (None = forever) expires. Transient errors ("not yet") are retried.
pub(crate) fn blocking<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    op: impl Fn(Option<Duration>) -> stampede::Result<T> + Sync,
) -> PyResult<T> {
    crate::trace::name_this_thread(py);
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let (slice, last) = match deadline {
            None => (SLICE, false),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left <= SLICE {
                    (left, true)
                } else {
                    (SLICE, false)
                }
            }
        };
        match py.detach(|| op(Some(slice))) {
            Err(e) if !last && e.is_transient() => py.check_signals()?,
            other => return other.map_err(to_pyerr),
        }
    }
}

/// Runs a non-waiting operation with the GIL released (it may take locks, run GC handlers).
pub(crate) fn released<T: Send>(py: Python<'_>, op: impl FnOnce() -> stampede::Result<T> + Send) -> PyResult<T> {
    crate::trace::name_this_thread(py);
    py.detach(op).map_err(to_pyerr)
}
