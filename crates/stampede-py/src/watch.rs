//! `Watch`: iterating over the name service's events (docs/NODES.md, "The name service";
//! `stampede::watch`).

use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use stampede::WatchEvent;

use crate::wait;

/// The names under a prefix — those that exist, then each creation and destruction — and,
/// through a client, nodes up and down. Each event is a dict: `event` ("created", "destroyed",
/// "node_up", "node_down", "lagged"), and `name`, `kind`, `node` or `missed`. Iteration ends
/// when nothing happens for the watch's timeout, or the runtime closes.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Watch {
    inner: Mutex<stampede::Watch>,
    timeout: Option<Duration>,
}

impl Watch {
    pub(crate) fn new(inner: stampede::Watch, timeout: Option<Duration>) -> Watch {
        Watch { inner: Mutex::new(inner), timeout }
    }
}

#[pymethods]
impl Watch {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match wait::blocking(py, self.timeout, |slice| self.inner.lock().next_event(slice)) {
            Ok(event) => Ok(Some(event_dict(py, event)?)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => Err(e),
            // Nothing within the timeout, or the runtime closed: the iteration ends.
            Err(_) => Ok(None),
        }
    }
}

fn event_dict(py: Python<'_>, event: WatchEvent) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    let what = match &event {
        WatchEvent::Created { .. } => "created",
        WatchEvent::Destroyed { .. } => "destroyed",
        WatchEvent::NodeUp { .. } => "node_up",
        WatchEvent::NodeDown { .. } => "node_down",
        WatchEvent::Lagged { .. } => "lagged",
    };
    dict.set_item("event", what)?;
    match event {
        WatchEvent::Created { name, kind, node } | WatchEvent::Destroyed { name, kind, node } => {
            dict.set_item("name", name)?;
            dict.set_item("kind", kind)?;
            dict.set_item("node", node)?;
        }
        WatchEvent::NodeUp { node } | WatchEvent::NodeDown { node } => dict.set_item("node", node)?,
        WatchEvent::Lagged { missed } => dict.set_item("missed", missed)?,
    }
    Ok(dict)
}
