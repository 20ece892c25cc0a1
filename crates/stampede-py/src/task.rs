//! `Task` (docs/SEMANTICS.md, "Terms" and "Virtual time, visibility, GC"): the holder of a virtual
//! time, and the way to attach connections.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{InputOptions, OutputOptions, Timestamp};

use crate::args::{self, At};
use crate::connection::{ChannelInput, ChannelOutput, QueueInput, QueueOutput};
use crate::container::{Channel, Queue};
use crate::reclaim::Handlers;
use crate::wait;

/// A task: virtual time, visibility, connections. Any thread or coroutine may drive it.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Task {
    pub(crate) inner: stampede::Task,
    /// The runtime's GC handlers (see [`Handlers`]: every handle that keeps the runtime alive
    /// holds them).
    pub(crate) handlers: Py<Handlers>,
}

impl Task {
    fn at(&self, op: &'static str) -> At<'static> {
        At { op, name: "task" }
    }
}

#[pymethods]
impl Task {
    /// The task's id, unique within its runtime.
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The task's virtual time.
    #[getter]
    fn virtual_time(&self) -> Timestamp {
        self.inner.virtual_time()
    }

    /// min(virtual_time, timestamps of items open on its input connections).
    #[getter]
    fn visibility(&self) -> Timestamp {
        self.inner.visibility()
    }

    /// Sets the virtual time; `v` must be >= visibility (else BelowVisibility). May reclaim.
    fn set_virtual_time(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = args::timestamp(v, "v", self.at("set_virtual_time"))?;
        wait::released(py, || self.inner.set_virtual_time(v))
    }

    /// A child task; `virtual_time` must be >= this task's visibility (default: equal to it).
    #[pyo3(signature = (virtual_time=None, *, name=None))]
    fn spawn(&self, py: Python<'_>, virtual_time: Option<&Bound<'_, PyAny>>, name: Option<&str>) -> PyResult<Task> {
        let virtual_time: Option<Timestamp> =
            virtual_time.map(|v| args::timestamp(v, "virtual_time", self.at("spawn"))).transpose()?;
        let inner = wait::released(py, || {
            let task = self.inner.spawn(virtual_time.unwrap_or_else(|| self.inner.visibility()))?;
            named(task, name)
        })?;
        Ok(Task { inner, handlers: self.handlers.clone_ref(py) })
    }

    /// Its label for tools (graph, dashboard), or None; set with `name=` or assign it.
    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name()
    }

    #[setter]
    fn set_name(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        wait::released(py, || self.inner.set_name(name))
    }

    /// Attaches an input connection to a Channel (ChannelInput) or a Queue (QueueInput). A
    /// channel's input may bound how far it falls behind: `max_lag_items` unseen items, none more
    /// than `max_lag_ts` below the newest; beyond, the oldest unseen are consumed for it and
    /// counted as skipped. `prefetch` ("off", "newest" or "auto", the default) says what the
    /// node pushes ahead of a remote channel input's gets (docs/PREFETCH.md).
    #[pyo3(signature = (container, *, max_lag_items=None, max_lag_ts=None, prefetch=None))]
    fn attach_input(
        &self,
        py: Python<'_>,
        container: &Bound<'_, PyAny>,
        max_lag_items: Option<&Bound<'_, PyAny>>,
        max_lag_ts: Option<&Bound<'_, PyAny>>,
        prefetch: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        if let Ok(channel) = container.cast::<Channel>() {
            let channel = channel.get();
            let at = At { op: "attach_input", name: channel.inner.name() };
            let options = InputOptions {
                max_lag_items: args::count(max_lag_items, "max_lag_items", at)?,
                max_lag_ts: args::count(max_lag_ts, "max_lag_ts", at)?,
                prefetch: args::prefetch(prefetch, at)?,
            };
            let inner = wait::released(py, || self.inner.attach_input_with(&channel.inner, options))?;
            return ChannelInput::new(inner, channel.handlers.clone_ref(py)).into_py_any(py);
        }
        if max_lag_items.is_some_and(|o| !o.is_none()) || max_lag_ts.is_some_and(|o| !o.is_none()) {
            return Err(PyTypeError::new_err(
                "max_lag_items and max_lag_ts bound a Channel's input: a Queue's items go to one reader each",
            ));
        }
        if prefetch.is_some() {
            return Err(PyTypeError::new_err("prefetch is a Channel input's: a Queue's items go to one reader each"));
        }
        if let Ok(queue) = container.cast::<Queue>() {
            let queue = queue.get();
            let inner = wait::released(py, || self.inner.attach_input(&queue.inner))?;
            return QueueInput::new(inner, queue.handlers.clone_ref(py)).into_py_any(py);
        }
        Err(not_a_container(container))
    }

    /// Attaches an output connection to a Channel (ChannelOutput) or a Queue (QueueOutput). A
    /// channel's output to a node may send up to `put_window` puts without waiting for their
    /// replies (0, the default: every put waits); their errors are raised by the next `put` or
    /// `flush` (docs/NODES.md, "Pipelined puts").
    #[pyo3(signature = (container, *, put_window=None))]
    fn attach_output(
        &self,
        py: Python<'_>,
        container: &Bound<'_, PyAny>,
        put_window: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if let Ok(channel) = container.cast::<Channel>() {
            let channel = channel.get();
            let at = At { op: "attach_output", name: channel.inner.name() };
            let options = OutputOptions { put_window: args::count(put_window, "put_window", at)?.unwrap_or(0) };
            let inner = wait::released(py, || self.inner.attach_output_with(&channel.inner, options))?;
            let pipelined = options.put_window > 0;
            return ChannelOutput::new(inner, channel.handlers.clone_ref(py), pipelined).into_py_any(py);
        }
        if put_window.is_some_and(|o| !o.is_none()) {
            return Err(PyTypeError::new_err(
                "put_window is a Channel output's: a Queue's puts wait for their replies",
            ));
        }
        if let Ok(queue) = container.cast::<Queue>() {
            let queue = queue.get();
            let inner = wait::released(py, || self.inner.attach_output(&queue.inner))?;
            return QueueOutput::new(inner, queue.handlers.clone_ref(py)).into_py_any(py);
        }
        Err(not_a_container(container))
    }

    /// Ends the task now: its connections are detached (later use raises Closed) and its claim
    /// on ts_min is released.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        wait::released(py, || {
            self.inner.close();
            Ok(())
        })
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
        format!("{:?}", self.inner)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
    }
}

fn not_a_container(obj: &Bound<'_, PyAny>) -> PyErr {
    let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    PyTypeError::new_err(format!("expected a Channel or a Queue, not {type_name}"))
}

/// `task` labelled `name` (if given); a refused name closes the task it was meant for.
pub(crate) fn named(task: stampede::Task, name: Option<&str>) -> stampede::Result<stampede::Task> {
    if let Some(name) = name {
        if let Err(e) = task.set_name(name) {
            task.close();
            return Err(e);
        }
    }
    Ok(task)
}
