//! `Pacer` (docs/SEMANTICS.md, "Pacing"): loose synchrony of a task's virtual time with real time.
//!
//! `sync(vt)` waits until `start + vt * tick` when early; when later than the tolerance it calls
//! `on_late(vt, lateness_seconds)` (after the Rust pacer returned, with no lock held, so the handler
//! may call `vt_now()` or `reset()`). Python's `sync` returns the virtual time to proceed with: `vt`,
//! or the int `on_late` returned to skip ahead (e.g. `pacer.vt_now()`). Long waits sleep in slices
//! of at most [`SLICE`] with a look at pending signals between them, so Ctrl-C interrupts any
//! wait within about one slice; the last stretch is the Rust pacer's precise wait.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pyo3::prelude::*;
use stampede::{Pace, Timestamp};

use crate::args::{self, At};
use crate::errors::{to_pyerr, IntoPyResult};
use crate::wait::SLICE;

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
    /// seconds late that still count as on time (None = 0); `on_late(vt, lateness)`: called when
    /// later. Both in 0 ..= 86 400 s (a tick of 0 is refused); anything else is InvalidArgument.
    #[new]
    #[pyo3(signature = (tick, tolerance=None, on_late=None))]
    fn new(
        py: Python<'_>,
        tick: &Bound<'_, PyAny>,
        tolerance: Option<&Bound<'_, PyAny>>,
        on_late: Option<Py<PyAny>>,
    ) -> PyResult<Pacer> {
        let tick_d = args::pacer_seconds(tick, "tick")?;
        let tolerance_d = tolerance.map_or(Ok(Duration::ZERO), |t| args::pacer_seconds(t, "tolerance"))?;
        let on_late = on_late.map(|cb| args::callable(cb, py, "on_late")).transpose()?;
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
    fn sync(&self, py: Python<'_>, vt: &Bound<'_, PyAny>) -> PyResult<Timestamp> {
        let at = At { op: "sync", name: "pacer" };
        let vt = args::timestamp(vt, "vt", at)?;
        if vt < 0 {
            return Err(to_pyerr(stampede::Error::InvalidTimestamp { op: "sync", name: "pacer".into(), ts: vt }));
        }
        // When vt is due, saturating like the pacer's own rule; a due time beyond what the clock
        // can represent (centuries away) is waited for like any other: until Ctrl-C.
        let due_nanos = u64::try_from(self.tick.as_nanos().saturating_mul(vt as u128)).unwrap_or(u64::MAX);
        let due = self.start.lock().checked_add(Duration::from_nanos(due_nanos));
        loop {
            let left = due.map_or(Duration::MAX, |due| due.saturating_duration_since(Instant::now()));
            if left <= SLICE {
                break;
            }
            py.detach(|| std::thread::sleep(SLICE.min(left - SLICE)));
            py.check_signals()?;
        }
        let pace = py.detach(|| self.inner.lock().sync(vt));
        match (pace, &self.on_late) {
            (Pace::Late(lateness), Some(on_late)) => {
                let next = on_late.call1(py, (vt, lateness.as_secs_f64()))?;
                let next = next.bind(py);
                if next.is_none() {
                    Ok(vt)
                } else {
                    args::timestamp(next, "the virtual time on_late returned", at)
                }
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
