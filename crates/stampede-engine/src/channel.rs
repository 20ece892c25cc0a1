//! Embedded channels and their connections (docs/SEMANTICS.md, "Channels"); the facade's
//! `stampede::Channel` forwards here when it is embedded.
//!
//! A [`Channel`] is a handle to a named container. A task attaches to it with
//! [`Channel::attach_input`] or [`Channel::attach_output`] and gets a [`ChannelInput`] or
//! [`ChannelOutput`]. Connections detach when dropped or with `detach` (idempotent, callable while
//! another thread is blocked on the connection: that call returns `Closed`); detaching an input
//! drops all its claims. Every later call on a detached connection fails `Closed`.
//!
//! Readiness: [`ChannelInput::changed`] and [`ChannelOutput::freed`] are owned futures that
//! complete when a blocked get (resp. put) of that connection would wake, for bridges that do the
//! operation itself synchronously (see [`Changed`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use stampede_core::{
    ConnId, InputOptions, Item, Limits, Payload, PutRecord, Result, Retention, Selector, Stats, Timestamp, TS_MAX,
};

use crate::disk::DiskStats;
use crate::options::{Info, PutOptions};
use crate::payload::IntoPayload;
use crate::space::{ChannelShared, Held, HorizonWait, Space, TaskShared};
use crate::task::Task;
use crate::trace::{self, Kind, NO_ITEM};
use crate::wait::{self, Changed};

/// A named channel of timestamped items (cheap to clone).
#[derive(Clone)]
pub struct Channel {
    pub(crate) shared: Arc<ChannelShared>,
    pub(crate) space: Arc<Space>,
}

impl Channel {
    /// The channel's id, unique within its runtime (names may be reused after `destroy`).
    pub fn id(&self) -> u64 {
        self.shared.key
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The channel's bounds.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Counters now: live items and bytes, reclaimed, puts, gets, connections, ts_min.
    pub fn stats(&self) -> Stats {
        self.shared.stats(&self.space)
    }

    /// What the disk tier holds now, if the channel has one.
    pub fn disk_stats(&self) -> Option<DiskStats> {
        self.shared.disk.as_ref().map(|disk| disk.lock().stats())
    }

    /// The channel's latest puts, oldest first (at most [`stampede_core::PUT_LOG_MAX`]): when (µs of this
    /// process's monotonic clock), the timestamp, the payload's size. The first call turns the
    /// log on, so it starts empty; a channel nobody asked about keeps none. What `stampede hz`
    /// computes a rate and a bandwidth from.
    pub fn put_log(&self) -> Vec<PutRecord> {
        self.shared.state.lock().put_log()
    }

    /// Timestamps of the items stored now, in order.
    pub fn timestamps(&self) -> Vec<Timestamp> {
        self.shared.state.lock().timestamps()
    }

    /// Registers a GC handler called with each item this channel reclaims, outside every lock,
    /// before the operation that made the item garbage returns.
    pub fn on_reclaim(&self, handler: impl Fn(&Item) + Send + Sync + 'static) {
        self.shared.on_reclaim(handler);
    }

    /// The channel's retention policy.
    pub fn retention(&self) -> Retention {
        self.shared.state.lock().retention()
    }

    /// Every timestamp below the returned one is **settled** (docs/CORRELATION.md,
    /// "Settled timestamps"): no task can still put it into this channel. With the producer set
    /// open this is ts_min; after [`close_producers`](Self::close_producers) it follows this
    /// channel's producers only.
    pub fn settled_below(&self) -> Timestamp {
        self.space.settled_below(&self.shared)
    }

    /// `true` once [`close_producers`](Self::close_producers) ran.
    pub fn producers_closed(&self) -> bool {
        self.shared.state.lock().producers_closed()
    }

    /// Declares the producer set closed: attaching another output connection fails from now on,
    /// and settledness depends only on the tasks holding output connections now, so one stalled
    /// task elsewhere no longer delays this channel's joins.
    pub fn close_producers(&self) {
        self.space.close_producers(&self.shared);
    }

    /// What the name service tells of it (embedded: no node).
    pub fn info(&self) -> Info {
        let meta = &self.shared.meta;
        Info {
            name: self.shared.name.to_string(),
            kind: "channel",
            node: None,
            limits: self.shared.limits,
            codec: meta.codec.clone(),
            description: meta.description.to_string(),
        }
    }

    /// Destroys the channel: its items are reclaimed, its name is freed, and every operation on
    /// it (blocked ones included) fails `Closed`.
    pub fn destroy(&self) -> Result<()> {
        self.space.destroy(&self.shared.name, "the channel was destroyed")
    }

    /// Attaches an input connection of `task`: every item present below the task's visibility is
    /// consumed on it at once; the rest, and every item put later, are unseen on it.
    pub fn attach_input(&self, task: &Task) -> Result<ChannelInput> {
        self.attach_input_with(task, InputOptions::default())
    }

    /// [`attach_input`](Self::attach_input) with a bound on how far the connection may fall
    /// behind: beyond it the oldest unseen items are consumed for it and counted as skipped
    /// (docs/SEMANTICS.md, "Slow readers: max_lag").
    pub fn attach_input_with(&self, task: &Task, options: InputOptions) -> Result<ChannelInput> {
        let task = &task.shared;
        self.space.check_same(task, "attach_input", self.name())?;
        let conn = self.space.next_id();
        self.space.attach_input(&self.shared, task, conn, |s, t| {
            let fx = s.attach_input(conn, t.id(), t.visibility(), options)?;
            Ok((s.input_claim(conn), fx))
        })?;
        task.held.lock().push(Held::ChannelInput(Arc::downgrade(&self.shared), conn));
        Ok(ChannelInput { channel: self.clone(), task: task.clone(), conn })
    }

    /// Attaches an output connection of `task`.
    pub fn attach_output(&self, task: &Task) -> Result<ChannelOutput> {
        let task = &task.shared;
        self.space.check_same(task, "attach_output", self.name())?;
        let conn = self.space.next_id();
        task.state.lock().check_open()?;
        {
            let mut state = self.shared.state.lock();
            state.attach_output(conn, task.id)?;
            self.space.attach_output(self.shared.key, task, conn);
        }
        task.held.lock().push(Held::ChannelOutput(Arc::downgrade(&self.shared), conn));
        Ok(ChannelOutput { channel: self.clone(), task: task.clone(), conn })
    }

    /// Completes at the next put or claim change in the runtime.
    pub fn progressed(&self) -> Changed {
        Changed::new(&self.space.progress)
    }

    /// `true` when both channels belong to the same runtime.
    pub fn same_runtime(&self, other: &Channel) -> bool {
        Arc::ptr_eq(&self.space, &other.space)
    }

    fn reclaimed(&self, items: &[Item]) {
        self.space.reclaimed(&self.shared, items);
    }
}

/// Handles are equal when they refer to the same channel (not merely the same name).
impl PartialEq for Channel {
    fn eq(&self, other: &Channel) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Eq for Channel {}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("name", &self.shared.name).finish()
    }
}

/// A task's output connection to a channel.
pub struct ChannelOutput {
    channel: Channel,
    pub(crate) task: Arc<TaskShared>,
    conn: ConnId,
}

impl ChannelOutput {
    /// The channel it puts into.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Puts with a reference count and/or a timeout (docs/SEMANTICS.md, "Channels"). Errors:
    /// `InvalidTimestamp`, `BelowVisibility`, `DuplicateTimestamp`, `Full`, `Closed`.
    pub fn put_with(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        let shared = &self.channel.shared;
        let _span = trace::span(Kind::Put, shared.trace_name(), ts as u64, payload.payload_bytes() as u64);
        shared.count_drop(self.admit(ts, payload).and_then(|payload| {
            self.spill()?;
            wait::blocking(&shared.freed, options.timeout, || self.try_put(ts, &payload, options.refcount))
        }))
    }

    /// The async form of [`put_with`](Self::put_with): waits for room without blocking a thread.
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        let shared = &self.channel.shared;
        let outcome = match self.admit(ts, payload).and_then(|payload| self.spill().map(|()| payload)) {
            Ok(payload) => {
                let attempt = || self.try_put(ts, &payload, options.refcount);
                wait::asynchronous(&shared.freed, options.timeout, attempt).await
            }
            Err(e) => Err(e),
        };
        shared.count_drop(outcome)
    }

    fn admit(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<Payload> {
        let buffers = &self.channel.shared.buffers;
        let declared = self.channel.shared.meta.codec.as_ref();
        crate::payload::admit(self.channel.name(), ts, payload, declared, buffers, |bytes| self.check_fits(ts, bytes))
    }

    /// Fails `Full { can_never_fit: true, .. }` (the error a put would return) when an item of
    /// `payload_bytes` at `ts` can never fit this channel's `max_bytes`, whatever is reclaimed:
    /// for callers that copy a payload themselves and want to refuse before the copy. Every put
    /// checks this before copying.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        let shared = &self.channel.shared;
        shared.limits.check_fits(&shared.name, ts, payload_bytes)
    }

    /// `Ok` unless a put at `ts` would be refused whatever is reclaimed (closed, detached, not
    /// visible to the task, a duplicate, refcount 0): what a caller about to wait for room of
    /// its own (a session's byte budget) asks first, so that such a put fails at once and with
    /// its own error.
    pub(crate) fn check_put(&self, ts: Timestamp, refcount: Option<u32>) -> Result<()> {
        // The order every operation takes them: the container's state, then the task's.
        let state = self.channel.shared.state.lock();
        state.check_put(self.conn, &self.task.state.lock(), ts, refcount)
    }

    /// Copies `parts`, concatenated, into a buffer from this channel's recycling pool: the one
    /// copy of copy-in, for callers (bindings) that build a [`Payload`] themselves.
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        self.channel.shared.buffers.copy(parts)
    }

    /// Demand feedback (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the
    /// lowest timestamp any current or future consumer may still get if it were put now. A source
    /// may skip producing frames below it: nobody would read them. See [`Retention`] for how late
    /// joiners affect it.
    pub fn demand(&self) -> Timestamp {
        self.channel.shared.state.lock().demand(self.channel.space.ts_min())
    }

    /// A future that completes when a put blocked on this connection would wake: room freed,
    /// the connection detached, its task, the channel or the runtime closed. Registered when
    /// created; see [`Changed`].
    pub fn freed(&self) -> Changed {
        Changed::new(&self.channel.shared.freed)
    }

    /// Detaches the connection (idempotent; dropping it detaches too). A put blocked on it
    /// returns `Closed`; every later call fails `Closed`.
    pub fn detach(&self) {
        self.channel.space.detach(&self.task, Held::ChannelOutput(Arc::downgrade(&self.channel.shared), self.conn));
    }

    /// With a disk tier, moves the oldest in-memory items beyond the memory horizon to disk
    /// before the put adds one more (docs/RECORDING.md, "The disk tier: history beyond memory"):
    /// written and synced first, then swapped for their disk copies. If the disk fails the put is
    /// refused with `Storage` and every item stays in memory. Blocks on disk I/O, in the async form
    /// too.
    fn spill(&self) -> Result<()> {
        let shared = &self.channel.shared;
        let Some(disk) = &shared.disk else { return Ok(()) };
        let mut store = disk.lock();
        let candidates = shared.state.lock().spill_candidates(store.keep());
        if candidates.is_empty() {
            return Ok(());
        }
        let on_disk = store.write(&candidates)?;
        let mut state = shared.state.lock();
        for (ts, data) in on_disk {
            // An item reclaimed since it was chosen is not swapped; the reclaiming call queued it,
            // and its place is freed when this store is let go (`disk::Held`).
            state.moved_to_disk(ts, data);
        }
        Ok(())
    }

    fn try_put(&self, ts: Timestamp, payload: &Payload, refcount: Option<u32>) -> Result<()> {
        let shared = &self.channel.shared;
        let (_, reclaimed) = self.channel.space.run(&**shared, &self.task, |s, t, _, fx| {
            s.put(self.conn, t, ts, payload.clone(), refcount, fx)?;
            s.note_put(ts, payload.len(), monotonic_us);
            Ok(())
        })?;
        shared.changed.notify();
        self.channel.reclaimed(&reclaimed);
        Ok(())
    }
}

impl Drop for ChannelOutput {
    fn drop(&mut self) {
        self.detach();
    }
}

/// A task's input connection to a channel: per item, a state unseen → open → consumed.
pub struct ChannelInput {
    channel: Channel,
    pub(crate) task: Arc<TaskShared>,
    pub(crate) conn: ConnId,
}

impl ChannelInput {
    /// Gets an item (docs/SEMANTICS.md, "Channels"); it becomes open on this connection. `timeout`:
    /// `None` waits as long as needed, `Some(Duration::ZERO)` never waits. Errors: `NotAvailable`
    /// (with the neighbouring timestamps), `AlreadyConsumed`, `Reclaimed`, `InvalidTimestamp`,
    /// `Closed`.
    pub fn get(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        let span = trace::span(Kind::Get, self.channel.shared.trace_name(), NO_ITEM, 0);
        let selector = selector.into();
        let got = match wait::at_once(self.try_get(selector), timeout) {
            Some(done) => done,
            None => {
                let mut registered = None;
                wait::blocking(&self.channel.shared.changed, timeout, || self.try_registered(selector, &mut registered))
            }
        };
        if let Ok(item) = &got {
            span.end_with(item.ts as u64, item.payload.len() as u64);
        }
        got
    }

    /// The async form of [`get`](Self::get), for tokio.
    pub async fn get_async(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        let selector = selector.into();
        if let Some(done) = wait::at_once(self.try_get(selector), timeout) {
            return done;
        }
        let mut registered = None;
        wait::asynchronous(&self.channel.shared.changed, timeout, || self.try_registered(selector, &mut registered))
            .await
    }

    /// A future that completes when a get with `selector` blocked on this connection would wake:
    /// an arrival, ts_min or the settled horizon passing what it asks for (the get then fails
    /// for good), the connection detached, its task, the channel or the runtime closed. Registered
    /// when created; see [`Changed`].
    pub fn changed(&self, selector: impl Into<Selector>) -> Changed {
        Changed::with_horizon(&self.channel.shared.changed, self.wait_horizon(selector.into()))
    }

    /// A blocking attempt: registers for horizon moves first if the get needs to (once), then
    /// tries. Registering inside the attempt means a producer set closed while the get waits
    /// (which wakes it) is seen by the next attempt.
    fn try_registered(&self, selector: Selector, registered: &mut Option<HorizonWait>) -> Result<Item> {
        if registered.is_none() {
            *registered = self.wait_horizon(selector);
        }
        self.try_get(selector)
    }

    /// Registers a get about to block for the horizon moves that end it, if any can: an exact get
    /// when ts_min or the settled horizon passes its timestamp, a wildcard get on a channel
    /// with a closed producer set when the horizon reaches `INFINITY`.
    fn wait_horizon(&self, selector: Selector) -> Option<HorizonWait> {
        let shared = &self.channel.shared;
        let threshold = match selector {
            Selector::At(ts) => ts,
            _ if shared.producers_closed.load(Ordering::SeqCst) => TS_MAX,
            _ => return None,
        };
        Some(self.channel.space.wait_horizon(shared, threshold))
    }

    /// Every item with `t0 <= ts <= t1` present and not consumed on this connection, in
    /// timestamp order; each becomes open. Never waits.
    pub fn get_range(&self, t0: Timestamp, t1: Timestamp) -> Result<Vec<Item>> {
        let (items, _) = self
            .channel
            .space
            .run(&*self.channel.shared, &self.task, |s, _, _, fx| s.get_range(self.conn, t0, t1, fx))?;
        Ok(items)
    }

    /// The timestamps open here that a get with `selector` (with `range`: a `get_range(t0, t1)`)
    /// would return without opening them (`stampede_core::ChannelState::open_for`): what a
    /// release of that get must not give back.
    pub fn open_for(&self, selector: Selector, range: Option<(Timestamp, Timestamp)>) -> Vec<Timestamp> {
        self.channel.shared.state.lock().open_for(self.conn, selector, range)
    }

    /// Gives back the items at `ts` a get whose reply never reached its client opened here (a
    /// node's release of the request: `stampede_core::ChannelState::give_back`): each still open
    /// is unseen again, and blocked getters wake for it. Returns how many went back.
    pub fn give_back(&self, ts: &[Timestamp]) -> usize {
        let shared = &self.channel.shared;
        let back = self.channel.space.run(&**shared, &self.task, |s, _, _, fx| Ok(s.give_back(self.conn, ts, fx)));
        let back = back.map_or(0, |(back, _)| back);
        if back > 0 {
            shared.changed.notify();
        }
        back
    }

    /// Marks the item at `ts` consumed on this connection. A no-op for an item already consumed
    /// or reclaimed; `NotAvailable` for a timestamp never put.
    pub fn consume(&self, ts: Timestamp) -> Result<()> {
        let _span = trace::span(Kind::Consume, self.channel.shared.trace_name(), ts as u64, 0);
        let (_, reclaimed) = self
            .channel
            .space
            .run(&*self.channel.shared, &self.task, |s, _, ts_min, fx| s.consume(self.conn, ts, ts_min, fx))?;
        self.channel.reclaimed(&reclaimed);
        Ok(())
    }

    /// What a node may push to this connection of the put at `ts`: the channel's newest
    /// timestamp, and the item if it may be pushed (`stampede_core::ChannelState::pushable`).
    /// Changes nothing.
    pub fn pushable(&self, ts: Timestamp) -> Option<(Timestamp, Option<Item>)> {
        self.channel.shared.state.lock().pushable(self.conn, ts)
    }

    /// The channel it reads.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Marks every present item `<= ts` consumed on this connection, unseen ones included.
    pub fn consume_until(&self, ts: Timestamp) -> Result<()> {
        let (_, reclaimed) = self
            .channel
            .space
            .run(&*self.channel.shared, &self.task, |s, _, _, fx| s.consume_until(self.conn, ts, fx))?;
        self.channel.reclaimed(&reclaimed);
        Ok(())
    }

    /// Detaches the connection (idempotent; dropping it detaches too): all its claims are
    /// dropped. A get blocked on it returns `Closed`; every later call fails `Closed`.
    pub fn detach(&self) {
        self.channel.space.detach(&self.task, Held::ChannelInput(Arc::downgrade(&self.channel.shared), self.conn));
    }

    fn try_get(&self, selector: Selector) -> Result<Item> {
        let (space, shared) = (&self.channel.space, &self.channel.shared);
        let (item, _) = space.run(&**shared, &self.task, |s, _, ts_min, fx| {
            s.get(self.conn, selector, ts_min, || space.horizon(shared), fx)
        })?;
        Ok(item)
    }
}

impl Drop for ChannelInput {
    fn drop(&mut self) {
        self.detach();
    }
}

/// µs since this process first asked: the put log's clock (monotonic; read only while a log is on).
fn monotonic_us() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed().as_micros() as u64
}
