//! Connections (SPEC §2, §5, §15): `ChannelOutput.put`, `ChannelInput.get` / `get_range` /
//! `consume` / `consume_until` / `stream`, and the queue forms, blocking and asyncio.
//!
//! Each Python connection holds its Rust connection behind an `Arc`, so several Python threads
//! may use one connection at once with the GIL released. `detach()` detaches the Rust connection
//! at once: calls still blocked on it on other threads wake with `Closed`, and every later call
//! raises `Closed` ("the connection was detached"). Building a join
//! (`crate::join`) *takes* the Rust connection of a `ChannelInput` the same way, for good: later
//! calls raise `Closed` ("handed over to a join").
//!
//! asyncio: `get_async` / `put_async` return coroutines (`crate::aio`): a waiting coroutine holds
//! no thread, and one cancelled or timed out never swallows an item nor lands a put later.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{Error, Payload, PutOptions, Selector, Timestamp};

use crate::aio::{Op, Pending};
use crate::args::{self, At};
use crate::errors::{to_pyerr, Closed, NotAvailable};
use crate::item::Item;
use crate::payload::to_payload;
use crate::reclaim::Handlers;
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
fn selector(obj: &Bound<'_, PyAny>, at: At<'_>) -> PyResult<Selector> {
    if let Ok(s) = obj.extract::<PySelector>() {
        return Ok(match s {
            PySelector::Oldest => Selector::Oldest,
            PySelector::Newest => Selector::Newest,
            PySelector::OldestUnseen => Selector::OldestUnseen,
            PySelector::NewestUnseen => Selector::NewestUnseen,
        });
    }
    args::timestamp(obj, "selector", at).map(Selector::At).map_err(|e| {
        if e.is_instance_of::<PyTypeError>(obj.py()) {
            PyTypeError::new_err("selector must be an int timestamp or OLDEST, NEWEST, OLDEST_UNSEEN, NEWEST_UNSEEN")
        } else {
            e
        }
    })
}

/// A queue input's selector: a queue hands out items in FIFO order, so only `OLDEST` (the
/// default) is meaningful; anything else, an int included, is `InvalidArgument`.
fn queue_selector(obj: Option<&Bound<'_, PyAny>>, at: At<'_>) -> PyResult<()> {
    match obj {
        None => Ok(()),
        Some(obj) if matches!(obj.extract::<PySelector>(), Ok(PySelector::Oldest)) => Ok(()),
        Some(obj) => Err(to_pyerr(Error::InvalidArgument {
            op: at.op,
            name: at.name.to_owned(),
            reason: format!(
                "a queue input gets in FIFO order: the selector must be stampede.OLDEST, not {} (pass a timeout \
                 by keyword: get(timeout=...))",
                obj.repr().map(|r| r.to_string()).unwrap_or_default()
            ),
        })),
    }
}

/// The Rust connection of a Python connection, until it is detached or handed over to a join.
struct Slot<T> {
    /// The connection, or why it is gone (the reason of the `Closed` error later calls raise).
    conn: RwLock<Result<Arc<T>, &'static str>>,
    name: String,
}

/// Why a connection handed over to a join refuses every later call.
const HANDED_OVER: &str = "the connection was handed over to a join (use the join; close it to detach)";

/// The Rust connections: each detaches through `&self`, so a call blocked on the connection on
/// another thread is woken (with `Closed`) instead of keeping it attached.
trait Detach {
    fn detach(&self);
}

macro_rules! detach_by_ref {
    ($($t:ty),*) => {$(
        impl Detach for $t {
            fn detach(&self) {
                <$t>::detach(self);
            }
        }
    )*};
}
detach_by_ref!(stampede::ChannelInput, stampede::ChannelOutput, stampede::QueueInput, stampede::QueueOutput);

impl<T: Detach + Send + Sync> Slot<T> {
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
        // Detaching may release claims and run GC handlers: do it without the GIL. Calls still
        // running on the connection on other threads wake with `Closed`.
        if let Some(conn) = conn {
            py.detach(move || conn.detach());
        }
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

    /// Converts the arguments every put takes and copies its data in with `copy_in` (once),
    /// after `check_fits` accepted its size: an item larger than the container's byte bound
    /// fails `Full` before a byte is copied.
    fn put_args(
        &self,
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
        (check_fits, copy_in): (CheckFits<T>, CopyIn<T>),
    ) -> PyResult<PutArgs<T>> {
        let at = At { op: "put", name: &self.name };
        let ts = args::timestamp(ts, "ts", at)?;
        let timeout = args::timeout(timeout, at)?;
        let conn = self.get()?;
        let copy = |parts: &[&[u8]]| {
            check_fits(&conn, ts, parts.iter().map(|p| p.len()).sum()).map_err(to_pyerr)?;
            Ok(copy_in(&conn, parts))
        };
        let payload = to_payload(data, codec, &self.name, ts, &copy)?;
        Ok(PutArgs { conn, ts, payload, timeout })
    }
}

/// An output connection's size check before a copy-in (`check_fits`).
type CheckFits<T> = fn(&T, Timestamp, usize) -> stampede::Result<()>;
/// An output connection's copy-in into a recycled buffer.
type CopyIn<T> = fn(&T, &[&[u8]]) -> bytes::Bytes;

/// A put's arguments, converted, with its data copied in.
struct PutArgs<T> {
    conn: Arc<T>,
    ts: Timestamp,
    payload: Payload,
    timeout: Option<Duration>,
}

// ---- channel output ------------------------------------------------------------------------

/// A task's output connection to a channel.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ChannelOutput {
    slot: Slot<stampede::ChannelOutput>,
    /// The runtime's GC handlers (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
}

impl ChannelOutput {
    pub(crate) fn new(conn: stampede::ChannelOutput, handlers: Py<Handlers>) -> ChannelOutput {
        let name = conn.channel().name().to_owned();
        ChannelOutput { slot: Slot::new(conn, &name), handlers }
    }

    /// Converts a put's arguments and copies its data in (once).
    fn prepare(
        &self,
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        refcount: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
    ) -> PyResult<(PutArgs<stampede::ChannelOutput>, Option<u32>)> {
        let refcount = args::count(refcount, "refcount", At { op: "put", name: &self.slot.name })?;
        Ok((
            self.slot.put_args(
                ts,
                data,
                timeout,
                codec,
                (stampede::ChannelOutput::check_fits, stampede::ChannelOutput::copy_in),
            )?,
            refcount,
        ))
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
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        refcount: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
    ) -> PyResult<()> {
        let (PutArgs { conn, ts, payload, timeout }, refcount) = self.prepare(ts, data, refcount, timeout, codec)?;
        wait::blocking(py, timeout, |slice| conn.put_with(ts, payload.clone(), PutOptions { refcount, timeout: slice }))
    }

    /// The asyncio form of `put`: an awaitable that waits for room without blocking the loop.
    ///
    /// Cancellation-safe: a coroutine cancelled (or timed out) while waiting for room has stored
    /// nothing, and nothing it was given lands later.
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
        let (PutArgs { conn, ts, payload, timeout }, refcount) = self.prepare(ts, data, refcount, timeout, codec)?;
        Pending::start(py, Op::ChannelPut(conn, ts, payload, refcount), timeout)
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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
    }
}

// ---- channel input -------------------------------------------------------------------------

/// A task's input connection to a channel: per item, unseen → open → consumed.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ChannelInput {
    slot: Slot<stampede::ChannelInput>,
    /// The runtime's GC handlers (see `reclaim::Handlers`).
    pub(crate) handlers: Py<Handlers>,
}

impl ChannelInput {
    pub(crate) fn new(conn: stampede::ChannelInput, handlers: Py<Handlers>) -> ChannelInput {
        let name = conn.channel().name().to_owned();
        ChannelInput { slot: Slot::new(conn, &name), handlers }
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

    fn consume_ts(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume(ts))
    }

    fn consume_until_ts(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume_until(ts))
    }

    fn at(&self, op: &'static str) -> At<'_> {
        At { op, name: &self.slot.name }
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
    fn get(&self, py: Python<'_>, selector: &Bound<'_, PyAny>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Item> {
        let at = self.at("get");
        let selector = self::selector(selector, at)?;
        self.get_item(py, selector, args::timeout(timeout, at)?)
    }

    /// The asyncio form of `get`: a coroutine that does not block the event loop. Cancellation-
    /// safe: a coroutine cancelled (or timed out) while waiting has taken nothing.
    #[pyo3(signature = (selector, timeout=None))]
    fn get_async<'py>(
        &self,
        py: Python<'py>,
        selector: &Bound<'py, PyAny>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let at = self.at("get");
        let selector = self::selector(selector, at)?;
        let timeout = args::timeout(timeout, at)?;
        Pending::start(py, Op::ChannelGet(self.slot.get()?, selector), timeout)
    }

    /// Every present item with t0 <= ts <= t1 not consumed on this connection, in timestamp
    /// order; each becomes open. Never waits.
    fn get_range(&self, py: Python<'_>, t0: &Bound<'_, PyAny>, t1: &Bound<'_, PyAny>) -> PyResult<Vec<Item>> {
        let at = self.at("get_range");
        let (t0, t1) = (args::timestamp(t0, "t0", at)?, args::timestamp(t1, "t1", at)?);
        let conn = self.slot.get()?;
        let items = wait::released(py, || conn.get_range(t0, t1))?;
        Ok(items.into_iter().map(Item::from_channel).collect())
    }

    /// Marks the item at `ts` consumed on this connection.
    fn consume(&self, py: Python<'_>, ts: &Bound<'_, PyAny>) -> PyResult<()> {
        let ts = args::timestamp(ts, "ts", self.at("consume"))?;
        self.consume_ts(py, ts)
    }

    /// Marks every present item <= ts consumed on this connection, unseen ones included.
    fn consume_until(&self, py: Python<'_>, ts: &Bound<'_, PyAny>) -> PyResult<()> {
        let ts = args::timestamp(ts, "ts", self.at("consume_until"))?;
        self.consume_until_ts(py, ts)
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
        slf: &Bound<'_, Self>,
        selector: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        consume: bool,
    ) -> PyResult<Stream> {
        let this = slf.get();
        let at = this.at("stream");
        let selector = match selector {
            None => Selector::OldestUnseen,
            Some(s) => self::selector(s, at)?,
        };
        if matches!(selector, Selector::At(_)) {
            return Err(to_pyerr(Error::InvalidArgument {
                op: "stream",
                name: this.slot.name.clone(),
                reason:
                    "stream() takes a wildcard selector (OLDEST_UNSEEN, NEWEST_UNSEEN, ...), not an exact timestamp"
                        .into(),
            }));
        }
        Ok(Stream {
            source: Source::Channel(slf.clone().unbind(), selector),
            timeout: args::timeout(timeout, at)?,
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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
    }
}

// ---- queue output --------------------------------------------------------------------------

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

#[pymethods]
impl QueueOutput {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.slot.name
    }

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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
    }
}

// ---- queue input ---------------------------------------------------------------------------

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

    fn get_item(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Item> {
        let conn = self.slot.get()?;
        let item = wait::blocking(py, timeout, |slice| conn.get(slice))?;
        Ok(Item::from_queue(item))
    }

    fn at(&self, op: &'static str) -> At<'_> {
        At { op, name: &self.slot.name }
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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
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
