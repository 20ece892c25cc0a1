//! `Pacer` (docs/SEMANTICS.md, "Pacing"): loose synchrony of a task's virtual time with real time.
//!
//! `sync(vt)` waits until `start + vt * tick` when early (`start`: when the pacer was made or reset,
//! or an `Epoch` — the mesh's, from `Runtime.epoch()`); when later than the tolerance it calls
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
    /// `epoch`: virtual time 0 is due then (`Runtime.epoch()`: paced sources on every host of a
    /// mesh number frames alike); None: now.
    #[new]
    #[pyo3(signature = (tick, tolerance=None, on_late=None, epoch=None))]
    fn new(
        py: Python<'_>,
        tick: &Bound<'_, PyAny>,
        tolerance: Option<&Bound<'_, PyAny>>,
        on_late: Option<Py<PyAny>>,
        epoch: Option<PyRef<'_, Epoch>>,
    ) -> PyResult<Pacer> {
        let tick_d = args::pacer_seconds(tick, "tick")?;
        let tolerance_d = tolerance.map_or(Ok(Duration::ZERO), |t| args::pacer_seconds(t, "tolerance"))?;
        let on_late = on_late.map(|cb| args::callable(cb, py, "on_late")).transpose()?;
        let epoch = epoch.map_or_else(stampede::Epoch::now, |e| e.inner);
        let inner = stampede::Pacer::since(epoch, tick_d, tolerance_d).py()?;
        Ok(Pacer { inner: Mutex::new(inner), tick: tick_d, tolerance: tolerance_d, on_late })
    }

    /// Waits until `vt` is due when early; calls `on_late` when late beyond the tolerance.
    /// Returns the virtual time to proceed with (`vt`, or what `on_late` returned).
    fn sync(&self, py: Python<'_>, vt: &Bound<'_, PyAny>) -> PyResult<Timestamp> {
        let at = At { op: "sync", name: "pacer" };
        let vt = args::timestamp(vt, "vt", at)?;
        if vt < 0 {
            return Err(to_pyerr(stampede::Error::InvalidTimestamp { op: "sync", name: "pacer".into(), ts: vt }));
        }
        // A due time beyond what the clock can represent (centuries away) is waited for like any
        // other: until Ctrl-C.
        let due = self.inner.lock().due_at(vt);
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
        self.inner.lock().vt_now()
    }

    /// Restarts the clock: virtual time 0 is due now.
    fn reset(&self) {
        self.inner.lock().reset();
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

/// The mesh's epoch on this process's clock (`Runtime.epoch()`), for `Pacer(..., epoch=)`.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Epoch {
    inner: stampede::Epoch,
}

impl From<stampede::Epoch> for Epoch {
    fn from(inner: stampede::Epoch) -> Epoch {
        Epoch { inner }
    }
}

#[pymethods]
impl Epoch {
    /// Seconds of mesh time since the epoch, now (negative before it).
    #[getter]
    fn elapsed(&self) -> f64 {
        self.inner.since_at(Instant::now()) as f64 / 1e9
    }

    fn __repr__(&self) -> String {
        format!("Epoch(elapsed={:.6})", self.elapsed())
    }
}
