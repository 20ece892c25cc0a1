//! `Runtime`, `Channel` and `Queue` (SPEC §15): the embedded node, its names and containers.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use stampede::{Limits, Stats, Timestamp};

use crate::errors::IntoPyResult;
use crate::reclaim::{self, HandlerErrors};
use crate::task::Task;
use crate::wait;

/// An embedded Stampede node in this process. Several may coexist; they share nothing.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Runtime {
    inner: stampede::Runtime,
    /// Exceptions raised by this runtime's GC handlers.
    errors: Arc<HandlerErrors>,
}

#[pymethods]
impl Runtime {
    #[new]
    fn new() -> Runtime {
        Runtime { inner: stampede::Runtime::new(), errors: Arc::default() }
    }

    /// Creates a channel; `capacity` (items) and `max_bytes` bound it, None = unbounded.
    #[pyo3(signature = (name, capacity=None, max_bytes=None))]
    fn create_channel(&self, name: &str, capacity: Option<usize>, max_bytes: Option<usize>) -> PyResult<Channel> {
        let inner = self.inner.create_channel(name, limits(capacity, max_bytes)).py()?;
        Ok(Channel { inner, errors: self.errors.clone() })
    }

    /// Creates a queue; `capacity` (items) and `max_bytes` bound it, None = unbounded.
    #[pyo3(signature = (name, capacity=None, max_bytes=None))]
    fn create_queue(&self, name: &str, capacity: Option<usize>, max_bytes: Option<usize>) -> PyResult<Queue> {
        let inner = self.inner.create_queue(name, limits(capacity, max_bytes)).py()?;
        Ok(Queue { inner, errors: self.errors.clone() })
    }

    /// The channel or queue called `name` (NotFound otherwise).
    fn lookup(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        Ok(match self.inner.lookup(name).py()? {
            stampede::Container::Channel(inner) => {
                Channel { inner, errors: self.errors.clone() }.into_pyobject(py)?.into_any().unbind()
            }
            stampede::Container::Queue(inner) => {
                Queue { inner, errors: self.errors.clone() }.into_pyobject(py)?.into_any().unbind()
            }
        })
    }

    /// Names of channels and queues starting with `prefix`, sorted.
    #[pyo3(signature = (prefix=""))]
    fn names(&self, prefix: &str) -> Vec<String> {
        self.inner.names(prefix)
    }

    /// The current global ts_min (an int; INFINITY when nothing holds it back).
    #[getter]
    fn ts_min(&self) -> Timestamp {
        self.inner.ts_min()
    }

    /// Forces a GC pass now; returns the number of items reclaimed.
    fn collect(&self, py: Python<'_>) -> PyResult<usize> {
        wait::released(py, || Ok(self.inner.collect()))
    }

    /// A root task at `virtual_time` (INFINITY allowed; must be >= ts_min).
    #[pyo3(signature = (virtual_time=0))]
    fn task(&self, py: Python<'_>, virtual_time: Timestamp) -> PyResult<Task> {
        let inner = wait::released(py, || self.inner.task(virtual_time))?;
        Ok(Task { inner })
    }

    /// Registers a GC handler for every channel and queue: `callback(name, ts)`.
    fn on_reclaim(&self, callback: Py<PyAny>) {
        self.inner.on_reclaim(reclaim::global(callback, self.errors.clone()));
    }

    /// Node-wide counters: ts_min, containers, claims, handler_errors.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.stats();
        let dict = PyDict::new(py);
        dict.set_item("ts_min", stats.ts_min)?;
        dict.set_item("containers", stats.containers)?;
        dict.set_item("claims", stats.claims)?;
        dict.set_item("handler_errors", self.errors.total())?;
        Ok(dict)
    }

    /// Ends the node: channels and queues are destroyed (blocked calls raise Closed), tasks are
    /// closed. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        wait::released(py, || {
            self.inner.close();
            Ok(())
        })
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let stats = self.inner.stats();
        format!("Runtime(containers={}, ts_min={}, closed={})", stats.containers, stats.ts_min, self.inner.is_closed())
    }
}

/// A named channel of timestamped items (at most one per timestamp).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Channel {
    pub(crate) inner: stampede::Channel,
    errors: Arc<HandlerErrors>,
}

#[pymethods]
impl Channel {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Most items stored at once (None = unbounded).
    #[getter]
    fn capacity(&self) -> Option<usize> {
        self.inner.limits().capacity
    }

    /// Most payload bytes stored at once (None = unbounded).
    #[getter]
    fn max_bytes(&self) -> Option<usize> {
        self.inner.limits().bytes_max
    }

    /// Counters now: live_items, live_bytes, reclaimed, puts, gets, inputs, outputs, tombstones,
    /// claim, ts_min, handler_errors.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.inner.stats(), self.errors.of(self.inner.name()))
    }

    /// Timestamps of the items stored now, in order.
    fn timestamps(&self) -> Vec<Timestamp> {
        self.inner.timestamps()
    }

    /// Registers a GC handler: `callback(ts)` for each item this channel reclaims.
    fn on_reclaim(&self, callback: Py<PyAny>) {
        let name = self.inner.name().to_owned();
        self.inner.on_reclaim(reclaim::per_container(name, callback, self.errors.clone()));
    }

    /// Destroys the channel: items are reclaimed, the name is freed, operations raise Closed.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        wait::released(py, || self.inner.destroy())
    }

    fn __repr__(&self) -> String {
        format!("Channel({:?})", self.inner.name())
    }
}

/// A named FIFO queue of timestamped items; each item goes to exactly one getter.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Queue {
    pub(crate) inner: stampede::Queue,
    errors: Arc<HandlerErrors>,
}

#[pymethods]
impl Queue {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn capacity(&self) -> Option<usize> {
        self.inner.limits().capacity
    }

    #[getter]
    fn max_bytes(&self) -> Option<usize> {
        self.inner.limits().bytes_max
    }

    /// Counters now (as `Channel.stats()`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.inner.stats(), self.errors.of(self.inner.name()))
    }

    /// Registers a GC handler: `callback(ts)` for each item the queue reclaims (when consumed).
    fn on_reclaim(&self, callback: Py<PyAny>) {
        let name = self.inner.name().to_owned();
        self.inner.on_reclaim(reclaim::per_container(name, callback, self.errors.clone()));
    }

    /// Destroys the queue: items are reclaimed, operations raise Closed.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        wait::released(py, || self.inner.destroy())
    }

    fn __repr__(&self) -> String {
        format!("Queue({:?})", self.inner.name())
    }
}

fn limits(capacity: Option<usize>, max_bytes: Option<usize>) -> Limits {
    Limits { capacity, bytes_max: max_bytes }
}

fn stats_dict<'py>(py: Python<'py>, stats: &Stats, handler_errors: u64) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("live_items", stats.live_items)?;
    dict.set_item("live_bytes", stats.live_bytes)?;
    dict.set_item("reclaimed", stats.reclaimed)?;
    dict.set_item("puts", stats.puts)?;
    dict.set_item("gets", stats.gets)?;
    dict.set_item("inputs", stats.inputs)?;
    dict.set_item("outputs", stats.outputs)?;
    dict.set_item("tombstones", stats.tombstones)?;
    dict.set_item("claim", stats.claim)?;
    dict.set_item("ts_min", stats.ts_min)?;
    dict.set_item("handler_errors", handler_errors)?;
    Ok(dict)
}
