//! The distributed ts_min protocol (docs/PROTOCOL.md; docs/NODES.md, "Failures and liveliness"):
//! one pure state machine per participant — node or client session — with no I/O, no threads, no
//! clock and no randomness. The driver hands inputs in (`peer_joined`, `peer_dead`, local claim
//! changes, moves of data between participants, messages from peers) and pulls outputs
//! ([`Mesh::poll_transmit`], [`Mesh::poll_event`], [`Mesh::ts_min`]). The protocol and its safety
//! and liveness argument: `docs/PROTOCOL.md`.
//!
//! **Model** (Timely Dataflow's progress tracking, adapted to crashes). Each participant reports
//! changes of its own claims as batches of `(site, timestamp, ±n)` tagged `(sender, incarnation,
//! seq)`, new claims before releases; every peer applies each batch at most once and in `seq`
//! order — its claims when its turn comes, its releases once the batches it names in `after`
//! have their claims applied. A participant's view is the sum of every batch it applied, kept
//! per owner; its ts_min is `min(every claim, every door, watermark)`.
//!
//! **Guarantees**, for participants that follow the rules below, under any delay, reordering
//! between senders (FIFO per sender), duplicate delivery, crash and restart:
//! - *safety*: a view's ts_min never exceeds the lowest claim any live participant holds or any
//!   in-flight move still covers, nor `1 +` the highest timestamp ever put; and it never
//!   decreases;
//! - *liveness*: once messages are delivered and deaths declared, every view reaches the same
//!   value, `min(live claims, watermark)`, within a bounded number of message rounds;
//! - *hostile input*: any message from the fabric is either applied or refused with a
//!   [`MeshRefusal`]; none panics, and everything the machine holds is bounded by
//!   [`MeshLimits`].
//!
//! **Rules for the driver.** New claims at or above a claim the participant holds (its
//! `Progress` enforces this locally); root tasks at or above [`Mesh::join_floor`]; data handed to
//! another participant covered by [`Mesh::send_move`] before the covering claim is released, and
//! taken over with [`Mesh::accept_move`] (or refused with [`Mesh::decline_move`]); a door opened
//! through a pause round ([`Mesh::open_door`]) before root tasks start, given back at will;
//! `peer_joined` for a peer before its messages; once the fabric declares an incarnation dead it
//! never speaks again (the driver closes its session; a process that finds itself declared dead
//! restarts as a new incarnation).
//!
//! Beside this file, in `mesh/`: `wire` (what participants send each other, and its checks),
//! `view` (the sum of the batches applied, per owner), `local` (own claim changes and moves),
//! `door` (doors opened through pause rounds and given back), `seal` (own changes sealed into batches), `stream` (each peer's stream applied in
//! order) and `members` (joins, deaths, fences, finalization).

mod door;
mod local;
mod members;
mod seal;
mod stream;
mod view;
pub mod wire;

#[cfg(test)]
mod hostile;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::id_map::IdMap;
use crate::mesh::door::{Opening, Pause};
use crate::mesh::view::View;
use crate::mutation::Switch;
use crate::time::Timestamp;
pub use view::CLAIM_COUNT_MAX;
pub use wire::{Batch, Change, Message, MoveId, MoveRef, Peer, Seq, Site, Snapshot, Transmit};

/// Named bounds on everything a participant holds or accepts. Inputs beyond them are refused
/// with [`MeshRefusal::Oversized`], [`MeshRefusal::TooManyPeers`], [`MeshRefusal::TooFarAhead`]
/// or [`MeshRefusal::Backpressure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshLimits {
    /// Participants known at once (live and dying).
    pub peers_max: usize,
    /// Changes in one batch (a larger local change is split, new claims first).
    pub batch_changes_max: usize,
    /// Markers (took, declined, fenced, after) in one batch or snapshot.
    pub batch_markers_max: usize,
    /// Batches of one sender held until the ones before them (or the ones they wait for) arrive.
    pub pending_batches_max: usize,
    /// Distinct `(site, timestamp)` entries one participant may hold.
    pub contribution_entries_max: usize,
    /// Moves this participant has handed out and not yet seen taken over.
    pub moves_open_max: usize,
    /// Moves of one sender resolved here ahead of an older one still unresolved.
    pub moves_ahead_max: usize,
    /// Messages waiting for `poll_transmit`.
    pub transmits_queued_max: usize,
    /// Dead incarnations remembered (their late messages are refused, their fences repeated).
    pub dead_remembered_max: usize,
    /// Events waiting for `poll_event`; beyond it the oldest is dropped.
    pub events_queued_max: usize,
}

impl Default for MeshLimits {
    fn default() -> MeshLimits {
        MeshLimits {
            peers_max: 1024,
            batch_changes_max: 4096,
            batch_markers_max: 4096,
            pending_batches_max: 256,
            contribution_entries_max: 1 << 16,
            moves_open_max: 1 << 16,
            moves_ahead_max: 4096,
            transmits_queued_max: 1 << 16,
            dead_remembered_max: 1024,
            events_queued_max: 1024,
        }
    }
}

/// Why an input was refused. Nothing changed when an input is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeshRefusal {
    #[error("{what}: {len} is more than the bound {max}")]
    Oversized { what: &'static str, len: usize, max: usize },
    #[error("timestamp {ts} is outside 0 ..= INFINITY")]
    InvalidTimestamp { ts: Timestamp },
    #[error("malformed message: {reason}")]
    InvalidChange { reason: &'static str },
    #[error("{peer:?} is not a known participant (report peer_joined before its messages)")]
    UnknownPeer { peer: Peer },
    #[error("{peer:?} was declared dead: its messages and moves are refused")]
    DeadIncarnation { peer: Peer },
    #[error("{peer:?} is older than the known incarnation {current} of that participant")]
    StaleIncarnation { peer: Peer, current: u64 },
    #[error("more than {max} participants")]
    TooManyPeers { max: usize },
    #[error("this participant was declared dead: restart it as a new incarnation")]
    Expelled,
    #[error("batch {seq} of {peer:?} was already received")]
    Duplicate { peer: Peer, seq: Seq },
    #[error("batch {seq} of {peer:?} is more than {max} ahead of batch {applied}, the last applied")]
    TooFarAhead { peer: Peer, seq: Seq, applied: Seq, max: usize },
    #[error("{peer:?} sent a batch that was refused: its stream stays stopped until it is declared dead")]
    Faulted { peer: Peer },
    #[error("{owner:?} claims ts={ts} below ts_min {ts_min}")]
    BelowFrontier { owner: Peer, ts: Timestamp, ts_min: Timestamp },
    #[error("{owner:?} releases a claim at {site:?} ts={ts} it does not hold")]
    ReleaseWithoutClaim { owner: Peer, site: Site, ts: Timestamp },
    #[error("a claim count out of range (0 ..= CLAIM_COUNT_MAX)")]
    CountOverflow,
    #[error("{owner:?} would hold more than {max} claim entries")]
    TooManyEntries { owner: Peer, max: usize },
    #[error("move {id} of {mover:?} was already taken over or declined")]
    DuplicateMove { mover: Peer, id: MoveId },
    #[error("{queued} messages wait to be sent (bound {max}): call poll_transmit")]
    Backpressure { queued: usize, max: usize },
}

/// What the driver should know of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer's batch or snapshot broke the rules; its stream is stopped (its claims stay,
    /// holding ts_min down, until the fabric declares it dead).
    Faulted { peer: Peer, refusal: MeshRefusal },
    /// A dead peer's claims were dropped: every live participant had fenced it.
    Finalized { peer: Peer },
    /// A peer listed an incarnation the fabric has not reported here (it may have died before
    /// this participant started): ask liveliness and report `peer_joined` or `peer_dead`. Until
    /// then it holds ts_min.
    AskLiveliness { peer: Peer },
    /// This participant was declared dead; it refuses every input from now on.
    Expelled,
}

/// A protocol fault that the simulation switches on to show that its checker catches it. Only
/// the `mutations` feature can switch one on (`Mesh::mutate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Apply a batch as soon as it is next in its sender's stream, ignoring its `after`.
    IgnoreDependencies,
    /// Drop a dead peer's claims as soon as its death is known, without waiting for fences.
    FinalizeWithoutFences,
    /// Open a door at the participant's own ts_min, asking nobody to pause.
    OpenWithoutPause,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    Live,
    /// Declared dead (by the fabric or a peer's fence); its claims stay until finalized.
    Dying,
}

/// What this participant knows of one peer.
#[derive(Debug)]
struct Member {
    standing: Standing,
    /// The fabric reported it (`peer_joined`); otherwise it was only heard of from peers, as
    /// live in their snapshots or as dead in their fences.
    confirmed: bool,
    /// The incarnations its snapshot listed as live (it may take their data over).
    snapshot_live: BTreeSet<Peer>,
    /// Its snapshot arrived: its batches after it may be applied.
    snapshot: bool,
    /// What its snapshot must be applied after (its view is complete only then).
    snapshot_after: Vec<(Peer, Seq)>,
    /// Last batch whose claims and markers are applied (the snapshot's `seq` at first).
    claimed: Seq,
    /// Last batch whose releases are applied too (`<= claimed`).
    applied: Seq,
    /// Batches after `applied`: received ahead of their turn, or claimed and waiting to release.
    pending: BTreeMap<Seq, Batch>,
    /// Dying participants this peer fenced, with the `seq` that said so.
    fences: BTreeMap<Peer, Seq>,
    /// Moves from this peer already taken over or declined here.
    moves: MoveWindow,
    /// A batch of it was refused: the rest of its stream cannot be applied.
    faulted: bool,
    /// This participant holds its ts_min for the door this peer is opening (`door.rs`).
    pause: Option<Pause>,
    /// The latest round of this peer whose door opened (a `Pause` of it or before is stale).
    opened: Option<Seq>,
}

impl Member {
    fn new(standing: Standing, confirmed: bool) -> Member {
        Member {
            standing,
            confirmed,
            snapshot_live: BTreeSet::new(),
            snapshot: false,
            snapshot_after: Vec::new(),
            claimed: 0,
            applied: 0,
            pending: BTreeMap::new(),
            fences: BTreeMap::new(),
            moves: MoveWindow { below: 1, ahead: BTreeSet::new() },
            faulted: false,
            pause: None,
            opened: None,
        }
    }
}

/// Move ids below `below`, and those in `ahead`, are resolved (at-most-once takeover).
#[derive(Debug)]
struct MoveWindow {
    below: MoveId,
    ahead: BTreeSet<MoveId>,
}

/// One participant's protocol machine.
#[derive(Debug)]
pub struct Mesh {
    me: Peer,
    limits: MeshLimits,
    view: View,
    /// Published ts_min: monotone; held while the view misses a live peer's snapshot.
    ts_min: Timestamp,
    /// This participant's door, while it has one.
    door: Option<Timestamp>,
    /// The round opening this participant's door, while it waits for its peers' answers.
    opening: Option<Opening>,
    members: BTreeMap<Peer, Member>,
    /// Dead incarnations remembered, oldest first (a set beside it for lookups).
    dead: VecDeque<Peer>,
    dead_set: BTreeSet<Peer>,
    /// Changes and markers not yet sealed into a batch.
    open: Batch,
    /// Last batch sealed.
    seq: Seq,
    /// Watermark carried by the last batch sealed (a rise alone is worth a batch: gossip).
    announced: Timestamp,
    /// The highest batch of each live peer that a sealed batch had to be applied after (what a
    /// snapshot must carry).
    after_sealed: BTreeMap<Peer, Seq>,
    /// Own moves not resolved yet, by receiver and id: the timestamp each carries.
    carries: IdMap<(Peer, MoveId), Timestamp>,
    /// The next move id for each receiver: ids count 1, 2, … per receiver, so each receiver's
    /// window of moves resolved (`Member::moves`) has no gaps left by moves to others.
    next_move: BTreeMap<Peer, MoveId>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    expelled: bool,
    mutation: Switch<Mutation>,
}

impl Mesh {
    /// A participant that knows nobody yet, with ts_min 0 and no door.
    pub fn new(me: Peer, limits: MeshLimits) -> Mesh {
        // Sums over owners stay below i64::MAX (view.rs relies on it).
        let entries = (limits.peers_max as u128 + 1) * limits.contribution_entries_max as u128;
        assert!(entries * CLAIM_COUNT_MAX as u128 <= i64::MAX as u128, "MeshLimits too large: {limits:?}");
        Mesh {
            me,
            limits,
            view: View::default(),
            ts_min: 0,
            door: None,
            opening: None,
            members: BTreeMap::new(),
            dead: VecDeque::new(),
            dead_set: BTreeSet::new(),
            open: Batch::default(),
            seq: 0,
            announced: 0,
            after_sealed: BTreeMap::new(),
            carries: IdMap::default(),
            next_move: BTreeMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            expelled: false,
            mutation: Switch::default(),
        }
    }

    /// Switches on a protocol fault (tests of the checker only).
    #[cfg(feature = "mutations")]
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation.set(mutation);
    }

    /// Whether `mutation` is switched on (never, without the `mutations` feature).
    fn mutated(&self, mutation: Mutation) -> bool {
        self.mutation.is(mutation)
    }

    pub fn me(&self) -> Peer {
        self.me
    }

    /// This participant's view of the global ts_min: nothing below it can be gotten any more,
    /// anywhere. Never decreases.
    pub fn ts_min(&self) -> Timestamp {
        self.ts_min
    }

    /// `1 +` the highest timestamp put anywhere that this participant heard of.
    pub fn watermark(&self) -> Timestamp {
        self.view.watermark()
    }

    /// The lowest virtual time a root task may start at here (its door); `None` while it has
    /// none. At or above every participant's ts_min, now and until the door rises past it.
    pub fn join_floor(&self) -> Option<Timestamp> {
        self.door
    }

    /// Whether the view holds every peer's snapshot, and what each must be applied after (ts_min
    /// is held until it does). A dying peer counts too until it is finalized: data it handed to a
    /// live participant is covered by its contribution until that participant's takeover is here.
    pub fn is_complete(&self) -> bool {
        self.members.values().all(|m| m.snapshot && self.dependencies_met(&m.snapshot_after))
    }

    // ---- outputs ---------------------------------------------------------------------------------

    /// The next message to send. Seals what is pending into a batch first.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.seal();
        self.transmits.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- internals -------------------------------------------------------------------------------

    fn check_alive(&self) -> Result<(), MeshRefusal> {
        if self.expelled {
            return Err(MeshRefusal::Expelled);
        }
        Ok(())
    }

    /// Refuses inputs that add to what waits to be sent while too much does. (Declarations of
    /// death and refusals of moves pass: they only ever add one marker.)
    fn admit(&self) -> Result<(), MeshRefusal> {
        self.check_alive()?;
        if self.transmits.len() >= self.limits.transmits_queued_max {
            return Err(MeshRefusal::Backpressure {
                queued: self.transmits.len(),
                max: self.limits.transmits_queued_max,
            });
        }
        Ok(())
    }

    fn unknown(&self, peer: Peer) -> MeshRefusal {
        if self.dead_set.contains(&peer) {
            MeshRefusal::DeadIncarnation { peer }
        } else {
            MeshRefusal::UnknownPeer { peer }
        }
    }

    /// Whether this participant is alone and idle: it knows no other participant, is not
    /// expelled, has its door, and has nothing queued to send — so its own claims are all its
    /// view holds, and it takes the next batch of them whatever it is (no backpressure).
    pub fn alone(&self) -> bool {
        self.members.is_empty() && !self.expelled && self.door.is_some() && self.transmits.is_empty()
    }

    /// Its bounds.
    pub fn limits(&self) -> &MeshLimits {
        &self.limits
    }

    /// Whether this participant knows any other (live, dying, or only heard of): otherwise it has
    /// nobody to send anything to.
    pub fn knows_peers(&self) -> bool {
        !self.members.is_empty()
    }

    /// The members this participant counts live (not fenced).
    pub fn live_peers(&self) -> Vec<Peer> {
        self.members.iter().filter(|(_, m)| m.standing == Standing::Live).map(|(&p, _)| p).collect()
    }

    fn push_event(&mut self, event: Event) {
        if self.events.len() >= self.limits.events_queued_max {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    /// After any input: applies what became applicable, finalizes the dead once every live peer
    /// fenced them, raises the door to the frontier, and publishes ts_min.
    fn settle(&mut self) {
        loop {
            self.drain();
            if !self.try_finalize() {
                break;
            }
        }
        if self.expelled {
            return;
        }
        self.end_pauses();
        self.try_open();
        if !self.is_complete() {
            return;
        }
        self.raise_door();
        let ts_min = self.view.ts_min().min(self.paused_at());
        assert!(ts_min >= self.ts_min, "ts_min of {:?} moved backwards from {} to {ts_min}", self.me, self.ts_min);
        self.ts_min = ts_min;
    }

    /// A door follows the frontier (it never holds the view below what the participant itself
    /// knows; it only keeps everyone else's view at or below it until they hear of the rise).
    fn raise_door(&mut self) {
        let Some(door) = self.door else { return };
        let frontier = self.view.frontier();
        if frontier <= door {
            return;
        }
        let changes =
            [Change { site: Site::Door, ts: frontier, delta: 1 }, Change { site: Site::Door, ts: door, delta: -1 }];
        self.commit_own(&changes).expect("a door moving up is covered by itself and keeps one entry");
        self.door = Some(frontier);
    }
}
