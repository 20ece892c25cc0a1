//! `Watch`: iterating over the name service's events (docs/NODES.md, "The name service";
//! `stampede::watch`), each a `WatchEvent`.

use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::wait;

/// The names under a prefix — those that exist, then each creation and destruction — and,
/// through a client, nodes up and down, as `WatchEvent`s. Iteration ends when nothing happens for
/// the watch's timeout, or the runtime closes.
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

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<WatchEvent>> {
        match wait::blocking(py, self.timeout, |slice| self.inner.lock().next_event(slice)) {
            Ok(event) => Ok(Some(WatchEvent::from(event))),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => Err(e),
            // Nothing within the timeout, or the runtime closed: the iteration ends.
            Err(_) => Ok(None),
        }
    }
}

/// One event of a watch: `kind` — what happened: "created", "destroyed", "node_up", "node_down"
/// or "lagged" —, `name` and `container_kind` ("channel" or "queue") of the channel or queue
/// created or destroyed, `node` (where it lives, or the node that came up or went down; `None`:
/// this process), and `missed` (how many changes a lagged watcher missed; `names()` tells the
/// present). Fields that do not apply are `None`.
#[pyclass(module = "stampede._stampede", frozen, eq)]
#[derive(PartialEq)]
pub(crate) struct WatchEvent {
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    name: Option<String>,
    #[pyo3(get)]
    container_kind: Option<String>,
    #[pyo3(get)]
    node: Option<String>,
    #[pyo3(get)]
    missed: Option<u64>,
}

#[pymethods]
impl WatchEvent {
    /// `WatchEvent(kind='created', name='camera/left', …)`: the fields that apply, each as Python
    /// writes it.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let text = [("name", &self.name), ("container_kind", &self.container_kind), ("node", &self.node)];
        let mut fields = vec![format!("kind={}", pyo3::types::PyString::new(py, self.kind).repr()?)];
        for (field, value) in text {
            if let Some(value) = value {
                fields.push(format!("{field}={}", pyo3::types::PyString::new(py, value).repr()?));
            }
        }
        fields.extend(self.missed.map(|missed| format!("missed={missed}")));
        Ok(format!("WatchEvent({})", fields.join(", ")))
    }
}

impl From<stampede::WatchEvent> for WatchEvent {
    fn from(event: stampede::WatchEvent) -> WatchEvent {
        use stampede::WatchEvent::*;
        let kind = event.kind();
        let none = WatchEvent { kind, name: None, container_kind: None, node: None, missed: None };
        match event {
            Created { name, container_kind, node } | Destroyed { name, container_kind, node } => {
                WatchEvent { name: Some(name), container_kind: Some(container_kind), node, ..none }
            }
            NodeUp { node } | NodeDown { node } => WatchEvent { node: Some(node), ..none },
            Lagged { missed } => WatchEvent { missed: Some(missed), ..none },
        }
    }
}
