//! The machinery both joins share: the hand-over of the Python connections' Rust connections,
//! and the [`Driver`] around a Rust join — its slices of waiting, its end once every input is
//! settled, the `on_incomplete` callback, its counters and its closing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{Error, Incomplete, JoinStats, Timestamp, INFINITY};

use crate::args::{self, At};
use crate::connection::ChannelInput;
use crate::errors::to_pyerr;
use crate::item::Item;
use crate::reclaim::{self, Handlers};
use crate::wait;

/// Reason of the `Closed` error once every input is settled everywhere and nothing is left.
const EXHAUSTED: &str = "the join is exhausted: every input channel is settled everywhere and nothing more can be \
                         released";
/// Reason of the `Closed` error after `close()`.
const JOIN_CLOSED: &str = "the join was closed";

/// What the driver needs of a Rust join.
pub(super) trait RustJoin: Send + 'static {
    type Output: Send;
    fn next(&mut self, timeout: Option<Duration>) -> stampede::Result<Self::Output>;
    fn stats(&self) -> JoinStats;
    fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static);
}

/// `RustJoin` for each Rust join (its output type given): its own methods, called by name.
macro_rules! rust_join {
    ($($join:ty => $output:ty),*) => {$(
        impl RustJoin for $join {
            type Output = $output;

            fn next(&mut self, timeout: Option<Duration>) -> stampede::Result<$output> {
                <$join>::next(self, timeout)
            }

            fn stats(&self) -> JoinStats {
                <$join>::stats(self).clone()
            }

            fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static) {
                <$join>::on_incomplete(self, handler);
            }
        }
    )*};
}
rust_join!(stampede::ExactJoin => stampede::Joined, stampede::ApproxJoin => stampede::Matched);

/// One partial, skipped or late timestamp, queued for the Python callback.
type Report = (Timestamp, Vec<bool>, Incomplete);

/// The Python-facing machinery both joins share.
pub(super) struct Driver<J> {
    /// The Rust join; `None` once closed.
    join: Mutex<Option<J>>,
    /// The counters at `close()`.
    final_stats: Mutex<JoinStats>,
    /// The input channels, in order (for settledness and messages).
    channels: Vec<stampede::Channel>,
    /// "a, b": the join's name in errors.
    name: String,
    reports: Arc<Mutex<Vec<Report>>>,
    callback: RwLock<Option<Py<PyAny>>>,
    /// The runtime's GC handlers and count of callback exceptions: the join keeps the runtime
    /// alive, so it holds them like every other handle (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
    /// This join's count of callback exceptions.
    callback_errors: AtomicU64,
}

/// The Rust connections taken from Python connections, with what the driver needs of them.
pub(super) struct HandedOver {
    pub(super) inputs: Vec<stampede::ChannelInput>,
    pub(super) channels: Vec<stampede::Channel>,
    pub(super) handlers: Py<Handlers>,
}

/// Checks what the Rust constructor checks, then takes the Rust connections out of `inputs`:
/// all of them or, on any failure, none. `settled_for`: the policy that needs every channel's
/// producer set closed, if any.
pub(super) fn hand_over(
    py: Python<'_>,
    inputs: &[Bound<'_, ChannelInput>],
    op: &'static str,
    settled_for: Option<&str>,
) -> PyResult<HandedOver> {
    let Some(first) = inputs.first() else {
        return Err(invalid(op, "", "no input connections".into()));
    };
    let handlers = first.get().handlers.clone_ref(py);
    if let Some(twice) = inputs.iter().enumerate().find(|(i, input)| inputs[..*i].iter().any(|e| e.is(*input))) {
        let reason = "the same input connection is given twice; a join reads each position through its own \
                      connection (attach another input to read a channel twice)";
        return Err(invalid(op, twice.1.get().name(), reason.into()));
    }
    let channels = inputs.iter().map(|i| i.get().channel()).collect::<PyResult<Vec<_>>>()?;
    if let Some(policy) = settled_for {
        for input in inputs {
            let input = input.get();
            if !wait::released(py, || input.producers_closed())? {
                return Err(invalid(
                    op,
                    input.name(),
                    format!(
                        "{policy} needs settledness: call close_producers() on this channel first (with an open \
                         producer set any task could still put a missing part)"
                    ),
                ));
            }
        }
    }
    let mut taken = Vec::with_capacity(inputs.len());
    for input in inputs {
        match input.get().take() {
            Ok(conn) => taken.push(conn),
            Err(e) => {
                for (input, conn) in inputs.iter().zip(taken) {
                    input.get().restore(conn);
                }
                return Err(to_pyerr(e));
            }
        }
    }
    Ok(HandedOver { inputs: taken, channels, handlers })
}

pub(super) fn invalid(op: &'static str, name: &str, reason: String) -> PyErr {
    to_pyerr(Error::InvalidArgument { op, name: name.to_owned(), reason })
}

impl<J: RustJoin> Driver<J> {
    pub(super) fn new(mut join: J, channels: Vec<stampede::Channel>, handlers: Py<Handlers>) -> Driver<J> {
        let reports: Arc<Mutex<Vec<Report>>> = Arc::default();
        let queue = reports.clone();
        join.on_incomplete(move |ts, present, what| queue.lock().push((ts, present.to_vec(), what)));
        let name = channels.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
        Driver {
            join: Mutex::new(Some(join)),
            final_stats: Mutex::default(),
            channels,
            name,
            reports,
            callback: RwLock::new(None),
            handlers,
            callback_errors: AtomicU64::new(0),
        }
    }

    /// A `next` or `stream` timeout (see `args::timeout`).
    pub(super) fn timeout(&self, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
        args::timeout(timeout, At { op: "join", name: &self.name })
    }

    fn closed(&self, reason: &'static str) -> Error {
        Error::Closed { name: self.name.clone(), reason }
    }

    /// The next output, waiting up to `timeout` (None: until there is one or the join ends).
    pub(super) fn next(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<J::Output> {
        wait::blocking(py, timeout, |slice| {
            let result = self.attempt(slice);
            self.deliver();
            result
        })
    }

    /// One slice of `next`. Settledness is read first and only grows: when every channel is
    /// settled everywhere, one attempt sees every item there will ever be.
    fn attempt(&self, slice: Option<Duration>) -> stampede::Result<J::Output> {
        let exhausted = self.channels.iter().all(|c| c.settled_below() == INFINITY);
        let mut guard = self.join.lock();
        let join = guard.as_mut().ok_or_else(|| self.closed(JOIN_CLOSED))?;
        match join.next(if exhausted { Some(Duration::ZERO) } else { slice }) {
            Err(Error::NotAvailable { .. }) if exhausted => Err(self.closed(EXHAUSTED)),
            other => other,
        }
    }

    /// Calls the Python callback with the reports queued so far (join lock not held).
    fn deliver(&self) {
        let reports = std::mem::take(&mut *self.reports.lock());
        if reports.is_empty() {
            return;
        }
        Python::try_attach(|py| {
            let Some(callback) = self.callback.read().as_ref().map(|c| c.clone_ref(py)) else { return };
            for (ts, present, what) in reports {
                reclaim::invoke(py, &callback, (ts, present, incomplete_name(what)), || {
                    self.callback_errors.fetch_add(1, Ordering::Relaxed);
                    self.handlers.get().errors.record(None);
                });
            }
        });
    }

    pub(super) fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = py.detach(|| match &*self.join.lock() {
            Some(join) => join.stats(),
            None => self.final_stats.lock().clone(),
        });
        let dict = PyDict::new(py);
        dict.set_item("complete", stats.complete)?;
        dict.set_item("partial", stats.partial)?;
        dict.set_item("skipped", stats.skipped)?;
        dict.set_item("late", stats.late)?;
        dict.set_item("handler_errors", self.callback_errors.load(Ordering::Relaxed))?;
        Ok(dict)
    }

    pub(super) fn on_incomplete(&self, callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        if let Some(callback) = &callback {
            if !callback.is_callable() {
                return Err(PyTypeError::new_err("on_incomplete takes a callable (ts, present, what) or None"));
            }
        }
        *self.callback.write() = callback.map(Bound::unbind);
        Ok(())
    }

    /// Reports the Python objects the join holds to the collector (a callback capturing its
    /// join must not make an uncollectable cycle).
    pub(super) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)?;
        // try_read: the collector holds the GIL and no code holds this lock across a call into
        // Python; if it is held anyway, skipping the callback only delays collection.
        if let Some(callback) = self.callback.try_read() {
            if let Some(callback) = &*callback {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    /// Drops the Rust join: its connections detach, their claims are released. Idempotent.
    pub(super) fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let join = self.join.lock().take();
            if let Some(join) = join {
                *self.final_stats.lock() = join.stats();
                drop(join);
            }
        });
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.channels.iter().map(|c| c.name().to_owned()).collect()
    }
}

fn incomplete_name(what: Incomplete) -> &'static str {
    match what {
        Incomplete::Partial => "partial",
        Incomplete::Skipped => "skipped",
        Incomplete::Late => "late",
    }
}

pub(super) fn items(py: Python<'_>, items: Vec<Option<stampede::Item>>) -> PyResult<Vec<Option<Py<Item>>>> {
    items.into_iter().map(|i| i.map(|i| Py::new(py, Item::from_channel(i))).transpose()).collect()
}

pub(super) fn clone_items(py: Python<'_>, items: &[Option<Py<Item>>]) -> Vec<Option<Py<Item>>> {
    items.iter().map(|i| i.as_ref().map(|i| i.clone_ref(py))).collect()
}
