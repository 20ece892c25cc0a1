//! Embedded queues and their connections (docs/SEMANTICS.md, "Queues"; the facade's
//! `stampede::Queue` forwards here): FIFO by insertion, each item to exactly one getter,
//! reclaimed when that getter consumes it.

use std::sync::Arc;
use std::time::Duration;

use stampede_core::queue::Ticket;
use stampede_core::{ConnId, Item, Limits, Payload, QueueItem, Result, Stats, Timestamp};

use crate::options::Info;
use crate::payload::IntoPayload;
use crate::space::{Held, QueueShared, Space, TaskShared};
use crate::task::Task;
use crate::trace::{self, Kind, NO_ITEM};
use crate::wait::{self, Changed};

/// A named FIFO queue of timestamped items (cheap to clone).
#[derive(Clone)]
pub struct Queue {
    pub(crate) shared: Arc<QueueShared>,
    pub(crate) space: Arc<Space>,
}

impl Queue {
    /// The queue's id, unique within its runtime (names may be reused after `destroy`).
    pub fn id(&self) -> u64 {
        self.shared.key
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The queue's bounds.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Counters now.
    pub fn stats(&self) -> Stats {
        self.shared.stats(&self.space)
    }

    /// Registers a GC handler called with each item the queue reclaims (when it is consumed).
    pub fn on_reclaim(&self, handler: impl Fn(&Item) + Send + Sync + 'static) {
        self.shared.on_reclaim(handler);
    }

    /// What the name service tells of it (embedded: no node).
    pub fn info(&self) -> Info {
        let meta = &self.shared.meta;
        Info {
            name: self.shared.name.to_string(),
            kind: "queue",
            node: None,
            limits: self.shared.limits,
            codec: meta.codec.clone(),
            description: meta.description.to_string(),
        }
    }

    /// Destroys the queue: items are reclaimed, operations fail `Closed`.
    pub fn destroy(&self) -> Result<()> {
        self.space.destroy(&self.shared.name, "the queue was destroyed")
    }

    /// Attaches an input connection of `task`.
    pub fn attach_input(&self, task: &Task) -> Result<QueueInput> {
        let task = &task.shared;
        self.space.check_same(task, "attach_input", self.name())?;
        let conn = self.space.next_id();
        self.space.attach_input(&self.shared, task, conn, |s, t| {
            s.attach_input(conn, t.id())?;
            Ok((s.claim(), stampede_core::Effects::default()))
        })?;
        task.held.lock().push(Held::QueueInput(Arc::downgrade(&self.shared), conn));
        Ok(QueueInput { queue: self.clone(), task: task.clone(), conn })
    }

    /// Attaches an output connection of `task`.
    pub fn attach_output(&self, task: &Task) -> Result<QueueOutput> {
        let task = &task.shared;
        self.space.check_same(task, "attach_output", self.name())?;
        let conn = self.space.next_id();
        task.state.lock().check_open()?;
        {
            let mut state = self.shared.state.lock();
            state.attach_output(conn, task.id)?;
            self.space.attach_output(self.shared.key, task, conn);
        }
        task.held.lock().push(Held::QueueOutput(Arc::downgrade(&self.shared), conn));
        Ok(QueueOutput { queue: self.clone(), task: task.clone(), conn })
    }
}

/// Handles are equal when they refer to the same queue (not merely the same name).
impl PartialEq for Queue {
    fn eq(&self, other: &Queue) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Eq for Queue {}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("name", &self.shared.name).finish()
    }
}

/// A task's output connection to a queue.
pub struct QueueOutput {
    queue: Queue,
    pub(crate) task: Arc<TaskShared>,
    conn: ConnId,
}

impl QueueOutput {
    /// The queue it puts into.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Appends `payload` at `ts` (duplicates allowed; `ts >= visibility`). `timeout` bounds the
    /// wait for room in a bounded queue.
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        let shared = &self.queue.shared;
        let _span = trace::span(Kind::Put, shared.trace_name(), ts as u64, payload.payload_bytes() as u64);
        shared.count_drop(
            self.admit(ts, payload)
                .and_then(|payload| wait::blocking(&shared.freed, timeout, || self.try_put(ts, &payload))),
        )
    }

    /// The async form of [`put`](Self::put).
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        let shared = &self.queue.shared;
        let outcome = match self.admit(ts, payload) {
            Ok(payload) => wait::asynchronous(&shared.freed, timeout, || self.try_put(ts, &payload)).await,
            Err(e) => Err(e),
        };
        shared.count_drop(outcome)
    }

    fn admit(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<Payload> {
        let buffers = &self.queue.shared.buffers;
        let declared = self.queue.shared.meta.codec.as_ref();
        crate::payload::admit(self.queue.name(), ts, payload, declared, buffers, |bytes| self.check_fits(ts, bytes))
    }

    /// As [`ChannelOutput::check_fits`](crate::ChannelOutput::check_fits), for this queue.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        let shared = &self.queue.shared;
        shared.limits.check_fits(&shared.name, ts, payload_bytes)
    }

    /// Copies `parts`, concatenated, into a buffer from this queue's recycling pool.
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        self.queue.shared.buffers.copy(parts)
    }

    /// A future that completes when a put blocked on this connection would wake (as
    /// [`ChannelOutput::freed`](crate::ChannelOutput::freed)).
    pub fn freed(&self) -> Changed {
        Changed::new(&self.queue.shared.freed)
    }

    /// Detaches the connection (idempotent; dropping it detaches too). A put blocked on it
    /// returns `Closed`; every later call fails `Closed`.
    pub fn detach(&self) {
        self.queue.space.detach(&self.task, Held::QueueOutput(Arc::downgrade(&self.queue.shared), self.conn));
    }

    /// `Ok` unless a put at `ts` would be refused whatever is taken (see
    /// [`ChannelOutput::check_put`](crate::ChannelOutput)).
    pub(crate) fn check_put(&self, ts: Timestamp) -> Result<()> {
        // The order every operation takes them: the container's state, then the task's.
        let state = self.queue.shared.state.lock();
        state.check_put(self.conn, &self.task.state.lock(), ts)
    }

    fn try_put(&self, ts: Timestamp, payload: &Payload) -> Result<()> {
        let shared = &self.queue.shared;
        self.queue.space.run(&**shared, &self.task, |s, t, _, fx| s.put(self.conn, t, ts, payload.clone(), fx))?;
        shared.changed.notify();
        Ok(())
    }
}

impl Drop for QueueOutput {
    fn drop(&mut self) {
        self.detach();
    }
}

/// A task's input connection to a queue.
pub struct QueueInput {
    queue: Queue,
    pub(crate) task: Arc<TaskShared>,
    pub(crate) conn: ConnId,
}

impl QueueInput {
    /// Takes the oldest waiting item; it is open on this connection (holding the task's
    /// visibility at its timestamp) until consumed. `NotAvailable` when the timeout expires.
    /// Blocked getters are served first come, first served; a getter that gives up passes its
    /// turn on.
    pub fn get(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        let span = trace::span(Kind::Get, self.queue.shared.trace_name(), NO_ITEM, 0);
        let got = match wait::at_once(self.try_get(None), timeout) {
            Some(done) => done,
            None => {
                let mut place = Place { input: self, ticket: None };
                wait::blocking(&self.queue.shared.changed, timeout, || self.try_get(Some(&mut place.ticket)))
            }
        };
        if let Ok(got) = &got {
            span.end_with(got.item.ts as u64, got.item.data().len() as u64);
        }
        got
    }

    /// The async form of [`get`](Self::get). Cancelling it (dropping the future) takes nothing
    /// and gives up its turn.
    pub async fn get_async(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        if let Some(done) = wait::at_once(self.try_get(None), timeout) {
            return done;
        }
        let mut place = Place { input: self, ticket: None };
        wait::asynchronous(&self.queue.shared.changed, timeout, || self.try_get(Some(&mut place.ticket))).await
    }

    /// Consumes an item this connection got; the queue reclaims it.
    pub fn consume(&self, item: &QueueItem) -> Result<()> {
        self.consume_at(Some(item.seq), item.item.ts)
    }

    /// Consumes the oldest item open on this connection at `ts`.
    pub fn consume_ts(&self, ts: Timestamp) -> Result<()> {
        self.consume_at(None, ts)
    }

    /// A future that completes when a get blocked on this connection would wake: an arrival,
    /// the connection detached, its task, the queue or the runtime closed. Registered when
    /// created; see [`Changed`]. It holds no place in line: a zero-timeout get after it is served
    /// only from items no blocked getter is waiting for.
    pub fn changed(&self) -> Changed {
        Changed::new(&self.queue.shared.changed)
    }

    /// Detaches the connection (idempotent; dropping it detaches too); items it still holds open
    /// go back to the head of the queue. A get blocked on it returns `Closed`; every later call
    /// fails `Closed`.
    pub fn detach(&self) {
        self.queue.space.detach(&self.task, Held::QueueInput(Arc::downgrade(&self.queue.shared), self.conn));
    }

    /// Gives back the open item `seq`, taken by a get whose reply never reached its client (a
    /// node's release of the request: `stampede_core::QueueState::give_back`); blocked getters
    /// wake for it. Returns whether it went back.
    pub fn give_back(&self, seq: u64) -> bool {
        let shared = &self.queue.shared;
        let back = self.queue.space.run(&**shared, &self.task, |s, _, _, fx| Ok(s.give_back(self.conn, seq, fx)));
        let back = back.is_ok_and(|(back, _)| back);
        if back {
            shared.changed.notify();
        }
        back
    }

    /// Whether the item `seq` is open on this connection (`stampede_core::QueueState::holds`).
    pub fn holds(&self, seq: u64) -> bool {
        self.queue.shared.state.lock().holds(self.conn, seq)
    }

    fn consume_at(&self, seq: Option<u64>, ts: Timestamp) -> Result<()> {
        let shared = &self.queue.shared;
        let _span = trace::span(Kind::Consume, shared.trace_name(), ts as u64, 0);
        let (_, reclaimed) =
            self.queue.space.run(&**shared, &self.task, |s, _, _, fx| s.consume(self.conn, seq, ts, fx))?;
        self.queue.space.reclaimed(shared, &reclaimed);
        Ok(())
    }

    fn try_get(&self, ticket: Option<&mut Option<Ticket>>) -> Result<QueueItem> {
        let (item, _) =
            self.queue.space.run(&*self.queue.shared, &self.task, |s, _, _, fx| s.get(self.conn, ticket, fx))?;
        Ok(item)
    }
}

/// A blocked get's place in the queue's line of getters, left when the get returns or is
/// cancelled (dropped).
struct Place<'a> {
    input: &'a QueueInput,
    ticket: Option<Ticket>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else { return };
        let shared = &self.input.queue.shared;
        let passed_on = shared.state.lock().leave(ticket);
        if passed_on {
            shared.changed.notify();
        }
    }
}

impl Drop for QueueInput {
    fn drop(&mut self) {
        self.detach();
    }
}
