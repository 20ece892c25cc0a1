//! The driver thread: it feeds the participant what the fabric reports (messages, joins,
//! deaths), keeps a sender's messages until the fabric reports it, tells fenced senders that keep
//! speaking that they were fenced, sends what the participant has to send, and acts on its events
//! — down to restarting the node's participant as a new incarnation when it was expelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

use stampede_core::mesh::{Event, Message};
use stampede_core::{Mesh, MeshLimits, MeshRefusal, Peer};
use zenoh::Wait;

use crate::mesh::life::{live_nodes, Life};
use crate::mesh::{incarnation_after, Fabric, Hooks, Input, EARLY_MESSAGES_MAX, EARLY_SENDERS_MAX, REMIND_EVERY, TICK};

/// The driver thread's state.
pub(super) struct Driver {
    pub(super) fabric: Fabric,
    /// The participant's declarations; `None` while an expelled node has not joined again.
    pub(super) life: Option<Life>,
    /// Messages of senders not reported yet, in arrival order.
    pub(super) early: HashMap<Peer, Vec<Message>>,
    /// Senders not reported yet some of whose messages were dropped (at most
    /// [`EARLY_SENDERS_MAX`]).
    pub(super) early_lost: std::collections::HashSet<Peer>,
    /// Fenced senders told so lately (at most [`EARLY_SENDERS_MAX`]), and when.
    pub(super) reminded: HashMap<Peer, Instant>,
    /// A wake is queued (the runtime's claims changed); cleared as it is taken.
    pub(super) woken: Arc<AtomicBool>,
    /// `STAMPEDE_MESH_DEBUG` is set: joins, deaths, refusals and events go to standard error.
    pub(super) debug: bool,
    /// Since when this node's pause round has waited for the same members (`None`: no round, or
    /// nobody to wait for).
    pub(super) round_waiting: Option<(Vec<Peer>, Instant)>,
    pub(super) hooks: Hooks,
}

impl Driver {
    fn log(&self, what: impl FnOnce() -> String) {
        if self.debug {
            eprintln!("stampede mesh {:?}: {}", self.fabric.link.peer(), what());
        }
    }

    pub(super) fn run(mut self, rx: &Receiver<Input>, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            if self.life.is_none() {
                self.rejoin(stop);
                continue;
            }
            if self.fabric.resync.swap(false, Ordering::AcqRel) {
                self.resync();
            }
            if self.fabric.overflow.swap(false, Ordering::AcqRel) {
                self.log(|| "a message addressed to it was dropped (inbox full): it starts over".to_owned());
                self.restart();
                continue;
            }
            match rx.recv_timeout(TICK) {
                Ok(input) => self.input(input),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            // Drain what else is waiting before sending: one batch for many inputs.
            while let Ok(input) = rx.try_recv() {
                self.input(input);
            }
            self.door();
            self.flush();
        }
    }

    /// Declares the link's current participant; on failure (the fabric refused or did not
    /// answer) waits a tick and leaves it to the next round.
    fn rejoin(&mut self, stop: &AtomicBool) {
        let peer = self.fabric.link.peer();
        match self.fabric.begin(peer) {
            Ok(life) => {
                self.log(|| "joined the mesh again".to_owned());
                self.life = Some(life);
            }
            Err(reason) => {
                self.log(|| format!("could not join again: {reason}"));
                if !stop.load(Ordering::Acquire) {
                    std::thread::sleep(TICK);
                }
            }
        }
    }

    /// This node was expelled: leave the fabric, close the shadows on it, and replace the
    /// participant by a new incarnation (joined by [`rejoin`](Self::rejoin)).
    fn restart(&mut self) {
        // Leaving the fabric first: its token gone, the old incarnation is dead to everyone.
        let Some(old) = self.life.take() else { return };
        let peer = Peer { id: old.me.id, incarnation: incarnation_after(old.me.incarnation) };
        drop(old);
        self.early.clear();
        self.early_lost.clear();
        self.reminded.clear();
        // A larger incarnation of this participant with no door: never refused.
        let _ = self.fabric.link.restart(Mesh::new(peer, MeshLimits::default()));
        self.fabric.counters.restarts.fetch_add(1, Ordering::Relaxed);
        (self.hooks.expelled)();
    }

    fn input(&mut self, input: Input) {
        match &input {
            Input::Joined(p) => self.log(|| format!("joined {p:?}")),
            Input::Dead(p) => self.log(|| format!("dead {p:?}")),
            Input::Message { .. } | Input::Wake => {}
        }
        match input {
            Input::Message { from, bytes } => self.message(from, &bytes),
            Input::Joined(peer) => match self.fabric.link.with(|mesh| mesh.peer_joined(peer)) {
                // Messages of it were dropped before it was reported: its stream to this
                // participant can never be applied past them, so the participant starts over.
                Ok(()) if self.early_lost.remove(&peer) => {
                    self.log(|| format!("messages of {peer:?} were dropped before it joined: it starts over"));
                    self.restart();
                }
                Ok(()) => {
                    for message in self.early.remove(&peer).unwrap_or_default() {
                        self.deliver(peer, message);
                    }
                }
                // Its token is (back) on the fabric, but this node fenced it: it may not know.
                Err(MeshRefusal::DeadIncarnation { .. }) => self.remind(peer),
                Err(_) => {}
            },
            Input::Dead(peer) => {
                self.early.remove(&peer);
                self.early_lost.remove(&peer);
                let _ = self.fabric.link.with(|mesh| mesh.peer_dead(peer));
                (self.hooks.dead)(peer);
            }
            Input::Wake => self.woken.store(false, Ordering::Release),
        }
    }

    fn message(&mut self, from: Peer, bytes: &[u8]) {
        let Ok((to, message)) = postcard::from_bytes::<(Vec<Peer>, Message)>(bytes) else {
            self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self.life.as_ref().is_some_and(|life| to.contains(&life.me)) {
            self.deliver(from, message);
        }
    }

    fn deliver(&mut self, from: Peer, message: Message) {
        match self.fabric.link.with(|mesh| mesh.handle_message(from, message.clone())) {
            Ok(()) => {}
            Err(MeshRefusal::UnknownPeer { .. }) => {
                let room = self.early.contains_key(&from) || self.early.len() < EARLY_SENDERS_MAX;
                match room.then(|| self.early.entry(from).or_default()) {
                    Some(early) if early.len() < EARLY_MESSAGES_MAX => early.push(message),
                    _ => {
                        self.fabric.counters.dropped.fetch_add(1, Ordering::Relaxed);
                        // Should the sender turn out real, its stream has a gap (see `input`).
                        if self.early_lost.len() < EARLY_SENDERS_MAX {
                            self.early_lost.insert(from);
                        }
                    }
                }
            }
            // Batches of `from` held here reached the bound while an earlier one (or its
            // snapshot) never came: it was lost before this node could hear it (published before
            // zenoh knew this node's subscriber, while `from` started), and refused ones are lost
            // too. Its stream can never be applied past that gap, and its view here never
            // completes, holding every node's ts_min: declared dead, it learns it and starts over
            // as a new incarnation, whose snapshot comes on routes that exist by then.
            Err(MeshRefusal::TooFarAhead { peer, .. }) if peer == from => {
                self.log(|| format!("the stream of {from:?} has a gap: declared dead, it starts over"));
                self.fabric.counters.refused.fetch_add(1, Ordering::Relaxed);
                self.input(Input::Dead(from));
            }
            Err(refusal) => {
                self.log(|| format!("refused a message from {from:?}: {refusal}"));
                self.fabric.counters.refused.fetch_add(1, Ordering::Relaxed);
                if let MeshRefusal::DeadIncarnation { peer } | MeshRefusal::Faulted { peer } = refusal {
                    if peer == from {
                        self.remind(from);
                    }
                }
            }
        }
    }

    /// `from` speaks although this node fenced it: it does not know it was expelled. Tell it
    /// ([`Mesh::remind`]), at most once per [`REMIND_EVERY`] per sender.
    fn remind(&mut self, from: Peer) {
        let now = Instant::now();
        if self.reminded.get(&from).is_some_and(|at| now.duration_since(*at) < REMIND_EVERY) {
            return;
        }
        if self.reminded.len() >= EARLY_SENDERS_MAX {
            self.reminded.retain(|_, at| now.duration_since(*at) < REMIND_EVERY);
        }
        if self.reminded.len() < EARLY_SENDERS_MAX && self.fabric.link.with(|mesh| mesh.remind(from)) {
            self.log(|| format!("told {from:?} it was fenced"));
            self.reminded.insert(from, now);
        }
    }

    /// Opens the door when the node needs one — a hook says so, or, restarted, it waits for a
    /// door before it shows its claims again — and gives it back when nothing needs it (a round
    /// running then ends with the door open, and the next look closes it). Tells the sessions
    /// waiting whether it is open.
    fn door(&mut self) {
        if self.life.is_none() {
            return;
        }
        let link = &self.fabric.link;
        let wanted = (self.hooks.door_wanted)() || link.awaits_floor();
        let open = link.read(|mesh| mesh.join_floor().is_some());
        if wanted && !open {
            let _ = link.with(Mesh::open_door);
        } else if !wanted && open {
            let _ = link.with(Mesh::close_door);
        }
        self.fabric.door.set(link.read(|mesh| mesh.join_floor().is_some()));
        self.silent_members();
    }

    /// A member that leaves this node's pause round unanswered for the liveliness timeout (a
    /// hung process whose zenoh session lives on, or a client speaking on the mesh's keys) is
    /// declared dead, as a member the fabric lost is: its fence ends the round's wait for it, and
    /// a live one learns it was fenced and rejoins anew. Without this one silent member would
    /// hold every node's doors shut (docs/PROTOCOL.md, point 3).
    fn silent_members(&mut self) {
        let waiting = self.fabric.link.read(Mesh::unanswered);
        match &self.round_waiting {
            _ if waiting.is_empty() => self.round_waiting = None,
            Some((same, since)) if *same == waiting => {
                if since.elapsed() >= self.fabric.timeout {
                    self.round_waiting = None;
                    for peer in waiting {
                        self.log(|| format!("{peer:?} left a pause round unanswered: declared dead"));
                        self.fabric.counters.silent.fetch_add(1, Ordering::Relaxed);
                        self.input(Input::Dead(peer));
                    }
                }
            }
            _ => self.round_waiting = Some((waiting, Instant::now())),
        }
    }

    /// Sends what the machine has to send and acts on its events.
    fn flush(&mut self) {
        // Between a restart and the new life's declarations, what the new participant has to
        // say stays queued in it: sent now, it would be lost, and a stream with a gap never heals.
        let Some(life) = &self.life else { return };
        let (transmits, events) = self.fabric.link.with(|mesh| {
            let transmits: Vec<_> = std::iter::from_fn(|| mesh.poll_transmit()).collect();
            let events: Vec<_> = std::iter::from_fn(|| mesh.poll_event()).collect();
            (transmits, events)
        });
        for transmit in transmits {
            match postcard::to_allocvec(&(&transmit.to, &transmit.message)) {
                Ok(bytes) => {
                    let _ = life.publisher.put(bytes).wait();
                }
                Err(_) => {
                    self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for event in events {
            if self.debug {
                let (ts_min, complete) = self.fabric.link.read(|m| (m.ts_min(), m.is_complete()));
                self.log(|| format!("event {event:?} (ts_min {ts_min}, complete {complete})"));
            }
            match event {
                Event::AskLiveliness { peer } => self.ask_liveliness(peer),
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
                    if self.life.as_ref().is_some_and(|life| life.alone && life.me.incarnation > peer.incarnation) =>
                {
                    self.log(|| "opened alone, it meets a mesh below its ts_min: it gives way".to_owned());
                    self.restart();
                    return;
                }
                Event::Faulted { peer, .. } => self.input(Input::Dead(peer)),
                Event::Expelled => {
                    // What else the old participant said is about a life that is over.
                    self.restart();
                    return;
                }
                Event::Finalized { .. } => {}
            }
        }
    }

    /// Reads liveliness again after a join or death was dropped (inbox full): every token on
    /// the fabric is reported joined, every live member without one dead.
    fn resync(&mut self) {
        let Some(live) = self.live_on_fabric() else {
            self.fabric.resync.store(true, Ordering::Release);
            return;
        };
        let members = self.fabric.link.read(Mesh::live_peers);
        for gone in members.into_iter().filter(|p| !live.contains(p)) {
            self.input(Input::Dead(gone));
        }
        for peer in live {
            self.input(Input::Joined(peer));
        }
    }

    /// Reports `peer` joined if its token is on the fabric now, dead otherwise.
    fn ask_liveliness(&mut self, peer: Peer) {
        let Some(live) = self.live_on_fabric() else { return };
        self.input(if live.contains(&peer) { Input::Joined(peer) } else { Input::Dead(peer) });
    }

    /// The other nodes' participants whose tokens are on the fabric now; `None` if the fabric
    /// does not answer.
    fn live_on_fabric(&self) -> Option<Vec<Peer>> {
        let live = live_nodes(&self.fabric.zenoh, self.fabric.link.peer(), TICK * 10).ok()?;
        Some(live.into_iter().map(|(_, peer)| peer).collect())
    }
}
