//! GC handlers written in Python (SPEC §3): callbacks the runtime calls, from Rust, for each
//! item it reclaims — and the one way every Python callback called from Rust is invoked
//! ([`invoke`]; joins' `on_incomplete` uses it too).
//!
//! A handler runs on the thread whose operation made the item garbage, after the runtime's locks
//! are released; it attaches to the interpreter for the call. An exception raised by a handler
//! is never lost and never reaches the runtime: it is reported through `sys.unraisablehook` and
//! counted in [`HandlerErrors`] (`Runtime.stats()["handler_errors"]` and the channel's
//! `stats()["handler_errors"]`). During interpreter shutdown handlers are skipped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;

/// Exceptions raised by GC handlers, per runtime, in total and per channel or queue name.
#[derive(Default)]
pub(crate) struct HandlerErrors {
    total: AtomicU64,
    by_name: Mutex<HashMap<String, u64>>,
}

impl HandlerErrors {
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub(crate) fn of(&self, name: &str) -> u64 {
        self.by_name.lock().get(name).copied().unwrap_or(0)
    }

    /// Counts one exception, in the total and, with a name, under that channel or queue.
    pub(crate) fn record(&self, name: Option<&str>) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if let Some(name) = name {
            *self.by_name.lock().entry(name.to_owned()).or_default() += 1;
        }
    }
}

/// A handler for one channel or queue: `callback(ts)`.
pub(crate) fn per_container(
    name: String,
    callback: Py<PyAny>,
    errors: Arc<HandlerErrors>,
) -> impl Fn(&stampede::Item) + Send + Sync + 'static {
    move |item| call(&callback, &errors, &name, (item.ts,))
}

/// A handler for every container of a runtime: `callback(name, ts)`.
pub(crate) fn global(callback: Py<PyAny>, errors: Arc<HandlerErrors>) -> impl Fn(&str, &stampede::Item) + Send + Sync {
    move |name, item| call(&callback, &errors, name, (name.to_owned(), item.ts))
}

fn call<A>(callback: &Py<PyAny>, errors: &HandlerErrors, name: &str, args: A)
where
    A: for<'py> pyo3::call::PyCallArgs<'py>,
{
    Python::try_attach(|py| invoke(py, callback, args, || errors.record(Some(name))));
}

/// Calls a Python callback on behalf of the runtime. An exception it raises is reported through
/// `sys.unraisablehook` and `failed` is called to count it; it never propagates.
pub(crate) fn invoke<A>(py: Python<'_>, callback: &Py<PyAny>, args: A, failed: impl FnOnce())
where
    A: for<'py> pyo3::call::PyCallArgs<'py>,
{
    if let Err(err) = callback.call1(py, args) {
        failed();
        err.write_unraisable(py, Some(callback.bind(py)));
    }
}
