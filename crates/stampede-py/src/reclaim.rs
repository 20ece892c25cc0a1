//! GC handlers written in Python (docs/SEMANTICS.md, "Virtual time, visibility, GC"): callbacks the
//! runtime calls, from Rust, for each item it reclaims — and the one way every Python callback
//! called from Rust is invoked ([`invoke`]; joins' `on_incomplete` uses it too).
//!
//! A handler runs on the thread whose operation made the item garbage, after the runtime's locks
//! are released; it attaches to the interpreter for the call. An exception raised by a handler
//! is never lost and never reaches the runtime: it is reported through `sys.unraisablehook` and
//! counted in [`HandlerErrors`] (`Runtime.stats()["handler_errors"]` and the channel's
//! `stats()["handler_errors"]`). During interpreter shutdown handlers are skipped. How handlers
//! are held so that one capturing its own channel does not leak the runtime: [`Handlers`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyWeakrefReference;
use pyo3::{PyTraverseError, PyVisit};

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

/// The GC handlers of one runtime, written in Python: one per channel or queue (`callback(ts)`)
/// and one for the whole runtime (`callback(name, ts)`). Setting a handler replaces the previous
/// one; `None` removes it.
///
/// Why a Python object: a handler often captures its channel or runtime, and the runtime holds
/// its handlers. Held from Rust, that cycle would be invisible to Python's garbage collector and
/// keep the runtime and its payloads alive forever. So the callbacks live here, in one object
/// per runtime that every binding object keeping the runtime alive (runtime, channels, queues,
/// tasks, connections) holds and reports to the collector (`__traverse__`); the runtime itself
/// only holds a *weak* reference to it. Once the Python side is unreachable the collector frees
/// the cycle, and the Rust runtime with it.
#[pyclass(module = "stampede._stampede", frozen, weakref)]
pub(crate) struct Handlers {
    table: Mutex<Table>,
    pub(crate) errors: Arc<HandlerErrors>,
}

#[derive(Default)]
struct Table {
    /// The runtime-wide handler, and whether its trampoline is registered with the runtime.
    global: Option<Py<PyAny>>,
    global_installed: bool,
    /// Per container (by its id): the handler, `None` once removed (the trampoline stays
    /// registered and does nothing).
    per: HashMap<u64, Option<Py<PyAny>>>,
}

/// Which handler a trampoline looks up.
#[derive(Clone, Copy)]
enum Slot {
    Global,
    Container(u64),
}

impl Handlers {
    pub(crate) fn new(py: Python<'_>) -> PyResult<Py<Handlers>> {
        Py::new(py, Handlers { table: Mutex::default(), errors: Arc::default() })
    }

    /// Sets (or with `None` removes) the handler of container `id`; returns the trampoline to
    /// register with the runtime the first time.
    pub(crate) fn set(
        slf: &Bound<'_, Handlers>,
        id: u64,
        name: String,
        callback: Option<Py<PyAny>>,
    ) -> PyResult<Option<impl Fn(&stampede::Item) + Send + Sync + 'static>> {
        // The previous handler is released after the lock: dropping it may run Python code.
        let previous = slf.get().table.lock().per.insert(id, callback);
        if previous.is_some() {
            return Ok(None);
        }
        let weak = PyWeakrefReference::new(slf)?.unbind();
        Ok(Some(move |item: &stampede::Item| {
            dispatch(&weak, Slot::Container(id), &name, (item.ts,));
        }))
    }

    /// Sets (or removes) the runtime-wide handler; returns the trampoline to register the first
    /// time.
    pub(crate) fn set_global(
        slf: &Bound<'_, Handlers>,
        callback: Option<Py<PyAny>>,
    ) -> PyResult<Option<impl Fn(&str, &stampede::Item) + Send + Sync + 'static>> {
        let (previous, first) = {
            let mut table = slf.get().table.lock();
            (std::mem::replace(&mut table.global, callback), !std::mem::replace(&mut table.global_installed, true))
        };
        drop(previous); // after the lock: dropping a handler may run Python code
        if !first {
            return Ok(None);
        }
        let weak = PyWeakrefReference::new(slf)?.unbind();
        Ok(Some(move |name: &str, item: &stampede::Item| {
            dispatch(&weak, Slot::Global, name, (name.to_owned(), item.ts));
        }))
    }

    fn callback(&self, py: Python<'_>, slot: Slot) -> Option<Py<PyAny>> {
        let table = self.table.lock();
        let callback = match slot {
            Slot::Global => table.global.as_ref(),
            Slot::Container(id) => table.per.get(&id).and_then(Option::as_ref),
        };
        callback.map(|cb| cb.clone_ref(py))
    }
}

#[pymethods]
impl Handlers {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // try_lock: the collector runs with the GIL held, and no code holds this lock across a
        // call into Python; if it is held anyway, skipping a traversal only delays collection.
        if let Some(table) = self.table.try_lock() {
            for callback in table.global.iter().chain(table.per.values().flatten()) {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        // Released after the lock: dropping a handler may run Python code.
        let cleared: Vec<Py<PyAny>> = {
            let mut table = self.table.lock();
            let mut cleared: Vec<Py<PyAny>> = table.global.take().into_iter().collect();
            cleared.extend(table.per.values_mut().filter_map(Option::take));
            cleared
        };
        drop(cleared);
    }
}

/// Calls the handler in `slot` of the registry `weak` points to, if both still exist.
fn dispatch<A>(weak: &Py<PyWeakrefReference>, slot: Slot, name: &str, args: A)
where
    A: for<'py> pyo3::call::PyCallArgs<'py>,
{
    Python::try_attach(|py| {
        let Some(handlers) = weak.bind(py).upgrade_as::<Handlers>().ok().flatten() else { return };
        let handlers = handlers.get();
        if let Some(callback) = handlers.callback(py, slot) {
            invoke(py, &callback, args, || handlers.errors.record(Some(name)));
        }
    });
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
