//! Channels and their connections: the user-facing side of the rules in docs/SEMANTICS.md,
//! "Channels".
//!
//! A [`Channel`] is a handle to a named container, in this process or on a node. A task attaches
//! to it with [`Task::attach_input`](crate::Task::attach_input) or
//! [`Task::attach_output`](crate::Task::attach_output) and gets a [`ChannelInput`] or
//! [`ChannelOutput`]. Connections detach when dropped or with `detach` (idempotent, callable while
//! another thread is blocked on the connection: that call returns `Closed`); detaching an input
//! drops all its claims. Every later call on a detached connection fails `Closed`.
//!
//! Readiness: [`ChannelInput::changed`] and [`ChannelOutput::freed`] are owned futures that
//! complete when a blocked get (resp. put) of that connection would wake, for bridges that do the
//! operation itself synchronously (see [`Changed`]).

use std::time::Duration;

use stampede_core::{Item, Limits, Result, Retention, Selector, Stats, Timestamp};

use crate::backend::{forward, remote, Backend};
#[cfg(not(feature = "remote"))]
use crate::backend::{Never as RemoteChannel, Never as RemoteChannelInput, Never as RemoteChannelOutput};
use crate::payload::IntoPayload;
#[cfg(feature = "remote")]
use crate::remote::channel::{RemoteChannel, RemoteChannelInput, RemoteChannelOutput};
use crate::runtime::Info;
use crate::wait::Changed;
use stampede_engine as engine;

pub use stampede_engine::options::PutOptions;

/// A named channel of timestamped items (cheap to clone).
#[derive(Clone)]
pub struct Channel(pub(crate) Backend<engine::Channel, RemoteChannel>);

impl Channel {
    /// The channel's id, unique within its runtime (names may be reused after `destroy`).
    pub fn id(&self) -> u64 {
        forward!(&self.0, ch => ch.id())
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        forward!(&self.0, ch => ch.name())
    }

    /// The channel's bounds.
    pub fn limits(&self) -> Limits {
        forward!(&self.0, ch => ch.limits())
    }

    /// Counters now: live items and bytes, reclaimed, puts, gets, connections, ts_min (remotely:
    /// the last ones seen when the node cannot be reached).
    pub fn stats(&self) -> Stats {
        forward!(&self.0, ch => ch.stats())
    }

    /// Timestamps of the items stored now, in order (remotely: none when the node cannot be
    /// reached).
    pub fn timestamps(&self) -> Vec<Timestamp> {
        forward!(&self.0, ch => ch.timestamps())
    }

    /// Registers a GC handler called with each item this channel reclaims, outside every lock,
    /// before the operation that made the item garbage returns. Through a client it runs on
    /// the client, for items reclaimed on the node (see `docs/NODES.md`).
    pub fn on_reclaim(&self, handler: impl Fn(&Item) + Send + Sync + 'static) -> Result<()> {
        match &self.0 {
            Backend::Local(ch) => {
                ch.on_reclaim(handler);
                Ok(())
            }
            Backend::Remote(ch) => remote!(ch => ch.on_reclaim(handler)),
        }
    }

    /// What the channel's disk tier holds now (items, bytes and extents on disk, items written
    /// and recovered), if it has one; `None` without a tier or through a client.
    pub fn disk_stats(&self) -> Option<crate::DiskStats> {
        match &self.0 {
            Backend::Local(ch) => ch.disk_stats(),
            Backend::Remote(_ch) => remote!(_ch => None),
        }
    }

    /// The channel's latest puts, oldest first (at most [`PUT_LOG_MAX`](stampede_core::PUT_LOG_MAX)):
    /// when each came (µs of its runtime's monotonic clock: compare within one log), its timestamp
    /// and its size, kept where the channel lives. The first call turns the log on, so it starts
    /// empty; nothing is read and GC is not held back. What `stampede hz` computes a rate from.
    pub fn put_log(&self) -> Result<Vec<stampede_core::PutRecord>> {
        match &self.0 {
            Backend::Local(ch) => Ok(ch.put_log()),
            Backend::Remote(ch) => remote!(ch => ch.put_log()),
        }
    }

    /// The channel's retention policy.
    pub fn retention(&self) -> Retention {
        forward!(&self.0, ch => ch.retention())
    }

    /// Every timestamp below the returned one is **settled** (docs/CORRELATION.md,
    /// "Settled timestamps"): no task can still put it into this channel. With the producer set
    /// open this is ts_min; after [`close_producers`](Self::close_producers) it follows this
    /// channel's producers only. Remotely: the last horizon seen when the node cannot be reached
    /// (it never decreases).
    pub fn settled_below(&self) -> Timestamp {
        forward!(&self.0, ch => ch.settled_below())
    }

    /// `true` when no task can still put `ts` into this channel.
    pub fn is_settled(&self, ts: Timestamp) -> bool {
        ts < self.settled_below()
    }

    /// `true` once [`close_producers`](Self::close_producers) ran.
    pub fn producers_closed(&self) -> bool {
        forward!(&self.0, ch => ch.producers_closed())
    }

    /// Declares the producer set closed: attaching another output connection fails from now on,
    /// and settledness depends only on the tasks holding output connections now, so one stalled
    /// task elsewhere no longer delays this channel's joins. Remotely `Unreachable` when the node
    /// cannot be reached (embedded it never fails).
    pub fn close_producers(&self) -> Result<()> {
        match &self.0 {
            Backend::Local(ch) => {
                ch.close_producers();
                Ok(())
            }
            Backend::Remote(ch) => remote!(ch => ch.close_producers()),
        }
    }

    /// What the name service tells of it: name, kind, node, bounds, codec, description.
    pub fn info(&self) -> Info {
        forward!(&self.0, x => x.info())
    }

    /// Destroys the channel: its items are reclaimed, its name is freed, and every operation on
    /// it (blocked ones included) fails `Closed`.
    pub fn destroy(&self) -> Result<()> {
        forward!(&self.0, ch => ch.destroy())
    }

    /// Completes at the next put or claim change anywhere in this channel's runtime (remotely:
    /// or after a wait slice); registered when created. What joins wait for.
    pub(crate) fn progressed(&self) -> Changed {
        forward!(&self.0, ch => ch.progressed())
    }

    /// `true` when both channels belong to the same runtime (remotely: the same session).
    pub(crate) fn same_runtime(&self, other: &Channel) -> bool {
        match (&self.0, &other.0) {
            (Backend::Local(a), Backend::Local(b)) => a.same_runtime(b),
            (Backend::Remote(a), Backend::Remote(b)) => remote!(a, b => a.same_runtime(b)),
            _ => false,
        }
    }
}

/// Handles are equal when they refer to the same channel (not merely the same name) through the
/// same runtime.
impl PartialEq for Channel {
    fn eq(&self, other: &Channel) -> bool {
        match (&self.0, &other.0) {
            (Backend::Local(a), Backend::Local(b)) => a == b,
            (Backend::Remote(a), Backend::Remote(b)) => remote!(a, b => a == b),
            _ => false,
        }
    }
}

impl Eq for Channel {}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        forward!(&self.0, ch => ch.fmt(f))
    }
}

/// A task's output connection to a channel.
pub struct ChannelOutput {
    pub(crate) channel: Channel,
    pub(crate) inner: Backend<engine::ChannelOutput, RemoteChannelOutput>,
}

impl ChannelOutput {
    /// The channel this connection puts into.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Puts `payload` at `ts`, waiting as long as needed for room in a bounded channel.
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<()> {
        self.put_with(ts, payload, PutOptions::default())
    }

    /// Puts with a reference count and/or a timeout (docs/SEMANTICS.md, "Channels"). Errors:
    /// `InvalidTimestamp`, `BelowVisibility`, `DuplicateTimestamp`, `Full`, `Closed` (remotely also
    /// `Unreachable`).
    pub fn put_with(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        forward!(&self.inner, out => out.put_with(ts, payload, options))
    }

    /// [`put_with`](Self::put_with) that waits for the node's reply even on a connection attached
    /// with a put window, after raising an earlier pipelined put's error that is known: for callers
    /// that poll (a binding's asyncio put tries with timeout 0 until there is room, which a
    /// pipelined put would not report). Embedded, and without a window, it is `put_with`.
    pub fn put_waited(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        match &self.inner {
            Backend::Local(out) => out.put_with(ts, payload, options),
            Backend::Remote(out) => remote!(out => out.put_waited(ts, payload, options)),
        }
    }

    /// The async form of [`put_with`](Self::put_with): waits for room without blocking a thread.
    /// On a connection with a put window it raises an earlier pipelined put's error that is
    /// known, then waits for its own reply.
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        forward!(&self.inner, out => out.put_async(ts, payload, options).await)
    }

    /// Fails `Full { can_never_fit: true, .. }` (the error a put would return) when an item of
    /// `payload_bytes` at `ts` can never fit this channel's `max_bytes` (or, remotely, the node's
    /// payload bound), whatever is reclaimed: for callers that copy a payload themselves and want
    /// to refuse before the copy. Every put checks this before copying.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        forward!(&self.inner, out => out.check_fits(ts, payload_bytes))
    }

    /// Copies `parts`, concatenated, into a buffer from this connection's recycling pool: the one
    /// copy of copy-in, for callers (bindings) that build a [`Payload`](crate::Payload) themselves.
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        forward!(&self.inner, out => out.copy_in(parts))
    }

    /// Demand feedback (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the
    /// lowest timestamp any current or future consumer may still get if it were put now. A source
    /// may skip producing frames below it: nobody would read them. See [`Retention`] for how late
    /// joiners affect it.
    pub fn demand(&self) -> Timestamp {
        forward!(&self.inner, out => out.demand())
    }

    /// A future that completes when a put blocked on this connection would wake: room freed,
    /// the connection detached, its task, the channel or the runtime closed. Registered when
    /// created; see [`Changed`].
    pub fn freed(&self) -> Changed {
        forward!(&self.inner, out => out.freed())
    }

    /// Waits until every put of this connection landed or failed, and raises the oldest error
    /// of a pipelined put not raised yet (`put_window`: [`Task::attach_output_with`](crate::Task::attach_output_with)).
    /// `Ok` at once for a connection without a window, and embedded (every put has landed
    /// when it returns).
    pub fn flush(&self) -> Result<()> {
        match &self.inner {
            Backend::Local(_) => Ok(()),
            Backend::Remote(out) => remote!(out => out.flush()),
        }
    }

    /// Detaches the connection (idempotent; dropping it detaches too). A put blocked on it
    /// returns `Closed`; every later call fails `Closed`. The errors of pipelined puts not raised
    /// yet are dropped: [`flush`](Self::flush) first to see them.
    pub fn detach(&self) {
        forward!(&self.inner, out => out.detach())
    }
}

/// A task's input connection to a channel: per item, a state unseen → open → consumed.
pub struct ChannelInput {
    pub(crate) channel: Channel,
    pub(crate) inner: Backend<engine::ChannelInput, RemoteChannelInput>,
}

impl ChannelInput {
    /// The channel this connection reads.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Gets an item (docs/SEMANTICS.md, "Channels"); it becomes open on this connection. `timeout`:
    /// `None` waits as long as needed, `Some(Duration::ZERO)` never waits. Errors: `NotAvailable`
    /// (with the neighbouring timestamps), `AlreadyConsumed`, `Reclaimed`, `InvalidTimestamp`,
    /// `Closed` (remotely also `Unreachable`).
    pub fn get(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        forward!(&self.inner, inp => inp.get(selector, timeout))
    }

    /// The async form of [`get`](Self::get), for tokio.
    pub async fn get_async(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        forward!(&self.inner, inp => inp.get_async(selector, timeout).await)
    }

    /// A future that completes when a get with `selector` blocked on this connection would wake:
    /// an arrival, ts_min or the settled horizon passing what it asks for (the get then fails
    /// for good), the connection detached, its task, the channel or the runtime closed. Registered
    /// when created; see [`Changed`].
    pub fn changed(&self, selector: impl Into<Selector>) -> Changed {
        forward!(&self.inner, inp => inp.changed(selector))
    }

    /// Every item with `t0 <= ts <= t1` present and not consumed on this connection, in
    /// timestamp order; each becomes open. Never waits.
    pub fn get_range(&self, t0: Timestamp, t1: Timestamp) -> Result<Vec<Item>> {
        forward!(&self.inner, inp => inp.get_range(t0, t1))
    }

    /// Marks the item at `ts` consumed on this connection. A no-op for an item already consumed
    /// or reclaimed; `NotAvailable` for a timestamp never put.
    pub fn consume(&self, ts: Timestamp) -> Result<()> {
        forward!(&self.inner, inp => inp.consume(ts))
    }

    /// Marks every present item `<= ts` consumed on this connection, unseen ones included.
    pub fn consume_until(&self, ts: Timestamp) -> Result<()> {
        forward!(&self.inner, inp => inp.consume_until(ts))
    }

    /// Detaches the connection (idempotent; dropping it detaches too): all its claims are
    /// dropped. A get blocked on it returns `Closed`; every later call fails `Closed`.
    pub fn detach(&self) {
        forward!(&self.inner, inp => inp.detach())
    }
}
