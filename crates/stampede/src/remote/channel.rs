//! Remote channels and their connections (the remote forms of [`crate::Channel`],
//! [`crate::ChannelInput`] and [`crate::ChannelOutput`]).
//!
//! A get returns an [`Item`] whose payload is the reply's bytes (copied once out of the zenoh
//! buffer, shared from then on, read-only). A put copies borrowed data once into a buffer of the
//! connection's pool, which zenoh then sends without another copy. Blocking calls wait in slices
//! (see [`crate::remote::client`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::payload::Buffers;
use crate::trace::{self, Kind, NO_ITEM};
use crate::wait::Changed;
use crate::{
    Error, InputOptions, IntoPayload, Item, Limits, OutputOptions, Payload, PutOptions, Result, Retention, Selector,
    Timestamp,
};

use crate::remote::client::Cache;
use crate::remote::connection::{container_handle, item, Link};
use crate::remote::pipeline::{Pipeline, Pipelined};
use crate::remote::runtime::unexpected;
use crate::remote::task::RemoteTask;
use stampede_core::Prefetch;
use stampede_wire::session::deferred::worth_deferring;
use stampede_wire::{Op, Outcome, WireOutcome};

container_handle!(RemoteChannel, "channel");

impl RemoteChannel {
    /// The channel's retention policy.
    pub fn retention(&self) -> Retention {
        self.container.retention
    }

    /// Timestamps of the items stored on the node now.
    pub fn timestamps(&self) -> Vec<Timestamp> {
        self.container.timestamps()
    }

    /// The settled horizon on the node (docs/CORRELATION.md, "Settled timestamps").
    pub fn settled_below(&self) -> Timestamp {
        self.container.settledness().0
    }

    /// `true` once the producer set was closed.
    pub fn producers_closed(&self) -> bool {
        self.container.settledness().1
    }

    /// The channel's put log on the node (see [`crate::Channel::put_log`]).
    pub fn put_log(&self) -> Result<Vec<stampede_core::PutRecord>> {
        match self.container.client.call(Op::PutLog { container: self.container.id }, None, Duration::ZERO)? {
            (Outcome::PutLog(log), _) => Ok(log),
            _ => Err(unexpected("put_log", self.container.client.node())),
        }
    }

    /// Closes the producer set on the node.
    pub fn close_producers(&self) -> Result<()> {
        self.container.close_producers()
    }

    /// Completes at the next put or claim change on the node, or after a wait slice.
    pub(crate) fn progressed(&self) -> Changed {
        self.container.client.progressed()
    }

    pub(crate) fn same_runtime(&self, other: &RemoteChannel) -> bool {
        Arc::ptr_eq(&self.container.client, &other.container.client)
    }

    pub(crate) fn attach_input(&self, task: &RemoteTask, options: InputOptions) -> Result<RemoteChannelInput> {
        let link = self.container.attach(task, Some(options))?;
        let cache = match link.client.prefetch(options) {
            Prefetch::Off => None,
            _ => Some(link.client.cache(link.id, self.container.id)?),
        };
        // Only where no producer can wait for the room a consume makes (docs/PREFETCH.md).
        let limits = self.limits();
        let defers = cache.is_some() && limits.capacity.is_none() && limits.bytes_max.is_none();
        let (last_consume, answered_here) = (Mutex::default(), Mutex::default());
        let asking = AtomicUsize::new(0);
        Ok(RemoteChannelInput { link, got: Mutex::default(), cache, asking, defers, last_consume, answered_here })
    }

    pub(crate) fn attach_output(&self, task: &RemoteTask, options: OutputOptions) -> Result<RemoteChannelOutput> {
        options.check(self.name())?;
        let link = self.container.attach(task, None)?;
        let buffers = link.client.buffers();
        let pipeline = (options.put_window > 0).then(|| Pipeline::new(options.put_window));
        Ok(RemoteChannelOutput { channel: self.clone(), link, buffers, pipeline })
    }
}

/// A remote task's output connection to a channel.
pub(crate) struct RemoteChannelOutput {
    channel: RemoteChannel,
    link: Link,
    /// Buffers borrowed payloads are copied into (once) before they are sent.
    buffers: Arc<Buffers>,
    /// Its puts sent without waiting for their replies, when attached with a window.
    pipeline: Option<Pipeline>,
}

impl RemoteChannelOutput {
    /// Puts with a reference count and/or a timeout (as [`crate::ChannelOutput::put_with`]).
    pub fn put_with(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        self.put_pipelined(ts, payload, options, true)
    }

    /// A put that waits for its reply even on a pipelined connection, after raising an earlier
    /// put's error that is known (as [`crate::ChannelOutput::put_waited`]).
    pub fn put_waited(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        self.put_pipelined(ts, payload, options, false)
    }

    /// A put, sent without waiting for its reply when `pipelined` and the connection has a window.
    fn put_pipelined(
        &self,
        ts: Timestamp,
        payload: impl IntoPayload,
        options: PutOptions,
        pipelined: bool,
    ) -> Result<()> {
        let _span = trace::span(Kind::Put, self.link.trace_name(), ts as u64, payload.payload_bytes() as u64);
        if let (Some(pipeline), false) = (&self.pipeline, pipelined) {
            pipeline.raise()?;
        }
        let payload = self.admit(ts, payload)?;
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request = |wait_us| Op::Put { connection, ts, codec: codec.clone(), refcount: options.refcount, wait_us };
        let pipeline = self.pipeline.as_ref().filter(|_| pipelined);
        let pipelined = pipeline.and_then(|p| p.put(&self.link.client, ts, options.timeout, &payload.data, request));
        match pipelined {
            Some(Pipelined::Raised(e)) => Err(e),
            Some(Pipelined::Sent(sent)) => self.landed(ts, sent),
            None => self
                .landed(ts, done("put", &self.link, self.link.waiting(options.timeout, Some(payload.data), request))),
        }
    }

    /// Waits until every pipelined put of this connection was answered, and raises the oldest
    /// error of one not raised yet (as [`crate::ChannelOutput::flush`]). `Ok` at once without a
    /// window.
    pub fn flush(&self) -> Result<()> {
        self.link.check_attached()?;
        self.pipeline.as_ref().map_or(Ok(()), |pipeline| pipeline.flush(&self.link.client))
    }

    /// [`put_with`](Self::put_with) without blocking a thread. On a pipelined connection it
    /// first raises an earlier put's error that is known, then waits for its own reply (a
    /// pipelined put may block on the window, which a future must not), as [`put_waited`](Self::put_waited).
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        if let Some(pipeline) = &self.pipeline {
            pipeline.raise()?;
        }
        let payload = self.admit(ts, payload)?;
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request = |wait_us| Op::Put { connection, ts, codec: codec.clone(), refcount: options.refcount, wait_us };
        self.landed(
            ts,
            done("put", &self.link, self.link.waiting_async(options.timeout, Some(payload.data), request).await),
        )
    }

    /// A put at `ts` ended with `put`: if it landed, or may have (its reply was lost), this
    /// client's caches of the channel know the channel holds it — a get of this client after its
    /// put never misses it (docs/PREFETCH.md).
    fn landed(&self, ts: Timestamp, put: Result<()>) -> Result<()> {
        if matches!(put, Ok(()) | Err(Error::Unreachable { .. })) {
            self.link.client.put_here(self.channel.container.id, ts);
        }
        put
    }

    fn admit(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<Payload> {
        self.link.check_attached()?;
        let declared = self.channel.container.codec.as_ref();
        crate::payload::admit(self.channel.name(), ts, payload, declared, &self.buffers, |bytes| {
            self.check_fits(ts, bytes)
        })
    }

    /// Copies `parts` into a buffer of this connection's pool (the one copy of copy-in).
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        self.buffers.copy(parts)
    }

    /// Demand feedback from the node (its ts_min when the node cannot be reached).
    pub fn demand(&self) -> Timestamp {
        match self.link.client.call(Op::Demand { connection: self.link.id }, None, Duration::ZERO) {
            Ok((Outcome::Timestamp(ts), _)) => ts,
            _ => self.channel.stats().ts_min,
        }
    }

    /// Completes when a put blocked on this connection would wake (or spuriously).
    pub fn freed(&self) -> Changed {
        self.link.changed(None)
    }

    /// Fails `Full { can_never_fit: true, .. }` when an item of `payload_bytes` can never fit the
    /// channel's `max_bytes` or the node's `payload_bytes_max`: every put checks this before
    /// copying or sending anything.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        check_fits(&self.link, self.channel.limits(), ts, payload_bytes)
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too). Every later
    /// call fails `Closed`.
    pub fn detach(&self) {
        self.link.detach();
    }
}

/// `Ok` for a `Done` reply.
pub(crate) fn done(op: &'static str, link: &Link, reply: Result<(WireOutcome, Bytes)>) -> Result<()> {
    match reply?.0 {
        Outcome::Done => Ok(()),
        _ => Err(unexpected(op, link.client.node())),
    }
}

/// The checks of [`RemoteChannelOutput::check_fits`], for channels and queues.
pub(crate) fn check_fits(link: &Link, limits: Limits, ts: Timestamp, payload_bytes: usize) -> Result<()> {
    let node_bytes_max = link.client.hello.payload_bytes_max;
    if payload_bytes as u64 > node_bytes_max {
        return Err(Error::Full {
            name: link.name.to_string(),
            ts,
            reason: format!(
                "a payload of {payload_bytes} bytes is above the node's payload_bytes_max {node_bytes_max}"
            ),
            can_never_fit: true,
        });
    }
    limits.check_fits(&link.name, ts, payload_bytes)
}

/// Most timestamps an input connection remembers as got and not consumed (see
/// [`RemoteChannelInput::consume`]); past it a consume waits for the node's reply.
pub const GOT_TRACKED_MAX: usize = 1024;

/// A remote task's input connection to a channel.
pub(crate) struct RemoteChannelInput {
    link: Link,
    /// Timestamps a get on this connection returned and no consume has named since.
    got: Mutex<BTreeSet<Timestamp>>,
    /// Its prefetch cache, unless its policy is `off` (docs/PREFETCH.md).
    cache: Option<Arc<Cache>>,
    /// Gets of this connection waiting for the node's reply: the cache answers none meanwhile
    /// (the node may be giving one of them the item the cache holds).
    asking: AtomicUsize,
    /// Whether its consumes of items its gets returned ride on the session's next request
    /// (prefetch on, a channel without bounds: `remote/client/consumes.rs`), and when it last
    /// consumed (only a connection that consumes often defers).
    defers: bool,
    last_consume: Mutex<Option<std::time::Instant>>,
    /// Those of `got` its cache answered: not open on the node until a request reports them, so
    /// a consume of them may wait for that request (one of an item a get opened on the node may
    /// not: the open item holds its task's visibility back until the consume arrives).
    answered_here: Mutex<BTreeSet<Timestamp>>,
}

impl RemoteChannelInput {
    /// Gets an item (as [`crate::ChannelInput::get`]); it becomes open on this connection.
    /// `timeout`: `None` waits as long as needed, `Some(Duration::ZERO)` never waits.
    pub fn get(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        let span = trace::span(Kind::Get, self.link.trace_name(), NO_ITEM, 0);
        let selector = selector.into();
        let connection = self.link.id;
        let deadline = crate::wait::deadline(timeout);
        if let Some(item) = self.cached(selector, deadline) {
            span.end_with(item.ts as u64, item.data().len() as u64);
            return Ok(item);
        }
        // What the cache waited is taken from the call's timeout.
        let timeout = deadline.map(|deadline| deadline.saturating_duration_since(std::time::Instant::now()));
        self.asking.fetch_add(1, Ordering::SeqCst);
        let at = std::time::Instant::now();
        let asked = self.link.waiting(timeout, None, |wait_us| Op::Get { connection, selector, wait_us });
        self.asking.fetch_sub(1, Ordering::SeqCst);
        let got = self.got(at, asked);
        if let Ok(item) = &got {
            span.end_with(item.ts as u64, item.data().len() as u64);
        }
        got
    }

    /// [`get`](Self::get) without blocking a thread.
    pub async fn get_async(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        let selector = selector.into();
        let connection = self.link.id;
        // Without blocking a thread, the cache answers what it holds now, and waits for nothing.
        if let Some(item) = self.cached(selector, Some(std::time::Instant::now())) {
            return Ok(item);
        }
        self.asking.fetch_add(1, Ordering::SeqCst);
        let at = std::time::Instant::now();
        let asked = self.link.waiting_async(timeout, None, |wait_us| Op::Get { connection, selector, wait_us }).await;
        self.asking.fetch_sub(1, Ordering::SeqCst);
        self.got(at, asked)
    }

    /// The cache's answer to a get with `selector` (only `NEWEST_UNSEEN` is answered there), if
    /// it has one by `deadline` (see `Client::cached`).
    fn cached(&self, selector: Selector, deadline: Option<std::time::Instant>) -> Option<Item> {
        let cache = self.cache.as_ref().filter(|_| selector == Selector::NewestUnseen)?;
        if self.asking.load(Ordering::SeqCst) > 0 || self.link.check_attached().is_err() {
            return None;
        }
        let item = self.link.client.cached(self.link.id, cache, deadline)?;
        self.remember(item.ts);
        if self.got.lock().contains(&item.ts) {
            self.answered_here.lock().insert(item.ts);
        }
        Some(item)
    }

    /// This connection read `ts` (a get returned it, or a consume named it, or everything up to
    /// it): its cache answers nothing at or below it.
    fn seen(&self, ts: Timestamp) {
        if let Some(cache) = &self.cache {
            cache.state.lock().seen(ts);
        }
    }

    /// The item of a get asked of the node at `asked` (the cache learns whether the node served
    /// it: its right to answer runs from then).
    fn got(&self, asked: std::time::Instant, reply: Result<(WireOutcome, Bytes)>) -> Result<Item> {
        if let Some(cache) = &self.cache {
            cache.served(asked, &reply);
        }
        match reply? {
            (Outcome::Item(header), data) => {
                self.remember(header.ts);
                self.seen(header.ts);
                Ok(item(header, data))
            }
            _ => Err(unexpected("get", self.link.client.node())),
        }
    }

    /// Completes when a get with `selector` blocked on this connection would wake (or spuriously).
    pub fn changed(&self, selector: impl Into<Selector>) -> Changed {
        self.link.changed(Some(selector.into()))
    }

    /// Every item with `t0 <= ts <= t1` present and not consumed on this connection, in
    /// timestamp order; each becomes open. Never waits.
    pub fn get_range(&self, t0: Timestamp, t1: Timestamp) -> Result<Vec<Item>> {
        let connection = self.link.id;
        match self.link.waiting(Some(Duration::ZERO), None, |_| Op::GetRange { connection, t0, t1 })? {
            (Outcome::Items(headers), data) => {
                let mut offset = 0;
                let mut items = Vec::with_capacity(headers.len());
                for header in headers {
                    // The lengths add up to the payload's (checked when the reply was decoded).
                    let len = stampede_wire::size(header.len);
                    self.remember(header.ts);
                    self.seen(header.ts);
                    items.push(item(header, data.slice(offset..offset + len)));
                    offset += len;
                }
                Ok(items)
            }
            _ => Err(unexpected("get_range", self.link.client.node())),
        }
    }

    /// Marks the item at `ts` consumed on this connection. An item a get on this connection
    /// returned is consumed without waiting for the node's reply (the node applies it at once,
    /// and every later call of this client sees it applied): the consume can then only fail on
    /// the node if the connection or its channel went meanwhile, which a later call reports.
    /// Any other timestamp waits for the node's answer (`NotAvailable` for one never put).
    pub fn consume(&self, ts: Timestamp) -> Result<()> {
        let _span = trace::span(Kind::Consume, self.link.trace_name(), ts as u64, 0);
        let request = Op::Consume { connection: self.link.id, ts };
        self.seen(ts);
        if self.got.lock().remove(&ts) {
            let (here, defers) = (self.answered_here.lock().remove(&ts), self.defers_now());
            if here && defers && self.defer(ts, false)? {
                return Ok(());
            }
            return self.link.send(request);
        }
        self.link.done(request)
    }

    /// Whether a consume made now is deferred (`stampede_wire::session::deferred::worth_deferring`).
    fn defers_now(&self) -> bool {
        let now = std::time::Instant::now();
        let previous = self.last_consume.lock().replace(now);
        self.defers && worth_deferring(previous.map(|at| now.saturating_duration_since(at)))
    }

    /// Defers a consume at `ts` (`consume_until` when `until`) into the session's requests
    /// (`remote/client/consumes.rs`): `false` when it cannot be, and is to be sent now.
    fn defer(&self, ts: Timestamp, until: bool) -> Result<bool> {
        self.link.check_attached()?;
        self.link.client.check_open("consume")?;
        Ok(self.link.client.defer_consume(self.link.id, ts, until))
    }

    /// Marks every present item `<= ts` consumed on this connection, unseen ones included.
    pub fn consume_until(&self, ts: Timestamp) -> Result<()> {
        self.seen(ts);
        // One that names an item a get returned is deferred where consumes are: a later request
        // of this client applies it first, so nothing it reads can tell it from one sent now.
        let (names_got, all_here) = {
            let (got, here) = (self.got.lock(), self.answered_here.lock());
            (got.range(ts..).next().is_some(), got.range(..=ts).all(|t| here.contains(t)))
        };
        if !(self.defers_now() && names_got && all_here && self.defer(ts, true)?) {
            self.link.done(Op::ConsumeUntil { connection: self.link.id, ts })?;
        }
        let mut got = self.got.lock();
        *got = got.split_off(&ts.saturating_add(1));
        let mut here = self.answered_here.lock();
        *here = here.split_off(&ts.saturating_add(1));
        Ok(())
    }

    /// Remembers that a get returned `ts`, while there is room.
    fn remember(&self, ts: Timestamp) {
        let mut got = self.got.lock();
        if got.len() < GOT_TRACKED_MAX {
            got.insert(ts);
        }
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too): its claims are
    /// dropped when this returns. Every later call fails `Closed`.
    pub fn detach(&self) {
        self.link.detach();
    }
}
