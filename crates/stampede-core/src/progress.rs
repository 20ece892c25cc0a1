//! Progress tracking: ts_min and settled horizons as one pure, location-keyed state machine
//! (docs/PROGRESS.md; the rules: docs/SEMANTICS.md, "Virtual time, visibility, GC", and
//! docs/CORRELATION.md, "Settled timestamps").
//!
//! A **claim** says "something at this timestamp may still be gotten or put". Every claim lives
//! at a [`Location`] — the owner that holds it: a task (its virtual time, plus items that were
//! open on its connections until the driver updates it, see below), an input connection (its
//! lowest unseen-or-open item), a queue (its lowest unconsumed item), the put watermark, or,
//! later, a remote peer. Claims change only through [`Update`]s `(location, timestamp, ±n)` in
//! the manner of Timely Dataflow's progress tracking, applied in atomic batches in which every
//! new claim comes before the releases it replaces. The driver hands batches in
//! ([`Progress::apply`]), reads the frontier ([`Progress::ts_min`]), sweeps when it moves, and
//! may take the applied updates from the outbox ([`Progress::take_outbox`]) to ship them to
//! peers. Dropping an owner ([`Progress::drop_location`]) cancels exactly its net counts.
//!
//! **Frontier.** `ts_min = min(every claim, watermark)` where the watermark is `1 +` the highest
//! timestamp ever put: ts_min never runs ahead of what exists, so a producer can always start at
//! or above everything that exists (a display started before its camera, a camera restarting).
//! Both parts only move up, so ts_min never decreases (asserted).
//!
//! **Settled horizons.** The machine also knows the graph: which tasks hold output connections
//! to which containers ([`Progress::attach_output`]), which input connections belong to which
//! task and read which container ([`Progress::attach_input`]), and which channels closed their
//! producer set. [`Progress::settled_below`] of a channel is ts_min for an open producer set;
//! for a closed one it is `max(ts_min, min over every claim that can reach the channel)`: each
//! producer's own claims (virtual time, items held), its input connections' claims, and —
//! recursively — what can still arrive on the containers it reads (a relaying tracker's result
//! `t` is not settled before frame `t` is). A horizon never decreases: the one graph change that
//! could lower it, a producer of a closed channel attaching an input that may deliver something
//! older than the channel's horizon, is refused ([`Progress::check_attach_input`]).
//!
//! **Invariants** (asserted here; the driver asserts the task side): a positive update is never
//! below ts_min; no location's count at a timestamp goes negative; ts_min and every published
//! horizon never decrease.
//!
//! Why a task has a location of its own beyond its virtual time: when an operation of task B
//! reclaims an item that task A holds open (a reference count reached, a channel destroyed), the
//! item stops being open on A's connection at once, but A's own state can only be updated under
//! A's lock, a moment later. The claim therefore *moves* to `Handover(A)` in the same batch, and is
//! released only when A's state no longer counts the item in its visibility — so ts_min can never
//! pass a timestamp some task still reports as its visibility.

use std::collections::HashSet;

use crate::claims::Claims;
use crate::id_map::IdMap;
use crate::time::{show, Timestamp, INFINITY};

/// Identifies a task within a node.
pub type TaskKey = u64;
/// Identifies a connection within a node.
pub type ConnKey = u64;
/// Identifies a channel or queue within a node.
pub type ContainerKey = u64;

/// Where a claim lives: its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Location {
    /// A task's virtual time.
    Task(TaskKey),
    /// Items another task's operation took away from a task's input connection while they were
    /// open there, held until the task's own state no longer counts them (module doc).
    Handover(TaskKey),
    /// A channel input connection: its lowest unseen-or-open item.
    Input(ConnKey),
    /// A queue: its lowest unconsumed (waiting or open) item.
    Queue(ContainerKey),
    /// `1 +` the highest timestamp ever put on this node.
    Watermark,
    /// A remote peer's claims (reserved for the node protocol).
    Peer(u64),
}

/// One change: `delta` claims appear (+) or vanish (−) at `ts` at `location`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    pub location: Location,
    pub ts: Timestamp,
    pub delta: i64,
}

/// Updates of one operation, applied as one atomic batch. Inline: an operation moves at most a
/// few claims, and this path runs on every put, get and consume.
pub type Updates = smallvec::SmallVec<[Update; 4]>;

/// Appends the updates that move one claim of `location` from `from` to `to` (either may be
/// absent): the new claim first, then the release.
pub fn push_move(updates: &mut Updates, location: Location, from: Option<Timestamp>, to: Option<Timestamp>) {
    if from == to {
        return;
    }
    if let Some(ts) = to {
        updates.push(Update { location, ts, delta: 1 });
    }
    if let Some(ts) = from {
        updates.push(Update { location, ts, delta: -1 });
    }
}

/// Why a batch or graph change was refused. The driver turns it into a user-facing error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A positive update below ts_min (a bookkeeping bug in the driver: it panics on this).
    BelowFrontier { location: Location, ts: Timestamp, ts_min: Timestamp },
    /// Attaching this input would lower the settled horizon of a closed channel the task
    /// produces into.
    WouldUnsettle { channel: ContainerKey, horizon: Timestamp, earliest: Timestamp },
}

/// Net counts of one location, by timestamp. Inline: a location holds one or two timestamps.
type Counts = smallvec::SmallVec<[(Timestamp, i64); 2]>;

/// What the machine knows of a task: the connections through which items reach it and the
/// containers it puts into.
#[derive(Debug, Default)]
struct TaskNode {
    inputs: Vec<(ConnKey, ContainerKey)>,
    outputs: Vec<(ConnKey, ContainerKey)>,
}

/// What the machine knows of a channel or queue.
#[derive(Debug)]
struct ContainerNode {
    /// Output connections and their tasks.
    producers: Vec<(ConnKey, TaskKey)>,
    /// Settledness follows the producers only (channels after `close_producers`).
    producers_closed: bool,
    /// Last horizon handed out (never decreases).
    horizon: Timestamp,
}

/// Progress tracking of one node.
#[derive(Debug, Default)]
pub struct Progress {
    /// Every claim except the watermark's, as one multiset: its minimum is at hand.
    claims: Claims,
    /// Net counts per location (what `drop_location` cancels).
    locations: IdMap<Location, Counts>,
    /// `1 +` the highest timestamp ever put (a claim that only moves up).
    watermark: Timestamp,
    ts_min: Timestamp,
    tasks: IdMap<TaskKey, TaskNode>,
    containers: IdMap<ContainerKey, ContainerNode>,
    /// Updates applied since the last `take_outbox`, when recording is on.
    outbox: Option<Vec<Update>>,
}

impl Progress {
    /// A node with nothing put, ts_min 0.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Current ts_min: no legal get can return an item below it, and no task may put below it.
    pub fn ts_min(&self) -> Timestamp {
        self.ts_min
    }

    /// `1 +` the highest timestamp put (0 before any put).
    pub fn watermark(&self) -> Timestamp {
        self.watermark
    }

    /// Number of claims held (tasks, connections, queues): neither the watermark nor the mirror
    /// of other nodes' claims ([`Location::Peer`]) counted.
    pub fn claim_count(&self) -> usize {
        let mirrored: i64 = self
            .locations
            .iter()
            .filter(|(location, _)| matches!(location, Location::Peer(_)))
            .flat_map(|(_, counts)| counts.iter().map(|&(_, n)| n))
            .sum();
        self.claims.len() - mirrored as usize
    }

    /// The lowest claim of `location`, if it holds any.
    pub fn claim(&self, location: Location) -> Option<Timestamp> {
        self.locations.get(&location).and_then(|counts| counts.iter().map(|&(ts, _)| ts).min())
    }

    /// The locations whose lowest claim is ts_min: what holds ts_min where it is, sorted (empty
    /// when nothing does — ts_min is at the watermark, `1 +` the highest timestamp put). A
    /// mesh's mirror (`Location::Peer`) counts only where no claim of this runtime is at ts_min
    /// and ts_min is below the watermark: otherwise it only echoes this runtime's own claims, or
    /// the watermark, back through the mesh. A diagnostic: it walks every location.
    pub fn holders(&self) -> Vec<Location> {
        let mut holders: Vec<Location> = self
            .locations
            .iter()
            .filter(|(_, counts)| counts.iter().any(|&(ts, n)| ts == self.ts_min && n > 0))
            .map(|(&location, _)| location)
            .collect();
        if self.ts_min >= self.watermark || holders.iter().any(|l| !matches!(l, Location::Peer(_))) {
            holders.retain(|l| !matches!(l, Location::Peer(_)));
        }
        holders.sort();
        holders
    }

    /// Starts recording applied updates for [`take_outbox`](Self::take_outbox).
    pub fn record_outbox(&mut self) {
        self.outbox.get_or_insert_with(Vec::new);
    }

    /// Stops recording applied updates (what was recorded is dropped).
    pub fn stop_outbox(&mut self) {
        self.outbox = None;
    }

    /// Every claim held now, as positive updates, and the watermark: the whole contribution of
    /// this node (what a mesh participant starts from when it is linked after claims exist).
    pub fn claims_held(&self) -> Vec<Update> {
        let mut held: Vec<Update> = self
            .locations
            .iter()
            .flat_map(|(&location, counts)| counts.iter().map(move |&(ts, delta)| Update { location, ts, delta }))
            .collect();
        if self.watermark > 0 {
            held.push(Update { location: Location::Watermark, ts: self.watermark, delta: 1 });
        }
        held
    }

    /// The updates applied since the last call (empty unless recording).
    pub fn take_outbox(&mut self) -> Vec<Update> {
        self.outbox.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Applies one atomic batch; returns the new ts_min if it advanced. Every positive update
    /// must be at or above ts_min (checked for the whole batch before anything changes).
    pub fn apply(&mut self, batch: &[Update]) -> Result<Option<Timestamp>, Refusal> {
        if let Some(u) = batch.iter().find(|u| u.delta > 0 && u.ts < self.ts_min) {
            return Err(Refusal::BelowFrontier { location: u.location, ts: u.ts, ts_min: self.ts_min });
        }
        for &update in batch {
            self.apply_one(update);
        }
        if let Some(outbox) = self.outbox.as_mut() {
            outbox.extend_from_slice(batch);
        }
        Ok(self.advance())
    }

    /// Records a put at `ts`: the watermark rises to `ts + 1` if that is higher. Returns the new
    /// ts_min if it advanced (it can, when nothing else holds it).
    pub fn note_put(&mut self, ts: Timestamp) -> Option<Timestamp> {
        assert!(ts >= self.ts_min, "put ts={ts} below ts_min {}", show(self.ts_min));
        let raised = ts.saturating_add(1);
        if raised <= self.watermark {
            return None;
        }
        if let Some(outbox) = self.outbox.as_mut() {
            outbox.push(Update { location: Location::Watermark, ts: raised, delta: 1 });
            outbox.push(Update { location: Location::Watermark, ts: self.watermark, delta: -1 });
        }
        self.watermark = raised;
        self.advance()
    }

    /// Cancels every net count of `location` (a task that closed, a peer declared dead).
    /// Returns the new ts_min if it advanced.
    pub fn drop_location(&mut self, location: Location) -> Option<Timestamp> {
        let counts = self.locations.remove(&location)?;
        for (ts, count) in counts {
            self.claims.apply_count(ts, -count);
            if let Some(outbox) = self.outbox.as_mut() {
                outbox.push(Update { location, ts, delta: -count });
            }
        }
        self.advance()
    }

    fn apply_one(&mut self, update: Update) {
        let counts = self.locations.entry(update.location).or_default();
        match counts.iter().position(|&(ts, _)| ts == update.ts) {
            Some(i) => {
                counts[i].1 += update.delta;
                assert!(counts[i].1 >= 0, "{:?} released a claim at ts={} it never made", update.location, update.ts);
                if counts[i].1 == 0 {
                    counts.swap_remove(i);
                }
            }
            None => {
                assert!(update.delta > 0, "{:?} released a claim at ts={} it never made", update.location, update.ts);
                counts.push((update.ts, update.delta));
            }
        }
        // Tasks and connections move their claims constantly: their entries stay, empty, until
        // the owner goes (`remove_task`, `detach`); a hand-over is rare and goes when released.
        if counts.is_empty() && matches!(update.location, Location::Handover(_)) {
            self.locations.remove(&update.location);
        }
        self.claims.apply_count(update.ts, update.delta);
    }

    /// Recomputes the frontier; returns it if it advanced.
    fn advance(&mut self) -> Option<Timestamp> {
        let frontier = self.claims.min().map_or(self.watermark, |claim| claim.min(self.watermark));
        assert!(frontier >= self.ts_min, "ts_min moved backwards from {} to {}", show(self.ts_min), show(frontier));
        if frontier > self.ts_min {
            self.ts_min = frontier;
            Some(frontier)
        } else {
            None
        }
    }

    // ---- the graph (settledness) ---------------------------------------------------------------

    /// Registers a channel or queue.
    pub fn add_container(&mut self, container: ContainerKey) {
        let node = ContainerNode { producers: Vec::new(), producers_closed: false, horizon: self.ts_min };
        self.containers.insert(container, node);
    }

    /// Forgets a destroyed container (its connections were detached first).
    pub fn remove_container(&mut self, container: ContainerKey) {
        self.containers.remove(&container);
    }

    /// Registers a task.
    pub fn add_task(&mut self, task: TaskKey) {
        self.tasks.insert(task, TaskNode::default());
    }

    /// Forgets a task and cancels its virtual-time claim (its connections are detached
    /// separately; claims in [`Location::Handover`] are released by whoever parked them). Returns
    /// the new ts_min if it advanced.
    pub fn remove_task(&mut self, task: TaskKey) -> Option<Timestamp> {
        self.tasks.remove(&task);
        self.drop_location(Location::Task(task))
    }

    /// Forgets the entry of a location whose owner is gone; it must hold no claim any more.
    fn forget(&mut self, location: Location) {
        if let Some(counts) = self.locations.remove(&location) {
            assert!(counts.is_empty(), "{location:?} went away holding claims {counts:?}");
        }
    }

    /// Closes `container`'s producer set: its horizon now follows its producers only.
    pub fn close_producers(&mut self, container: ContainerKey) {
        if let Some(node) = self.containers.get_mut(&container) {
            node.producers_closed = true;
        }
    }

    /// Records an output connection of `task` to `container`.
    pub fn attach_output(&mut self, conn: ConnKey, task: TaskKey, container: ContainerKey) {
        self.tasks.entry(task).or_default().outputs.push((conn, container));
        if let Some(node) = self.containers.get_mut(&container) {
            assert!(!node.producers_closed, "output attached to a container whose producer set is closed");
            node.producers.push((conn, task));
        }
    }

    /// Whether `task` may attach an input connection to `container` whose first claim would be
    /// `claim`: refused if something arriving there could be older than the settled horizon of
    /// a closed channel the task produces into (that horizon would go back).
    pub fn check_attach_input(
        &mut self,
        task: TaskKey,
        container: ContainerKey,
        claim: Option<Timestamp>,
    ) -> Result<(), Refusal> {
        let Some(node) = self.tasks.get(&task) else { return Ok(()) };
        let closed_outputs: Vec<ContainerKey> = node
            .outputs
            .iter()
            .map(|&(_, c)| c)
            .filter(|c| self.containers.get(c).is_some_and(|n| n.producers_closed))
            .collect();
        if closed_outputs.is_empty() {
            return Ok(());
        }
        let earliest = claim.unwrap_or(INFINITY).min(self.settled_below(container));
        for channel in closed_outputs {
            let horizon = self.settled_below(channel);
            if earliest < horizon {
                return Err(Refusal::WouldUnsettle { channel, horizon, earliest });
            }
        }
        Ok(())
    }

    /// Records an input connection of `task` reading `container` (after
    /// [`check_attach_input`](Self::check_attach_input)).
    pub fn attach_input(&mut self, conn: ConnKey, task: TaskKey, container: ContainerKey) {
        self.tasks.entry(task).or_default().inputs.push((conn, container));
    }

    /// Forgets a connection (input or output) of `task`.
    pub fn detach(&mut self, conn: ConnKey, task: TaskKey) {
        self.forget(Location::Input(conn));
        if let Some(node) = self.tasks.get_mut(&task) {
            if let Some(i) = node.outputs.iter().position(|&(c, _)| c == conn) {
                let (_, container) = node.outputs.swap_remove(i);
                if let Some(container) = self.containers.get_mut(&container) {
                    container.producers.retain(|&(c, _)| c != conn);
                }
            }
            node.inputs.retain(|&(c, _)| c != conn);
        }
    }

    /// Every timestamp below the returned one is settled on `container`: no task can still put
    /// it there. ts_min for an open producer set (any task, even one started later, may put at
    /// or above ts_min); for a closed one, the lowest claim that can reach the container (see the
    /// module doc), never below ts_min. Never decreases (asserted).
    pub fn settled_below(&mut self, container: ContainerKey) -> Timestamp {
        let ts_min = self.ts_min;
        let Some(node) = self.containers.get(&container) else { return INFINITY };
        if !node.producers_closed {
            return ts_min;
        }
        let horizon = self.reach_floor(container).max(ts_min);
        let node = self.containers.get_mut(&container).expect("container present");
        // Tests and debug builds catch a horizon going back; a release build keeps its promise
        // (never decreasing) rather than crash a node over it.
        debug_assert!(
            horizon >= node.horizon,
            "settled horizon of container {container} moved backwards from {} to {}",
            show(node.horizon),
            show(horizon)
        );
        node.horizon = node.horizon.max(horizon);
        node.horizon
    }

    /// The lowest claim that can still become an item of `container`, walking producers, their
    /// input connections and the containers those read (each container visited once). A
    /// container with an open producer set contributes ts_min (anyone may put there).
    fn reach_floor(&self, container: ContainerKey) -> Timestamp {
        let mut floor = INFINITY;
        let mut seen: HashSet<ContainerKey> = HashSet::new();
        let mut pending = vec![container];
        while let Some(c) = pending.pop() {
            if !seen.insert(c) {
                continue;
            }
            let Some(node) = self.containers.get(&c) else { continue };
            if !node.producers_closed {
                return self.ts_min;
            }
            for &(_, task) in &node.producers {
                floor = floor.min(self.claim(Location::Task(task)).unwrap_or(INFINITY));
                floor = floor.min(self.claim(Location::Handover(task)).unwrap_or(INFINITY));
                let Some(task) = self.tasks.get(&task) else { continue };
                for &(conn, read) in &task.inputs {
                    floor = floor.min(self.claim(Location::Input(conn)).unwrap_or(INFINITY));
                    pending.push(read);
                }
            }
            if floor <= self.ts_min {
                return self.ts_min;
            }
        }
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(location: Location, ts: Timestamp, delta: i64) -> Update {
        Update { location, ts, delta }
    }

    /// The frontier is the lowest claim, capped by 1 + the highest put; it never decreases.
    #[test]
    fn frontier_is_min_of_claims_and_watermark() {
        let mut p = Progress::new();
        p.apply(&[up(Location::Task(1), 5, 1)]).unwrap();
        assert_eq!(p.ts_min(), 0, "nothing put: a producer may still start at 0");
        assert_eq!(p.note_put(7), Some(5));
        p.apply(&[up(Location::Task(1), 9, 1), up(Location::Task(1), 5, -1)]).unwrap();
        assert_eq!(p.ts_min(), 8);
    }

    /// A positive update below ts_min is refused as a whole batch, changing nothing.
    #[test]
    fn claims_below_the_frontier_are_refused() {
        let mut p = Progress::new();
        p.note_put(3);
        assert_eq!(p.ts_min(), 4);
        let refused = p.apply(&[up(Location::Task(1), 9, 1), up(Location::Task(2), 2, 1)]);
        assert!(matches!(refused, Err(Refusal::BelowFrontier { ts: 2, .. })));
        assert_eq!(p.claim_count(), 0);
    }

    /// What holds ts_min is every location whose lowest claim is ts_min; nothing, once ts_min
    /// is at the watermark.
    #[test]
    fn the_holders_of_ts_min_are_the_locations_claiming_it() {
        let mut p = Progress::new();
        p.apply(&[up(Location::Task(1), 5, 1), up(Location::Input(7), 9, 1), up(Location::Queue(3), 5, 2)]).unwrap();
        p.note_put(20);
        assert_eq!(p.ts_min(), 5);
        assert_eq!(p.holders(), vec![Location::Task(1), Location::Queue(3)]);
        p.apply(&[up(Location::Task(1), 12, 1), up(Location::Task(1), 5, -1)]).unwrap();
        assert_eq!(p.holders(), vec![Location::Queue(3)], "the task moved on");
        p.apply(&[up(Location::Queue(3), 5, -2)]).unwrap();
        assert_eq!((p.ts_min(), p.holders()), (9, vec![Location::Input(7)]));
        p.drop_location(Location::Input(7));
        p.drop_location(Location::Task(1));
        assert_eq!((p.ts_min(), p.holders()), (21, vec![]), "at the watermark nothing holds it");
    }

    /// Dropping a location cancels exactly its net counts, not another location's at the same
    /// timestamp (a dead peer's claims go, a live task's stay).
    #[test]
    fn dropping_a_location_cancels_exactly_its_counts() {
        let mut p = Progress::new();
        p.apply(&[up(Location::Peer(1), 3, 2), up(Location::Task(1), 3, 1), up(Location::Peer(1), 6, 1)]).unwrap();
        p.note_put(100);
        assert_eq!(p.claim_count(), 1, "the mirror of other nodes' claims is not counted");
        assert_eq!(p.drop_location(Location::Peer(1)), None, "the task still holds 3");
        assert_eq!(p.claim_count(), 1);
        assert_eq!(p.drop_location(Location::Task(1)), Some(101));
    }

    /// The outbox hands over exactly the updates applied (watermark moves and dropped owners
    /// included), and a gone owner leaves no entry behind.
    #[test]
    fn outbox_records_what_was_applied_and_owners_leave_nothing() {
        let mut p = Progress::new();
        p.record_outbox();
        p.add_task(1);
        p.apply(&[up(Location::Task(1), 2, 1), up(Location::Input(7), 3, 1)]).unwrap();
        p.note_put(4);
        p.apply(&[up(Location::Input(7), 3, -1)]).unwrap();
        p.detach(7, 1);
        p.remove_task(1);
        let outbox = p.take_outbox();
        assert_eq!(
            outbox,
            vec![
                up(Location::Task(1), 2, 1),
                up(Location::Input(7), 3, 1),
                up(Location::Watermark, 5, 1),
                up(Location::Watermark, 0, -1),
                up(Location::Input(7), 3, -1),
                up(Location::Task(1), 2, -1),
            ]
        );
        assert!(p.take_outbox().is_empty());
        assert!(p.locations.is_empty(), "{:?}", p.locations);
        assert_eq!(p.ts_min(), 5);
    }

    /// A closed channel's horizon follows what can reach it: its producer's claims, that
    /// producer's input connections, and recursively the containers it reads.
    #[test]
    fn horizon_reaches_through_relaying_producers() {
        let (frames, results) = (10, 11);
        let (camera, tracker) = (1, 2);
        let mut p = Progress::new();
        p.add_container(frames);
        p.add_container(results);
        p.add_task(camera);
        p.add_task(tracker);
        // An unrelated task holds ts_min at 0.
        let claims =
            [up(Location::Task(camera), 4, 1), up(Location::Task(tracker), INFINITY, 1), up(Location::Task(9), 0, 1)];
        p.apply(&claims).unwrap();
        p.note_put(50);
        p.attach_output(100, camera, frames);
        p.attach_input(101, tracker, frames);
        p.attach_output(102, tracker, results);
        p.close_producers(results);
        assert_eq!(p.settled_below(results), 0, "frames is open: anyone may put at ts_min");
        p.close_producers(frames);
        assert_eq!(p.settled_below(results), 4, "the camera may still put 4, the tracker relay it");
        p.apply(&[up(Location::Input(101), 6, 1)]).unwrap();
        p.apply(&[up(Location::Task(camera), 8, 1), up(Location::Task(camera), 4, -1)]).unwrap();
        assert_eq!(p.settled_below(results), 6, "an unseen item at 6 on the tracker's input");
        assert!(matches!(
            p.check_attach_input(tracker, frames, Some(5)),
            Err(Refusal::WouldUnsettle { horizon: 6, earliest: 5, .. })
        ));
        p.detach(100, camera);
        p.apply(&[up(Location::Input(101), 6, -1)]).unwrap();
        assert_eq!(p.settled_below(results), INFINITY, "no producer of frames is left");
    }
}
