//! `Pacer` (SPEC §6): loose synchrony of a task's virtual time with real time.
//!
//! `sync(vt)` waits until `start + vt * tick` when early; when later than the tolerance it calls
//! `on_late(vt, lateness_seconds)` (after the Rust pacer returned, with no lock held, so the handler
//! may call `vt_now()` or `reset()`). Python's `sync` returns the virtual time to proceed with: `vt`,
//! or the int `on_late` returned to skip ahead (e.g. `pacer.vt_now()`). Long waits are sliced so
//! Ctrl-C interrupts them; the last stretch is the Rust pacer's precise wait.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pyo3::prelude::*;
use stampede::{Pace, Timestamp};

use crate::errors::IntoPyResult;
use crate::wait::{self, SLICE};

/// Paces a loop against real time: `vt = pacer.sync(vt)`.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Pacer {
    inner: Mutex<stampede::Pacer>,
    /// The pacer's start as seen from here (within microseconds of the Rust pacer's), for the
    /// interruptible part of long waits.
    start: Mutex<Instant>,
    tick: Duration,
    tolerance: Duration,
    /// Called by `sync` (with the GIL, outside every lock) when late beyond the tolerance.
    on_late: Option<Py<PyAny>>,
}

#[pymethods]
impl Pacer {
    /// `tick`: seconds of real time per unit of virtual time (1/30 for 30 fps); `tolerance`:
    /// seconds late that still count as on time; `on_late(vt, lateness)`: called when later.
    #[new]
    #[pyo3(signature = (tick, tolerance=0.0, on_late=None))]
    fn new(tick: f64, tolerance: f64, on_late: Option<Py<PyAny>>) -> PyResult<Pacer> {
        let tick_d = wait::seconds("tick", tick)?;
        let tolerance_d = wait::seconds("tolerance", tolerance)?;
        let inner = stampede::Pacer::new(tick_d, tolerance_d).py()?;
        Ok(Pacer {
            inner: Mutex::new(inner),
            start: Mutex::new(Instant::now()),
            tick: tick_d,
            tolerance: tolerance_d,
            on_late,
        })
    }

    /// Waits until `vt` is due when early; calls `on_late` when late beyond the tolerance.
    /// Returns the virtual time to proceed with (`vt`, or what `on_late` returned).
    fn sync(&self, py: Python<'_>, vt: Timestamp) -> PyResult<Timestamp> {
        let due = *self.start.lock() + self.tick.saturating_mul(u32::try_from(vt.max(0)).unwrap_or(u32::MAX));
        loop {
            let left = due.saturating_duration_since(Instant::now());
            if left <= SLICE {
                break;
            }
            py.detach(|| std::thread::sleep(left - SLICE));
            py.check_signals()?;
        }
        let pace = py.detach(|| self.inner.lock().sync(vt));
        match (pace, &self.on_late) {
            (Pace::Late(lateness), Some(on_late)) => {
                Ok(on_late.call1(py, (vt, lateness.as_secs_f64()))?.extract::<Option<Timestamp>>(py)?.unwrap_or(vt))
            }
            _ => Ok(vt),
        }
    }

    /// The virtual time due now: where a late source can skip ahead to.
    fn vt_now(&self) -> Timestamp {
        let elapsed = self.start.lock().elapsed();
        Timestamp::try_from(elapsed.as_nanos() / self.tick.as_nanos()).unwrap_or(stampede::TS_MAX)
    }

    /// Restarts the clock: virtual time 0 is due now.
    fn reset(&self) {
        self.inner.lock().reset();
        *self.start.lock() = Instant::now();
    }

    /// Seconds per unit of virtual time.
    #[getter]
    fn tick(&self) -> f64 {
        self.tick.as_secs_f64()
    }

    /// Seconds late that still count as on time.
    #[getter]
    fn tolerance(&self) -> f64 {
        self.tolerance.as_secs_f64()
    }
}
