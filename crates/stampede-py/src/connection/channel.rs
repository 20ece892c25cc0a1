//! Channel connections: `ChannelOutput.put` (blocking and asyncio) and `demand`, and
//! `ChannelInput.get` / `get_range` / `consume` / `consume_until` / `stream`. A `ChannelInput`'s
//! Rust connection may be handed over to a join for good (`crate::join`).

use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use stampede::{Error, PutOptions, Selector, Timestamp};

use crate::aio::{Op, Pending};
use crate::args::{self, At};
use crate::connection::stream::{Source, Stream};
use crate::connection::{connection_class, selector, PutArgs, Slot, HANDED_OVER};
use crate::errors::to_pyerr;
use crate::item::Item;
use crate::reclaim::Handlers;
use crate::wait;

/// A task's output connection to a channel.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ChannelOutput {
    slot: Slot<stampede::ChannelOutput>,
    /// The runtime's GC handlers (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
    /// Attached with a `put_window`: a put returns before the node's reply, so it is made whole
    /// (with the caller's timeout), not in slices that check for signals.
    pipelined: bool,
}

impl ChannelOutput {
    pub(crate) fn new(conn: stampede::ChannelOutput, handlers: Py<Handlers>, pipelined: bool) -> ChannelOutput {
        let name = conn.channel().name().to_owned();
        ChannelOutput { slot: Slot::new(conn, &name), handlers, pipelined }
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

connection_class! {
    ChannelOutput;
    /// The channel's name.
    fn name;
    /// Detaches the connection. Idempotent.
    fn detach;

    /// Puts `data` (bytes-like, str, NumPy array or Item) at `ts`. Copies the data once.
    /// `refcount`: consumptions after which the item is reclaimed. `timeout` bounds the wait
    /// for room in a full bounded channel (None = wait, 0 = raise Full at once). On a connection
    /// attached with `put_window`, a remote put returns before the node's reply: its error is
    /// raised by the next `put` or `flush` (docs/NODES.md, "Pipelined puts").
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
        if self.pipelined {
            return py.detach(|| conn.put_with(ts, payload, PutOptions { refcount, timeout })).map_err(to_pyerr);
        }
        wait::blocking(py, timeout, |slice| conn.put_with(ts, payload.clone(), PutOptions { refcount, timeout: slice }))
    }

    /// Waits until every put of this connection landed or failed, and raises the oldest error of
    /// a pipelined put not raised yet (`put_window`). Returns at once for a connection without a
    /// window, and embedded.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let conn = self.slot.get()?;
        py.detach(|| conn.flush()).map_err(to_pyerr)
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

    /// Demand feedback (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the
    /// lowest timestamp any current or future consumer may still get if it were put now. A source
    /// may skip producing below it. On a "history" channel this is ts_min; on a "current_readers"
    /// channel the minimum over the readers' `consume_until` floors (+1), INFINITY with no reader.
    fn demand(&self) -> PyResult<Timestamp> {
        Ok(self.slot.get()?.demand())
    }
}

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

    pub(super) fn get_item(&self, py: Python<'_>, selector: Selector, timeout: Option<Duration>) -> PyResult<Item> {
        let conn = self.slot.get()?;
        let item = wait::blocking(py, timeout, |slice| conn.get(selector, slice))?;
        Ok(Item::from_channel(item))
    }

    pub(super) fn consume_ts(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume(ts))
    }

    pub(super) fn consume_until_ts(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.slot.get()?;
        wait::released(py, || conn.consume_until(ts))
    }

    fn at(&self, op: &'static str) -> At<'_> {
        At { op, name: &self.slot.name }
    }
}

connection_class! {
    ChannelInput;
    /// The channel's name.
    pub(crate) fn name;
    /// Detaches the connection: all its claims are dropped. Idempotent.
    fn detach;

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
}
