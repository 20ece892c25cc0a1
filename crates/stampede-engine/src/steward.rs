//! The steward of a node's participant in the distributed ts_min (docs/PROTOCOL.md): what a node
//! does between its fabric and its [`Mesh`] machine, with no I/O — the node's fabric driver
//! (`stampede-node`'s `mesh/driver.rs`) carries it over zenoh, the simulations step it over
//! in-memory links on a virtual clock.
//!
//! It is fed what the fabric reports — a message ([`message`](Steward::message)), a node that
//! joined or died ([`joined`](Steward::joined), [`dead`](Steward::dead)) — and looked at now and
//! then ([`look`](Steward::look): the door, silent members); it hands out what the driver must do
//! ([`poll_action`](Steward::poll_action)): send a message, ask the fabric whether a node lives,
//! close the shadows of a node it fenced, leave the fabric as a new incarnation.
//!
//! **Guarantees.** A message from a sender the fabric has not reported yet waits for it, at most
//! [`EARLY_MESSAGES_MAX`] per sender and [`EARLY_SENDERS_MAX`] senders; a sender some of whose
//! messages were dropped so starts over when it is reported (its stream has a gap). A fenced
//! sender that keeps speaking is told so at most once per [`REMIND_EVERY`]. A member that leaves
//! this node's pause round unanswered for the liveliness timeout is declared dead, as a stream the
//! machine refuses is (its peer learns it was fenced and rejoins anew), so that no silent member
//! holds every door shut. An expelled participant is replaced by a larger incarnation with no door
//! ([`MeshLink::restart`]); what it had to say before is sent first, nothing of its old life after.
//! The door is opened while the node needs one and given back when nothing does. Time is the
//! driver's: every method that needs it takes `now`, a duration since an origin of its choosing.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stampede_core::mesh::{Event, Message, Transmit};
use stampede_core::{Mesh, MeshLimits, MeshRefusal, Peer};

use crate::mesh_link::MeshLink;

/// Messages of one sender kept while the fabric has not reported it (its token may come after
/// its first message); beyond it they are dropped and counted.
pub const EARLY_MESSAGES_MAX: usize = 256;
/// Senders not reported yet whose messages are kept; messages of more are dropped and counted.
/// Also the bound on fenced senders remembered as reminded.
pub const EARLY_SENDERS_MAX: usize = 64;
/// How often a fenced sender that keeps speaking is told it was fenced.
pub const REMIND_EVERY: Duration = Duration::from_secs(1);

/// Counters of what the steward and its driver dropped (for docs/PROTOCOL.md's "what can hold
/// ts_min" and for tests); shared with the driver, which counts what it drops itself.
#[derive(Debug, Default)]
pub struct MeshCounters {
    /// Messages that did not decode, or came from a key that does not name a participant.
    pub malformed: AtomicU64,
    /// Messages the machine refused (duplicates, stale or dead senders, bounds).
    pub refused: AtomicU64,
    /// Messages dropped because the inbox or a sender's early queue was full.
    pub dropped: AtomicU64,
    /// Times this node was expelled and rejoined as a new incarnation.
    pub restarts: AtomicU64,
    /// Members declared dead for leaving this node's pause round unanswered for the liveliness
    /// timeout.
    pub silent: AtomicU64,
}

/// What the driver must do, in the order given.
#[derive(Debug)]
pub enum Action {
    /// Send `message` to the participants in `to` (on the node's one ordered stream).
    Send(Transmit),
    /// Tell [`joined`](Steward::joined) if `peer`'s token is on the fabric now, else
    /// [`dead`](Steward::dead).
    AskLiveliness(Peer),
    /// `peer` was declared dead here (reported dead, or fenced for its stream or its silence):
    /// the node closes the shadows of its tasks.
    Fenced(Peer),
    /// This node's participant was expelled (or its own stream here has a gap) and was replaced
    /// by a new incarnation, [`peer`](Steward::peer) now: the driver leaves the fabric as the old
    /// one, the node closes every shadow on it and forgets its sessions' moves, and the driver
    /// declares the new one and calls [`began`](Steward::began).
    Restarted {
        /// The incarnation that ended.
        old: Peer,
    },
    /// What happened, for a driver that logs (only when made with `notes`).
    Note(String),
}

/// The steward of one node's participant (see the module doc).
pub struct Steward {
    link: MeshLink,
    /// The liveliness timeout: how long a member may leave a pause round unanswered.
    timeout: Duration,
    /// The incarnation after an expelled one (larger: a start time, or a counter).
    next_incarnation: fn(u64) -> u64,
    counters: Arc<MeshCounters>,
    notes: bool,
    /// `Some(alone)` while the current incarnation is declared on the fabric: `alone` when no
    /// other node was live as it began (an island, if its door opened at once, that gives way
    /// when it meets the rest of the mesh).
    declared: Option<bool>,
    /// Messages of senders not reported yet, in arrival order.
    early: BTreeMap<Peer, Vec<Message>>,
    /// Senders not reported yet some of whose messages were dropped.
    early_lost: BTreeSet<Peer>,
    /// Fenced senders told so lately, and when.
    reminded: BTreeMap<Peer, Duration>,
    /// Since when this node's pause round has waited for the same members (`None`: no round, or
    /// nobody to wait for).
    round_waiting: Option<(Vec<Peer>, Duration)>,
    actions: VecDeque<Action>,
}

impl Steward {
    /// The steward of `link`'s participant, not declared on the fabric yet ([`began`](Self::began)).
    pub fn new(
        link: MeshLink,
        timeout: Duration,
        next_incarnation: fn(u64) -> u64,
        counters: Arc<MeshCounters>,
        notes: bool,
    ) -> Steward {
        Steward {
            link,
            timeout,
            next_incarnation,
            counters,
            notes,
            declared: None,
            early: BTreeMap::new(),
            early_lost: BTreeSet::new(),
            reminded: BTreeMap::new(),
            round_waiting: None,
            actions: VecDeque::new(),
        }
    }

    /// The participant now (a restart makes a new incarnation of it).
    pub fn peer(&self) -> Peer {
        self.link.peer()
    }

    /// Whether the current incarnation is declared on the fabric.
    pub fn declared(&self) -> bool {
        self.declared.is_some()
    }

    /// The link it stewards.
    pub fn link(&self) -> &MeshLink {
        &self.link
    }

    /// The counters it keeps.
    pub fn counters(&self) -> &Arc<MeshCounters> {
        &self.counters
    }

    /// The current incarnation is declared on the fabric, `live` being the other nodes'
    /// participants live there as it began (they get its snapshot; none: it is alone).
    pub fn began(&mut self, live: &[Peer]) {
        debug_assert!(self.declared.is_none(), "an incarnation is declared once");
        for other in live {
            // Known already, or dead: harmless.
            let _ = self.link.with(|mesh| mesh.peer_joined(*other));
        }
        self.declared = Some(live.is_empty());
    }

    /// The next thing the driver must do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.notes {
            self.actions.push_back(Action::Note(what()));
        }
    }

    /// A message from `from` to the participants `to`; ignored unless the current incarnation,
    /// declared, is among them.
    pub fn message(&mut self, from: Peer, to: &[Peer], message: Message, now: Duration) {
        if self.declared.is_some() && to.contains(&self.peer()) {
            self.deliver(from, message, now);
        }
    }

    /// What the fabric says of `peer` (a liveliness event, or the answer to
    /// [`Action::AskLiveliness`]): its token shows (`live`: [`joined`](Self::joined)) or not
    /// ([`dead`](Self::dead)).
    pub fn reported(&mut self, peer: Peer, live: bool, now: Duration) {
        match live {
            true => self.joined(peer, now),
            false => self.dead(peer),
        }
    }

    /// The fabric reports `peer` live (its token appeared).
    pub fn joined(&mut self, peer: Peer, now: Duration) {
        self.note(|| format!("joined {peer:?}"));
        match self.link.with(|mesh| mesh.peer_joined(peer)) {
            // Messages of it were dropped before it was reported: its stream to this participant
            // can never be applied past them, so the participant starts over.
            Ok(()) if self.early_lost.remove(&peer) => {
                self.note(|| format!("messages of {peer:?} were dropped before it joined: it starts over"));
                self.restart();
            }
            Ok(()) => {
                for message in self.early.remove(&peer).unwrap_or_default() {
                    self.deliver(peer, message, now);
                }
            }
            // Its token is (back) on the fabric, but this node fenced it: it may not know.
            Err(MeshRefusal::DeadIncarnation { .. }) => self.remind(peer, now),
            Err(_) => {}
        }
    }

    /// The fabric reports `peer` dead (its token went), or this node declares it so.
    pub fn dead(&mut self, peer: Peer) {
        self.note(|| format!("dead {peer:?}"));
        self.early.remove(&peer);
        self.early_lost.remove(&peer);
        let _ = self.link.with(|mesh| mesh.peer_dead(peer));
        self.actions.push_back(Action::Fenced(peer));
    }

    /// A message addressed to this participant was dropped before it got here (the driver's
    /// inbox was full): a sender's stream has a gap, so the participant starts over.
    pub fn start_over(&mut self) {
        self.note(|| "a message addressed to it was dropped: it starts over".to_owned());
        self.restart();
    }

    fn deliver(&mut self, from: Peer, message: Message, now: Duration) {
        match self.link.with(|mesh| mesh.handle_message(from, message.clone())) {
            Ok(()) => {}
            Err(MeshRefusal::UnknownPeer { .. }) => {
                let room = self.early.contains_key(&from) || self.early.len() < EARLY_SENDERS_MAX;
                match room.then(|| self.early.entry(from).or_default()) {
                    Some(early) if early.len() < EARLY_MESSAGES_MAX => early.push(message),
                    _ => {
                        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                        // Should the sender turn out real, its stream has a gap (see `joined`).
                        if self.early_lost.len() < EARLY_SENDERS_MAX {
                            self.early_lost.insert(from);
                        }
                    }
                }
            }
            // Batches of `from` held here reached the bound while an earlier one (or its
            // snapshot) never came: it was lost before this node could hear it (sent before the
            // fabric knew this node listened, while `from` started), and refused ones are lost
            // too. Its stream can never be applied past that gap, and its view here never
            // completes, holding every node's ts_min: declared dead, it learns it and starts over
            // as a new incarnation, whose snapshot comes on routes that exist by then.
            Err(MeshRefusal::TooFarAhead { peer, .. }) if peer == from => {
                self.note(|| format!("the stream of {from:?} has a gap: declared dead, it starts over"));
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                self.dead(from);
            }
            Err(refusal) => {
                self.note(|| format!("refused a message from {from:?}: {refusal}"));
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                if let MeshRefusal::DeadIncarnation { peer } | MeshRefusal::Faulted { peer } = refusal {
                    if peer == from {
                        self.remind(from, now);
                    }
                }
            }
        }
    }

    /// `from` speaks although this node fenced it: it does not know it was expelled. Tell it
    /// ([`Mesh::remind`]), at most once per [`REMIND_EVERY`] per sender.
    fn remind(&mut self, from: Peer, now: Duration) {
        let lately = |at: &Duration| now.saturating_sub(*at) < REMIND_EVERY;
        if self.reminded.get(&from).is_some_and(lately) {
            return;
        }
        if self.reminded.len() >= EARLY_SENDERS_MAX {
            self.reminded.retain(|_, at| lately(at));
        }
        if self.reminded.len() < EARLY_SENDERS_MAX && self.link.with(|mesh| mesh.remind(from)) {
            self.note(|| format!("told {from:?} it was fenced"));
            self.reminded.insert(from, now);
        }
    }

    /// Opens the door when the node needs one — `wanted`, or, restarted, it waits for a door
    /// before it shows its claims again — and gives it back when nothing needs it (a round
    /// running then ends with the door open, and the next look closes it); declares dead the
    /// members that left its pause round unanswered for the liveliness timeout. Whether the door
    /// is open.
    pub fn look(&mut self, wanted: bool, now: Duration) -> bool {
        if self.declared.is_none() {
            return false;
        }
        let wanted = wanted || self.link.awaits_floor();
        let open = self.link.read(|mesh| mesh.join_floor().is_some());
        if wanted && !open {
            let _ = self.link.with(Mesh::open_door);
        } else if !wanted && open {
            let _ = self.link.with(Mesh::close_door);
        }
        self.silent_members(now);
        self.link.read(|mesh| mesh.join_floor().is_some())
    }

    /// A member that leaves this node's pause round unanswered for the liveliness timeout (a
    /// hung process whose fabric session lives on, or a client speaking on the mesh's keys) is
    /// declared dead, as a member the fabric lost is: its fence ends the round's wait for it, and
    /// a live one learns it was fenced and rejoins anew (docs/PROTOCOL.md, point 3).
    fn silent_members(&mut self, now: Duration) {
        let waiting = self.link.read(Mesh::unanswered);
        match &self.round_waiting {
            _ if waiting.is_empty() => self.round_waiting = None,
            Some((same, since)) if *same == waiting => {
                if now.saturating_sub(*since) >= self.timeout {
                    self.round_waiting = None;
                    for peer in waiting {
                        self.note(|| format!("{peer:?} left a pause round unanswered: declared dead"));
                        self.counters.silent.fetch_add(1, Ordering::Relaxed);
                        self.dead(peer);
                    }
                }
            }
            _ => self.round_waiting = Some((waiting, now)),
        }
    }

    /// Takes what the machine has to send (as [`Action::Send`]) and acts on its events.
    pub fn flush(&mut self) {
        // Between a restart and the new life's declarations, what the new participant has to
        // say stays queued in it: sent now, it would be lost, and a stream with a gap never heals.
        let Some(alone) = self.declared else { return };
        let (transmits, events) = self.link.with(|mesh| {
            let transmits: Vec<_> = std::iter::from_fn(|| mesh.poll_transmit()).collect();
            let events: Vec<_> = std::iter::from_fn(|| mesh.poll_event()).collect();
            (transmits, events)
        });
        self.actions.extend(transmits.into_iter().map(Action::Send));
        let me = self.peer();
        for event in events {
            self.note(|| format!("event {event:?}"));
            match event {
                Event::AskLiveliness { peer } => self.actions.push_back(Action::AskLiveliness(peer)),
                // A peer's stream the machine refused holds ts_min until that peer is declared
                // dead: this node declares it (fences it). Its peers follow the fence, and the
                // peer, learning it was expelled, rejoins as a new incarnation — so a stream
                // broken by a partition that healed, or by a restarted node that opened its
                // door alone, does not hold the mesh for ever.
                //
                // Unless this node opened its door alone after that peer started (it restarted
                // while cut off: incarnations are start times) and finds the peer's claims below
                // its own ts_min: then it is the island, and gives way — it restarts and joins
                // through the others — rather than expel the rest of the mesh. (A node that opened
                // alone before, the mesh's first, fences a newcomer that did.)
                Event::Faulted { peer, refusal: MeshRefusal::BelowFrontier { .. } }
                    if alone && me.incarnation > peer.incarnation =>
                {
                    self.note(|| "opened alone, it meets a mesh below its ts_min: it gives way".to_owned());
                    self.restart();
                    return;
                }
                Event::Faulted { peer, .. } => self.dead(peer),
                // What else the old participant said is about a life that is over.
                Event::Expelled => {
                    self.restart();
                    return;
                }
                Event::Finalized { .. } => {}
            }
        }
    }

    /// Replaces the participant by a new incarnation with no door, not declared yet.
    fn restart(&mut self) {
        let Some(_) = self.declared.take() else { return };
        let old = self.peer();
        let peer = Peer { id: old.id, incarnation: (self.next_incarnation)(old.incarnation) };
        debug_assert!(peer.incarnation > old.incarnation, "a restart is a larger incarnation");
        self.early.clear();
        self.early_lost.clear();
        self.reminded.clear();
        self.round_waiting = None;
        // A larger incarnation of this participant with no door: never refused.
        let _ = self.link.restart(Mesh::new(peer, MeshLimits::default()));
        self.counters.restarts.fetch_add(1, Ordering::Relaxed);
        self.actions.push_back(Action::Restarted { old });
    }
}
