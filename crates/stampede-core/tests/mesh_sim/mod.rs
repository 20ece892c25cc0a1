//! The simulated world: participants (nodes and client sessions) in slots that crash and
//! restart, a fabric of FIFO links per (sender, receiver, lane) that delays, interleaves
//! senders, duplicates and — when a sender crashes — cuts off what it had not yet delivered, a
//! liveliness service that declares crashed incarnations dead to each participant at its own
//! time, false suspicions of live participants and the expulsions and rejoins they lead to
//! (`suspicion.rs`), and an omniscient oracle that knows every live claim.

pub mod participant;
pub mod suspicion;

use std::collections::{BTreeMap, VecDeque};

#[cfg(feature = "mutations")]
use stampede_core::mesh::Mutation;
use stampede_core::mesh::{Event, Message, MoveId};
use stampede_core::{Mesh, MeshLimits, MeshRefusal, Peer, Timestamp, INFINITY};

use crate::support::Rng;
use participant::{Data, Participant, TS_SPREAD};
pub use suspicion::Counts;

/// Workload steps per seed before the world quiesces.
pub const STEPS: usize = 300;
/// Rounds of delivering everything in flight within which every view must reach the truth once
/// the workload stops (a death's fences, the finalization, the release of carries, door rises and
/// their news each take a round; a pause round and a liveliness question more). The most
/// measured: 10, over 300 000 seeds.
pub const LIVENESS_ROUNDS_MAX: usize = 16;
/// Chance, in percent, that a delivered message is delivered again later.
const DUPLICATE_PERCENT: u64 = 5;

/// The seeded stream the runtime's tests use (`crates/stampede/tests/support`), with the two
/// choices the world makes most.
trait Choices {
    fn chance(&mut self, percent: u64) -> bool;
    fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T>;
}

impl Choices for Rng {
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        (!items.is_empty()).then(|| items[self.below(items.len() as u64) as usize])
    }
}

/// Why a seed failed.
#[derive(Debug)]
pub enum Failure {
    /// A view above the true minimum, or going back.
    Safety(String),
    /// Not every view reached the truth within the bound after quiescence.
    Liveness(String),
    /// A refusal, a fault event or a panic on honest traffic.
    Protocol(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Safety(what) => write!(f, "safety: {what}"),
            Failure::Liveness(what) => write!(f, "liveness: {what}"),
            Failure::Protocol(what) => write!(f, "protocol: {what}"),
        }
    }
}

#[derive(Clone, Debug)]
enum Wire {
    Progress(Message),
    Data(Data),
}

/// Progress messages and data travel on separate links: FIFO each, unordered between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Progress,
    Data,
}

struct Slot {
    node: bool,
    incarnation: u64,
    live: Option<Participant>,
}

pub struct World {
    rng: Rng,
    step: usize,
    slots: Vec<Slot>,
    links: BTreeMap<(Peer, Peer, Lane), VecDeque<Wire>>,
    /// Crashed incarnations the liveliness service has not declared dead yet.
    undeclared: Vec<Peer>,
    /// Declarations made but not yet delivered: (recipient slot, the dead).
    declarations: Vec<(usize, Peer)>,
    /// `1 +` the highest timestamp put anywhere, ever (at hosts alive or dead).
    watermark: Timestamp,
    /// Live incarnations some participant declared dead (false suspicions), until they leave.
    suspected: Vec<Peer>,
    /// When each participant last reminded each fenced sender: (reminder, sender) → clock.
    reminded: BTreeMap<(Peer, Peer), u64>,
    /// Counts `after_step` calls: the time reminders are rate-limited by.
    clock: u64,
    /// This world suspects live participants (half of the seeds; the other half keeps the density
    /// of every other path, which the mutations are caught on).
    suspicious: bool,
    /// The workload stopped: no more suspicions or corruptions.
    quiescing: bool,
    /// `STAMPEDE_MESH_TRACE` is set.
    tracing: bool,
    /// `STAMPEDE_MESH_UNFIXED` is set: drivers skip the rule that stands in for a fix of the
    /// core ([`World::holds_data`]), to do only what the node driver does.
    unfixed: bool,
    #[cfg(feature = "mutations")]
    mutation: Option<Mutation>,
    /// Most rounds any quiescence took.
    pub rounds_max: usize,
    /// What the false-suspicion paths did in this seed.
    pub counts: Counts,
}

impl World {
    /// 1–3 nodes and 0–3 sessions, none with a door yet: each opens one (a pause round) when it
    /// first starts a root task, and gives it back and opens it again at random.
    pub fn new(seed: u64) -> World {
        let mut rng = Rng(seed);
        let nodes = 1 + rng.below(3) as usize;
        let sessions = rng.below(4) as usize;
        let suspicious = rng.below(2) == 0;
        let slots = (0..nodes + sessions).map(|i| Slot { node: i < nodes, incarnation: 0, live: None }).collect();
        World {
            rng,
            step: 0,
            slots,
            links: BTreeMap::new(),
            undeclared: Vec::new(),
            declarations: Vec::new(),
            watermark: 0,
            suspected: Vec::new(),
            reminded: BTreeMap::new(),
            clock: 0,
            suspicious,
            quiescing: false,
            tracing: std::env::var_os("STAMPEDE_MESH_TRACE").is_some(),
            unfixed: std::env::var_os("STAMPEDE_MESH_UNFIXED").is_some(),
            #[cfg(feature = "mutations")]
            mutation: None,
            rounds_max: 0,
            counts: Counts::default(),
        }
    }

    #[cfg(feature = "mutations")]
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation = Some(mutation);
    }

    /// Starts every slot, runs the workload, then quiesces twice: with the claims left, and after
    /// every claim is released.
    pub fn run(&mut self) -> Result<(), Failure> {
        for slot in 0..self.slots.len() {
            self.start(slot)?;
            self.after_step()?;
        }
        for step in 0..STEPS {
            self.step = step;
            self.random_step()?;
            self.after_step()?;
        }
        self.quiescing = true;
        self.quiesce()?;
        for slot in 0..self.slots.len() {
            if let Some(p) = self.slots[slot].live.as_mut() {
                p.release_everything().map_err(Failure::Protocol)?;
            }
        }
        self.quiesce()
    }

    fn random_step(&mut self) -> Result<(), Failure> {
        match self.rng.below(100) {
            0..=44 => self.deliver_one(),
            45..=79 => self.workload(),
            80..=84 => self.deliver_declaration(),
            85..=86 => self.crash(),
            87..=89 => self.restart(),
            90..=92 => self.declare(),
            93 if self.suspicious => self.suspect(),
            _ => self.toggle_door(),
        }
    }

    /// With `STAMPEDE_MESH_TRACE` set, every step says what happened (to read a failing seed).
    fn trace(&self, what: impl FnOnce() -> String) {
        if self.tracing {
            eprintln!("[{}] {}", self.step, what());
        }
    }

    fn live_slots(&self) -> Vec<usize> {
        (0..self.slots.len()).filter(|&s| self.slots[s].live.is_some()).collect()
    }

    fn live(&mut self, slot: usize) -> &mut Participant {
        self.slots[slot].live.as_mut().expect("a live slot")
    }

    fn slot_of(&self, peer: Peer) -> Option<usize> {
        let slot = self.slots.get(peer.id as usize)?;
        slot.live.as_ref().filter(|p| p.peer == peer).map(|_| peer.id as usize)
    }

    fn send(&mut self, from: Peer, to: Peer, wire: Wire) {
        self.trace(|| format!("send {from:?} -> {to:?}: {wire:?}"));
        let lane = if matches!(wire, Wire::Progress(_)) { Lane::Progress } else { Lane::Data };
        self.links.entry((from, to, lane)).or_default().push_back(wire);
    }

    // ---- life and death -------------------------------------------------------------------------

    /// A new incarnation in `slot`: liveliness tells it everyone whose token is still there
    /// (crashed but undeclared incarnations too), and tells everyone of it.
    fn start(&mut self, slot: usize) -> Result<(), Failure> {
        self.slots[slot].incarnation += 1;
        let peer = Peer { id: slot as u64, incarnation: self.slots[slot].incarnation };
        #[cfg_attr(not(feature = "mutations"), allow(unused_mut))]
        let mut mesh = Mesh::new(peer, MeshLimits::default());
        #[cfg(feature = "mutations")]
        if let Some(mutation) = self.mutation {
            mesh.mutate(mutation);
        }
        let mut newcomer = Participant::new(peer, mesh);
        let others: Vec<Peer> =
            self.live_slots().iter().map(|&s| self.slots[s].live.as_ref().expect("live").peer).collect();
        for &other in others.iter().chain(self.undeclared.iter()).filter(|other| other.id != peer.id) {
            self.trace(|| format!("{peer:?} learns of {other:?}"));
            match newcomer.mesh_mut().peer_joined(other) {
                // Liveliness may still list an old incarnation of a participant that restarted.
                Ok(()) | Err(MeshRefusal::StaleIncarnation { .. }) => {}
                Err(r) => return Err(Failure::Protocol(format!("join of {other:?}: {r}"))),
            }
        }
        for s in self.live_slots() {
            match self.live(s).mesh_mut().peer_joined(peer) {
                // Expelled in this step, it restarts before the step ends.
                Ok(()) | Err(MeshRefusal::Expelled) => {}
                Err(r) => return Err(Failure::Protocol(format!("join of {peer:?}: {r}"))),
            }
        }
        self.trace(|| format!("start {peer:?}"));
        self.slots[slot].live = Some(newcomer);
        Ok(())
    }

    /// A live participant stops.
    fn crash(&mut self) -> Result<(), Failure> {
        let Some(slot) = self.rng.pick(&self.live_slots()) else { return Ok(()) };
        let peer = self.stop(slot);
        self.trace(|| format!("crash {peer:?}"));
        Ok(())
    }

    /// The participant in `slot` leaves (a crash, or an expelled incarnation): its token goes,
    /// so liveliness will declare it dead; per link, a prefix of what it sent still arrives (a
    /// crash cuts a stream, never reorders it); what was sent to it is lost.
    fn stop(&mut self, slot: usize) -> Peer {
        let peer = self.slots[slot].live.take().expect("live").peer;
        self.suspected.retain(|&p| p != peer);
        self.undeclared.push(peer);
        self.links.retain(|&(_, to, _), _| to != peer);
        let outgoing: Vec<(Peer, Peer, Lane)> = self.links.keys().filter(|k| k.0 == peer).copied().collect();
        for key in outgoing {
            let queue = self.links.get_mut(&key).expect("link");
            let kept = self.rng.below(queue.len() as u64 + 1) as usize;
            queue.truncate(kept);
        }
        peer
    }

    fn restart(&mut self) -> Result<(), Failure> {
        let down: Vec<usize> = (0..self.slots.len()).filter(|&s| self.slots[s].live.is_none()).collect();
        match self.rng.pick(&down) {
            Some(slot) => self.start(slot),
            None => Ok(()),
        }
    }

    /// Liveliness declares a crashed incarnation dead; each live participant hears of it at its
    /// own time — or first from a peer's fence.
    fn declare(&mut self) -> Result<(), Failure> {
        let Some(i) = (!self.undeclared.is_empty()).then(|| self.rng.below(self.undeclared.len() as u64) as usize)
        else {
            return Ok(());
        };
        let dead = self.undeclared.swap_remove(i);
        for slot in self.live_slots() {
            self.declarations.push((slot, dead));
        }
        Ok(())
    }

    fn deliver_declaration(&mut self) -> Result<(), Failure> {
        if self.declarations.is_empty() {
            return Ok(());
        }
        let i = self.rng.below(self.declarations.len() as u64) as usize;
        let (slot, dead) = self.declarations.swap_remove(i);
        self.trace(|| format!("declare {dead:?} dead to slot {slot}"));
        if let Some(p) = self.slots[slot].live.as_mut() {
            p.mesh_mut()
                .peer_dead(dead)
                .map_err(|r| Failure::Protocol(format!("{:?}: peer_dead({dead:?}): {r}", p.peer)))?;
            p.sync().map_err(Failure::Protocol)?;
        }
        Ok(())
    }

    /// A live participant gives its door back, or opens one.
    fn toggle_door(&mut self) -> Result<(), Failure> {
        let Some(slot) = self.rng.pick(&self.live_slots()) else { return Ok(()) };
        let p = self.live(slot);
        let opening = p.mesh().join_floor().is_none();
        self.counts.doors_opened += u64::from(opening);
        self.counts.doors_closed += u64::from(!opening);
        self.live(slot).toggle_door().map_err(Failure::Protocol)
    }

    // ---- the workload -----------------------------------------------------------------------------

    fn workload(&mut self) -> Result<(), Failure> {
        let Some(slot) = self.rng.pick(&self.live_slots()) else { return Ok(()) };
        let above = self.rng.below(TS_SPREAD + 1);
        let roll = self.rng.below(100);
        let tasks: Vec<u64> = self.live(slot).tasks.keys().copied().collect();
        let task = self.rng.pick(&tasks);
        self.trace(|| format!("workload slot {slot} roll {roll} task {task:?} above {above}"));
        let p = self.live(slot);
        let result = match (roll, task) {
            (0..=14, _) | (_, None) => p.new_task(above, roll.is_multiple_of(8)),
            (15..=19, Some(t)) => p.spawn(t, above),
            (20..=34, Some(t)) => p.set_virtual_time(t, above, roll == 20),
            (35..=49, Some(t)) => return self.put(slot, t, above),
            (50..=64, Some(t)) => return self.get(slot, t),
            (65..=84, Some(t)) if !p.tasks[&t].open.is_empty() => {
                let index = (roll as usize) % p.tasks[&t].open.len();
                p.consume(t, index)
            }
            (85..=89, Some(t)) => p.end_task(t),
            (90..=99, Some(t)) => return self.move_task(slot, t),
            _ => Ok(()),
        };
        result.map_err(Failure::Protocol)
    }

    /// A put: into a channel here (a node), or on another node through the fabric.
    fn put(&mut self, slot: usize, task: u64, above: u64) -> Result<(), Failure> {
        let Some(ts) = self.live(slot).put_ts(task, above) else { return Ok(()) };
        let hosts: Vec<usize> = self.live_slots().into_iter().filter(|&s| self.slots[s].node && s != slot).collect();
        let remote = self.rng.pick(&hosts).filter(|_| !self.slots[slot].node || self.rng.chance(50));
        match remote {
            None if self.slots[slot].node => self.live(slot).local_put(ts).map_err(Failure::Protocol),
            None => Ok(()),
            Some(host) => {
                let (from, to) = (self.live(slot).peer, self.live(host).peer);
                if let Some(data) = self.live(slot).remote_put(to, ts) {
                    self.send(from, to, Wire::Data(data));
                }
                Ok(())
            }
        }
    }

    /// A get: of an item hosted here, or of one hosted by a node elsewhere (the item, and its
    /// claim, move to the getter).
    fn get(&mut self, slot: usize, task: u64) -> Result<(), Failure> {
        let hosts: Vec<usize> = self
            .live_slots()
            .into_iter()
            .filter(|&s| self.slots[s].live.as_ref().is_some_and(|p| !p.items.is_empty()))
            .collect();
        let Some(host) = self.rng.pick(&hosts) else { return Ok(()) };
        let items: Vec<u64> = self.live(host).items.keys().copied().collect();
        let item = self.rng.pick(&items).expect("an item");
        if host == slot {
            return self.live(slot).local_get(task, item).map_err(Failure::Protocol);
        }
        let (from, to) = (self.live(host).peer, self.live(slot).peer);
        if let Some(data) = self.live(host).give(to, task, item).map_err(Failure::Protocol)? {
            self.send(from, to, Wire::Data(data));
        }
        Ok(())
    }

    /// A task moves to another live participant (a shadow there).
    fn move_task(&mut self, slot: usize, task: u64) -> Result<(), Failure> {
        let others: Vec<usize> = self.live_slots().into_iter().filter(|&s| s != slot).collect();
        let Some(to) = self.rng.pick(&others) else { return Ok(()) };
        let (from, to) = (self.live(slot).peer, self.live(to).peer);
        if let Some(data) = self.live(slot).move_task(to, task).map_err(Failure::Protocol)? {
            self.send(from, to, Wire::Data(data));
        }
        Ok(())
    }

    // ---- the fabric -------------------------------------------------------------------------------

    fn deliver_one(&mut self) -> Result<(), Failure> {
        let busy: Vec<(Peer, Peer, Lane)> = self.links.iter().filter(|(_, q)| !q.is_empty()).map(|(&k, _)| k).collect();
        match self.rng.pick(&busy) {
            Some(link) => self.deliver(link),
            None => Ok(()),
        }
    }

    /// Delivers the head of one link (and sometimes keeps a copy to deliver again later).
    fn deliver(&mut self, link: (Peer, Peer, Lane)) -> Result<(), Failure> {
        let (from, to, lane) = link;
        if lane == Lane::Data && self.slot_of(to).is_some_and(|s| self.holds_data(s)) {
            return Ok(());
        }
        let queue = self.links.get_mut(&link).expect("link");
        let wire = queue.pop_front().expect("a message");
        self.trace(|| format!("deliver {from:?} -> {to:?}: {wire:?}"));
        if self.rng.chance(DUPLICATE_PERCENT) {
            self.links.get_mut(&link).expect("link").push_back(wire.clone());
        } else if self.links[&link].is_empty() {
            // Links of the dead would pile up otherwise (and the oracle reads every link).
            self.links.remove(&link);
        }
        let Some(slot) = self.slot_of(to) else { return Ok(()) };
        let wire = match wire {
            Wire::Progress(message) => Wire::Progress(self.corrupt(from, message)),
            data => data,
        };
        let p = self.live(slot);
        match wire {
            Wire::Progress(message) => match p.mesh_mut().handle_message(from, message) {
                Ok(()) => p.sync().map_err(Failure::Protocol),
                // A copy; or a fence of the receiver: `after_step` restarts it.
                Err(MeshRefusal::Duplicate { .. } | MeshRefusal::Expelled) => Ok(()),
                // A sender this participant fenced (finalized, or whose stream it stopped) still
                // speaks: it may not know it was fenced.
                Err(MeshRefusal::DeadIncarnation { peer } | MeshRefusal::Faulted { peer }) if peer == from => {
                    self.remind(slot, from);
                    Ok(())
                }
                Err(r) => Err(Failure::Protocol(format!("{to:?} refused a message of {from:?}: {r}"))),
            },
            Wire::Data(data) => p.receive(from, data).map_err(Failure::Protocol),
        }
    }

    /// After every step: participants act on their events as a driver does (an expelled one
    /// restarts), what they have to send goes on the links, and the oracle checks every view.
    fn after_step(&mut self) -> Result<(), Failure> {
        self.clock += 1;
        let landed = self.slots.iter().filter_map(|s| s.live.as_ref()).map(|p| p.watermark).max();
        self.watermark = self.watermark.max(landed.unwrap_or(0));
        loop {
            let expelled = self.drive()?;
            if expelled.is_empty() {
                break;
            }
            for slot in expelled {
                self.rejoin(slot)?;
            }
        }
        self.check_safety()
    }

    /// Every live participant's events and transmits; returns the slots expelled.
    fn drive(&mut self) -> Result<Vec<usize>, Failure> {
        let mut expelled = Vec::new();
        for slot in self.live_slots() {
            let p = self.live(slot);
            let from = p.peer;
            for event in std::iter::from_fn(|| p.mesh_mut().poll_event()).collect::<Vec<_>>() {
                match event {
                    Event::Finalized { .. } => {}
                    // Liveliness answers: alive (its token is there) or dead (gone: declared
                    // before this participant started).
                    Event::AskLiveliness { peer } => {
                        if self.slot_of(peer).is_some() || self.undeclared.contains(&peer) {
                            let asker = self.live(slot);
                            match asker.mesh_mut().peer_joined(peer) {
                                Ok(()) => {}
                                // Fenced here since it asked, and its token is there: it may not
                                // know (the node driver reminds it too).
                                Err(MeshRefusal::DeadIncarnation { .. }) => self.remind(slot, peer),
                                Err(r) => return Err(Failure::Protocol(format!("{:?}: {r}", asker.peer))),
                            }
                        } else {
                            self.declarations.push((slot, peer));
                        }
                    }
                    // A stream this participant refused holds its view until the sender is dead:
                    // the driver declares it (and the sender, told, rejoins anew).
                    Event::Faulted { peer, refusal } => {
                        self.trace(|| format!("{from:?}: stream of {peer:?} faulted: {refusal}"));
                        self.counts.faults += 1;
                        let p = self.live(slot);
                        match p.mesh_mut().peer_dead(peer) {
                            Ok(()) => p.sync().map_err(Failure::Protocol)?,
                            Err(MeshRefusal::Expelled) => {}
                            Err(r) => return Err(Failure::Protocol(format!("{from:?}: peer_dead({peer:?}): {r}"))),
                        }
                    }
                    Event::Expelled => {
                        self.counts.expulsions += 1;
                        expelled.push(slot);
                    }
                }
            }
            let p = self.live(slot);
            p.settled = p.settled || p.mesh().is_complete();
            for transmit in p.transmits() {
                for to in transmit.to {
                    self.send(from, to, Wire::Progress(transmit.message.clone()));
                }
            }
        }
        Ok(expelled)
    }

    // ---- the oracle -------------------------------------------------------------------------------

    /// The true minimum as it binds each live participant (by slot): every claim, every join
    /// floor (a root task may start there) and every move in flight that its
    /// receiver may still take over, within the participant's component (the participants it may
    /// still exchange data with, directly or through others: `suspicion.rs`), capped by `1 +` the
    /// highest put ever. Without suspicions every live participant is in one component; `split`
    /// false takes that for granted (a bound below the truth: cheaper, and enough when every view
    /// is at or below it).
    fn truths(&self, split: bool) -> Vec<(usize, Timestamp)> {
        let component = match split {
            true => self.components(),
            false => self.slots.iter().map(|s| s.live.as_ref().map(|_| 0)).collect(),
        };
        let mut truth = vec![self.watermark; self.slots.len()];
        for (slot, c) in component.iter().enumerate() {
            let (Some(c), Some(p)) = (c, self.slots[slot].live.as_ref()) else { continue };
            // Root tasks start at the root floor: the door, or the runtime's ts_min when that is
            // higher (a node alone, whose mesh's door is as it was when it went solo).
            let floor = p.root_floor().unwrap_or(INFINITY).min(p.true_floor());
            truth[*c] = truth[*c].min(floor);
        }
        for (&(from, to, _), queue) in self.links.iter().filter(|((_, _, lane), _)| *lane == Lane::Data) {
            let Some(slot) = self.slot_of(to) else { continue };
            let (Some(c), Some(receiver)) = (component[slot], self.slots[slot].live.as_ref()) else { continue };
            for wire in queue {
                if let Wire::Data(d) = wire {
                    if d.ts < truth[c] && receiver.mesh().may_accept(from, d.id).is_ok() {
                        truth[c] = d.ts;
                    }
                }
            }
        }
        component.iter().enumerate().filter_map(|(slot, c)| c.map(|c| (slot, truth[c]))).collect()
    }

    fn check_safety(&mut self) -> Result<(), Failure> {
        let mut truths = self.truths(false);
        let live = |s: usize| self.slots[s].live.as_ref().expect("live");
        let view = |s: usize| live(s).mesh().ts_min().max(live(s).runtime_ts_min());
        if self.tracing || truths.iter().any(|&(s, truth)| view(s) > truth) {
            truths = self.truths(true);
        }
        self.trace(|| {
            let views: Vec<String> = truths
                .iter()
                .map(|&(s, truth)| {
                    let p = self.slots[s].live.as_ref().expect("live");
                    format!("{}:{}/{}/{truth}", p.peer.id, p.mesh().ts_min(), p.true_floor())
                })
                .collect();
            format!("views (id:ts_min/floor/truth) {views:?}")
        });
        for (slot, truth) in truths {
            let step = self.step;
            let p = self.live(slot);
            let ts_min = p.mesh().ts_min();
            if ts_min > truth {
                if std::env::var_os("STAMPEDE_MESH_TRACE").is_some() {
                    eprintln!("{:#?}", p.mesh());
                }
                let what = format!("step {step}: {:?} has ts_min {ts_min} above the true minimum {truth}", p.peer);
                return Err(Failure::Safety(what));
            }
            if ts_min < p.ts_min_seen {
                return Err(Failure::Safety(format!(
                    "step {step}: {:?} ts_min went back from {} to {ts_min}",
                    p.peer, p.ts_min_seen
                )));
            }
            p.ts_min_seen = ts_min;
            // What the runtime reclaims below: the mirror of the mesh's, or alone, its own.
            let runtime = p.runtime_ts_min();
            if runtime > truth || runtime < p.runtime_ts_min_seen {
                return Err(Failure::Safety(format!(
                    "step {step}: {:?} has a runtime ts_min of {runtime} (before: {}), the true minimum {truth}",
                    p.peer, p.runtime_ts_min_seen
                )));
            }
            p.runtime_ts_min_seen = runtime;
        }
        Ok(())
    }

    /// The workload has stopped: liveliness declares every crashed incarnation dead to everyone,
    /// and everything in flight is delivered, round after round, until
    /// nothing moves. Then every view must equal the truth (with the watermark every live
    /// participant heard of: a put whose host died before telling anyone is forgotten with its
    /// item).
    fn quiesce(&mut self) -> Result<(), Failure> {
        for round in 1..=LIVENESS_ROUNDS_MAX {
            // Crashed incarnations, and expelled ones that left in the last round.
            for dead in std::mem::take(&mut self.undeclared) {
                for slot in self.live_slots() {
                    self.declarations.push((slot, dead));
                }
            }
            // Declarations, including answers to liveliness questions asked in the last round.
            while !self.declarations.is_empty() {
                self.deliver_declaration()?;
                self.after_step()?;
            }
            // What the last round's inputs made the participants send goes on the links.
            self.after_step()?;
            let busy: Vec<((Peer, Peer, Lane), usize)> =
                self.links.iter().filter(|(_, q)| !q.is_empty()).map(|(&k, q)| (k, q.len())).collect();
            if busy.is_empty() && self.declarations.is_empty() && self.undeclared.is_empty() {
                self.rounds_max = self.rounds_max.max(round);
                return self.check_liveness();
            }
            for (link, len) in busy {
                for _ in 0..len {
                    if self.links.get(&link).is_some_and(|q| !q.is_empty()) {
                        self.deliver(link)?;
                        self.after_step()?;
                    }
                }
            }
        }
        Err(Failure::Liveness(format!("still busy after {LIVENESS_ROUNDS_MAX} rounds")))
    }

    /// Every view can advance: complete, and holding no live participant as fenced (a faulted
    /// stream, a suspicion not yet resolved by an expulsion) — then every view equals the truth.
    fn check_liveness(&mut self) -> Result<(), Failure> {
        let live: Vec<&Participant> = self.slots.iter().filter_map(|s| s.live.as_ref()).collect();
        for p in &live {
            if !p.mesh().is_complete() {
                return Err(Failure::Liveness(format!("{:?}: view incomplete after quiescence", p.peer)));
            }
            for q in live.iter().filter(|q| q.peer != p.peer) {
                if let Err(r) = p.mesh().may_accept(q.peer, MoveId::MAX) {
                    return Err(Failure::Liveness(format!("{:?} still refuses live {:?}: {r}", p.peer, q.peer)));
                }
            }
        }
        let heard = live.iter().map(|p| p.mesh().watermark()).max().unwrap_or(0);
        let landed = live.iter().map(|p| p.watermark).max().unwrap_or(0);
        if heard > self.watermark || heard < landed {
            return Err(Failure::Liveness(format!(
                "watermark {heard}: puts landed at live hosts {landed}, ever {}",
                self.watermark
            )));
        }
        let expected = live.iter().map(|p| p.true_floor()).fold(heard, Timestamp::min);
        for p in live {
            if p.mesh().ts_min() != expected {
                let (peer, ts_min) = (p.peer, p.mesh().ts_min());
                if std::env::var("STAMPEDE_MESH_TRACE").is_ok() {
                    for q in self.slots.iter().filter_map(|s| s.live.as_ref()) {
                        eprintln!("{:?} ts_min {} floor {} {:?}", q.peer, q.mesh().ts_min(), q.true_floor(), q.mesh());
                    }
                }
                return Err(Failure::Liveness(format!(
                    "{peer:?} has ts_min {ts_min} after quiescence, expected {expected}"
                )));
            }
        }
        Ok(())
    }
}
