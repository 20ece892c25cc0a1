//! One queue: FIFO by insertion, each item delivered to one getter (docs/SEMANTICS.md, "Queues").
//!
//! Every item not yet consumed — waiting or open on a getter — holds a claim on ts_min at its
//! timestamp: a worker that gets it later may put results at that timestamp, so GC must not pass
//! it. An item is reclaimed when its getter consumes it. Items a getter still holds open when it
//! detaches go back to the head of the queue in their original order, so a worker that quits or
//! dies never loses a frame.
//!
//! Fairness: getters are served first come, first served. A getter that is going to wait takes a
//! [`Ticket`], a place in line; the ticket at position `k` is served as soon as more than `k`
//! items wait, and a getter without a ticket only from items beyond every ticket's share — so a
//! fresh getter never overtakes a waiting one, and an arriving item is, in effect, reserved for
//! the oldest waiting getter. A getter that gives up (timeout, cancellation, detach) leaves the
//! line ([`QueueState::leave`]), passing its share on: no item is ever stranded behind a ticket
//! nobody holds.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::channel::{check_open, check_put, ConnId, Limits};
use crate::claims::Claims;
use crate::effects::{Effects, OpenChange};
use crate::error::{Error, Result};
use crate::id_map::IdMap;
use crate::item::{Item, Payload};
use crate::progress::{push_move, ContainerKey, Location};
use crate::stats::{ConnectionStats, Stats};
use crate::task::{TaskId, TaskState};
use crate::time::{Selector, Timestamp};

/// An item delivered by a queue, with the sequence number that tells it apart from other items
/// of the same timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueItem {
    /// Position in the queue's insertion order (unique per queue).
    pub seq: u64,
    /// Timestamp and payload.
    pub item: Item,
}

/// A waiting getter's place in line (see the module doc).
pub type Ticket = u64;

/// The state of one queue.
#[derive(Debug)]
pub struct QueueState {
    /// Where the queue's claim lives ([`Location::Queue`]).
    key: ContainerKey,
    name: Arc<str>,
    limits: Limits,
    waiting: VecDeque<QueueItem>,
    /// Getters waiting for an item, oldest first, with their connections.
    line: VecDeque<(Ticket, ConnId)>,
    next_ticket: Ticket,
    /// Items gotten and not yet consumed, per input connection.
    open: IdMap<ConnId, Vec<QueueItem>>,
    inputs: IdMap<ConnId, (TaskId, ConnectionStats)>,
    outputs: IdMap<ConnId, (TaskId, ConnectionStats)>,
    /// Timestamps of every item not yet consumed; the minimum is the queue's claim on ts_min.
    claims: Claims,
    next_seq: u64,
    live_bytes: usize,
    puts: u64,
    gets: u64,
    reclaimed: u64,
    closed: Option<&'static str>,
}

impl QueueState {
    /// An empty queue.
    pub fn new(key: ContainerKey, name: Arc<str>, limits: Limits) -> QueueState {
        QueueState {
            key,
            name,
            limits,
            waiting: VecDeque::new(),
            line: VecDeque::new(),
            next_ticket: 0,
            open: IdMap::default(),
            inputs: IdMap::default(),
            outputs: IdMap::default(),
            claims: Claims::default(),
            next_seq: 0,
            live_bytes: 0,
            puts: 0,
            gets: 0,
            reclaimed: 0,
            closed: None,
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The queue's bounds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fails `Closed` once the queue is destroyed.
    pub fn check_open(&self) -> Result<()> {
        check_open(&self.name, self.closed)
    }

    fn live_items(&self) -> usize {
        self.waiting.len() + self.open.values().map(Vec::len).sum::<usize>()
    }

    /// Every check of [`put`](Self::put) but room: what refuses the put whatever is taken
    /// (closed, not an item timestamp, detached, not visible to `task`).
    pub fn check_put(&self, conn: ConnId, task: &TaskState, ts: Timestamp) -> Result<()> {
        check_put(&self.name, self.closed, &self.outputs, conn, task, ts)
    }

    /// Appends an item through output connection `conn` of `task` (duplicate timestamps
    /// allowed). Its effects go into `fx`.
    pub fn put(
        &mut self,
        conn: ConnId,
        task: &TaskState,
        ts: Timestamp,
        payload: Payload,
        fx: &mut Effects,
    ) -> Result<()> {
        self.check_put(conn, task, ts)?;
        self.limits.check_room(&self.name, ts, self.live_items(), self.live_bytes, payload.len())?;
        let before = self.claims.min();
        self.claims.add(ts);
        push_move(&mut fx.claims, Location::Queue(self.key), before, self.claims.min());
        self.live_bytes += payload.len();
        self.waiting.push_back(QueueItem { seq: self.next_seq, item: Item { ts, payload } });
        self.next_seq += 1;
        self.puts += 1;
        self.outputs.get_mut(&conn).expect("checked above").1.items += 1;
        fx.put = Some(ts);
        Ok(())
    }

    /// Takes the oldest waiting item for `conn`; it is open there until consumed. `ticket`:
    /// `None` for a getter that will not wait (served only from items beyond every waiting
    /// getter's share); `Some(slot)` for one that waits: when it cannot be served it takes a
    /// ticket into `slot` (kept across attempts, cleared when served; the caller must
    /// [`leave`](Self::leave) with a ticket still held when it gives up).
    pub fn get(&mut self, conn: ConnId, ticket: Option<&mut Option<Ticket>>, fx: &mut Effects) -> Result<QueueItem> {
        self.check_open()?;
        let (task, _) = *self.inputs.get(&conn).ok_or_else(|| Error::detached(&self.name))?;
        let held = ticket.as_ref().and_then(|slot| **slot);
        let position = held.and_then(|t| self.line.iter().position(|&(held, _)| held == t));
        let served = self.waiting.len() > position.unwrap_or(self.line.len());
        let item = if served { self.waiting.pop_front() } else { None };
        let Some(item) = item else {
            if let Some(slot) = ticket {
                if position.is_none() {
                    *slot = Some(self.next_ticket);
                    self.line.push_back((self.next_ticket, conn));
                    self.next_ticket += 1;
                }
            }
            return Err(Error::NotAvailable {
                op: "get",
                name: self.name.to_string(),
                selector: Selector::Oldest,
                previous: None,
                next: None,
                settled: false,
            });
        };
        if let (Some(position), Some(slot)) = (position, ticket) {
            self.line.remove(position);
            *slot = None;
        }
        fx.opens.push(OpenChange { task, ts: item.item.ts, opened: true });
        self.open.entry(conn).or_default().push(item.clone());
        self.gets += 1;
        self.inputs.get_mut(&conn).expect("checked above").1.items += 1;
        Ok(item)
    }

    /// A getter gives up its place in line. Returns `true` when that passes an item on (one was
    /// there for it): the driver must wake the other getters.
    pub fn leave(&mut self, ticket: Ticket) -> bool {
        let Some(position) = self.line.iter().position(|&(held, _)| held == ticket) else { return false };
        self.line.remove(position);
        position < self.waiting.len()
    }

    /// Consumes the open item `seq` (or, with `seq == None`, the oldest open item at `ts`) on
    /// `conn`; the item is reclaimed.
    pub fn consume(&mut self, conn: ConnId, seq: Option<u64>, ts: Timestamp, fx: &mut Effects) -> Result<()> {
        self.check_open()?;
        let (task, _) = *self.inputs.get(&conn).ok_or_else(|| Error::detached(&self.name))?;
        let open = self.open.entry(conn).or_default();
        let position = match seq {
            Some(seq) => open.iter().position(|q| q.seq == seq),
            None => open.iter().position(|q| q.item.ts == ts),
        };
        let Some(position) = position else {
            let previous = open.iter().map(|q| q.item.ts).filter(|&t| t < ts).max();
            let next = open.iter().map(|q| q.item.ts).filter(|&t| t > ts).min();
            return Err(Error::NotAvailable {
                op: "consume",
                name: self.name.to_string(),
                selector: Selector::At(ts),
                previous,
                next,
                settled: false,
            });
        };
        let item = open.remove(position).item;
        fx.opens.push(OpenChange { task, ts: item.ts, opened: false });
        let before = self.claims.min();
        self.claims.remove(item.ts);
        push_move(&mut fx.claims, Location::Queue(self.key), before, self.claims.min());
        self.live_bytes -= item.payload.len();
        self.reclaimed += 1;
        fx.reclaimed.push(item);
        Ok(())
    }

    /// Gives back on `conn` the open item `seq`, taken by a get whose reply never reached its
    /// client (the node's release of it: docs/NODES.md, "A call's timeout"): it goes back to the
    /// head of the queue, where it was taken from, as a detach gives items back. Returns whether
    /// it went back (`false`: not open there — consumed, or its connection detached, since).
    pub fn give_back(&mut self, conn: ConnId, seq: u64, fx: &mut Effects) -> bool {
        let Some(&(task, _)) = self.inputs.get(&conn) else { return false };
        let Some(open) = self.open.get_mut(&conn) else { return false };
        let Some(position) = open.iter().position(|q| q.seq == seq) else { return false };
        let item = open.remove(position);
        fx.opens.push(OpenChange { task, ts: item.item.ts, opened: false });
        self.waiting.push_front(item);
        true
    }

    /// Whether the item `seq` is open on `conn`: gotten there, not consumed, not given back.
    pub fn holds(&self, conn: ConnId, seq: u64) -> bool {
        self.open.get(&conn).is_some_and(|open| open.iter().any(|q| q.seq == seq))
    }

    /// Attaches an input connection of `task`.
    pub fn attach_input(&mut self, conn: ConnId, task: TaskId) -> Result<()> {
        self.check_open()?;
        self.inputs.insert(conn, (task, ConnectionStats::default()));
        Ok(())
    }

    /// Detaches an input connection; items it held open go back to the head of the queue.
    pub fn detach_input(&mut self, conn: ConnId) -> Effects {
        let mut fx = Effects::default();
        let Some((task, _)) = self.inputs.remove(&conn) else { return fx };
        self.line.retain(|&(_, held)| held != conn);
        let mut returned = self.open.remove(&conn).unwrap_or_default();
        returned.sort_by_key(|q| q.seq);
        for q in returned.into_iter().rev() {
            fx.opens.push(OpenChange { task, ts: q.item.ts, opened: false });
            self.waiting.push_front(q);
        }
        fx
    }

    /// Records an output connection of `task`.
    pub fn attach_output(&mut self, conn: ConnId, task: TaskId) -> Result<()> {
        self.check_open()?;
        self.outputs.insert(conn, (task, ConnectionStats::default()));
        Ok(())
    }

    /// Forgets an output connection.
    pub fn detach_output(&mut self, conn: ConnId) {
        self.outputs.remove(&conn);
    }

    /// Destroys the queue: items are reclaimed and claims dropped.
    pub fn close(&mut self, reason: &'static str) -> Effects {
        let mut fx = Effects::default();
        if self.closed.is_some() {
            return fx;
        }
        self.closed = Some(reason);
        let conns: Vec<ConnId> = self.inputs.keys().copied().collect();
        for conn in conns {
            fx.opens.extend(self.detach_input(conn).opens);
        }
        self.outputs.clear();
        let before = self.claims.min();
        for q in self.waiting.drain(..) {
            self.claims.remove(q.item.ts);
            self.reclaimed += 1;
            fx.reclaimed.push(q.item);
        }
        push_move(&mut fx.claims, Location::Queue(self.key), before, self.claims.min());
        self.live_bytes = 0;
        fx
    }

    /// The queue's claim on ts_min: its lowest unconsumed item, if any.
    pub fn claim(&self) -> Option<Timestamp> {
        self.claims.min()
    }

    /// Counters and sizes now.
    /// What went through connection `conn` (input or output) so far; `None` if it is not
    /// attached here.
    pub fn connection_stats(&self, conn: ConnId) -> Option<ConnectionStats> {
        self.inputs.get(&conn).or_else(|| self.outputs.get(&conn)).map(|&(_, counts)| counts)
    }

    pub fn stats(&self) -> Stats {
        Stats {
            live_items: self.live_items(),
            live_bytes: self.live_bytes,
            reclaimed: self.reclaimed,
            puts: self.puts,
            gets: self.gets,
            inputs: self.inputs.len(),
            outputs: self.outputs.len(),
            tombstones: 0,
            tombstone_runs: 0,
            claim: self.claims.min(),
            ts_min: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskState;

    fn queue() -> (QueueState, TaskState) {
        let mut q = QueueState::new(1, "work".into(), Limits::unbounded());
        for conn in [10, 11, 12] {
            q.attach_input(conn, 7).unwrap();
        }
        q.attach_output(20, 7).unwrap();
        (q, TaskState::new(7, 0).0)
    }

    fn put(q: &mut QueueState, task: &TaskState, ts: Timestamp) {
        q.put(20, task, ts, Payload::from(vec![ts as u8]), &mut Effects::default()).unwrap();
    }

    /// Waiting getters are served in the order they started waiting; a fresh getter (with or
    /// without the will to wait) does not overtake them.
    #[test]
    fn waiting_getters_are_served_first_come_first_served() {
        let (mut q, task) = queue();
        let mut fx = Effects::default();
        let (mut first, mut second) = (None, None);
        assert!(q.get(10, Some(&mut first), &mut fx).is_err());
        assert!(q.get(11, Some(&mut second), &mut fx).is_err());
        put(&mut q, &task, 0);
        assert!(q.get(12, None, &mut fx).is_err(), "a fresh getter overtook the line");
        assert!(q.get(11, Some(&mut second), &mut fx).is_err(), "the second in line overtook the first");
        assert_eq!(q.get(10, Some(&mut first), &mut fx).unwrap().item.ts, 0);
        assert_eq!(first, None);
        put(&mut q, &task, 1);
        put(&mut q, &task, 2);
        assert_eq!(q.get(11, Some(&mut second), &mut fx).unwrap().item.ts, 1);
        assert_eq!(q.get(12, None, &mut fx).unwrap().item.ts, 2, "items beyond the line are anyone's");
    }

    /// A getter that gives up passes its share on, and a detached connection leaves the line:
    /// no item is stranded behind a ticket nobody holds.
    #[test]
    fn leaving_the_line_strands_nothing() {
        let (mut q, task) = queue();
        let mut fx = Effects::default();
        let (mut gone, mut next, mut detached) = (None, None, None);
        assert!(q.get(10, Some(&mut gone), &mut fx).is_err());
        assert!(q.get(12, Some(&mut detached), &mut fx).is_err());
        assert!(q.get(11, Some(&mut next), &mut fx).is_err());
        put(&mut q, &task, 0);
        assert!(q.leave(gone.unwrap()), "its item is passed on");
        assert!(!q.leave(gone.unwrap()), "leaving twice changes nothing");
        q.detach_input(12);
        assert_eq!(q.get(11, Some(&mut next), &mut fx).unwrap().item.ts, 0);
        assert!(q.line.is_empty());
    }

    /// A get released after it ran: its item goes back to the head of the queue, the next getter
    /// gets it, and it is reclaimed only by the consume of whoever holds it then.
    #[test]
    fn a_released_get_gives_its_item_back_to_the_head() {
        let (mut q, task) = queue();
        let mut fx = Effects::default();
        put(&mut q, &task, 0);
        put(&mut q, &task, 1);
        let taken = q.get(10, None, &mut fx).unwrap();
        assert_eq!(taken.item.ts, 0);
        assert!(q.give_back(10, taken.seq, &mut fx));
        assert!(!q.give_back(10, taken.seq, &mut fx), "given back once");
        assert_eq!(q.claim(), Some(0));
        let again = q.get(11, None, &mut fx).unwrap();
        assert_eq!(again, taken, "the next getter gets it, before the items put after it");
        assert!(q.consume(10, Some(taken.seq), 0, &mut fx).is_err(), "it is no longer the first getter's");
        q.consume(11, Some(taken.seq), 0, &mut fx).unwrap();
        assert_eq!(q.get(12, None, &mut fx).unwrap().item.ts, 1);
    }
}
