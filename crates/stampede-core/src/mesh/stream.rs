//! Each peer's stream as this participant receives it: its snapshot, then its batches, each
//! applied at most once and in `seq` order, in two steps:
//!
//! 1. **claims** — a batch's new claims and its markers (took, declined, fenced, watermark) as
//!    soon as every earlier batch's claims are applied;
//! 2. **releases** — its releases once every earlier batch's releases are applied and the batches
//!    it names in `after` have had their claims applied (or their senders are dead).
//!
//! New claims before releases, literally: a claim only lowers a view, so it never needs to wait;
//! a release waits for what it depends on. Claims never wait on dependencies, so nothing a
//! dependency waits for (a takeover, a fence that lets a dead sender be finalized) can ever sit
//! behind it — there is no cycle to deadlock on.
//!
//! A batch that breaks the rules (a release of a claim its sender does not hold, a new claim
//! below ts_min, …) stops its sender's stream here: later batches cannot be applied without it.
//! Its claims stay — a stopped stream can only hold ts_min down — until the fabric declares the
//! sender dead.

use crate::mesh::view::Net;
use crate::mesh::wire::{Batch, Change, Peer, Seq, Snapshot};
use crate::mesh::{Event, Mesh, MeshRefusal, Message, Mutation};

impl Mesh {
    /// A message from `from` (snapshot or batch). Refused at once if malformed, from an unknown
    /// or dead incarnation, a duplicate, or too far ahead; otherwise applied now or held until
    /// its turn. A fault found when its turn comes is reported by [`Mesh::poll_event`].
    pub fn handle_message(&mut self, from: Peer, message: Message) -> Result<(), MeshRefusal> {
        self.admit()?;
        message.validate(&self.limits)?;
        // A peer that fenced this participant expels it, whatever the message's turn in its
        // stream, and even if this participant finalized that peer already (both sides of a
        // partition fenced each other): a fence must reach a participant that lives on, and
        // being expelled is always safe (it takes nothing more, and rejoins anew).
        let heard_of = self.members.contains_key(&from) || self.dead_set.contains(&from);
        if heard_of && message.fenced().contains(&self.me) {
            self.expel();
            return Err(MeshRefusal::Expelled);
        }
        let member = self.members.get(&from).ok_or_else(|| self.unknown(from))?;
        if member.faulted {
            return Err(MeshRefusal::Faulted { peer: from });
        }
        match message {
            Message::Snapshot(snapshot) => self.take_snapshot(from, snapshot)?,
            Message::Batch(batch) => self.hold(from, batch)?,
            door => self.door_message(from, door)?,
        }
        self.settle();
        Ok(())
    }

    fn take_snapshot(&mut self, from: Peer, snapshot: Snapshot) -> Result<(), MeshRefusal> {
        if self.members.get(&from).is_some_and(|m| m.snapshot) {
            return Err(MeshRefusal::Duplicate { peer: from, seq: snapshot.seq });
        }
        let entries_max = self.limits.contribution_entries_max;
        let net = match self.view.check(from, &snapshot.claims, self.ts_min, entries_max) {
            Ok(net) => net,
            Err(refusal) => {
                self.fault(from, refusal.clone());
                return Err(refusal);
            }
        };
        self.view.apply(from, &net);
        self.view.raise_watermark(snapshot.watermark);
        let member = self.members.get_mut(&from).expect("checked member");
        member.snapshot = true;
        member.snapshot_after = snapshot.after;
        member.claimed = snapshot.seq;
        member.applied = snapshot.seq;
        member.pending.retain(|&seq, _| seq > snapshot.seq);
        member.snapshot_live = snapshot.live.iter().copied().collect();
        self.note_fences(from, &snapshot.fenced, snapshot.seq);
        for &peer in &snapshot.live {
            let known = peer == self.me || self.members.contains_key(&peer);
            // Refusals (stale: dead now; dead; too many) leave nothing to ask.
            if !known && self.learn_peer(peer, false).is_ok() {
                self.push_event(Event::AskLiveliness { peer });
            }
        }
        Ok(())
    }

    /// Keeps `batch` until its turn (at-most-once: a `seq` seen before is refused).
    fn hold(&mut self, from: Peer, batch: Batch) -> Result<(), MeshRefusal> {
        let max = self.limits.pending_batches_max;
        let member = self.members.get_mut(&from).expect("checked member");
        let seq = batch.seq;
        if (member.snapshot && seq <= member.applied) || member.pending.contains_key(&seq) {
            return Err(MeshRefusal::Duplicate { peer: from, seq });
        }
        if seq - member.applied > max as u64 {
            return Err(MeshRefusal::TooFarAhead { peer: from, seq, applied: member.applied, max });
        }
        member.pending.insert(seq, batch);
        Ok(())
    }

    /// Applies claims, then releases, of every held batch whose turn has come, until none has.
    pub(super) fn drain(&mut self) {
        loop {
            if let Some(from) = self.next_claims() {
                self.apply_claims(from);
            } else if let Some(from) = self.next_releases() {
                self.apply_releases(from);
            } else {
                return;
            }
            if self.expelled {
                return;
            }
        }
    }

    /// A peer whose next batch's claims may be applied now.
    fn next_claims(&self) -> Option<Peer> {
        self.members.iter().find_map(|(&peer, m)| {
            let ready = m.snapshot && !m.faulted && m.pending.contains_key(&(m.claimed + 1));
            ready.then_some(peer)
        })
    }

    /// A peer whose oldest held batch has its claims applied and may be released now.
    fn next_releases(&self) -> Option<Peer> {
        self.members.iter().find_map(|(&peer, m)| {
            let (&seq, batch) = m.pending.first_key_value()?;
            let ready = !m.faulted && seq <= m.claimed && self.dependencies_met(&batch.after);
            ready.then_some(peer)
        })
    }

    /// Whether every batch named in `after` has its claims applied here, or its sender is not a
    /// member here: dead and finalized, or — since every live participant is known before it can
    /// matter (`docs/PROTOCOL.md`, membership) — declared dead before this one joined.
    pub(super) fn dependencies_met(&self, after: &[(Peer, Seq)]) -> bool {
        self.mutated(Mutation::IgnoreDependencies)
            || after.iter().all(|&(peer, seq)| {
                peer == self.me || self.members.get(&peer).is_none_or(|m| m.snapshot && m.claimed >= seq)
            })
    }

    /// Step 1 for `from`'s next batch: its new claims and markers; its releases stay held.
    fn apply_claims(&mut self, from: Peer) {
        let member = self.members.get_mut(&from).expect("ready member");
        let seq = member.claimed + 1;
        let batch = member.pending.get_mut(&seq).expect("ready batch");
        let (claims, releases): (Vec<Change>, Vec<Change>) = batch.changes.drain(..).partition(|c| c.delta > 0);
        batch.changes = releases;
        let (took, declined, fenced, watermark) = (
            std::mem::take(&mut batch.took),
            std::mem::take(&mut batch.declined),
            std::mem::take(&mut batch.fenced),
            batch.watermark,
        );
        let Some(net) = self.checked(from, &claims) else { return };
        self.view.apply(from, &net);
        self.view.raise_watermark(watermark);
        self.members.get_mut(&from).expect("ready member").claimed = seq;
        let me = self.me;
        for took in took.iter().filter(|t| t.mover == me) {
            if self.carries.contains_key(&(from, took.id)) {
                // The release must not overtake the takeover anywhere.
                self.add_after((from, seq));
                self.release_carry(from, took.id);
            }
        }
        for declined in declined.iter().filter(|t| t.mover == me) {
            self.release_carry(from, declined.id);
        }
        self.note_fences(from, &fenced, seq);
    }

    /// Step 2 for `from`'s oldest held batch: its releases.
    fn apply_releases(&mut self, from: Peer) {
        let member = self.members.get_mut(&from).expect("ready member");
        let (seq, batch) = member.pending.pop_first().expect("ready batch");
        let Some(net) = self.checked(from, &batch.changes) else { return };
        self.view.apply(from, &net);
        self.members.get_mut(&from).expect("ready member").applied = seq;
    }

    /// `changes` of `from` checked against its contribution, or `None` after faulting it.
    fn checked(&mut self, from: Peer, changes: &[Change]) -> Option<Net> {
        let entries_max = self.limits.contribution_entries_max;
        match self.view.check(from, changes, self.ts_min, entries_max) {
            Ok(net) => Some(net),
            Err(refusal) => {
                self.fault(from, refusal);
                None
            }
        }
    }

    fn fault(&mut self, peer: Peer, refusal: MeshRefusal) {
        if let Some(member) = self.members.get_mut(&peer) {
            member.faulted = true;
            member.pending.clear();
        }
        self.push_event(Event::Faulted { peer, refusal });
    }
}
