//! `Stream`: the iterator of `ChannelInput.stream()` and `QueueInput.stream()`, which consumes
//! each item when the next one is asked for, and ends on a timeout or a closed source.

use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use stampede::{Selector, Timestamp};

use crate::connection::{ChannelInput, QueueInput};
use crate::errors::{Closed, NotAvailable};

pub(super) enum Source {
    Channel(Py<ChannelInput>, Selector),
    Queue(Py<QueueInput>),
}

/// The iterator returned by `ChannelInput.stream()` and `QueueInput.stream()`.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Stream {
    pub(super) source: Source,
    pub(super) timeout: Option<Duration>,
    pub(super) consume: bool,
    /// The item handed out last, to consume on the next step: (ts, queue seq).
    pub(super) pending: Mutex<Option<(Timestamp, Option<u64>)>>,
}

#[pymethods]
impl Stream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let pending = self.pending.lock().take();
        if let Some((ts, seq)) = pending {
            if let Err(e) = self.consume_pending(py, ts, seq) {
                return ended(py, e);
            }
        }
        let got = match &self.source {
            Source::Channel(conn, selector) => conn.get().get_item(py, *selector, self.timeout),
            Source::Queue(conn) => conn.get().get_item(py, self.timeout),
        };
        match got {
            Ok(item) => {
                if self.consume {
                    *self.pending.lock() = Some((item.ts, item.seq));
                }
                Ok(Some(item.into_py_any(py)?))
            }
            Err(e) => ended(py, e),
        }
    }
}

impl Stream {
    fn consume_pending(&self, py: Python<'_>, ts: Timestamp, seq: Option<u64>) -> PyResult<()> {
        match &self.source {
            Source::Channel(conn, Selector::Newest | Selector::NewestUnseen) => conn.get().consume_until_ts(py, ts),
            Source::Channel(conn, _) => conn.get().consume_ts(py, ts),
            Source::Queue(conn) => conn.get().consume_at(py, seq, ts),
        }
    }
}

/// A stream ends on a timeout (NotAvailable) or a closed source; other errors propagate.
pub(crate) fn ended<T>(py: Python<'_>, e: PyErr) -> PyResult<Option<T>> {
    if e.is_instance_of::<NotAvailable>(py) || e.is_instance_of::<Closed>(py) {
        Ok(None)
    } else {
        Err(e)
    }
}
