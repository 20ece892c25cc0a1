//! One channel's items and its input connections' item states (SPEC §2).
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
//! Disk tier (SPEC §10): a channel made [`with_disk_tier`](ChannelState::with_disk_tier) also
//! keeps the set of timestamps whose payload is still in memory. The driver writes the oldest of
//! them to disk ([`spill_candidates`](ChannelState::spill_candidates)) and swaps their bytes for
//! equal ones backed by the disk ([`moved_to_disk`](ChannelState::moved_to_disk)): where an
//! item's bytes live changes nothing else — item states, claims and GC are the same for both.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::effects::{Effects, OpenChange};
use crate::error::{Error, Result};
use crate::item::{Item, Payload};
use crate::progress::{push_move, Location};
use crate::stats::{ConnectionStats, Stats};
use crate::task::{TaskId, TaskState};
use crate::time::{earliest, is_item_ts, show, Selector, Timestamp, INFINITY};
use crate::tombstones::Tombstones;

/// Identifies a connection within a node.
pub type ConnId = u64;

/// Bounds of a channel, checked on put. `None` means unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most items stored at once.
    pub capacity: Option<usize>,
    /// Most payload bytes stored at once.
    pub bytes_max: Option<usize>,
}

impl Limits {
    /// No bound at all.
    pub fn unbounded() -> Limits {
        Limits::default()
    }

    /// At most `capacity` items.
    pub fn items(capacity: usize) -> Limits {
        Limits { capacity: Some(capacity), bytes_max: None }
    }

    /// Adds a bound of `bytes_max` payload bytes.
    pub fn with_bytes(self, bytes_max: usize) -> Limits {
        Limits { bytes_max: Some(bytes_max), ..self }
    }

    /// Refuses bounds nothing could ever fit in (`capacity` or `bytes_max` of 0): every put
    /// would fail. `op` and `name` are the creation's, for the error.
    pub fn check(&self, op: &'static str, name: &str) -> Result<()> {
        let zero = match (self.capacity, self.bytes_max) {
            (Some(0), _) => "capacity",
            (_, Some(0)) => "max_bytes",
            _ => return Ok(()),
        };
        Err(Error::InvalidArgument {
            op,
            name: name.to_owned(),
            reason: format!("{zero}=0 would refuse every item; give a positive bound, or None for unbounded"),
        })
    }

    /// Fails `Full { can_never_fit: true }` when an item of `payload_bytes` at `ts` could never
    /// fit in container `name`, however much is reclaimed: check this before copying a payload.
    pub fn check_fits(&self, name: &str, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        match self.bytes_max {
            Some(bytes_max) if payload_bytes > bytes_max => Err(Error::Full {
                name: name.to_owned(),
                ts,
                reason: format!("the item's {payload_bytes} bytes exceed max_bytes={bytes_max}; it can never fit"),
                can_never_fit: true,
            }),
            _ => Ok(()),
        }
    }

    /// Fails `Full` when an item of `len` bytes at `ts` does not fit next to `items`/`bytes`
    /// already stored in container `name`; `can_never_fit` when no reclamation could make room.
    pub fn check_room(&self, name: &str, ts: Timestamp, items: usize, bytes: usize, len: usize) -> Result<()> {
        self.check_fits(name, ts, len)?;
        let full = |reason: String| Error::Full { name: name.to_owned(), ts, reason, can_never_fit: false };
        if let Some(bytes_max) = self.bytes_max {
            if bytes.saturating_add(len) > bytes_max {
                return Err(full(format!("{bytes} of max_bytes={bytes_max} bytes in use, the item needs {len}")));
            }
        }
        match self.capacity {
            Some(capacity) if items >= capacity => Err(full(format!("holds capacity={capacity} items"))),
            _ => Ok(()),
        }
    }
}

/// When a channel may reclaim an item above ts_min (SPEC §3, "beyond the papers").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Retention {
    /// Late joiners may read the past: an item lives until ts_min passes it (or its reference
    /// count is reached).
    #[default]
    History,
    /// Only current readers count: an item is reclaimed as soon as every input connection
    /// attached now has consumed it (at once if none is attached). A late joiner sees only what
    /// is still present.
    CurrentReaders,
}

#[derive(Debug)]
struct Stored {
    payload: Payload,
    /// Consumptions still needed before the item is reclaimed early (SPEC §3 REF), if declared.
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
    /// producers only, SPEC §4).
    producers_closed: bool,
    items: BTreeMap<Timestamp, Stored>,
    /// Timestamps reclaimed early by reference count, kept until ts_min passes them so that a
    /// second put at the same timestamp is still rejected (runs of consecutive timestamps cost
    /// one entry; bounded, see [`Tombstones`]).
    tombstones: Tombstones,
    inputs: HashMap<ConnId, Input>,
    outputs: HashMap<ConnId, (TaskId, ConnectionStats)>,
    live_bytes: usize,
    /// With a disk tier: the timestamps of the items whose payload is still in memory (the rest
    /// are on disk). `None`: no tier, everything is in memory.
    in_memory: Option<BTreeSet<Timestamp>>,
    puts: u64,
    gets: u64,
    reclaimed: u64,
    closed: Option<&'static str>,
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
            inputs: HashMap::new(),
            outputs: HashMap::new(),
            live_bytes: 0,
            in_memory: None,
            puts: 0,
            gets: 0,
            reclaimed: 0,
            closed: None,
        }
    }

    /// Keeps track of which items are in memory, for a disk tier: every item put from now on is
    /// in memory until [`moved_to_disk`](Self::moved_to_disk).
    pub fn with_disk_tier(mut self) -> ChannelState {
        self.in_memory = Some(self.items.keys().copied().collect());
        self
    }

    /// With a disk tier, the oldest items whose payload is in memory beyond the newest `keep`
    /// of them, in timestamp order: what the driver writes to disk next. Empty without a tier.
    pub fn spill_candidates(&self, keep: usize) -> Vec<Item> {
        let Some(in_memory) = &self.in_memory else { return Vec::new() };
        let excess = in_memory.len().saturating_sub(keep);
        in_memory.iter().take(excess).map(|&ts| Item { ts, payload: self.items[&ts].payload.clone() }).collect()
    }

    /// Swaps the in-memory bytes of the item at `ts` for `on_disk`, the same bytes read from the
    /// disk tier. Nothing changes if the item was reclaimed meanwhile or is not in memory.
    pub fn moved_to_disk(&mut self, ts: Timestamp, on_disk: bytes::Bytes) {
        let Some(in_memory) = self.in_memory.as_mut() else { return };
        let Some(stored) = self.items.get_mut(&ts) else { return };
        if !in_memory.remove(&ts) {
            return;
        }
        assert_eq!(stored.payload.data.len(), on_disk.len(), "\"{}\" ts={ts}: the disk copy differs", self.name);
        debug_assert!(stored.payload.data == on_disk, "\"{}\" ts={ts}: the disk copy differs", self.name);
        stored.payload.data = on_disk;
    }

    /// Puts back an item recovered from the disk tier when the channel is created (before any
    /// connection attaches, so no connection holds it yet); the driver raises the watermark as
    /// for a put. A timestamp already present is `DuplicateTimestamp`.
    pub fn restore(&mut self, ts: Timestamp, payload: Payload) -> Result<()> {
        self.check_open()?;
        if !is_item_ts(ts) {
            return Err(Error::InvalidTimestamp { op: "restore", name: self.name.to_string(), ts });
        }
        if !(self.inputs.is_empty() && self.outputs.is_empty()) {
            return Err(Error::InvalidArgument {
                op: "restore",
                name: self.name.to_string(),
                reason: "items are restored before any connection attaches".into(),
            });
        }
        if self.items.contains_key(&ts) {
            return Err(Error::DuplicateTimestamp { name: self.name.to_string(), ts });
        }
        self.live_bytes += payload.len();
        self.items.insert(ts, Stored { payload, refs_left: None, holders: 0 });
        Ok(())
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
        match self.closed {
            Some(reason) => Err(Error::Closed { name: self.name.to_string(), reason }),
            None => Ok(()),
        }
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

    /// `put(ts, payload, refcount)` through output connection `conn` of `task` (SPEC §2).
    /// Copy-in happened when `payload` was made.
    pub fn put(
        &mut self,
        conn: ConnId,
        task: &TaskState,
        ts: Timestamp,
        payload: Payload,
        refcount: Option<u32>,
    ) -> Result<Effects> {
        self.check_open()?;
        if !is_item_ts(ts) {
            return Err(Error::InvalidTimestamp { op: "put", name: self.name.to_string(), ts });
        }
        if !self.outputs.contains_key(&conn) {
            return Err(Error::detached(&self.name));
        }
        task.check_put(&self.name, ts)?;
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
        self.limits.check_room(&self.name, ts, self.items.len(), self.live_bytes, payload.len())?;
        let mut fx = Effects::default();
        let mut holders = 0;
        let mut born_consumed = 0;
        for (&conn, input) in self.inputs.iter_mut() {
            if input.floor.is_some_and(|floor| ts <= floor) {
                born_consumed += 1;
                continue;
            }
            let before = input.claim();
            input.unseen.insert(ts);
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
        self.reclaim_if_garbage(ts, &mut fx);
        Ok(fx)
    }

    /// `get(selector)` on input connection `conn` (SPEC §2); the item becomes open there.
    /// `settled_below` is asked, only when nothing suitable is present, for the channel's settled
    /// horizon (SPEC §4): a `NotAvailable` is final (`settled`) when nothing suitable can come
    /// any more — an exact timestamp below it, or, for a wildcard, a horizon at `INFINITY`.
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
        let input = self.inputs.get(&conn).ok_or_else(|| Error::detached(&self.name))?;
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
        let input = self.inputs.get_mut(&conn).ok_or_else(|| Error::detached(&self.name))?;
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
    /// later, whatever their timestamp, are unseen on `conn`.
    pub fn consume_until(&mut self, conn: ConnId, ts: Timestamp, fx: &mut Effects) -> Result<()> {
        self.check_open()?;
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

    /// Attaches an input connection for a task at `visibility`: present items below it are
    /// consumed on the new connection at once, the rest are unseen.
    pub fn attach_input(&mut self, conn: ConnId, task: TaskId, visibility: Timestamp) -> Result<Effects> {
        self.check_open()?;
        let mut unseen = BTreeSet::new();
        for (&ts, stored) in self.items.range_mut(visibility..) {
            stored.holders += 1;
            unseen.insert(ts);
        }
        let input = Input { task, unseen, open: BTreeSet::new(), floor: None, counts: ConnectionStats::default() };
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
    /// depends only on the tasks producing now (SPEC §4).
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

    /// Demand (SPEC §3): the lowest timestamp that some current or future consumer may still
    /// get if it were put now. A connection that called `consume_until(f)` no longer wants
    /// anything at or below `f`; one that never did may want anything. With
    /// [`Retention::History`] a late joiner may read any item at or above ts_min, so demand is
    /// ts_min; with [`Retention::CurrentReaders`] it follows the current readers (`INFINITY`
    /// when there are none: nobody would ever read the item).
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

    /// Reclaims every item below `ts_min` (TGC) and forgets tombstones below it. Work is
    /// proportional to what is reclaimed.
    pub fn reclaim_below(&mut self, ts_min: Timestamp, reclaimed: &mut Vec<Item>) {
        debug_assert!(
            self.inputs.values().all(|input| input.claim().is_none_or(|claim| claim >= ts_min)),
            "channel \"{}\" has an unconsumed item below ts_min {}",
            self.name,
            show(ts_min)
        );
        while let Some(entry) = self.items.first_entry() {
            if *entry.key() >= ts_min {
                break;
            }
            let (ts, stored) = entry.remove_entry();
            self.live_bytes -= stored.payload.len();
            self.reclaimed += 1;
            reclaimed.push(Item { ts, payload: stored.payload });
        }
        if let Some(in_memory) = self.in_memory.as_mut() {
            *in_memory = in_memory.split_off(&ts_min);
        }
        self.tombstones.remove_below(ts_min);
        debug_assert!(self.oldest().is_none_or(|oldest| oldest >= ts_min), "an item survived a sweep below ts_min");
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

    /// Counts one consumption of the item at `ts` (unseen/open → consumed on one connection).
    fn count_consumption(&mut self, ts: Timestamp, fx: &mut Effects) {
        self.release_holder(ts, true, fx);
    }

    /// One connection stops holding the item at `ts`, by consuming it (`consumed`, which counts
    /// against its reference count) or by detaching; reclaims it early if it became garbage.
    fn release_holder(&mut self, ts: Timestamp, consumed: bool, fx: &mut Effects) {
        let Some(stored) = self.items.get_mut(&ts) else { return };
        stored.holders -= 1;
        if consumed {
            if let Some(refs_left) = stored.refs_left.as_mut() {
                *refs_left = refs_left.saturating_sub(1);
            }
        }
        self.reclaim_if_garbage(ts, fx);
    }

    /// Reclaims the item at `ts` early if its reference count is reached or, under
    /// [`Retention::CurrentReaders`], no connection holds it any more. Its timestamp is kept as a
    /// tombstone until ts_min passes it, so it cannot be put again.
    fn reclaim_if_garbage(&mut self, ts: Timestamp, fx: &mut Effects) {
        let Some(stored) = self.items.get(&ts) else { return };
        let by_refcount = stored.refs_left == Some(0);
        let by_readers = self.retention == Retention::CurrentReaders && stored.holders == 0;
        if !(by_refcount || by_readers) {
            return;
        }
        let stored = self.items.remove(&ts).expect("item present");
        if let Some(in_memory) = self.in_memory.as_mut() {
            in_memory.remove(&ts);
        }
        self.live_bytes -= stored.payload.len();
        self.reclaimed += 1;
        self.tombstones.insert(ts);
        for (&conn, input) in self.inputs.iter_mut() {
            let before = input.claim();
            let was_open = input.open.remove(&ts);
            if was_open {
                fx.opens.push(OpenChange { task: input.task, ts, opened: false });
            }
            let was_unseen = !was_open && input.unseen.remove(&ts);
            input.counts.skipped += u64::from(was_unseen);
            if was_open || was_unseen {
                push_move(&mut fx.claims, Location::Input(conn), before, input.claim());
            }
        }
        fx.reclaimed.push(Item { ts, payload: stored.payload });
    }
}
