//! Connections (SPEC §2, §5, §15): `ChannelOutput.put`, `ChannelInput.get` / `get_range` /
//! `consume` / `consume_until` / `stream`, and the queue forms, blocking and asyncio.
//!
//! Each Python connection holds its Rust connection behind an `Arc`, so several Python threads
//! may use one connection at once with the GIL released. `detach()` drops the Python side's
//! reference: the Rust connection detaches at once, or when the calls still running on it return;
//! every later call raises `Closed` ("the connection was detached"). Building a join
//! (`crate::join`) *takes* the Rust connection of a `ChannelInput` the same way, for good: later
//! calls raise `Closed` ("handed over to a join").
//!
//! asyncio: `get_async` / `put_async` run the runtime's own async operations on a small tokio
//! runtime (pyo3-async-runtimes) and complete an asyncio future. A waiting coroutine holds no
//! thread, and cancelling it drops the Rust future before it takes an item, so a cancelled queue
//! get never swallows an item (which an executor thread blocked in `get` would).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use stampede::{Error, Payload, PutOptions, Selector, Timestamp};

use crate::errors::{to_pyerr, Closed, IntoPyResult, NotAvailable};
use crate::item::Item;
use crate::payload::to_payload;
use crate::reclaim::HandlerErrors;
use crate::wait;

/// A get selector other than an exact timestamp: `OLDEST`, `NEWEST`, `OLDEST_UNSEEN`,
/// `NEWEST_UNSEEN`.
#[pyclass(
    module = "stampede._stampede",
    name = "Selector",
    eq,
    frozen,
    from_py_object,
    rename_all = "SCREAMING_SNAKE_CASE"
)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PySelector {
    Oldest,
    Newest,
    OldestUnseen,
    NewestUnseen,
}

/// An exact timestamp (int) or a `Selector`.
fn selector(obj: &Bound<'_, PyAny>) -> PyResult<Selector> {
    if let Ok(s) = obj.extract::<PySelector>() {
        return Ok(match s {
            PySelector::Oldest => Selector::Oldest,
            PySelector::Newest => Selector::Newest,
            PySelector::OldestUnseen => Selector::OldestUnseen,
            PySelector::NewestUnseen => Selector::NewestUnseen,
        });
    }
    obj.extract::<Timestamp>().map(Selector::At).map_err(|_| {
        PyTypeError::new_err("selector must be an int timestamp or OLDEST, NEWEST, OLDEST_UNSEEN, NEWEST_UNSEEN")
    })
}

/// The Rust connection of a Python connection, until it is detached or handed over to a join.
struct Slot<T> {
    /// The connection, or why it is gone (the reason of the `Closed` error later calls raise).
    conn: RwLock<Result<Arc<T>, &'static str>>,
    name: String,
}

/// Why a connection handed over to a join refuses every later call.
const HANDED_OVER: &str = "the connection was handed over to a join (use the join; close it to detach)";

impl<T: Send + Sync> Slot<T> {
    fn new(conn: T, name: &str) -> Slot<T> {
        Slot { conn: RwLock::new(Ok(Arc::new(conn))), name: name.to_owned() }
    }

    fn get(&self) -> PyResult<Arc<T>> {
        self.connection().map_err(to_pyerr)
    }

    fn connection(&self) -> stampede::Result<Arc<T>> {
        match &*self.conn.read() {
            Ok(conn) => Ok(conn.clone()),
            Err(reason) => Err(Error::Closed { name: self.name.clone(), reason }),
        }
    }

    fn detach(&self, py: Python<'_>) {
        let conn = {
            let mut slot = self.conn.write();
            match &*slot {
                Ok(_) => std::mem::replace(&mut *slot, Err(stampede::DETACHED)).ok(),
                Err(_) => None, // detached already, or owned by a join now
            }
        };
        // Detaching may release claims and run GC handlers: do it without the GIL.
        py.detach(move || drop(conn));
    }

    /// Takes the Rust connection out for good: later calls fail `Closed` with `reason`. Fails
    /// (changing nothing) if the connection is gone already or a call on another thread still
    /// uses it.
    fn take(&self, reason: &'static str) -> stampede::Result<T> {
        let mut slot = self.conn.write();
        let conn = match std::mem::replace(&mut *slot, Err(reason)) {
            Ok(conn) => conn,
            Err(gone) => {
                *slot = Err(gone);
                return Err(Error::Closed { name: self.name.clone(), reason: gone });
            }
        };
        Arc::try_unwrap(conn).map_err(|conn| {
            *slot = Ok(conn);
            Error::InvalidArgument {
                op: "join",
                name: self.name.clone(),
                reason: "the connection is in use by a call on another thread; a join needs it to itself".into(),
            }
        })
    }

    /// Puts back a connection [`take`](Self::take) took (when building a join failed early).
    fn restore(&self, conn: T) {
        *self.conn.write() = Ok(Arc::new(conn));
    }
}

// ---- channel output ------------------------------------------------------------------------

/// A task's output connection to a channel.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ChannelOutput {
    slot: Slot<stampede::ChannelOutput>,
}

impl ChannelOutput {
    pub(crate) fn new(conn: stampede::ChannelOutput) -> ChannelOutput {
        let name = conn.channel().name().to_owned();
        ChannelOutput { slot: Slot::new(conn, &name) }
    }
}

#[pymethods]
impl ChannelOutput {
    /// The channel's name.
    #[getter]
    fn name(&self) -> &str {
        &self.slot.name
    }

    /// Puts `data` (bytes-like, str, NumPy array or Item) at `ts`. Copies the data once.
    /// `refcount`: consumptions after which the item is reclaimed. `timeout` bounds the wait
    /// for room in a full bounded channel (None = wait, 0 = raise Full at once).
    #[pyo3(signature = (ts, data, refcount=None, timeout=None, codec=None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        data: &Bound<'_, PyAny>,
        refcount: Option<u32>,
        timeout: Option<f64>,
        codec: Option<&str>,
    ) -> PyResult<()> {
        let conn = self.slot.get()?;
        let payload = to_payload(data, codec, &|parts: &[&[u8]]| conn.copy_in(parts))?;
        let timeout = wait::timeout(timeout)?;
        wait::blocking(py, timeout, |slice| conn.put_with(ts, payload.clone(), PutOptions { refcount, timeout: slice }))
    }

    /// The asyncio form of `put`: an awaitable that waits for room without blocking the loop.
    #[pyo3(signature = (ts, data, refcount=None, timeout=None, codec=None))]
    fn put_async<'py>(
        &self,
        py: Python<'py>,
        ts: Timestamp,
        data: &Bound<'py, PyAny>,
        refcount: Option<u32>,
        timeout: Option<f64>,
        codec: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.slot.get()?;
        let payload = to_payload(data, codec, &|parts: &[&[u8]]| conn.copy_in(parts))?;
        let timeout = wait::timeout(timeout)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            conn.put_async(ts, payload, PutOptions { refcount, timeout }).await.py()
        })
    }

    /// Demand feedback (SPEC §3): the lowest timestamp any current or future consumer may still
    /// get if it were put now. A source may skip producing below it. On a "history" channel this
    /// is ts_min; on a "current_readers" channel the minimum over the readers' `consume_until`
    /// floors (+1), INFINITY with no reader.
    fn demand(&self) -> PyResult<Timestamp> {
        Ok(self.slot.get()?.demand())
    }

    /// Detaches the connection. Idempotent.
    fn detach(&self, py: Python<'_>) {
        self.slot.detach(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.detach(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("ChannelOutput({:?})", self.slot.name)
    }
}

// ---- channel input -------------------------------------------------------------------------

/// A task's input connection to a channel: per item, unseen → open → consumed.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ChannelInput {
    slot: Slot<stampede::ChannelInput>,
    /// The runtime's count of callback exceptions (a join's `on_incomplete` reports there).
    pub(crate) errors: Arc<HandlerErrors>,
}

impl ChannelInput {
    pub(crate) fn new(conn: stampede::ChannelInput, errors: Arc<HandlerErrors>) -> ChannelInput {
        let name = conn.channel().name().to_owned();
        ChannelInput { slot: Slot::new(conn, &name), errors }
    }

    /// The channel, while the connection is usable.
    pub(crate) fn channel(&self) -> PyResult<stampede::Channel> {
        Ok(self.slot.get()?.channel().clone())
    }

    /// Whether the channel's producer set is closed.
    pub(crate) fn producers_closed(&self) -> stampede::Result<bool> {
        Ok(self.slot.connection()?.channel().producers_closed())
    }

    /// Hands the Rust connection over to a join; this Python connection then raises `Closed`.
    pub(crate) fn take(&self) -> stampede::Result<stampede::ChannelInput> {
        self.slot.take(HANDED_OVER)
    }

    /// Gives back a connection [`take`](Self::take) took, when building the join failed early.
    pub(crate) fn restore(&self, conn: stampede::ChannelInput) {
        self.slot.restore(conn);
    }

    fn get_item(&self, py: Python<'_>, selector: Selector, timeout: Option<Duration>) -> PyResult<Item> {
        let conn = self.slot.get()?;
        let item = wait::blocking(py, timeout, |slice| conn.get(selector, slice))?;
        Ok(Item::from_channel(item))
    }
}

#[pymethods]
impl ChannelInput {
    /// The channel's name.
    #[getter]
    pub(crate) fn name(&self) -> &str {
        &self.slot.name
    }

    /// Gets an item by exact timestamp or selector; it becomes open on this connection.
    /// `timeout`: None waits, 0 never waits, seconds otherwise. Raises NotAvailable (with
    /// `previous` and `next`), AlreadyConsumed, Reclaimed, InvalidTimestamp, Closed.
    #[pyo3(signature = (selector, timeout=None))]
    fn get(&self, py: Python<'_>, selector: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Item> {
        let selector = self::selector(selector)?;
        self.get_item(py, selector, wait::timeout(timeout)?)
    }

    /// The asyncio form of `get`: an awaitable that does not block the event loop.
    #[pyo3(signature = (selector, timeout=None))]
    fn get_async<'py>(
        &self,
        py: Python<'py>,
        selector: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.slot.get()?;
        let selector = self::selector(selector)?;
        let timeout = wait::timeout(timeout)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            conn.get_async(selector, timeout).await.map(Item::from_channel).py()
        })
    }

    /// Every present item with t0 <= ts <= t1 not consumed on this connection, in timestamp
    /// order; each becomes open. Never waits.
    fn get_range(&self, py: Python<'_>, t0: Timestamp, t1: Timestamp) -> PyResult<Vec<Item>> {
        let conn = self.slot.get()?;
        let items = wait::released(py, || conn.get_range(t0, t1))?;
        Ok(items.into_iter().map(Item::from_channel).collect())
    }

    /// Marks the item at `ts` consumed on this connection.
    fn consume(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume(ts))
    }

    /// Marks every present item <= ts consumed on this connection, unseen ones included.
    fn consume_until(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume_until(ts))
    }

    /// An iterator of items: each step gets with `selector` (a wildcard) and `timeout`.
    ///
    /// With `consume=True`, each item is consumed when the iterator is asked for the next one
    /// (so after the loop body ran): with `NEWEST_UNSEEN` or `NEWEST` by `consume_until(item.ts)`
    /// (the frames skipped before it are garbage too), with `OLDEST_UNSEEN` or `OLDEST` by
    /// `consume(item.ts)` (only that item). The last item of a loop left with `break` stays open
    /// until consumed or detached. The iteration ends (StopIteration) when no item arrives within
    /// `timeout`, or when the channel, connection, task or runtime is closed.
    #[pyo3(signature = (selector=None, timeout=None, consume=true))]
    fn stream(
        slf: Py<Self>,
        selector: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
        consume: bool,
    ) -> PyResult<Stream> {
        let selector = match selector {
            None => Selector::OldestUnseen,
            Some(s) => self::selector(s)?,
        };
        if matches!(selector, Selector::At(_)) {
            return Err(PyValueError::new_err("stream() takes a wildcard selector, not an exact timestamp"));
        }
        Ok(Stream {
            source: Source::Channel(slf, selector),
            timeout: wait::timeout(timeout)?,
            consume,
            pending: Mutex::new(None),
        })
    }

    /// Detaches the connection: all its claims are dropped. Idempotent.
    fn detach(&self, py: Python<'_>) {
        self.slot.detach(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.detach(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("ChannelInput({:?})", self.slot.name)
    }
}

// ---- queue output --------------------------------------------------------------------------

/// A task's output connection to a queue.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct QueueOutput {
    slot: Slot<stampede::QueueOutput>,
}

impl QueueOutput {
    pub(crate) fn new(conn: stampede::QueueOutput) -> QueueOutput {
        let name = conn.queue().name().to_owned();
        QueueOutput { slot: Slot::new(conn, &name) }
    }
}

#[pymethods]
impl QueueOutput {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.slot.name
    }

    /// Appends `data` at `ts` (duplicates allowed; ts >= the task's visibility). `timeout` bounds
    /// the wait for room in a bounded queue.
    #[pyo3(signature = (ts, data, timeout=None, codec=None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        codec: Option<&str>,
    ) -> PyResult<()> {
        let conn = self.slot.get()?;
        let payload = to_payload(data, codec, &|parts: &[&[u8]]| conn.copy_in(parts))?;
        let timeout = wait::timeout(timeout)?;
        wait::blocking(py, timeout, |slice| conn.put(ts, payload.clone(), slice))
    }

    /// The asyncio form of `put`.
    #[pyo3(signature = (ts, data, timeout=None, codec=None))]
    fn put_async<'py>(
        &self,
        py: Python<'py>,
        ts: Timestamp,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        codec: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.slot.get()?;
        let payload = to_payload(data, codec, &|parts: &[&[u8]]| conn.copy_in(parts))?;
        let timeout = wait::timeout(timeout)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move { conn.put_async(ts, payload, timeout).await.py() })
    }

    /// Detaches the connection. Idempotent.
    fn detach(&self, py: Python<'_>) {
        self.slot.detach(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.detach(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("QueueOutput({:?})", self.slot.name)
    }
}

// ---- queue input ---------------------------------------------------------------------------

/// A task's input connection to a queue.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct QueueInput {
    slot: Slot<stampede::QueueInput>,
}

impl QueueInput {
    pub(crate) fn new(conn: stampede::QueueInput) -> QueueInput {
        let name = conn.queue().name().to_owned();
        QueueInput { slot: Slot::new(conn, &name) }
    }

    fn get_item(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Item> {
        let conn = self.slot.get()?;
        let item = wait::blocking(py, timeout, |slice| conn.get(slice))?;
        Ok(Item::from_queue(item))
    }

    fn consume_at(&self, py: Python<'_>, seq: Option<u64>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || match seq {
            Some(seq) => conn
                .consume(&stampede::QueueItem { seq, item: stampede::Item { ts, payload: Payload::from(Vec::new()) } }),
            None => conn.consume_ts(ts),
        })
    }
}

#[pymethods]
impl QueueInput {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.slot.name
    }

    /// Takes the oldest waiting item; it stays open on this connection (holding the task's
    /// visibility at its timestamp) until consumed. Raises NotAvailable when the timeout expires.
    #[pyo3(signature = (timeout=None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Item> {
        self.get_item(py, wait::timeout(timeout)?)
    }

    /// The asyncio form of `get`.
    #[pyo3(signature = (timeout=None))]
    fn get_async<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.slot.get()?;
        let timeout = wait::timeout(timeout)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            conn.get_async(timeout).await.map(Item::from_queue).py()
        })
    }

    /// Consumes an item this connection got — given as the Item (exact) or as its timestamp
    /// (the oldest open item at that timestamp); the queue reclaims it.
    fn consume(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(item) = item.cast::<Item>() {
            let item = item.get();
            return self.consume_at(py, item.seq, item.ts);
        }
        let ts: Timestamp =
            item.extract().map_err(|_| PyTypeError::new_err("consume() takes an Item or an int timestamp"))?;
        self.consume_at(py, None, ts)
    }

    /// An iterator of items, each consumed (with `consume(item)`) when the next one is asked for
    /// if `consume=True`. Ends when no item arrives within `timeout` or the queue is closed.
    #[pyo3(signature = (timeout=None, consume=true))]
    fn stream(slf: Py<Self>, timeout: Option<f64>, consume: bool) -> PyResult<Stream> {
        Ok(Stream { source: Source::Queue(slf), timeout: wait::timeout(timeout)?, consume, pending: Mutex::new(None) })
    }

    /// Detaches the connection; items it still holds open go back to the head of the queue.
    fn detach(&self, py: Python<'_>) {
        self.slot.detach(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.detach(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("QueueInput({:?})", self.slot.name)
    }
}

// ---- streams -------------------------------------------------------------------------------

enum Source {
    Channel(Py<ChannelInput>, Selector),
    Queue(Py<QueueInput>),
}

/// The iterator returned by `ChannelInput.stream()` and `QueueInput.stream()`.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Stream {
    source: Source,
    timeout: Option<Duration>,
    consume: bool,
    /// The item handed out last, to consume on the next step: (ts, queue seq).
    pending: Mutex<Option<(Timestamp, Option<u64>)>>,
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
            Source::Channel(conn, Selector::Newest | Selector::NewestUnseen) => conn.get().consume_until(py, ts),
            Source::Channel(conn, _) => conn.get().consume(py, ts),
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
