//! Model-based property test of the rules of docs/SEMANTICS.md — "Channels", "Virtual time,
//! visibility, GC" and "Queues" — against the embedded runtime.
//!
//! The reference model below is written from the rules, not from `stampede-core`: per (item,
//! input connection) an explicit [`Seen`] state in a plain map, visibility and ts_min recomputed
//! by brute force from their definitions after every step, reference counts and tombstones as
//! plain fields. Random operation sequences from several root and child tasks on two channels
//! (one unbounded, one bounded by items and bytes) and one bounded queue run against a real
//! [`Runtime`] and the model side by side. After each step the test compares the operation's
//! result (value, or error variant with its key fields), then the live timestamps, stats and GC
//! handler calls of every container, `ts_min`, and every task's virtual time and visibility, and
//! checks GC safety (nothing some connection still has unseen or open, or that a future task could
//! legally get, was reclaimed) and liveness (nothing below ts_min survives).
//!
//! Semantic decisions the implementation made where the rules leave a choice (and the model
//! follows; docs/SEMANTICS.md): ts_min never runs ahead of 1 + the highest timestamp ever put (a
//! producer can always join: docs/SEMANTICS.md, "Virtual time, visibility, GC"), so with nothing
//! claiming it, it is exactly that; a root task starts at or above ts_min; `consume` of an item
//! already consumed or reclaimed is a no-op, of a timestamp never put `NotAvailable`; `get_range`
//! acts on items present now; `consume_until(ts)` consumes the present items up to `ts` and makes
//! later items at or below `ts` born consumed on that connection (counting as its consumption for
//! a reference count) — a newer decision than "present items only", recorded in
//! docs/SEMANTICS.md; an exact get below ts_min fails `Reclaimed` before presence is checked; a
//! refcount reclaim leaves a tombstone until ts_min passes it; the implicit consumption on attach
//! does not count towards a reference count.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use stampede::{
    Channel, ChannelInput, ChannelOutput, Error, Item, Limits, Payload, PutOptions, Queue, QueueInput, QueueItem,
    QueueOutput, Runtime, Selector, Task, Timestamp, INFINITY,
};

type Ts = Timestamp;

/// Most tasks one sequence creates (creation ops beyond it are skipped).
const TASKS_MAX: usize = 5;
/// Longest generated sequence (after a fixed prelude).
const OPS_MAX: usize = 100;
/// Most connections one sequence attaches.
const CONNS_MAX: usize = 12;
/// Bounds of the second channel: small, so `Full` happens (by items and by bytes).
const BOUNDED_ITEMS_MAX: usize = 3;
const BOUNDED_BYTES_MAX: usize = 20;
/// Bound of the queue.
const QUEUE_ITEMS_MAX: usize = 4;
/// Longest payload a put generates (below `BOUNDED_BYTES_MAX`, so every item could fit).
const PAYLOAD_BYTES_MAX: usize = 8;

const NOW: Option<Duration> = Some(Duration::ZERO);

fn channel_limits(ch: usize) -> Limits {
    match ch {
        0 => Limits::unbounded(),
        _ => Limits::items(BOUNDED_ITEMS_MAX).with_bytes(BOUNDED_BYTES_MAX),
    }
}

fn queue_limits() -> Limits {
    Limits::items(QUEUE_ITEMS_MAX)
}

fn is_item_ts(ts: Ts) -> bool {
    (0..INFINITY).contains(&ts)
}

// ---- operations --------------------------------------------------------------------------------

/// A generated operation. Indices are raw and resolved modulo what exists when the operation
/// runs, so shrinking keeps sequences meaningful.
#[derive(Clone, Debug)]
enum Op {
    RootTask {
        vt: Ts,
    },
    Spawn {
        parent: usize,
        vt: Ts,
    },
    SetVirtualTime {
        task: usize,
        vt: VirtualTime,
    },
    AttachInput {
        task: usize,
        target: usize,
    },
    AttachOutput {
        task: usize,
        target: usize,
    },
    Detach {
        conn: usize,
    },
    Put {
        conn: usize,
        ts: Ts,
        len: usize,
        refcount: Option<u32>,
    },
    Get {
        conn: usize,
        selector: Selector,
    },
    GetRange {
        conn: usize,
        t0: Ts,
        t1: Ts,
    },
    Consume {
        conn: usize,
        ts: Ts,
    },
    /// Exact get of a timestamp once put into the connection's channel (present or not).
    GetKnown {
        conn: usize,
        k: usize,
    },
    /// Consume of a timestamp once put into the connection's channel (present or not).
    ConsumeKnown {
        conn: usize,
        k: usize,
    },
    ConsumeUntil {
        conn: usize,
        ts: Ts,
    },
    QueueConsumeSeq {
        conn: usize,
        seq: usize,
    },
    CloseTask {
        task: usize,
    },
    Collect,
}

/// The argument of a generated `set_virtual_time`: mostly a small step from the current virtual
/// time (so ts_min advances gradually and puts keep landing), sometimes an absolute value.
#[derive(Clone, Copy, Debug)]
enum VirtualTime {
    Step(i64),
    At(Ts),
}

/// Where a connection points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Channel(usize),
    Queue,
}

impl Target {
    fn of(raw: usize) -> Target {
        match raw % 3 {
            2 => Target::Queue,
            ch => Target::Channel(ch),
        }
    }
}

/// A resolved operation: indices name existing tasks and connections (same in model and runtime).
#[derive(Clone, Debug)]
enum Step {
    RootTask { vt: Ts },
    Spawn { parent: usize, vt: Ts },
    SetVirtualTime { task: usize, vt: Ts },
    AttachInput { task: usize, target: Target },
    AttachOutput { task: usize, target: Target },
    Detach { conn: usize },
    Put { conn: usize, ts: Ts, payload: Vec<u8>, refcount: Option<u32> },
    Get { conn: usize, selector: Selector },
    GetRange { conn: usize, t0: Ts, t1: Ts },
    Consume { conn: usize, ts: Ts },
    ConsumeUntil { conn: usize, ts: Ts },
    QueueConsumeSeq { conn: usize, seq: u64, ts: Ts },
    CloseTask { task: usize },
    Collect,
}

/// What an operation returned, reduced to what the rules (docs/SEMANTICS.md) fix.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Ok,
    Item(Ts, Vec<u8>),
    QueueItem(u64, Ts, Vec<u8>),
    Items(Vec<(Ts, Vec<u8>)>),
    Count(usize),
    Err(Fail),
}

/// An error variant with its key fields.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fail {
    BelowVisibility { ts: Ts, limit: Ts },
    DuplicateTimestamp { ts: Ts },
    InvalidTimestamp { ts: Ts },
    Full { ts: Ts },
    NotAvailable { previous: Option<Ts>, next: Option<Ts> },
    AlreadyConsumed { ts: Ts },
    Reclaimed { ts: Ts },
    Closed,
    InvalidArgument,
    Other(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        match e {
            Error::BelowVisibility { ts, limit, .. } => Fail::BelowVisibility { ts, limit },
            Error::DuplicateTimestamp { ts, .. } => Fail::DuplicateTimestamp { ts },
            Error::InvalidTimestamp { ts, .. } => Fail::InvalidTimestamp { ts },
            Error::Full { ts, .. } => Fail::Full { ts },
            Error::NotAvailable { previous, next, .. } => Fail::NotAvailable { previous, next },
            Error::AlreadyConsumed { ts, .. } => Fail::AlreadyConsumed { ts },
            Error::Reclaimed { ts, .. } => Fail::Reclaimed { ts },
            Error::Closed { .. } => Fail::Closed,
            Error::InvalidArgument { .. } => Fail::InvalidArgument,
            other => Fail::Other(other.to_string()),
        }
    }
}

fn fail(f: Fail) -> Out {
    Out::Err(f)
}

// ---- the reference model -----------------------------------------------------------------------

/// State of one item on one channel input connection (docs/SEMANTICS.md, "Channels").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Unseen,
    Open,
    Consumed,
}

struct MItem {
    payload: Vec<u8>,
    /// Consumptions still needed for an early reclaim, if the put declared a reference count.
    refs_left: Option<u32>,
}

struct MChannel {
    limits: Limits,
    items: BTreeMap<Ts, MItem>,
    /// Timestamps reclaimed by reference count, not yet below ts_min.
    tombstones: BTreeSet<Ts>,
    /// Timestamp of every item ever put, in put order.
    put_log: Vec<Ts>,
    puts: u64,
    reclaimed: u64,
}

impl MChannel {
    fn live_bytes(&self) -> usize {
        self.items.values().map(|i| i.payload.len()).sum()
    }
}

#[derive(Clone)]
struct MQueueItem {
    seq: u64,
    ts: Ts,
    payload: Vec<u8>,
}

struct MQueue {
    limits: Limits,
    /// Items not yet gotten (or given back by a detaching getter), in delivery order.
    waiting: VecDeque<MQueueItem>,
    /// Timestamp of every item ever put, by sequence number.
    ts_by_seq: Vec<Ts>,
    puts: u64,
    reclaimed: u64,
}

struct MTask {
    vt: Ts,
    closed: bool,
}

struct MConn {
    task: usize,
    target: Target,
    input: bool,
    /// The test still holds the handle (not explicitly detached).
    handle: bool,
    /// Attached: neither detached nor closed with its task.
    attached: bool,
    /// Channel input: the state of every present item on this connection.
    seen: BTreeMap<Ts, Seen>,
    /// Queue input: items gotten and not consumed, in get order.
    queue_open: Vec<MQueueItem>,
    /// Channel input: highest timestamp passed to `consume_until`; an item put later at or
    /// below it is born consumed here.
    floor: Option<Ts>,
}

struct Model {
    ts_min: Ts,
    /// 1 + the highest timestamp ever put (0 before the first put): ts_min never passes it.
    watermark: Ts,
    tasks: Vec<MTask>,
    channels: Vec<MChannel>,
    queue: MQueue,
    conns: Vec<MConn>,
    /// Timestamps reclaimed during the current step, per channel, then the queue.
    reclaimed_now: Vec<Vec<Ts>>,
}

impl Model {
    fn new() -> Model {
        let channel = |ch| MChannel {
            limits: channel_limits(ch),
            items: BTreeMap::new(),
            tombstones: BTreeSet::new(),
            put_log: Vec::new(),
            puts: 0,
            reclaimed: 0,
        };
        Model {
            ts_min: 0,
            watermark: 0,
            tasks: Vec::new(),
            channels: vec![channel(0), channel(1)],
            queue: MQueue {
                limits: queue_limits(),
                waiting: VecDeque::new(),
                ts_by_seq: Vec::new(),
                puts: 0,
                reclaimed: 0,
            },
            conns: Vec::new(),
            reclaimed_now: vec![Vec::new(); 3],
        }
    }

    /// `min(vt, timestamps of items open on any of the task's input connections)`.
    fn visibility(&self, task: usize) -> Ts {
        let mut vis = self.tasks[task].vt;
        for c in self.conns.iter().filter(|c| c.attached && c.input && c.task == task) {
            for (&ts, &s) in &c.seen {
                if s == Seen::Open {
                    vis = vis.min(ts);
                }
            }
            for q in &c.queue_open {
                vis = vis.min(q.ts);
            }
        }
        vis
    }

    /// Lowest unseen-or-open timestamp over a channel's attached input connections.
    fn channel_claim(&self, ch: usize) -> Option<Ts> {
        self.conns
            .iter()
            .filter(|c| c.attached && c.input && c.target == Target::Channel(ch))
            .flat_map(|c| c.seen.iter().filter(|(_, &s)| s != Seen::Consumed).map(|(&ts, _)| ts))
            .min()
    }

    /// Every queue item not yet consumed: waiting, or open on an attached getter.
    fn queue_items(&self) -> Vec<MQueueItem> {
        let open = self.conns.iter().filter(|c| c.attached).flat_map(|c| c.queue_open.iter().cloned());
        self.queue.waiting.iter().cloned().chain(open).collect()
    }

    /// ts_min from its definition: live tasks' visibility, unseen-or-open channel items, queue
    /// items not consumed. `None` when nothing claims anything.
    fn lowest_claim(&self) -> Option<Ts> {
        let tasks = (0..self.tasks.len()).filter(|&t| !self.tasks[t].closed).map(|t| self.visibility(t));
        let channels = (0..self.channels.len()).filter_map(|ch| self.channel_claim(ch));
        let queue = self.queue_items().into_iter().map(|q| q.ts);
        tasks.chain(channels).chain(queue).min()
    }

    /// Recomputes ts_min and reclaims everything below it (TGC). Returns an error text if ts_min
    /// would move backwards, which no sequence of legal operations may cause.
    fn collect(&mut self) -> Result<(), String> {
        let new = self.lowest_claim().map_or(self.watermark, |claim| claim.min(self.watermark));
        if new < self.ts_min {
            return Err(format!("model: ts_min would move back from {} to {new}", self.ts_min));
        }
        self.ts_min = new;
        for (ch, channel) in self.channels.iter_mut().enumerate() {
            let kept = channel.items.split_off(&new);
            for ts in std::mem::replace(&mut channel.items, kept).into_keys() {
                channel.reclaimed += 1;
                self.reclaimed_now[ch].push(ts);
            }
            channel.tombstones.retain(|&ts| ts >= new);
        }
        let channels = &self.channels;
        for c in &mut self.conns {
            if let Target::Channel(ch) = c.target {
                c.seen.retain(|ts, _| channels[ch].items.contains_key(ts));
            }
        }
        Ok(())
    }

    /// One consumption of the item at `ts` (a state moved from unseen or open to consumed): an
    /// item whose reference count is reached is reclaimed at once, on every connection.
    fn count_consumption(&mut self, ch: usize, ts: Ts) {
        let channel = &mut self.channels[ch];
        let Some(item) = channel.items.get_mut(&ts) else { return };
        let Some(refs_left) = item.refs_left.as_mut() else { return };
        *refs_left -= 1;
        if *refs_left == 0 {
            self.reclaim_early(ch, ts);
        }
    }

    /// Reclaims the item at `ts` above ts_min (its reference count is reached), leaving a
    /// tombstone; it stops being unseen or open everywhere.
    fn reclaim_early(&mut self, ch: usize, ts: Ts) {
        let channel = &mut self.channels[ch];
        channel.items.remove(&ts);
        channel.tombstones.insert(ts);
        channel.reclaimed += 1;
        self.reclaimed_now[ch].push(ts);
        for c in &mut self.conns {
            if c.target == Target::Channel(ch) {
                c.seen.remove(&ts);
            }
        }
    }

    /// Highest unseen-or-open timestamp below `ts` and lowest above it on a connection.
    fn neighbours(&self, conn: usize, ts: Ts) -> (Option<Ts>, Option<Ts>) {
        let live: Vec<Ts> =
            self.conns[conn].seen.iter().filter(|(_, &s)| s != Seen::Consumed).map(|(&t, _)| t).collect();
        (live.iter().copied().filter(|&t| t < ts).max(), live.iter().copied().filter(|&t| t > ts).min())
    }

    fn detach(&mut self, conn: usize) {
        let c = &mut self.conns[conn];
        if !c.attached {
            return;
        }
        c.attached = false;
        c.seen.clear();
        let mut back = std::mem::take(&mut c.queue_open);
        back.sort_by_key(|q| q.seq);
        for q in back.into_iter().rev() {
            self.queue.waiting.push_front(q);
        }
    }

    fn apply(&mut self, step: &Step) -> Out {
        match *step {
            Step::RootTask { vt } => {
                if vt < 0 {
                    return fail(Fail::InvalidTimestamp { ts: vt });
                }
                if vt < self.ts_min {
                    return fail(Fail::BelowVisibility { ts: vt, limit: self.ts_min });
                }
                self.tasks.push(MTask { vt, closed: false });
                Out::Ok
            }
            Step::Spawn { parent, vt } => {
                if vt < 0 {
                    return fail(Fail::InvalidTimestamp { ts: vt });
                }
                if self.tasks[parent].closed {
                    return fail(Fail::Closed);
                }
                let limit = self.visibility(parent);
                if vt < limit {
                    return fail(Fail::BelowVisibility { ts: vt, limit });
                }
                self.tasks.push(MTask { vt, closed: false });
                Out::Ok
            }
            Step::SetVirtualTime { task, vt } => {
                if self.tasks[task].closed {
                    return fail(Fail::Closed);
                }
                let limit = self.visibility(task);
                if vt < limit {
                    return fail(Fail::BelowVisibility { ts: vt, limit });
                }
                self.tasks[task].vt = vt;
                Out::Ok
            }
            Step::AttachInput { task, target } => {
                if self.tasks[task].closed {
                    return fail(Fail::Closed);
                }
                let vis = self.visibility(task);
                let seen = match target {
                    // Present items below the task's visibility are consumed at once.
                    Target::Channel(ch) => self.channels[ch]
                        .items
                        .keys()
                        .map(|&ts| (ts, if ts < vis { Seen::Consumed } else { Seen::Unseen }))
                        .collect(),
                    Target::Queue => BTreeMap::new(),
                };
                let c = MConn {
                    task,
                    target,
                    input: true,
                    handle: true,
                    attached: true,
                    seen,
                    queue_open: Vec::new(),
                    floor: None,
                };
                self.conns.push(c);
                Out::Ok
            }
            Step::AttachOutput { task, target } => {
                if self.tasks[task].closed {
                    return fail(Fail::Closed);
                }
                let c = MConn {
                    task,
                    target,
                    input: false,
                    handle: true,
                    attached: true,
                    seen: BTreeMap::new(),
                    queue_open: Vec::new(),
                    floor: None,
                };
                self.conns.push(c);
                Out::Ok
            }
            Step::Detach { conn } => {
                self.detach(conn);
                self.conns[conn].handle = false;
                Out::Ok
            }
            Step::CloseTask { task } => {
                // `Task::close` releases the task's claim first (its connections' claims still
                // cover what it holds), then detaches its connections one by one; ts_min may
                // advance after each step and never moves back.
                if self.tasks[task].closed {
                    return Out::Ok;
                }
                self.tasks[task].closed = true;
                if let Err(e) = self.collect() {
                    return fail(Fail::Other(e));
                }
                for conn in 0..self.conns.len() {
                    if self.conns[conn].task == task && self.conns[conn].attached {
                        self.detach(conn);
                        if let Err(e) = self.collect() {
                            return fail(Fail::Other(e));
                        }
                    }
                }
                Out::Ok
            }
            Step::Put { conn, ts, ref payload, refcount } => self.put(conn, ts, payload, refcount),
            Step::Get { conn, selector } => match self.conns[conn].target {
                Target::Channel(ch) => self.get(conn, ch, selector),
                Target::Queue => self.queue_get(conn),
            },
            Step::GetRange { conn, t0, t1 } => self.get_range(conn, t0, t1),
            Step::Consume { conn, ts } => match self.conns[conn].target {
                Target::Channel(ch) => self.consume(conn, ch, ts),
                Target::Queue => self.queue_consume(conn, None, ts),
            },
            Step::ConsumeUntil { conn, ts } => self.consume_until(conn, ts),
            Step::QueueConsumeSeq { conn, seq, ts } => self.queue_consume(conn, Some(seq), ts),
            Step::Collect => Out::Count(0),
        }
    }

    fn put(&mut self, conn: usize, ts: Ts, payload: &[u8], refcount: Option<u32>) -> Out {
        if !is_item_ts(ts) {
            return fail(Fail::InvalidTimestamp { ts });
        }
        let c = &self.conns[conn];
        if !c.attached {
            return fail(Fail::Closed);
        }
        let limit = self.visibility(c.task);
        if ts < limit {
            return fail(Fail::BelowVisibility { ts, limit });
        }
        let ch = match c.target {
            Target::Queue => return self.queue_put(ts, payload),
            Target::Channel(ch) => ch,
        };
        let channel = &mut self.channels[ch];
        if channel.items.contains_key(&ts) || channel.tombstones.contains(&ts) {
            return fail(Fail::DuplicateTimestamp { ts });
        }
        if refcount == Some(0) {
            return fail(Fail::InvalidArgument);
        }
        let too_many = channel.limits.capacity.is_some_and(|cap| channel.items.len() >= cap);
        let too_big = channel.limits.bytes_max.is_some_and(|max| channel.live_bytes() + payload.len() > max);
        if too_many || too_big {
            return fail(Fail::Full { ts });
        }
        channel.puts += 1;
        channel.put_log.push(ts);
        let mut born_consumed = 0;
        for c in &mut self.conns {
            if c.attached && c.input && c.target == Target::Channel(ch) {
                let done_with_it = c.floor.is_some_and(|floor| ts <= floor);
                born_consumed += u32::from(done_with_it);
                c.seen.insert(ts, if done_with_it { Seen::Consumed } else { Seen::Unseen });
            }
        }
        // Being born consumed on a connection counts as that connection's consumption.
        let refs_left = refcount.map(|r| r.saturating_sub(born_consumed));
        self.channels[ch].items.insert(ts, MItem { payload: payload.to_vec(), refs_left });
        self.watermark = self.watermark.max(ts + 1);
        if refs_left == Some(0) {
            self.reclaim_early(ch, ts);
        }
        Out::Ok
    }

    fn queue_put(&mut self, ts: Ts, payload: &[u8]) -> Out {
        let live = self.queue_items().len();
        if self.queue.limits.capacity.is_some_and(|cap| live >= cap) {
            return fail(Fail::Full { ts });
        }
        let seq = self.queue.ts_by_seq.len() as u64;
        self.queue.ts_by_seq.push(ts);
        self.queue.waiting.push_back(MQueueItem { seq, ts, payload: payload.to_vec() });
        self.watermark = self.watermark.max(ts + 1);
        self.queue.puts += 1;
        Out::Ok
    }

    fn get(&mut self, conn: usize, ch: usize, selector: Selector) -> Out {
        if !self.conns[conn].attached {
            return fail(Fail::Closed);
        }
        let seen = &self.conns[conn].seen;
        let unseen = || seen.iter().filter(|(_, &s)| s == Seen::Unseen).map(|(&t, _)| t);
        let live = || seen.iter().filter(|(_, &s)| s != Seen::Consumed).map(|(&t, _)| t);
        let chosen = match selector {
            Selector::At(ts) => {
                if !is_item_ts(ts) {
                    return fail(Fail::InvalidTimestamp { ts });
                }
                if ts < self.ts_min || self.channels[ch].tombstones.contains(&ts) {
                    return fail(Fail::Reclaimed { ts });
                }
                match seen.get(&ts) {
                    None => {
                        let (previous, next) = self.neighbours(conn, ts);
                        return fail(Fail::NotAvailable { previous, next });
                    }
                    Some(Seen::Consumed) => return fail(Fail::AlreadyConsumed { ts }),
                    Some(_) => Some(ts),
                }
            }
            Selector::Oldest => live().min(),
            Selector::Newest => live().max(),
            Selector::OldestUnseen => unseen().min(),
            Selector::NewestUnseen => unseen().max(),
        };
        let Some(ts) = chosen else {
            return fail(Fail::NotAvailable { previous: live().max(), next: None });
        };
        self.conns[conn].seen.insert(ts, Seen::Open);
        Out::Item(ts, self.channels[ch].items[&ts].payload.clone())
    }

    fn get_range(&mut self, conn: usize, t0: Ts, t1: Ts) -> Out {
        let Target::Channel(ch) = self.conns[conn].target else { unreachable!("get_range on a queue") };
        if !self.conns[conn].attached {
            return fail(Fail::Closed);
        }
        let mut items = Vec::new();
        for (&ts, s) in &mut self.conns[conn].seen {
            if t0 <= ts && ts <= t1 && *s != Seen::Consumed {
                *s = Seen::Open;
                items.push((ts, self.channels[ch].items[&ts].payload.clone()));
            }
        }
        Out::Items(items)
    }

    fn consume(&mut self, conn: usize, ch: usize, ts: Ts) -> Out {
        if !is_item_ts(ts) {
            return fail(Fail::InvalidTimestamp { ts });
        }
        let gone = ts < self.ts_min || self.channels[ch].tombstones.contains(&ts);
        let present = self.channels[ch].items.contains_key(&ts);
        if !self.conns[conn].attached {
            return fail(Fail::Closed);
        }
        if !present {
            if gone {
                return Out::Ok;
            }
            let (previous, next) = self.neighbours(conn, ts);
            return fail(Fail::NotAvailable { previous, next });
        }
        let state = self.conns[conn].seen.insert(ts, Seen::Consumed);
        if state != Some(Seen::Consumed) {
            self.count_consumption(ch, ts);
        }
        Out::Ok
    }

    fn consume_until(&mut self, conn: usize, ts: Ts) -> Out {
        let Target::Channel(ch) = self.conns[conn].target else { unreachable!("consume_until on a queue") };
        if !is_item_ts(ts) {
            return fail(Fail::InvalidTimestamp { ts });
        }
        if !self.conns[conn].attached {
            return fail(Fail::Closed);
        }
        let c = &mut self.conns[conn];
        c.floor = c.floor.max(Some(ts));
        let mut counted = Vec::new();
        for (&t, s) in &mut c.seen {
            if t <= ts && *s != Seen::Consumed {
                *s = Seen::Consumed;
                counted.push(t);
            }
        }
        for t in counted {
            self.count_consumption(ch, t);
        }
        Out::Ok
    }

    fn queue_get(&mut self, conn: usize) -> Out {
        if !self.conns[conn].attached {
            return fail(Fail::Closed);
        }
        let Some(q) = self.queue.waiting.pop_front() else {
            return fail(Fail::NotAvailable { previous: None, next: None });
        };
        let out = Out::QueueItem(q.seq, q.ts, q.payload.clone());
        self.conns[conn].queue_open.push(q);
        out
    }

    /// Consumes the open item `seq` (or the oldest open at `ts`) on a queue connection.
    fn queue_consume(&mut self, conn: usize, seq: Option<u64>, ts: Ts) -> Out {
        let c = &mut self.conns[conn];
        if !c.attached {
            return fail(Fail::Closed);
        }
        let position = match seq {
            Some(seq) => c.queue_open.iter().position(|q| q.seq == seq),
            None => c.queue_open.iter().position(|q| q.ts == ts),
        };
        let Some(position) = position else {
            let previous = c.queue_open.iter().map(|q| q.ts).filter(|&t| t < ts).max();
            let next = c.queue_open.iter().map(|q| q.ts).filter(|&t| t > ts).min();
            return fail(Fail::NotAvailable { previous, next });
        };
        let q = c.queue_open.remove(position);
        self.queue.reclaimed += 1;
        self.reclaimed_now[2].push(q.ts);
        Out::Ok
    }
}

// ---- the real runtime --------------------------------------------------------------------------

enum Handle {
    ChannelInput(ChannelInput),
    ChannelOutput(ChannelOutput),
    QueueInput(QueueInput),
    QueueOutput(QueueOutput),
    Dropped,
}

struct Real {
    rt: Runtime,
    channels: Vec<Channel>,
    queue: Queue,
    tasks: Vec<Task>,
    conns: Vec<Handle>,
    /// What the GC handlers saw, per channel, then the queue.
    reclaim_log: Vec<Arc<Mutex<Vec<Ts>>>>,
}

impl Real {
    fn new() -> Real {
        let rt = Runtime::new();
        let channels: Vec<Channel> =
            (0..2).map(|ch| rt.create_channel(&format!("model/c{ch}"), channel_limits(ch)).unwrap()).collect();
        let queue = rt.create_queue("model/q", queue_limits()).unwrap();
        let reclaim_log: Vec<Arc<Mutex<Vec<Ts>>>> = (0..3).map(|_| Arc::default()).collect();
        for (ch, channel) in channels.iter().enumerate() {
            let log = reclaim_log[ch].clone();
            channel.on_reclaim(move |item: &Item| log.lock().unwrap().push(item.ts)).unwrap();
        }
        let log = reclaim_log[2].clone();
        queue.on_reclaim(move |item: &Item| log.lock().unwrap().push(item.ts)).unwrap();
        Real { rt, channels, queue, tasks: Vec::new(), conns: Vec::new(), reclaim_log }
    }

    fn apply(&mut self, step: &Step) -> Out {
        let unit = |r: stampede::Result<()>| match r {
            Ok(()) => Out::Ok,
            Err(e) => Out::Err(e.into()),
        };
        let item = |r: stampede::Result<Item>| match r {
            Ok(item) => Out::Item(item.ts, item.data().to_vec()),
            Err(e) => Out::Err(e.into()),
        };
        match *step {
            Step::RootTask { vt } => self.task(self.rt.task(vt)),
            Step::Spawn { parent, vt } => self.task(self.tasks[parent].spawn(vt)),
            Step::SetVirtualTime { task, vt } => unit(self.tasks[task].set_virtual_time(vt)),
            Step::AttachInput { task, target } => {
                let task = &self.tasks[task];
                let handle = match target {
                    Target::Channel(ch) => task.attach_input(&self.channels[ch]).map(Handle::ChannelInput),
                    Target::Queue => task.attach_input(&self.queue).map(Handle::QueueInput),
                };
                self.connection(handle)
            }
            Step::AttachOutput { task, target } => {
                let task = &self.tasks[task];
                let handle = match target {
                    Target::Channel(ch) => task.attach_output(&self.channels[ch]).map(Handle::ChannelOutput),
                    Target::Queue => task.attach_output(&self.queue).map(Handle::QueueOutput),
                };
                self.connection(handle)
            }
            Step::Detach { conn } => {
                match std::mem::replace(&mut self.conns[conn], Handle::Dropped) {
                    Handle::ChannelInput(c) => c.detach(),
                    Handle::ChannelOutput(c) => c.detach(),
                    Handle::QueueInput(c) => c.detach(),
                    Handle::QueueOutput(c) => c.detach(),
                    Handle::Dropped => unreachable!("detach of a dropped connection"),
                }
                Out::Ok
            }
            Step::CloseTask { task } => {
                self.tasks[task].close();
                Out::Ok
            }
            Step::Put { conn, ts, ref payload, refcount } => match &self.conns[conn] {
                Handle::ChannelOutput(out) => {
                    unit(out.put_with(ts, payload.clone(), PutOptions { refcount, timeout: NOW }))
                }
                Handle::QueueOutput(out) => unit(out.put(ts, payload.clone(), NOW)),
                _ => unreachable!("put on an input connection"),
            },
            Step::Get { conn, selector } => match &self.conns[conn] {
                Handle::ChannelInput(inp) => item(inp.get(selector, NOW)),
                Handle::QueueInput(inp) => match inp.get(NOW) {
                    Ok(q) => Out::QueueItem(q.seq, q.item.ts, q.item.data().to_vec()),
                    Err(e) => Out::Err(e.into()),
                },
                _ => unreachable!("get on an output connection"),
            },
            Step::GetRange { conn, t0, t1 } => match &self.conns[conn] {
                Handle::ChannelInput(inp) => match inp.get_range(t0, t1) {
                    Ok(items) => Out::Items(items.into_iter().map(|i| (i.ts, i.data().to_vec())).collect()),
                    Err(e) => Out::Err(e.into()),
                },
                _ => unreachable!("get_range on a non-channel-input connection"),
            },
            Step::Consume { conn, ts } => match &self.conns[conn] {
                Handle::ChannelInput(inp) => unit(inp.consume(ts)),
                Handle::QueueInput(inp) => unit(inp.consume_ts(ts)),
                _ => unreachable!("consume on an output connection"),
            },
            Step::ConsumeUntil { conn, ts } => match &self.conns[conn] {
                Handle::ChannelInput(inp) => unit(inp.consume_until(ts)),
                _ => unreachable!("consume_until on a non-channel-input connection"),
            },
            Step::QueueConsumeSeq { conn, seq, ts } => match &self.conns[conn] {
                Handle::QueueInput(inp) => {
                    // Only `seq` and `ts` identify the item; the payload is irrelevant here.
                    let q = QueueItem { seq, item: Item { ts, payload: Payload::from(Vec::new()) } };
                    unit(inp.consume(&q))
                }
                _ => unreachable!("queue consume on a non-queue-input connection"),
            },
            Step::Collect => Out::Count(self.rt.collect()),
        }
    }

    fn task(&mut self, made: stampede::Result<Task>) -> Out {
        match made {
            Ok(task) => {
                self.tasks.push(task);
                Out::Ok
            }
            Err(e) => Out::Err(e.into()),
        }
    }

    fn connection(&mut self, made: stampede::Result<Handle>) -> Out {
        match made {
            Ok(handle) => {
                self.conns.push(handle);
                Out::Ok
            }
            Err(e) => Out::Err(e.into()),
        }
    }

    fn drain_log(&self, index: usize) -> Vec<Ts> {
        let mut log = std::mem::take(&mut *self.reclaim_log[index].lock().unwrap());
        log.sort_unstable();
        log
    }
}

// ---- driving both ------------------------------------------------------------------------------

struct Harness {
    model: Model,
    real: Real,
    payloads_made: u64,
    trace: String,
}

impl Harness {
    /// Turns a raw operation into a step on what exists now, or `None` if it cannot apply.
    fn resolve(&mut self, op: &Op) -> Option<Step> {
        let tasks = self.model.tasks.len();
        let pick = |raw: usize, want: &dyn Fn(&MConn) -> bool| {
            let found: Vec<usize> = (0..self.model.conns.len()).filter(|&i| want(&self.model.conns[i])).collect();
            (!found.is_empty()).then(|| found[raw % found.len()])
        };
        let step = match *op {
            Op::RootTask { vt } => (tasks < TASKS_MAX).then_some(Step::RootTask { vt })?,
            Op::Spawn { parent, vt } => {
                (tasks > 0 && tasks < TASKS_MAX).then(|| Step::Spawn { parent: parent % tasks, vt })?
            }
            Op::SetVirtualTime { task, vt } => {
                let task = task % tasks.max(1);
                let vt = match vt {
                    VirtualTime::Step(step) => self.model.tasks.get(task)?.vt.saturating_add(step),
                    VirtualTime::At(vt) => vt,
                };
                (tasks > 0).then_some(Step::SetVirtualTime { task, vt })?
            }
            Op::AttachInput { task, target } => (tasks > 0 && self.model.conns.len() < CONNS_MAX)
                .then(|| Step::AttachInput { task: task % tasks, target: Target::of(target) })?,
            Op::AttachOutput { task, target } => (tasks > 0 && self.model.conns.len() < CONNS_MAX)
                .then(|| Step::AttachOutput { task: task % tasks, target: Target::of(target) })?,
            Op::Detach { conn } => Step::Detach { conn: pick(conn, &|c| c.handle)? },
            Op::Put { conn, ts, len, refcount } => {
                let conn = pick(conn, &|c| c.handle && !c.input)?;
                self.payloads_made += 1;
                let salt = self.payloads_made;
                let payload = (0..len as u64).map(|i| (salt * 31 + i) as u8).collect();
                Step::Put { conn, ts, payload, refcount }
            }
            Op::Get { conn, selector } => Step::Get { conn: pick(conn, &|c| c.handle && c.input)?, selector },
            Op::GetRange { conn, t0, t1 } => {
                let conn = pick(conn, &|c| c.handle && c.input && c.target != Target::Queue)?;
                Step::GetRange { conn, t0, t1 }
            }
            Op::Consume { conn, ts } => Step::Consume { conn: pick(conn, &|c| c.handle && c.input)?, ts },
            Op::GetKnown { conn, k } => {
                let conn = pick(conn, &|c| c.handle && c.input && c.target != Target::Queue)?;
                Step::Get { conn, selector: Selector::At(self.known_ts(conn, k)?) }
            }
            Op::ConsumeKnown { conn, k } => {
                let conn = pick(conn, &|c| c.handle && c.input && c.target != Target::Queue)?;
                Step::Consume { conn, ts: self.known_ts(conn, k)? }
            }
            Op::ConsumeUntil { conn, ts } => {
                Step::ConsumeUntil { conn: pick(conn, &|c| c.handle && c.input && c.target != Target::Queue)?, ts }
            }
            Op::QueueConsumeSeq { conn, seq } => {
                let conn = pick(conn, &|c| c.handle && c.input && c.target == Target::Queue)?;
                let put = &self.model.queue.ts_by_seq;
                if put.is_empty() {
                    return None;
                }
                let seq = seq % put.len();
                Step::QueueConsumeSeq { conn, seq: seq as u64, ts: put[seq] }
            }
            Op::CloseTask { task } => (tasks > 0).then(|| Step::CloseTask { task: task % tasks })?,
            Op::Collect => Step::Collect,
        };
        Some(step)
    }

    /// The `k`-th timestamp ever put into the channel of input connection `conn`.
    fn known_ts(&self, conn: usize, k: usize) -> Option<Ts> {
        let Target::Channel(ch) = self.model.conns[conn].target else { return None };
        let log = &self.model.channels[ch].put_log;
        (!log.is_empty()).then(|| log[k % log.len()])
    }

    fn run(&mut self, ops: &[Op]) -> Result<(), TestCaseError> {
        for op in ops {
            let Some(step) = self.resolve(op) else { continue };
            let expected = self.model.apply(&step);
            let got = self.real.apply(&step);
            let _ = writeln!(self.trace, "{step:?} -> {got:?}");
            prop_assert_eq!(&got, &expected, "result differs (model is `right`)\ntrace:\n{}", self.trace);
            self.model.collect().map_err(|e| TestCaseError::fail(format!("{e}\ntrace:\n{}", self.trace)))?;
            self.check()?;
        }
        Ok(())
    }

    /// Compares every observable after a step and checks GC safety and liveness.
    fn check(&mut self) -> Result<(), TestCaseError> {
        let (model, real, trace) = (&mut self.model, &self.real, &self.trace);
        let ts_min = real.rt.ts_min();
        prop_assert_eq!(ts_min, model.ts_min, "ts_min differs\ntrace:\n{}", trace);
        for (t, task) in real.tasks.iter().enumerate() {
            prop_assert_eq!(task.virtual_time(), model.tasks[t].vt, "task {} virtual time\ntrace:\n{}", t, trace);
            prop_assert_eq!(task.visibility(), model.visibility(t), "task {} visibility\ntrace:\n{}", t, trace);
        }
        for (ch, channel) in real.channels.iter().enumerate() {
            let present = channel.timestamps();
            let expected: Vec<Ts> = model.channels[ch].items.keys().copied().collect();
            // Liveness: nothing below ts_min survives.
            prop_assert!(present.iter().all(|&ts| ts >= ts_min), "c{} keeps items below ts_min\ntrace:\n{}", ch, trace);
            // Safety: nothing a connection still has unseen or open was reclaimed.
            for c in model.conns.iter().filter(|c| c.attached && c.target == Target::Channel(ch)) {
                for (ts, _) in c.seen.iter().filter(|(_, &s)| s != Seen::Consumed) {
                    prop_assert!(present.contains(ts), "c{} lost ts={} still claimed\ntrace:\n{}", ch, ts, trace);
                }
            }
            // ...nor anything a future task could still get (everything >= ts_min not reclaimed
            // by its reference count), and nothing else survives: the sets are equal.
            prop_assert_eq!(&present, &expected, "c{} live timestamps\ntrace:\n{}", ch, trace);
            let stats = channel.stats();
            let m = &model.channels[ch];
            prop_assert_eq!(stats.live_items, m.items.len(), "c{} live_items\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.live_bytes, m.live_bytes(), "c{} live_bytes\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.reclaimed, m.reclaimed, "c{} reclaimed\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.puts, m.puts, "c{} puts\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.tombstones, m.tombstones.len(), "c{} tombstones\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.claim, model.channel_claim(ch), "c{} claim\ntrace:\n{}", ch, trace);
            let attached = |input: bool| {
                model.conns.iter().filter(|c| c.attached && c.input == input && c.target == Target::Channel(ch)).count()
            };
            prop_assert_eq!(stats.inputs, attached(true), "c{} inputs\ntrace:\n{}", ch, trace);
            prop_assert_eq!(stats.outputs, attached(false), "c{} outputs\ntrace:\n{}", ch, trace);
            let mut expected_log = std::mem::take(&mut model.reclaimed_now[ch]);
            expected_log.sort_unstable();
            prop_assert_eq!(real.drain_log(ch), expected_log, "c{} GC handler calls\ntrace:\n{}", ch, trace);
        }
        let stats = real.queue.stats();
        let items = model.queue_items();
        prop_assert_eq!(stats.live_items, items.len(), "queue live_items\ntrace:\n{}", trace);
        prop_assert_eq!(stats.live_bytes, items.iter().map(|q| q.payload.len()).sum::<usize>(), "queue bytes");
        prop_assert_eq!(stats.reclaimed, model.queue.reclaimed, "queue reclaimed\ntrace:\n{}", trace);
        prop_assert_eq!(stats.puts, model.queue.puts, "queue puts\ntrace:\n{}", trace);
        prop_assert_eq!(stats.claim, items.iter().map(|q| q.ts).min(), "queue claim\ntrace:\n{}", trace);
        let mut expected_log = std::mem::take(&mut model.reclaimed_now[2]);
        expected_log.sort_unstable();
        prop_assert_eq!(real.drain_log(2), expected_log, "queue GC handler calls\ntrace:\n{}", trace);
        Ok(())
    }
}

// ---- strategies --------------------------------------------------------------------------------

/// Item timestamps: mostly a small range so collisions happen, sometimes invalid.
fn item_ts() -> impl Strategy<Value = Ts> {
    prop_oneof![16 => 0..12i64, 1 => Just(-1i64), 1 => Just(INFINITY)]
}

/// Virtual times: a small range, sometimes INFINITY or negative.
fn virtual_time() -> impl Strategy<Value = Ts> {
    prop_oneof![12 => 0..14i64, 2 => Just(INFINITY), 1 => Just(-1i64)]
}

fn set_virtual_time() -> impl Strategy<Value = VirtualTime> {
    prop_oneof![6 => (-2..4i64).prop_map(VirtualTime::Step), 1 => virtual_time().prop_map(VirtualTime::At)]
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        3 => item_ts().prop_map(Selector::At),
        1 => Just(Selector::Oldest),
        1 => Just(Selector::Newest),
        2 => Just(Selector::OldestUnseen),
        2 => Just(Selector::NewestUnseen),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let ix = || 0..64usize;
    let refcount = prop_oneof![4 => Just(None), 2 => (1..3u32).prop_map(Some), 1 => Just(Some(0u32))];
    prop_oneof![
        1 => virtual_time().prop_map(|vt| Op::RootTask { vt }),
        1 => (ix(), virtual_time()).prop_map(|(parent, vt)| Op::Spawn { parent, vt }),
        5 => (ix(), set_virtual_time()).prop_map(|(task, vt)| Op::SetVirtualTime { task, vt }),
        4 => (ix(), ix()).prop_map(|(task, target)| Op::AttachInput { task, target }),
        2 => (ix(), ix()).prop_map(|(task, target)| Op::AttachOutput { task, target }),
        1 => ix().prop_map(|conn| Op::Detach { conn }),
        14 => (ix(), item_ts(), 0..=PAYLOAD_BYTES_MAX, refcount)
            .prop_map(|(conn, ts, len, refcount)| Op::Put { conn, ts, len, refcount }),
        14 => (ix(), selector()).prop_map(|(conn, selector)| Op::Get { conn, selector }),
        2 => (ix(), -1..13i64, -1..13i64).prop_map(|(conn, t0, t1)| Op::GetRange { conn, t0, t1 }),
        5 => (ix(), item_ts()).prop_map(|(conn, ts)| Op::Consume { conn, ts }),
        6 => (ix(), ix()).prop_map(|(conn, k)| Op::GetKnown { conn, k }),
        4 => (ix(), ix()).prop_map(|(conn, k)| Op::ConsumeKnown { conn, k }),
        3 => (ix(), -1..13i64).prop_map(|(conn, ts)| Op::ConsumeUntil { conn, ts }),
        2 => (ix(), ix()).prop_map(|(conn, seq)| Op::QueueConsumeSeq { conn, seq }),
        1 => ix().prop_map(|task| Op::CloseTask { task }),
        1 => Just(Op::Collect),
    ]
}

/// A fixed start so that most sequences exercise data flow: a producer at vt 0 with outputs to
/// every container, a reader at INFINITY of the unbounded channel, and one of the bounded channel
/// and the queue.
fn prelude() -> Vec<Op> {
    vec![
        Op::RootTask { vt: 0 },
        Op::AttachOutput { task: 0, target: 0 },
        Op::AttachOutput { task: 0, target: 1 },
        Op::AttachOutput { task: 0, target: 2 },
        Op::RootTask { vt: INFINITY },
        Op::AttachInput { task: 1, target: 0 },
        Op::RootTask { vt: INFINITY },
        Op::AttachInput { task: 2, target: 1 },
        Op::AttachInput { task: 2, target: 2 },
    ]
}

fn run_sequence(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut harness = Harness { model: Model::new(), real: Real::new(), payloads_made: 0, trace: String::new() };
    harness.run(&prelude())?;
    harness.run(&ops)?;
    harness.real.rt.close();
    Ok(())
}

proptest! {
    // 256 cases by default (PROPTEST_CASES overrides); no regression files in the tree.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    })]

    /// Proves that the embedded runtime matches a brute-force reference model of docs/SEMANTICS.md
    /// ("Channels", "Virtual time, visibility, GC", "Queues") on random sequences of task,
    /// connection, put, get, consume and close operations: same results and errors, same live
    /// items, ts_min, visibilities, stats and GC handler calls after every step; GC never reclaims
    /// a claimed or still-gettable item and leaves nothing below ts_min.
    #[test]
    fn runtime_matches_reference_model(ops in proptest::collection::vec(op(), 1..OPS_MAX)) {
        run_sequence(ops)?;
    }
}

/// Proves that `Task::close` detaches input connections for good, as its doc says
/// ("their later use fails `Closed`"): a `consume` of an already reclaimed timestamp through such
/// a connection fails `Closed` like every other operation, rather than succeeding silently.
#[test]
fn consume_on_a_detached_connection_fails_closed() {
    let rt = Runtime::new();
    let ch = rt.create_channel("bug/consume", Limits::unbounded()).unwrap();
    let producer = rt.task(0).unwrap();
    let reader = rt.task(INFINITY).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    reader.close();
    producer.attach_output(&ch).unwrap().put(7, &b"."[..]).unwrap();
    producer.set_virtual_time(8).unwrap();
    assert_eq!(rt.ts_min(), 8);
    assert!(matches!(inp.consume_until(0), Err(Error::Closed { .. })));
    assert!(matches!(inp.consume(0), Err(Error::Closed { .. })), "got {:?}", inp.consume(0));
}
