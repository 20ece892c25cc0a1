//! Queue connections: `QueueOutput.put` (blocking and asyncio) and `QueueInput.get` /
//! `consume` / `stream`, with a channel connection's call shapes: a refcount must be None and a
//! selector `OLDEST`, since a queue hands each item to exactly one getter in FIFO order.

use std::time::Duration;

use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use stampede::{Error, Payload, Timestamp};

use crate::aio::{Op, Pending};
use crate::args::{self, At};
use crate::connection::stream::{Source, Stream};
use crate::connection::{connection_class, queue_selector, PutArgs, Slot};
use crate::errors::to_pyerr;
use crate::item::Item;
use crate::reclaim::Handlers;
use crate::wait;

/// A task's output connection to a queue.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct QueueOutput {
    slot: Slot<stampede::QueueOutput>,
    /// The runtime's GC handlers (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
}

impl QueueOutput {
    pub(crate) fn new(conn: stampede::QueueOutput, handlers: Py<Handlers>) -> QueueOutput {
        let name = conn.queue().name().to_owned();
        QueueOutput { slot: Slot::new(conn, &name), handlers }
    }

    /// Converts a put's arguments (refusing a refcount) and copies its data in (once).
    fn prepare(
        &self,
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        refcount: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
    ) -> PyResult<PutArgs<stampede::QueueOutput>> {
        if refcount.is_some_and(|r| !r.is_none()) {
            return Err(to_pyerr(Error::InvalidArgument {
                op: "put",
                name: self.slot.name.clone(),
                reason: "a queue item goes to exactly one getter and is reclaimed when it consumes the item: \
                         refcount must be None"
                    .into(),
            }));
        }
        self.slot.put_args(
            ts,
            data,
            timeout,
            codec,
            (stampede::QueueOutput::check_fits, stampede::QueueOutput::copy_in),
        )
    }
}

connection_class! {
    QueueOutput;
    /// The queue's name.
    fn name;
    /// Detaches the connection. Idempotent.
    fn detach;

    /// Appends `data` at `ts` (duplicates allowed; ts >= the task's visibility). The call shape
    /// is a channel output's; `refcount` must be None (a queue item goes to exactly one getter
    /// and is reclaimed when that getter consumes it). `timeout` bounds the wait for room in a
    /// bounded queue.
    #[pyo3(signature = (ts, data, refcount=None, timeout=None, codec=None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        refcount: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
    ) -> PyResult<()> {
        let PutArgs { conn, ts, payload, timeout } = self.prepare(ts, data, refcount, timeout, codec)?;
        wait::blocking(py, timeout, |slice| conn.put(ts, payload.clone(), slice))
    }

    /// The asyncio form of `put` (cancellation-safe, as `ChannelOutput.put_async`).
    #[pyo3(signature = (ts, data, refcount=None, timeout=None, codec=None))]
    fn put_async<'py>(
        &self,
        py: Python<'py>,
        ts: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        refcount: Option<&Bound<'py, PyAny>>,
        timeout: Option<&Bound<'py, PyAny>>,
        codec: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let PutArgs { conn, ts, payload, timeout } = self.prepare(ts, data, refcount, timeout, codec)?;
        Pending::start(py, Op::QueuePut(conn, ts, payload), timeout)
    }
}

/// A task's input connection to a queue.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct QueueInput {
    slot: Slot<stampede::QueueInput>,
    /// The runtime's GC handlers (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
}

impl QueueInput {
    pub(crate) fn new(conn: stampede::QueueInput, handlers: Py<Handlers>) -> QueueInput {
        let name = conn.queue().name().to_owned();
        QueueInput { slot: Slot::new(conn, &name), handlers }
    }

    pub(super) fn get_item(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Item> {
        let conn = self.slot.get()?;
        let item = wait::blocking(py, timeout, |slice| conn.get(slice))?;
        Ok(Item::from_queue(item))
    }

    fn at(&self, op: &'static str) -> At<'_> {
        At { op, name: &self.slot.name }
    }

    pub(super) fn consume_at(&self, py: Python<'_>, seq: Option<u64>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || match seq {
            Some(seq) => conn
                .consume(&stampede::QueueItem { seq, item: stampede::Item { ts, payload: Payload::from(Vec::new()) } }),
            None => conn.consume_ts(ts),
        })
    }
}

connection_class! {
    QueueInput;
    /// The queue's name.
    fn name;
    /// Detaches the connection; items it still holds open go back to the head of the queue.
    fn detach;

    /// Takes the oldest waiting item; it stays open on this connection (holding the task's
    /// visibility at its timestamp) until consumed. The call shape is a channel input's; the
    /// selector must be `OLDEST` (the default). Raises NotAvailable when the timeout expires.
    #[pyo3(signature = (selector=None, timeout=None))]
    fn get(
        &self,
        py: Python<'_>,
        selector: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Item> {
        let at = self.at("get");
        queue_selector(selector, at)?;
        self.get_item(py, args::timeout(timeout, at)?)
    }

    /// The asyncio form of `get` (cancellation-safe, as `ChannelInput.get_async`).
    #[pyo3(signature = (selector=None, timeout=None))]
    fn get_async<'py>(
        &self,
        py: Python<'py>,
        selector: Option<&Bound<'py, PyAny>>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let at = self.at("get");
        queue_selector(selector, at)?;
        let timeout = args::timeout(timeout, at)?;
        Pending::start(py, Op::QueueGet(self.slot.get()?), timeout)
    }

    /// Consumes an item this connection got — given as the Item (exact) or as its timestamp
    /// (the oldest open item at that timestamp); the queue reclaims it.
    fn consume(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(item) = item.cast::<Item>() {
            let item = item.get();
            return self.consume_at(py, item.seq, item.ts);
        }
        let ts = args::timestamp(item, "item", self.at("consume")).map_err(|e| {
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err("consume() takes an Item or an int timestamp")
            } else {
                e
            }
        })?;
        self.consume_at(py, None, ts)
    }

    /// An iterator of items, each consumed (with `consume(item)`) when the next one is asked for
    /// if `consume=True`. The call shape is a channel input's (the selector must be `OLDEST`).
    /// Ends when no item arrives within `timeout` or the queue is closed.
    #[pyo3(signature = (selector=None, timeout=None, consume=true))]
    fn stream(
        slf: &Bound<'_, Self>,
        selector: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        consume: bool,
    ) -> PyResult<Stream> {
        let at = slf.get().at("stream");
        queue_selector(selector, at)?;
        Ok(Stream {
            source: Source::Queue(slf.clone().unbind()),
            timeout: args::timeout(timeout, at)?,
            consume,
            pending: Mutex::new(None),
        })
    }
}
