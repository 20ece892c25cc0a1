//! One channel's items and its input connections' item states (docs/SEMANTICS.md, "Channels").
//!
//! Representation: the items in an ordered map by timestamp; per input connection the sets of
//! timestamps that are *unseen* and *open* there — every other present item is *consumed* there.
//! This makes each selector a first/last lookup, `consume_until` a split proportional to what it
//! consumes, and the connection's claim on ts_min `min(unseen ∪ open)`, reported at
//! [`Location::Input`] whenever it moves.
//!
//! Invariants (asserted after GC): no unseen or open timestamp lies below ts_min, so reclaiming
//! everything below ts_min can never take an item a connection may still get.
//!
//! Disk tier (docs/RECORDING.md, "The disk tier: history beyond memory"): a channel made
//! [`with_disk_tier`](ChannelState::with_disk_tier) also keeps the set of timestamps whose payload
//! is still in memory. The driver writes the oldest of them to disk
//! ([`spill_candidates`](ChannelState::spill_candidates)) and swaps their bytes for equal ones
//! backed by the disk ([`moved_to_disk`](ChannelState::moved_to_disk)): where an item's bytes live
//! changes nothing else — item states, claims and GC are the same for both.
//!
//! Beside this file: `limits` (the bounds and the retention policy), `lag` (an input
//! connection's bound on how far it may fall behind), `disk_tier` (the disk tier's side) and
//! `reclaim` (reclamation below ts_min and early).

mod disk_tier;
mod give_back;
mod lag;
mod limits;
mod output;
mod put_log;
mod reclaim;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::effects::{Effects, OpenChange};
use crate::error::{Error, Result};
use crate::id_map::IdMap;
use crate::item::{Item, Payload};
use crate::progress::{push_move, Location};
use crate::stats::{ConnectionStats, Stats};
use crate::task::{TaskId, TaskState};
use crate::time::{earliest, is_item_ts, show, Selector, Timestamp, INFINITY};
use crate::tombstones::Tombstones;
pub use lag::InputOptions;
pub use limits::{Limits, Retention};
pub use output::{OutputOptions, PUT_WINDOW_MAX};
pub use put_log::{PutRecord, PUT_LOG_MAX};

/// Identifies a connection within a node.
pub type ConnId = u64;

#[derive(Debug)]
pub(super) struct Stored {
    payload: Payload,
    /// Consumptions still needed before the item is reclaimed early (docs/SEMANTICS.md,
    /// "Virtual time, visibility, GC": reference counts), if declared.
    refs_left: Option<u32>,
    /// Input connections on which the item is unseen or open.
    holders: u32,
}

#[derive(Debug)]
struct Input {
    task: TaskId,
    unseen: BTreeSet<Timestamp>,
    open: BTreeSet<Timestamp>,
    /// Highest timestamp passed to `consume_until`: items put later at or below it are born
    /// consumed on this connection.
    floor: Option<Timestamp>,
    /// How far it may fall behind (unbounded by default).
    lag: InputOptions,
    counts: ConnectionStats,
}

impl Input {
    /// This connection's claim on ts_min: its lowest unseen or open item.
    fn claim(&self) -> Option<Timestamp> {
        earliest(self.unseen.first().copied(), self.open.first().copied())
    }

    /// Highest non-consumed timestamp below `ts` and lowest above it.
    fn neighbours(&self, ts: Timestamp) -> (Option<Timestamp>, Option<Timestamp>) {
        let below = |set: &BTreeSet<Timestamp>| set.range(..ts).next_back().copied();
        let above = |set: &BTreeSet<Timestamp>| set.range(ts.saturating_add(1)..).next().copied();
        let previous = below(&self.unseen).max(below(&self.open));
        let next = earliest(above(&self.unseen), above(&self.open));
        (previous, next)
    }
}

/// The state of one channel.
#[derive(Debug)]
pub struct ChannelState {
    name: Arc<str>,
    limits: Limits,
    retention: Retention,
    /// Once set, no new output connection may attach (settledness then depends on the current
    /// producers only: docs/CORRELATION.md, "Settled timestamps").
    producers_closed: bool,
    items: BTreeMap<Timestamp, Stored>,
    /// Timestamps reclaimed early by reference count, kept until ts_min passes them so that a
    /// second put at the same timestamp is still rejected (runs of consecutive timestamps cost
    /// one entry; bounded, see [`Tombstones`]).
    tombstones: Tombstones,
    inputs: IdMap<ConnId, Input>,
    outputs: IdMap<ConnId, (TaskId, ConnectionStats)>,
    live_bytes: usize,
    /// With a disk tier: the timestamps of the items whose payload is still in memory (the rest
    /// are on disk). `None`: no tier, everything is in memory.
    in_memory: Option<BTreeSet<Timestamp>>,
    puts: u64,
    gets: u64,
    reclaimed: u64,
    closed: Option<&'static str>,
    /// Its latest puts, once someone asked for them (`put_log`).
    put_log: Option<std::collections::VecDeque<PutRecord>>,
}

impl ChannelState {
    /// An empty channel.
    pub fn new(name: Arc<str>, limits: Limits, retention: Retention) -> ChannelState {
        ChannelState {
            name,
            limits,
            retention,
            producers_closed: false,
            items: BTreeMap::new(),
            tombstones: Tombstones::new(),
            inputs: IdMap::default(),
            outputs: IdMap::default(),
            live_bytes: 0,
            in_memory: None,
            puts: 0,
            gets: 0,
            reclaimed: 0,
            closed: None,
            put_log: None,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The channel's bounds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fails `Closed` once the channel is destroyed.
    pub fn check_open(&self) -> Result<()> {
        check_open(&self.name, self.closed)
    }

    /// Lowest timestamp stored or tombstoned, if any (lets GC skip channels with nothing to
    /// reclaim below ts_min).
    pub fn oldest(&self) -> Option<Timestamp> {
        earliest(self.items.keys().next().copied(), self.tombstones.first())
    }

    /// The lowest timestamp stored at or above `ts`: the first claim of an input connection
    /// attached by a task at visibility `ts`.
    pub fn lowest_from(&self, ts: Timestamp) -> Option<Timestamp> {
        self.items.range(ts..).next().map(|(&ts, _)| ts)
    }

    /// Every check of [`put`](Self::put) but room: what refuses the put whatever is reclaimed
    /// (closed, not an item timestamp, detached, not visible to `task`, a duplicate, refcount 0).
    pub fn check_put(&self, conn: ConnId, task: &TaskState, ts: Timestamp, refcount: Option<u32>) -> Result<()> {
        check_put(&self.name, self.closed, &self.outputs, conn, task, ts)?;
        if self.items.contains_key(&ts) || self.tombstones.contains(ts) {
            return Err(Error::DuplicateTimestamp { name: self.name.to_string(), ts });
        }
        if refcount == Some(0) {
            return Err(Error::InvalidArgument {
                op: "put",
                name: self.name.to_string(),
                reason: format!("ts={ts}: refcount must be at least 1 (it counts consumptions)"),
            });
        }
        Ok(())
    }

    /// `put(ts, payload, refcount)` through output connection `conn` of `task` (docs/SEMANTICS.md,
    /// "Channels"). Copy-in happened when `payload` was made. Its effects go into `fx`.
    pub fn put(
        &mut self,
        conn: ConnId,
        task: &TaskState,
        ts: Timestamp,
        payload: Payload,
        refcount: Option<u32>,
        fx: &mut Effects,
    ) -> Result<()> {
        self.check_put(conn, task, ts, refcount)?;
        self.limits.check_room(&self.name, ts, self.items.len(), self.live_bytes, payload.len())?;
        let mut holders = 0;
        let mut born_consumed = 0;
        // Items inputs with a bound on lag let go (counted as their consumptions below).
        let mut skipped = Vec::new();
        // The channel's newest item, looked up only for an input bounded by timestamp distance.
        let newest = || self.items.last_key_value().map_or(ts, |(&last, _)| last.max(ts));
        for (&conn, input) in self.inputs.iter_mut() {
            if input.floor.is_some_and(|floor| ts <= floor) {
                born_consumed += 1;
                continue;
            }
            let before = input.claim();
            input.unseen.insert(ts);
            let trimmed = input.lag.trim(&mut input.unseen, input.lag.max_lag_ts.map(|_| newest()));
            input.counts.skipped += trimmed.len() as u64;
            skipped.extend(trimmed);
            push_move(&mut fx.claims, Location::Input(conn), before, input.claim());
            holders += 1;
        }
        self.live_bytes += payload.len();
        if let Some(in_memory) = self.in_memory.as_mut() {
            in_memory.insert(ts);
        }
        let refs_left = refcount.map(|r| r.saturating_sub(born_consumed));
        self.items.insert(ts, Stored { payload, refs_left, holders });
        self.puts += 1;
        self.outputs.get_mut(&conn).expect("checked above").1.items += 1;
        fx.put = Some(ts);
        for ts in skipped {
            self.count_consumption(ts, fx);
        }
        self.reclaim_if_garbage(ts, fx);
        Ok(())
    }

    /// `get(selector)` on input connection `conn` (docs/SEMANTICS.md, "Channels"); the item becomes
    /// open there. `settled_below` is asked, only when nothing suitable is present, for the
    /// channel's settled horizon (docs/CORRELATION.md, "Settled timestamps"): a `NotAvailable` is
    /// final (`settled`) when nothing suitable can come any more — an exact timestamp below it, or,
    /// for a wildcard, a horizon at `INFINITY`.
    pub fn get(
        &mut self,
        conn: ConnId,
        selector: Selector,
        ts_min: Timestamp,
        settled_below: impl FnOnce() -> Timestamp,
        fx: &mut Effects,
    ) -> Result<Item> {
        self.check_open()?;
        let input = self.inputs.get_mut(&conn).ok_or_else(|| Error::detached(&self.name))?;
        let ts = match selector {
            Selector::At(ts) => {
                if !is_item_ts(ts) {
                    return Err(Error::InvalidTimestamp { op: "get", name: self.name.to_string(), ts });
                }
                if ts < ts_min {
                    let reason = format!("ts_min is {}; nothing below it can be gotten again", show(ts_min));
                    return Err(Error::Reclaimed { name: self.name.to_string(), ts, reason });
                }
                if !self.items.contains_key(&ts) {
                    if self.tombstones.contains(ts) {
                        let reason = "reclaimed early: its reference count was reached".to_owned();
                        return Err(Error::Reclaimed { name: self.name.to_string(), ts, reason });
                    }
                    let (previous, next) = input.neighbours(ts);
                    let settled = ts < settled_below();
                    return Err(Error::NotAvailable {
                        op: "get",
                        name: self.name.to_string(),
                        selector,
                        previous,
                        next,
                        settled,
                    });
                }
                if !input.unseen.contains(&ts) && !input.open.contains(&ts) {
                    return Err(Error::AlreadyConsumed { name: self.name.to_string(), ts });
                }
                Some(ts)
            }
            Selector::Oldest => input.claim(),
            Selector::Newest => input.unseen.last().max(input.open.last()).copied(),
            Selector::OldestUnseen => input.unseen.first().copied(),
            Selector::NewestUnseen => input.unseen.last().copied(),
        };
        let Some(ts) = ts else {
            let previous = input.unseen.last().max(input.open.last()).copied();
            let settled = settled_below() == INFINITY;
            return Err(Error::NotAvailable {
                op: "get",
                name: self.name.to_string(),
                selector,
                previous,
                next: None,
                settled,
            });
        };
        // unseen -> open keeps min(unseen ∪ open), so the claim does not move.
        if input.unseen.remove(&ts) {
            input.open.insert(ts);
            fx.opens.push(OpenChange { task: input.task, ts, opened: true });
        }
        self.gets += 1;
        input.counts.items += 1;
        let stored = &self.items[&ts];
        Ok(Item { ts, payload: stored.payload.clone() })
    }

    /// What a node may push to input connection `conn` of the put at `ts` (crate::prefetch): the
    /// channel's newest timestamp, and the item when it is unseen there, carries no reference
    /// count and the connection has no bound on lag. Changes nothing. `None`: no such connection
    /// or item.
    pub fn pushable(&self, conn: ConnId, ts: Timestamp) -> Option<(Timestamp, Option<Item>)> {
        let input = self.inputs.get(&conn)?;
        let newest = *self.items.last_key_value()?.0;
        let stored = self.items.get(&ts)?;
        let pushed = (input.unseen.contains(&ts) && stored.refs_left.is_none() && !input.lag.bounded())
            .then(|| Item { ts, payload: stored.payload.clone() });
        Some((newest, pushed))
    }

    /// Every item with `t0 <= ts <= t1` present and not consumed on `conn`, in timestamp order;
    /// each becomes open there.
    pub fn get_range(&mut self, conn: ConnId, t0: Timestamp, t1: Timestamp, fx: &mut Effects) -> Result<Vec<Item>> {
        self.check_open()?;
        let input = self.inputs.get_mut(&conn).ok_or_else(|| Error::detached(&self.name))?;
        if t0 > t1 {
            return Ok(Vec::new());
        }
        let newly_open: Vec<Timestamp> = input.unseen.range(t0..=t1).copied().collect();
        for &ts in &newly_open {
            input.unseen.remove(&ts);
            input.open.insert(ts);
            fx.opens.push(OpenChange { task: input.task, ts, opened: true });
        }
        let items: Vec<Item> =
            input.open.range(t0..=t1).map(|&ts| Item { ts, payload: self.items[&ts].payload.clone() }).collect();
        self.gets += items.len() as u64;
        input.counts.items += items.len() as u64;
        Ok(items)
    }

    /// `consume(ts)` on `conn`. Consuming an item already consumed or reclaimed is a no-op;
    /// consuming a timestamp that was never put fails `NotAvailable`.
    pub fn consume(&mut self, conn: ConnId, ts: Timestamp, ts_min: Timestamp, fx: &mut Effects) -> Result<()> {
        self.check_open()?;
        if !is_item_ts(ts) {
            return Err(Error::InvalidTimestamp { op: "consume", name: self.name.to_string(), ts });
        }
        // One lookup of the connection; the item's presence is checked against it (the
        // error's neighbours come from it).
        let input = self.inputs.get_mut(&conn).ok_or_else(|| Error::detached(&self.name))?;
        if !self.items.contains_key(&ts) {
            if ts < ts_min || self.tombstones.contains(ts) {
                return Ok(());
            }
            let (previous, next) = input.neighbours(ts);
            return Err(Error::NotAvailable {
                op: "consume",
                name: self.name.to_string(),
                selector: Selector::At(ts),
                previous,
                next,
                settled: false,
            });
        }
        let before = input.claim();
        let was_open = input.open.remove(&ts);
        let was_unseen = !was_open && input.unseen.remove(&ts);
        input.counts.skipped += u64::from(was_unseen);
        let counted = was_open || was_unseen;
        if was_open {
            fx.opens.push(OpenChange { task: input.task, ts, opened: false });
        }
        push_move(&mut fx.claims, Location::Input(conn), before, input.claim());
        if counted {
            self.count_consumption(ts, fx);
        }
        Ok(())
    }

    /// `consume_until(ts)` on `conn`: every present item `<= ts`, unseen ones included. Items put
    /// later, whatever their timestamp, are unseen on `conn`. `ts` is an item timestamp (0 to
    /// `TS_MAX`), as `consume`'s: `InvalidTimestamp` else.
    pub fn consume_until(&mut self, conn: ConnId, ts: Timestamp, fx: &mut Effects) -> Result<()> {
        self.check_open()?;
        if !is_item_ts(ts) {
            return Err(Error::InvalidTimestamp { op: "consume_until", name: self.name.to_string(), ts });
        }
        let input = self.inputs.get_mut(&conn).ok_or_else(|| Error::detached(&self.name))?;
        let before = input.claim();
        input.floor = input.floor.max(Some(ts));
        let split = ts.saturating_add(1);
        let keep_unseen = input.unseen.split_off(&split);
        let keep_open = input.open.split_off(&split);
        let consumed_unseen = std::mem::replace(&mut input.unseen, keep_unseen);
        let consumed_open = std::mem::replace(&mut input.open, keep_open);
        input.counts.skipped += consumed_unseen.len() as u64;
        let task = input.task;
        fx.opens.extend(consumed_open.iter().map(|&ts| OpenChange { task, ts, opened: false }));
        push_move(&mut fx.claims, Location::Input(conn), before, input.claim());
        for ts in consumed_unseen.into_iter().chain(consumed_open) {
            self.count_consumption(ts, fx);
        }
        Ok(())
    }

    /// Attaches an input connection for a task at `visibility`: present items below it, and the
    /// oldest beyond the connection's bound on lag (`options`), are consumed on the new connection
    /// at once (the latter counted as skipped); the rest are unseen.
    pub fn attach_input(
        &mut self,
        conn: ConnId,
        task: TaskId,
        visibility: Timestamp,
        options: InputOptions,
    ) -> Result<Effects> {
        self.check_open()?;
        options.check(&self.name)?;
        let mut unseen: BTreeSet<Timestamp> = self.items.range(visibility..).map(|(&ts, _)| ts).collect();
        let skipped = options.trim(&mut unseen, self.items.last_key_value().map(|(&ts, _)| ts)).len() as u64;
        for ts in &unseen {
            self.items.get_mut(ts).expect("an unseen item is present").holders += 1;
        }
        let counts = ConnectionStats { skipped, ..ConnectionStats::default() };
        let input = Input { task, unseen, open: BTreeSet::new(), floor: None, lag: options, counts };
        let mut fx = Effects::default();
        push_move(&mut fx.claims, Location::Input(conn), None, input.claim());
        self.inputs.insert(conn, input);
        Ok(fx)
    }

    /// Detaches an input connection: all its claims are dropped.
    pub fn detach_input(&mut self, conn: ConnId) -> Effects {
        let mut fx = Effects::default();
        if let Some(input) = self.inputs.remove(&conn) {
            push_move(&mut fx.claims, Location::Input(conn), input.claim(), None);
            let task = input.task;
            fx.opens.extend(input.open.iter().map(|&ts| OpenChange { task, ts, opened: false }));
            for ts in input.unseen.into_iter().chain(input.open) {
                self.release_holder(ts, false, &mut fx);
            }
        }
        fx
    }

    /// Records an output connection of `task`.
    pub fn attach_output(&mut self, conn: ConnId, task: TaskId) -> Result<()> {
        self.check_open()?;
        if self.producers_closed {
            return Err(Error::InvalidArgument {
                op: "attach_output",
                name: self.name.to_string(),
                reason: "the channel's producer set is closed; no new output connections".into(),
            });
        }
        self.outputs.insert(conn, (task, ConnectionStats::default()));
        Ok(())
    }

    /// Declares the producer set closed: no new output connection may attach, so settledness
    /// depends only on the tasks producing now (docs/CORRELATION.md, "Settled timestamps").
    pub fn close_producers(&mut self) {
        self.producers_closed = true;
    }

    /// `true` once [`close_producers`](Self::close_producers) ran.
    pub fn producers_closed(&self) -> bool {
        self.producers_closed
    }

    /// The channel's retention policy.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The claim of input connection `conn`: its lowest unseen or open item, if any.
    pub fn input_claim(&self, conn: ConnId) -> Option<Timestamp> {
        self.inputs.get(&conn).and_then(Input::claim)
    }

    /// Demand (docs/CORRELATION.md, "Demand feedback and the current-readers policy"): the lowest
    /// timestamp that some current or future consumer may still get if it were put now. A
    /// connection that called `consume_until(f)` no longer wants anything at or below `f`; one that
    /// never did may want anything. With [`Retention::History`] a late joiner may read any item at
    /// or above ts_min, so demand is ts_min; with [`Retention::CurrentReaders`] it follows the
    /// current readers (`INFINITY` when there are none: nobody would ever read the item).
    pub fn demand(&self, ts_min: Timestamp) -> Timestamp {
        match self.retention {
            Retention::History => ts_min,
            Retention::CurrentReaders => {
                let wanted = |input: &Input| input.floor.map_or(0, |floor| floor.saturating_add(1));
                self.inputs.values().map(wanted).min().unwrap_or(INFINITY).max(ts_min)
            }
        }
    }

    /// Forgets an output connection.
    pub fn detach_output(&mut self, conn: ConnId) {
        self.outputs.remove(&conn);
    }

    /// Destroys the channel: every item is reclaimed, every connection's claims dropped; later
    /// operations fail `Closed` with `reason`.
    pub fn close(&mut self, reason: &'static str) -> Effects {
        let mut fx = Effects::default();
        if self.closed.is_some() {
            return fx;
        }
        self.closed = Some(reason);
        let conns: Vec<ConnId> = self.inputs.keys().copied().collect();
        for conn in conns {
            let detached = self.detach_input(conn);
            fx.claims.extend(detached.claims);
            fx.opens.extend(detached.opens);
        }
        self.outputs.clear();
        self.reclaim_below(INFINITY, &mut fx.reclaimed);
        self.tombstones.clear();
        fx
    }

    /// Counters and sizes now (`ts_min` left at 0 for the runtime to fill in).
    pub fn stats(&self) -> Stats {
        Stats {
            live_items: self.items.len(),
            live_bytes: self.live_bytes,
            reclaimed: self.reclaimed,
            puts: self.puts,
            gets: self.gets,
            inputs: self.inputs.len(),
            outputs: self.outputs.len(),
            tombstones: self.tombstones.len() as usize,
            tombstone_runs: self.tombstones.runs(),
            claim: self.inputs.values().filter_map(Input::claim).min(),
            ts_min: 0,
        }
    }

    /// What went through connection `conn` (input or output) so far; `None` if it is not
    /// attached here.
    pub fn connection_stats(&self, conn: ConnId) -> Option<ConnectionStats> {
        self.inputs.get(&conn).map(|input| input.counts).or_else(|| self.outputs.get(&conn).map(|&(_, sent)| sent))
    }

    /// Timestamps of the items stored now, in order (for tests and tools).
    pub fn timestamps(&self) -> Vec<Timestamp> {
        self.items.keys().copied().collect()
    }
}

/// Fails `Closed` once a container is destroyed (`closed` says why).
pub(crate) fn check_open(name: &str, closed: Option<&'static str>) -> Result<()> {
    match closed {
        Some(reason) => Err(Error::Closed { name: name.to_owned(), reason }),
        None => Ok(()),
    }
}

/// The checks a put makes first, on a channel or a queue: the container is open, `ts` is an item
/// timestamp, `conn` is one of its output connections, and `task` may put at `ts`.
pub(crate) fn check_put<V>(
    name: &str,
    closed: Option<&'static str>,
    outputs: &IdMap<ConnId, V>,
    conn: ConnId,
    task: &TaskState,
    ts: Timestamp,
) -> Result<()> {
    check_open(name, closed)?;
    if !is_item_ts(ts) {
        return Err(Error::InvalidTimestamp { op: "put", name: name.to_owned(), ts });
    }
    if !outputs.contains_key(&conn) {
        return Err(Error::detached(name));
    }
    task.check_put(name, ts)
}
