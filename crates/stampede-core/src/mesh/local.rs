//! The local inputs: this participant's own claim changes, and moves of data between
//! participants — sent and covered by a carry ([`Mesh::send_move`]), taken over, declined. Each
//! move is resolved at most once: a window per mover of the ids resolved here.

use crate::mesh::wire::{Change, MoveId, MoveRef, Peer, Site};
use crate::mesh::{Member, Mesh, MeshRefusal, Standing};
use crate::progress::Update;
use crate::time::Timestamp;

impl Mesh {
    /// Applies a batch of this participant's own claim changes — what its `Progress` outbox
    /// holds. `Location::Peer` updates (the driver's mirror of this machine) are skipped; a
    /// watermark rise is gossiped. New claims below ts_min are refused (a driver bug).
    pub fn apply_local(&mut self, updates: &[Update]) -> Result<(), MeshRefusal> {
        self.admit()?;
        self.commit_local(updates)?;
        self.settle();
        Ok(())
    }

    /// Covers data at `ts` handed to `to` (a put to a remote channel, an item given to a remote
    /// getter, a task moving there) with a carry claim, until `to` takes it over, declines it,
    /// or is dead. Call it before releasing the claim that covered the data. The id goes with
    /// the data.
    pub fn send_move(&mut self, to: Peer, ts: Timestamp) -> Result<MoveId, MeshRefusal> {
        self.admit()?;
        match self.members.get(&to) {
            Some(m) if m.standing == Standing::Live => {}
            Some(_) => return Err(MeshRefusal::DeadIncarnation { peer: to }),
            None => return Err(MeshRefusal::UnknownPeer { peer: to }),
        }
        if self.carries.len() >= self.limits.moves_open_max {
            let max = self.limits.moves_open_max;
            return Err(MeshRefusal::Oversized { what: "moves open", len: self.carries.len() + 1, max });
        }
        let id = self.next_move.get(&to).copied().unwrap_or(1);
        self.commit_own(&[Change { site: Site::Carry { to, id }, ts, delta: 1 }])?;
        self.next_move.insert(to, id + 1);
        self.carries.insert((to, id), ts);
        Ok(id)
    }

    /// The timestamp `from`'s move `id` to this participant carries, once `from`'s batch with
    /// the carry is applied here (`None` before, and once the move is resolved). A takeover must
    /// claim at or above it: the carry is what covers the data until then.
    pub fn carried(&self, from: Peer, id: MoveId) -> Option<Timestamp> {
        self.view.carried(from, self.me, id)
    }

    /// Whether this participant's own move `id` to `to` is still unresolved: `to` has neither
    /// taken it over nor declined it, and is not known dead.
    pub fn is_move_open(&self, to: Peer, id: MoveId) -> bool {
        self.carries.contains_key(&(to, id))
    }

    /// Whether move `id` of `from` may be taken over here: `from` is live here (a fenced sender's
    /// data is refused — its claims may already be gone elsewhere) and the move is not resolved.
    pub fn may_accept(&self, from: Peer, id: MoveId) -> Result<(), MeshRefusal> {
        self.check_alive()?;
        let member = self.members.get(&from).ok_or_else(|| self.unknown(from))?;
        if member.standing == Standing::Dying {
            return Err(MeshRefusal::DeadIncarnation { peer: from });
        }
        self.check_unresolved(from, member, id)
    }

    /// Takes over move `id` of `from`: `updates` (from the local `Progress`) create the claims
    /// that now cover the data; the mover learns it from the same batch and releases its carry.
    pub fn accept_move(&mut self, from: Peer, id: MoveId, updates: &[Update]) -> Result<(), MeshRefusal> {
        self.admit()?;
        self.may_accept(from, id)?;
        self.commit_local(updates)?;
        self.resolve(from, id, true);
        self.settle();
        Ok(())
    }

    /// Refuses move `id` of `from` (the data is dropped: a getter gone, a put that failed); the
    /// mover may release its carry.
    pub fn decline_move(&mut self, from: Peer, id: MoveId) -> Result<(), MeshRefusal> {
        self.check_alive()?;
        let member = self.members.get(&from).ok_or_else(|| self.unknown(from))?;
        self.check_unresolved(from, member, id)?;
        self.resolve(from, id, false);
        Ok(())
    }

    fn check_unresolved(&self, from: Peer, member: &Member, id: MoveId) -> Result<(), MeshRefusal> {
        let window = &member.moves;
        if id < window.below || window.ahead.contains(&id) {
            return Err(MeshRefusal::DuplicateMove { mover: from, id });
        }
        if window.ahead.len() >= self.limits.moves_ahead_max {
            let max = self.limits.moves_ahead_max;
            return Err(MeshRefusal::Oversized { what: "moves resolved ahead", len: window.ahead.len() + 1, max });
        }
        Ok(())
    }

    /// Marks move `id` of `from` resolved and tells its mover (took or declined).
    fn resolve(&mut self, from: Peer, id: MoveId, took: bool) {
        let window = &mut self.members.get_mut(&from).expect("checked member").moves;
        window.ahead.insert(id);
        while window.ahead.remove(&window.below) {
            window.below += 1;
        }
        let marker = MoveRef { mover: from, id };
        if took {
            self.open.took.push(marker);
        } else {
            self.open.declined.push(marker);
        }
        self.seal_if_full();
    }
}
