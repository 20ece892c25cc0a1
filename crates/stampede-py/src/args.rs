//! Python arguments to Rust values, with the errors that docs/SEMANTICS.md ("Errors") promises and
//! never a panic, an `OverflowError` or a silent coercion.
//!
//! - A value of the wrong type raises `TypeError` — `bool` included, although Python counts it
//!   as an int (`put(True, …)` is a bug, not timestamp 1), and `float` where an int is meant.
//! - An int that does not fit raises the typed error of what it is: `InvalidTimestamp` for a
//!   timestamp or virtual time beyond 64 bits, `InvalidArgument` for a negative or huge count,
//!   size or number of seconds. Range rules inside 64 bits (a negative timestamp, refcount 0,
//!   capacity 0) are the runtime's, so Rust and Python give the same error.
//!
//! Every conversion names the operation and the channel, like the runtime's own errors.

use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};
use stampede::{Error, Timestamp};

use crate::errors::{to_pyerr, InvalidTimestamp};

/// Longest finite timeout in seconds; anything above waits forever (as `None` does). About 31
/// years: far beyond any real wait, far below where `Instant` arithmetic could overflow.
pub(crate) const TIMEOUT_SECONDS_MAX: f64 = 1e9;

/// Longest pacer tick or tolerance in seconds (a day per unit of virtual time).
pub(crate) const PACER_SECONDS_MAX: f64 = 86_400.0;

/// Where an argument goes, for error messages: the operation and the channel (or queue, task).
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    pub(crate) op: &'static str,
    pub(crate) name: &'a str,
}

impl At<'_> {
    pub(crate) fn invalid(&self, reason: String) -> PyErr {
        to_pyerr(Error::InvalidArgument { op: self.op, name: self.name.to_owned(), reason })
    }
}

/// `TypeError` for a value of the wrong type, naming the argument.
fn wrong_type(arg: &str, expected: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    let got = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    PyTypeError::new_err(format!("{arg} must be {expected}, not {got}"))
}

/// An int argument (anything with `__index__`, such as NumPy integers), never a bool or float.
fn int<'py>(obj: &Bound<'py, PyAny>, arg: &str) -> PyResult<Bound<'py, PyInt>> {
    if let Ok(exact) = obj.cast_exact::<PyInt>() {
        return Ok(exact.clone());
    }
    if obj.is_instance_of::<PyBool>() || obj.is_instance_of::<PyFloat>() {
        return Err(wrong_type(arg, "an int", obj));
    }
    let index = obj.py().import("operator")?.getattr("index")?;
    index.call1((obj,)).and_then(|i| Ok(i.cast_into::<PyInt>()?)).map_err(|_| wrong_type(arg, "an int", obj))
}

/// A timestamp or virtual time: any 64-bit signed int (the runtime checks the range rules).
pub(crate) fn timestamp(obj: &Bound<'_, PyAny>, arg: &str, at: At<'_>) -> PyResult<Timestamp> {
    if let Ok(ts) = exact_i64(obj) {
        return Ok(ts);
    }
    let value = int(obj, arg)?;
    if let Ok(ts) = value.extract::<Timestamp>() {
        return Ok(ts);
    }
    let err = InvalidTimestamp::new_err(format!(
        "{} {arg}={value} on \"{}\" is out of range: timestamps are 64-bit signed ints (items live at 0 ..= \
         stampede.TS_MAX; stampede.INFINITY is only a virtual time)",
        at.op, at.name
    ));
    let exc = err.value(obj.py());
    exc.setattr("name", at.name)?;
    exc.setattr("ts", &value)?;
    exc.setattr("reason", pyo3::types::PyNone::get(obj.py()))?;
    Err(err)
}

/// The fast path of [`timestamp`]: a plain `int` (not a bool) that fits.
fn exact_i64(obj: &Bound<'_, PyAny>) -> Result<Timestamp, ()> {
    if obj.is_exact_instance_of::<PyInt>() {
        obj.extract::<Timestamp>().map_err(|_| ())
    } else {
        Err(())
    }
}

/// A count or size (`refcount`, `capacity`, `max_bytes`): `None`, or an int in `0 ..= max`.
pub(crate) fn count<T: TryFrom<u64>>(obj: Option<&Bound<'_, PyAny>>, arg: &str, at: At<'_>) -> PyResult<Option<T>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    let value = int(obj, arg)?;
    match value.extract::<u64>().ok().and_then(|v| T::try_from(v).ok()) {
        Some(v) => Ok(Some(v)),
        None => Err(at.invalid(format!("{arg}={value} is out of range (a non-negative int, or None)"))),
    }
}

/// A prefetch policy by name (`None`: the runtime's default).
pub(crate) fn prefetch(name: Option<&str>, at: At<'_>) -> PyResult<Option<stampede::Prefetch>> {
    let Some(name) = name else { return Ok(None) };
    stampede::Prefetch::parse(name).map(Some).map_err(|why| at.invalid(format!("prefetch={why}")))
}

/// A timeout: `None` (wait as long as needed), `0` (never wait), or seconds `>= 0`; `inf` and
/// anything above [`TIMEOUT_SECONDS_MAX`] wait forever.
pub(crate) fn timeout(obj: Option<&Bound<'_, PyAny>>, at: At<'_>) -> PyResult<Option<Duration>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    let s = number(obj, "timeout")?;
    if s.is_nan() || s < 0.0 {
        return Err(at.invalid(format!("timeout={s} must be None or a number of seconds >= 0")));
    }
    if s > TIMEOUT_SECONDS_MAX {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs_f64(s)))
}

/// A pacer's `tick` or `tolerance` in seconds: finite, `>= 0`, at most [`PACER_SECONDS_MAX`].
pub(crate) fn pacer_seconds(obj: &Bound<'_, PyAny>, arg: &str) -> PyResult<Duration> {
    let s = number(obj, arg)?;
    if !s.is_finite() || !(0.0..=PACER_SECONDS_MAX).contains(&s) {
        let at = At { op: "Pacer", name: "pacer" };
        return Err(at.invalid(format!("{arg}={s} must be a number of seconds in 0 ..= {PACER_SECONDS_MAX}")));
    }
    Ok(Duration::from_secs_f64(s))
}

/// A real number of seconds (int or float, not bool).
fn number(obj: &Bound<'_, PyAny>, arg: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>() {
        return Err(wrong_type(arg, "a number of seconds", obj));
    }
    if let Ok(value) = int(obj, arg) {
        // An int too large for a float is still a well-defined, huge number of seconds.
        return Ok(value.extract::<f64>().unwrap_or(f64::INFINITY));
    }
    obj.extract::<f64>().map_err(|_| wrong_type(arg, "a number of seconds", obj))
}

/// A callable (GC handler, `on_late`, `on_incomplete`), or `TypeError` naming the argument.
pub(crate) fn callable(obj: Py<PyAny>, py: Python<'_>, arg: &str) -> PyResult<Py<PyAny>> {
    if obj.bind(py).is_callable() {
        Ok(obj)
    } else {
        Err(wrong_type(arg, "callable", obj.bind(py)))
    }
}
