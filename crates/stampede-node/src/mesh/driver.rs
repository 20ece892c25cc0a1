//! The driver thread: it carries the node's [`Steward`] over zenoh — feeds it what the fabric
//! reports (messages, joins, deaths) and looks at it every [`TICK`], publishes what it sends,
//! answers its liveliness questions from the fabric, and acts on what it says: closing the
//! shadows of a node it fenced, leaving the fabric and joining again as a new incarnation.
//! Every rule is the steward's (`stampede_engine::steward`); this file only does the I/O.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

use stampede_core::mesh::Message;
use stampede_core::Peer;
use stampede_engine::steward::{Action, Steward};
use zenoh::Wait;

use crate::mesh::life::{live_nodes, Life};
use crate::mesh::{Fabric, Hooks, Input, TICK};

/// Rounds of actions carried out after one look, each of which may answer a question the
/// steward asked (a liveliness question): the rest waits for the next look.
const ACTION_ROUNDS_MAX: usize = 8;

/// The driver thread's state.
pub(super) struct Driver {
    pub(super) fabric: Fabric,
    pub(super) steward: Steward,
    /// The participant's declarations; `None` while an expelled node has not joined again.
    pub(super) life: Option<Life>,
    /// A wake is queued (the runtime's claims changed); cleared as it is taken.
    pub(super) woken: Arc<AtomicBool>,
    /// `STAMPEDE_MESH_DEBUG` is set: the steward's notes go to standard error.
    pub(super) debug: bool,
    /// The steward's time origin.
    pub(super) origin: Instant,
    pub(super) hooks: Hooks,
}

impl Driver {
    fn log(&self, what: &str) {
        if self.debug {
            eprintln!("stampede mesh {:?}: {what}", self.steward.peer());
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
                self.steward.start_over();
                self.carry_out();
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
            let now = self.origin.elapsed();
            (self.hooks.look)(now);
            let open = self.steward.look((self.hooks.door_wanted)(), now);
            if self.life.is_some() {
                self.fabric.door.set(open);
            }
            self.carry_out();
        }
    }

    /// Declares the steward's current participant; on failure (the fabric refused or did not
    /// answer) waits a tick and leaves it to the next round.
    fn rejoin(&mut self, stop: &AtomicBool) {
        match self.fabric.begin(self.steward.peer()) {
            Ok(life) => {
                self.log("joined the mesh again");
                self.steward.began(&life.live);
                self.life = Some(life);
            }
            Err(reason) => {
                self.log(&format!("could not join again: {reason}"));
                if !stop.load(Ordering::Acquire) {
                    // The fabric refused or did not answer: try again next tick.
                    std::thread::sleep(TICK);
                }
            }
        }
    }

    fn input(&mut self, input: Input) {
        let now = self.origin.elapsed();
        match input {
            Input::Message { from, bytes } => match postcard::from_bytes::<(Vec<Peer>, Message)>(&bytes) {
                Ok((to, message)) => self.steward.message(from, &to, message, now),
                Err(_) => {
                    self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
                }
            },
            Input::Joined(peer) => self.steward.joined(peer, now),
            Input::Dead(peer) => self.steward.dead(peer),
            Input::Wake => self.woken.store(false, Ordering::Release),
        }
    }

    /// Takes what the steward has to send and carries out what it says, until it says nothing
    /// more (at most [`ACTION_ROUNDS_MAX`] rounds).
    fn carry_out(&mut self) {
        for _ in 0..ACTION_ROUNDS_MAX {
            self.steward.flush();
            let mut acted = false;
            while let Some(action) = self.steward.poll_action() {
                acted = true;
                self.act(action);
            }
            if !acted {
                return;
            }
        }
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Send(transmit) => {
                let Some(life) = &self.life else { return };
                match postcard::to_allocvec(&(&transmit.to, &transmit.message)) {
                    Ok(bytes) => {
                        let _ = life.publisher.put(self.fabric.seal.seal(bytes)).wait();
                    }
                    Err(_) => {
                        self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Action::AskLiveliness(peer) => self.ask_liveliness(peer),
            Action::Fenced(peer) => (self.hooks.dead)(peer, self.origin.elapsed()),
            Action::Restarted { old } => {
                // Leaving the fabric: its token gone, the old incarnation is dead to everyone.
                self.log(&format!("{old:?} was expelled: it leaves and joins again"));
                self.life = None;
                self.fabric.door.set(false);
                (self.hooks.expelled)(self.origin.elapsed());
            }
            Action::Note(note) => self.log(&note),
        }
    }

    /// Reads liveliness again after a join or death was dropped (inbox full): every token on
    /// the fabric is reported joined, every live member without one dead.
    fn resync(&mut self) {
        let Some(live) = self.live_on_fabric() else {
            self.fabric.resync.store(true, Ordering::Release);
            return;
        };
        let members = self.steward.link().read(stampede_core::Mesh::live_peers);
        for gone in members.into_iter().filter(|p| !live.contains(p)) {
            self.steward.dead(gone);
        }
        let now = self.origin.elapsed();
        for peer in live {
            self.steward.joined(peer, now);
        }
    }

    /// Reports `peer` joined if its token is on the fabric now, dead otherwise.
    fn ask_liveliness(&mut self, peer: Peer) {
        let Some(live) = self.live_on_fabric() else { return };
        self.steward.reported(peer, live.contains(&peer), self.origin.elapsed());
    }

    /// The other nodes' participants whose tokens are on the fabric now; `None` if the fabric
    /// does not answer.
    fn live_on_fabric(&self) -> Option<Vec<Peer>> {
        let live = live_nodes(&self.fabric.zenoh, self.steward.peer(), TICK * 10).ok()?;
        Some(live.into_iter().map(|(_, peer)| peer).collect())
    }
}
