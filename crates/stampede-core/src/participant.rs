//! A runtime's participant in progress tracking: its [`Progress`] and — when the runtime is a node
//! of a mesh — its [`Mesh`] participant, together with every rule that glues the two (the mirror,
//! the stash, the floor of a restarted participant, the door, the takeover checks). One
//! implementation: the engine holds one per runtime under its progress lock, and the mesh
//! simulations drive the same one.
//!
//! Guarantees, once linked ([`Participant::link`]):
//! - Every change of the runtime's claims reaches the mesh at the next [`settle`](Participant::settle),
//!   which the driver calls after every change under the same lock: new claims before releases,
//!   in order. What the mesh refuses under backpressure is stashed and handed over first next
//!   time; the mesh meanwhile sees claims as they were, which holds every view lower, never higher.
//! - The mesh's ts_min is mirrored back into [`Progress`] as a claim at `Location::Peer(0)`, so
//!   the runtime reclaims nothing another node's view still covers, and its ts_min is the mesh's.
//! - **Alone, a node pays no mesh bookkeeping per claim change** (`Linked::solo`): while its mesh
//!   is alone and idle ([`Mesh::alone`]: no other participant, not expelled, its door open,
//!   nothing queued to send), its claims all taken and its ts_min exactly where the runtime's own
//!   claims put it, the progress machine records nothing, the mirror is taken off and settling
//!   does nothing — the runtime's ts_min is then its own, which is what the mesh's would be.
//!   Every input from the fabric comes through [`mesh_mut`](Participant::mesh_mut), which first
//!   hands the mesh the difference between the claims it holds and those held now and puts the
//!   mirror back, so a peer never meets a stale view; so does every [`SOLO_SETTLES_MAX`]th
//!   settle. The mesh takes that difference whatever it is: nothing is queued, and the claims
//!   held when solo began and at most `SOLO_SETTLES_MAX` operations' new ones fit in half its
//!   bound on entries. What [`mesh`](Participant::mesh) answers meanwhile is the mesh as it was
//!   when solo began. A restarted participant (its claims raised to a floor) is never solo.
//!   Puts heard from elsewhere raise the runtime's watermark: ts_min never runs ahead of one past
//!   the highest put anywhere, and may reach it.
//! - A root task starts at or above ts_min and the node's door ([`Participant::check_root`]); a
//!   node opens its door through a pause round when it needs one and may give it back
//!   (docs/PROTOCOL.md, "Doors"); without one, root tasks are refused `Unreachable` (try again).
//! - A shadow task takes over a move only when the mesh may take it, its view is complete (every
//!   member's snapshot here, so a fence of the mover is known), its carry reached this node
//!   and covers the task, and it is at or above ts_min ([`Participant::check_takeover`]); every
//!   refusal but one for an earlier incarnation of this node declines the move, so the mover's
//!   carry is released.
//!
//! Unlinked, a participant is its [`Progress`] alone: settling does nothing.
//!
//! No I/O, no clock: [`Settled::handed`] tells the driver when to wake whatever sends the mesh's
//! messages.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::mesh::{Mesh, MeshRefusal, MoveId, Peer};
use crate::progress::{push_move, Location, Progress, Refusal, TaskKey, Update, Updates};
use crate::time::Timestamp;

mod solo;
#[cfg(test)]
mod tests;

use solo::Solo;
pub use solo::SOLO_SETTLES_MAX;

/// What [`Participant::settle`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "an advanced ts_min is due for a sweep, and a hand-over for the driver's wake-up"]
pub struct Settled {
    /// The runtime's new ts_min, when settling let it advance.
    pub advanced: Option<Timestamp>,
    /// The mesh took claim changes and knows other participants: it may have something to
    /// transmit.
    pub handed: bool,
}

/// A runtime's progress machine and its mesh participant, if linked.
#[derive(Debug, Default)]
pub struct Participant {
    progress: Progress,
    linked: Option<Linked>,
}

/// The mesh side of a linked participant.
#[derive(Debug)]
struct Linked {
    mesh: Mesh,
    /// The mesh's ts_min as mirrored at `Location::Peer(0)`.
    mirror: Timestamp,
    /// Local changes the mesh refused under backpressure, in order: they go first next time.
    stash: Vec<Update>,
    /// How this runtime's claims are shown to the mesh (a restarted participant's are raised).
    floor: Floor,
    /// While alone (see the module doc); `None` otherwise.
    solo: Option<Solo>,
}

/// How a participant shows the runtime's claims: as they are, or — after a restart
/// ([`Participant::relink`]) — raised to a floor. A restarted participant's peers may have
/// reclaimed past claims the node still holds (a queue's waiting items, a task of the embedded
/// application), and would refuse them below their ts_min. Those claims only ever cover this
/// node's own items, which its `Progress` keeps exactly; to the mesh they read as claims at the
/// floor. Raising every update by one monotone function keeps each release matched with its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Floor {
    /// A participant linked once: claims as they are.
    None,
    /// Restarted, no door yet: the mesh takes none of the node's claims (the floor is the door,
    /// unknown yet); when the door opens it takes every claim held then. The mirror the old
    /// participant had reached is a floor too.
    Waiting { mirror: Timestamp },
    /// Restarted and joined: claims below `at` read as claims at `at`.
    At(Timestamp),
}

impl Floor {
    /// The runtime's claim changes as the mesh sees them. (While `Waiting`, nothing is shown: no
    /// stash is kept then and takeovers are refused.)
    fn show(self, updates: &[Update]) -> Cow<'_, [Update]> {
        let Floor::At(floor) = self else { return Cow::Borrowed(updates) };
        let raise = |u: &Update| match u.location {
            Location::Watermark | Location::Peer(_) => *u,
            _ => Update { ts: u.ts.max(floor), ..*u },
        };
        updates.iter().map(raise).collect()
    }
}

impl Linked {
    /// Hands the stashed claim changes to the mesh; `true` when none wait any more.
    fn flush_stash(&mut self) -> bool {
        if self.stash.is_empty() {
            return true;
        }
        match self.mesh.apply_local(&self.floor.show(&self.stash)) {
            Ok(()) => self.stash.clear(),
            // Expelled (declared dead by its peers): the participant takes nothing any more and
            // its ts_min never moves again, so neither does the mirror; keeping the updates would
            // only grow memory with every operation.
            Err(MeshRefusal::Expelled) => self.stash.clear(),
            // Backpressure (the driver is behind): the updates stay stashed, in order, and go
            // with the next change.
            Err(_) => {}
        }
        self.stash.is_empty()
    }
}

impl Participant {
    /// The progress machine: the driver changes claims through it, then [`settle`](Self::settle)s.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The progress machine, to change claims; [`settle`](Self::settle) after every change.
    pub fn progress_mut(&mut self) -> &mut Progress {
        &mut self.progress
    }

    /// Applies a batch of claim changes to the progress machine (see [`Progress::apply`]).
    pub fn apply(&mut self, batch: &[Update]) -> std::result::Result<Option<Timestamp>, Refusal> {
        self.progress.apply(batch)
    }

    /// The mesh participant, when linked: for questions that change nothing. While solo (see
    /// the module doc) it is the mesh as it was when solo began: its ts_min and watermark may be
    /// behind the runtime's.
    pub fn mesh(&self) -> Option<&Mesh> {
        self.linked.as_ref().map(|linked| &linked.mesh)
    }

    /// The mesh participant, when linked: for inputs from the fabric (a message, a death, a
    /// door); [`settle`](Self::settle) after. A participant alone first hands the mesh what it
    /// did not (see the module doc).
    pub fn mesh_mut(&mut self) -> Option<&mut Mesh> {
        self.leave_solo();
        self.linked.as_mut().map(|linked| &mut linked.mesh)
    }

    /// Covers a task of this runtime at `visibility` moving to `to` with a carry
    /// ([`Mesh::send_move`]), after what waits in the stash (it only adds this runtime's own
    /// claim: no settling needed). Returns the mover (this participant) and the move's id.
    /// `Unreachable` while a restarted participant has no door, and below its floor: its claims
    /// read as the floor to the mesh and its peers may have reclaimed below it, so a carry below
    /// would be refused there and the receiver's shadow would start below their ts_min (a task
    /// holding an item from before the restart stays on this node until it consumes it).
    pub fn send_move(&mut self, to: Peer, visibility: Timestamp) -> Result<(Peer, MoveId)> {
        self.leave_solo();
        let linked = self.linked.as_mut().ok_or_else(not_linked)?;
        match linked.floor {
            Floor::Waiting { .. } => return Err(joining("shadow", "attach again once it joined")),
            Floor::At(floor) if visibility < floor => {
                let reason = format!(
                    "the task holds timestamp {visibility}, below {floor}, where this node's mesh may have reclaimed \
                     since the node rejoined it; consume what it holds below {floor} first"
                );
                return Err(Error::Unreachable { op: "shadow", name: "runtime".into(), reason });
            }
            Floor::None | Floor::At(_) => {}
        }
        linked.flush_stash();
        let me = linked.mesh.me();
        let id = linked.mesh.send_move(to, visibility).map_err(|refusal| Error::Unreachable {
            op: "shadow",
            name: "runtime".into(),
            reason: format!("this node's mesh cannot move the task to {to:?}: {refusal}"),
        })?;
        Ok((me, id))
    }

    /// Claim changes the mesh has not taken yet (0 unlinked): held under backpressure and handed
    /// over with the next change. None are kept once the mesh expelled this participant. (While
    /// solo, what changed is counted nowhere: it is handed over when solo ends.)
    pub fn stashed(&self) -> usize {
        self.linked.as_ref().map_or(0, |linked| linked.stash.len())
    }

    /// Links `mesh`: the outbox starts recording (with every claim held now, so the mesh starts
    /// from the runtime's whole contribution) and the mirror holds ts_min where it is.
    /// `InvalidArgument` when a mesh is linked already.
    pub fn link(&mut self, mesh: Mesh) -> Result<Settled> {
        if self.linked.is_some() {
            return Err(Error::InvalidArgument {
                op: "mesh",
                name: "runtime".into(),
                reason: "this runtime is already a node of a mesh".into(),
            });
        }
        let ts_min = self.progress.ts_min();
        self.progress.record_outbox();
        let mirror = [Update { location: Location::Peer(0), ts: ts_min, delta: 1 }];
        self.progress.apply(&mirror).expect("a claim at ts_min is always covered");
        self.progress.take_outbox();
        let stash = self.progress.claims_held();
        self.linked = Some(Linked { mesh, mirror: ts_min, stash, floor: Floor::None, solo: None });
        Ok(self.settle())
    }

    /// Whether a restarted participant still waits for its door before it shows the runtime's
    /// claims (its driver opens the door then, whatever else needs one).
    pub fn awaits_floor(&self) -> bool {
        self.linked.as_ref().is_some_and(|linked| matches!(linked.floor, Floor::Waiting { .. }))
    }

    /// Replaces the linked participant by `mesh`, a restart with no door yet: the mirror stays
    /// (the runtime keeps its ts_min); the claims held when the new door opens go to the mesh
    /// then, raised to it (one alone first hands its old mesh what changed while solo, refused or
    /// not). `InvalidArgument`, nothing else changed, when unlinked or for a `mesh` with
    /// a door already or that is not a larger incarnation of the same participant. The driver
    /// wakes its sender after.
    pub fn relink(&mut self, mesh: Mesh) -> Result<()> {
        let refuse =
            |reason: &str| Error::InvalidArgument { op: "mesh", name: "runtime".into(), reason: reason.into() };
        self.leave_solo();
        let linked = self.linked.as_mut().ok_or_else(|| refuse("this runtime is not a node of a mesh"))?;
        if mesh.join_floor().is_some() {
            return Err(refuse("a restarted participant opens its door after it is linked, through its driver"));
        }
        if mesh.me().id != linked.mesh.me().id || mesh.me().incarnation <= linked.mesh.me().incarnation {
            return Err(refuse("a restart is a larger incarnation of the same participant"));
        }
        linked.mesh = mesh;
        linked.stash = Vec::new();
        linked.floor = Floor::Waiting { mirror: linked.mirror };
        Ok(())
    }

    /// Hands what the progress machine recorded to the mesh, then mirrors the mesh's ts_min back
    /// at `Location::Peer(0)` and its watermark into the runtime's. A no-op unlinked. The driver
    /// calls it after every change of claims and every input to the mesh, under the lock that
    /// guards both, so the mesh's view of the runtime's claims is never behind its `Progress`.
    pub fn settle(&mut self) -> Settled {
        let Some(linked) = self.linked.as_mut() else { return Settled::default() };
        if let Some(solo) = linked.solo.as_mut() {
            solo.settles += 1;
            if solo.settles < SOLO_SETTLES_MAX {
                // Alone: the runtime's ts_min is its own, and nobody waits for its claims.
                return Settled::default();
            }
            // Bounded: the mesh is handed what changed, then the participant goes solo again.
            self.leave_solo();
        }
        let Some(linked) = self.linked.as_mut() else { return Settled::default() };
        let outbox = self.progress.take_outbox();
        match (linked.floor, linked.mesh.join_floor()) {
            // A restarted participant without a door takes nothing yet; it starts from every
            // claim held when the door opens (so nothing piles up meanwhile), raised to the
            // floor. A door opens only through `mesh_mut`, which the driver settles after: no
            // takeover comes first.
            (Floor::Waiting { .. }, None) => {}
            (Floor::Waiting { mirror }, Some(door)) => {
                linked.floor = Floor::At(door.max(mirror));
                linked.stash = self.progress.claims_held();
            }
            (Floor::None | Floor::At(_), _) => linked.stash.extend(outbox),
        }
        let took = !linked.stash.is_empty();
        if took {
            linked.flush_stash();
        }
        // A mesh that knows no other participant has nobody to send anything to: its driver
        // need not wake (a node alone pays no thread hand-off per claim change). Whoever joins
        // reaches it through the driver, which then sends what is due.
        let handed = took && linked.mesh.knows_peers();
        let (ts_min, heard) = (linked.mesh.ts_min(), linked.mesh.watermark());
        let mut advanced = None;
        if ts_min > linked.mirror {
            let mut updates = Updates::new();
            push_move(&mut updates, Location::Peer(0), Some(linked.mirror), Some(ts_min));
            linked.mirror = ts_min;
            // The mirror only rises, and the local ts_min is at or below the old mirror.
            advanced = self.progress.apply(&updates).expect("the mirror rises above ts_min");
        }
        // Puts elsewhere raise this node's watermark too, so its ts_min is the global one even
        // when nothing was put here.
        if heard > self.progress.watermark() {
            advanced = self.progress.note_put(heard - 1).or(advanced);
        }
        // The mirror's updates are skipped by the mesh, and the watermark came from it: nothing
        // to hand over.
        self.progress.take_outbox();
        advanced = self.go_solo().or(advanced);
        Settled { advanced, handed }
    }

    /// The lowest virtual time a root task may start at: ts_min alone, or linked, also the
    /// node's door (every other node's view stays at or below it); `None` while the participant
    /// has no door.
    pub fn root_floor(&self) -> Option<Timestamp> {
        let ts_min = self.progress.ts_min();
        match &self.linked {
            None => Some(ts_min),
            Some(linked) => linked.mesh.join_floor().map(|door| door.max(ts_min)),
        }
    }

    /// Refuses a root task below [`root_floor`](Self::root_floor): `BelowVisibility`, or
    /// `Unreachable` (try again) while there is no door.
    pub fn check_root(&self, virtual_time: Timestamp) -> Result<()> {
        let floor = self.root_floor().ok_or_else(|| joining("task", "try again"))?;
        if virtual_time >= floor {
            return Ok(());
        }
        let what = if floor > self.progress.ts_min() { "the node's door (docs/PROTOCOL.md)" } else { "ts_min" };
        Err(Error::BelowVisibility { op: "task", name: "runtime".into(), ts: virtual_time, what, limit: floor })
    }

    /// Whether a shadow task at `virtual_time` may take over `from`'s move `id` to `to`: `to` is
    /// this participant now, the mesh takes it (the mover is live here, the move unresolved, no
    /// backlog), its carry is in this node's view at or below `virtual_time` (what a client says
    /// is not trusted: a claim below the carry could be below another node's view), and it is at
    /// or above ts_min. Every refusal but the first declines the move, so the mover's carry is
    /// released; a move to an earlier incarnation declines nothing, for move ids count per
    /// receiver and the same id may yet come to this incarnation.
    pub fn check_takeover(&mut self, from: Peer, id: MoveId, to: Peer, virtual_time: Timestamp) -> Result<()> {
        self.leave_solo();
        let ts_min = self.progress.ts_min();
        let linked = self.linked.as_mut().ok_or_else(not_linked)?;
        if linked.mesh.me() != to {
            return Err(Error::Unreachable {
                op: "shadow",
                name: "runtime".into(),
                reason: format!(
                    "the task moved to {to:?}, an earlier life of this node (now {:?}: it rejoined its mesh); \
                     attach again",
                    linked.mesh.me()
                ),
            });
        }
        let below = |what: &'static str, limit: Timestamp| Error::BelowVisibility {
            op: "shadow",
            name: "runtime".into(),
            ts: virtual_time,
            what,
            limit,
        };
        // What waits must reach the mesh before the takeover's claims, in order.
        // A shadow is covered by its move, not by a door; but a restarted participant shows no
        // claim before its floor is known.
        let refused = if matches!(linked.floor, Floor::Waiting { .. }) {
            joining("shadow", "attach again")
        } else if !linked.flush_stash() {
            Error::Full {
                name: "runtime".into(),
                ts: virtual_time,
                reason: "the node's mesh is behind (backpressure); try again".into(),
                can_never_fit: false,
            }
        } else if let Err(refusal) = linked.mesh.may_accept(from, id) {
            takeover_refused(&refusal)
        } else if !linked.mesh.is_complete() {
            // A member's snapshot may still say the mover is dead (a newcomer that joined after a
            // peer declared the mover dead): a takeover now could be of data that peer no longer
            // covers. Once every snapshot is here, a fence of the mover refuses it above.
            Error::Unreachable {
                op: "shadow",
                name: "runtime".into(),
                reason: "this node has not heard from every node of its mesh yet; attach again".into(),
            }
        } else {
            match linked.mesh.carried(from, id) {
                Some(carried) if virtual_time < carried => below("the task's move", carried),
                None => Error::Unreachable {
                    op: "shadow",
                    name: "runtime".into(),
                    reason: format!("the task's move ({from:?}, {id}) has not reached this node; attach again"),
                },
                Some(_) if virtual_time < ts_min => below("ts_min", ts_min),
                Some(_) => return Ok(()),
            }
        };
        let _ = linked.mesh.decline_move(from, id);
        Err(refused)
    }

    /// Hands the claims recorded since the last settle to the mesh as the takeover of `from`'s
    /// move `id` (what a put or item arriving from another node, or a shadow task, creates here).
    /// On a refusal the claims stay in the progress machine: the caller undoes them.
    pub fn take_over_recorded(&mut self, from: Peer, id: MoveId) -> std::result::Result<(), MeshRefusal> {
        // `check_takeover` came first and left solo; should it not have, what changed while solo
        // (the takeover's claims among it) reaches the mesh before the move resolves.
        self.leave_solo();
        let updates = self.progress.take_outbox();
        let Some(linked) = self.linked.as_mut() else { return Ok(()) };
        linked.mesh.accept_move(from, id, &linked.floor.show(&updates))
    }

    /// Hands the claims task `task`'s creation just recorded to the mesh as the takeover of
    /// `from`'s move `id` (after [`check_takeover`](Self::check_takeover)); if the mesh refuses
    /// them, the task is removed again (its claims never left this node) and the move declined.
    pub fn take_over_task(&mut self, from: Peer, id: MoveId, task: TaskKey) -> Result<()> {
        let Err(refusal) = self.take_over_recorded(from, id) else { return Ok(()) };
        if let Some(mesh) = self.mesh_mut() {
            let _ = mesh.decline_move(from, id);
        }
        self.progress.remove_task(task);
        self.progress.take_outbox();
        Err(takeover_refused(&refusal))
    }
}

/// The error while the participant has no door (its node opens one when a session opens, and a
/// restarted one before it shows its claims again): for a moment.
fn joining(op: &'static str, then: &str) -> Error {
    let reason = format!("this node is opening its door to its mesh (a pause round); {then}");
    Error::Unreachable { op, name: "runtime".into(), reason }
}

/// The error for a move the mesh will not let this node take over.
fn takeover_refused(refusal: &MeshRefusal) -> Error {
    Error::Unreachable {
        op: "shadow",
        name: "runtime".into(),
        reason: format!("the mesh refused the task's move to this node ({refusal}); attach again"),
    }
}

/// The error for a takeover on a runtime that is no node of a mesh.
fn not_linked() -> Error {
    Error::InvalidArgument {
        op: "shadow",
        name: "runtime".into(),
        reason: "this runtime is no node of a mesh (it serves no one)".into(),
    }
}
