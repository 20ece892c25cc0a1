//! `span(name)`: a span of the application's own in the event log (`stampede::trace`,
//! `docs/TRACING.md`): `with stampede.span("track"): ...` logs its begin on entry and its end on
//! exit, on the calling thread, when the process traces (`STAMPEDE_TRACE=<dir>`); otherwise it
//! costs a flag's load.

use parking_lot::Mutex;
use pyo3::prelude::*;

/// A named span; a context manager.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Span {
    name: String,
    open: Mutex<Option<stampede::trace::Span>>,
}

#[pymethods]
impl Span {
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        name_this_thread(slf.py());
        *slf.open.lock() = Some(stampede::trace::user_span(&slf.name));
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        drop(self.open.lock().take());
        false
    }

    fn __repr__(&self) -> String {
        format!("span({:?})", self.name)
    }
}

/// Names the calling Python thread in the event log after `threading.current_thread().name`,
/// once per thread (the runtime cannot name an interpreter's threads). Off, a flag's load.
pub(crate) fn name_this_thread(py: Python<'_>) {
    thread_local! {
        static NAMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !stampede::trace::enabled() || NAMED.with(|named| named.replace(true)) {
        return;
    }
    let name = py
        .import("threading")
        .and_then(|threading| threading.call_method0("current_thread"))
        .and_then(|thread| thread.getattr("name"))
        .and_then(|name| name.extract::<String>());
    if let Ok(name) = name {
        stampede::trace::name_thread(&name);
    }
}

/// `stampede.span(name)`: a span of the application's own, for `with`.
#[pyfunction]
pub(crate) fn span(name: String) -> Span {
    Span { name, open: Mutex::new(None) }
}

/// `stampede.trace_flush()`: hands this thread's records to the log's writer and waits until
/// everything handed over is written (a no-op when not tracing).
#[pyfunction]
pub(crate) fn trace_flush(py: Python<'_>) {
    py.detach(stampede::trace::flush);
}
