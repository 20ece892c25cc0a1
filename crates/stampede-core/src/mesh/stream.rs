//! Each peer's stream as this participant receives it: its snapshot, then its batches applied at
//! most once, in `seq` order (held while earlier ones are missing), each after the batches it
//! names in `after`, each as a whole or not at all.
//!
//! A batch that breaks the rules (a release of a claim its sender does not hold, a new claim
//! below ts_min, …) stops its sender's stream here: later batches cannot be applied without it.
//! Its claims stay — a stopped stream can only hold ts_min down — until the fabric declares the
//! sender dead.

use crate::mesh::wire::{Batch, Peer, Seq, Snapshot};
use crate::mesh::{Event, Mesh, MeshRefusal, Message, Mutation};

impl Mesh {
    /// A message from `from` (snapshot or batch). Refused at once if malformed, from an unknown
    /// or dead incarnation, a duplicate, or too far ahead; otherwise applied now or held until
    /// its turn. A fault found when its turn comes is reported by [`Mesh::poll_event`].
    pub fn handle_message(&mut self, from: Peer, message: Message) -> Result<(), MeshRefusal> {
        self.admit()?;
        message.validate(&self.limits)?;
        let member = self.members.get(&from).ok_or_else(|| self.unknown(from))?;
        if member.faulted {
            return Err(MeshRefusal::Faulted { peer: from });
        }
        match message {
            Message::Snapshot(snapshot) => self.take_snapshot(from, snapshot)?,
            Message::Batch(batch) => self.hold(from, batch)?,
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
        member.applied = snapshot.seq;
        member.pending.retain(|&seq, _| seq > snapshot.seq);
        self.note_fences(from, &snapshot.fenced, snapshot.seq);
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

    /// Applies every held batch whose turn has come, until none has.
    pub(super) fn drain(&mut self) {
        while let Some(from) = self.next_ready() {
            let member = self.members.get_mut(&from).expect("ready member");
            let (_, batch) = member.pending.pop_first().expect("ready batch");
            self.apply_batch(from, batch);
            if self.expelled {
                return;
            }
        }
    }

    /// A peer whose next batch is held and may be applied now.
    fn next_ready(&self) -> Option<Peer> {
        self.members.iter().find_map(|(&peer, m)| {
            let (&seq, batch) = m.pending.first_key_value()?;
            let ready = m.snapshot && !m.faulted && seq == m.applied + 1 && self.dependencies_met(&batch.after);
            ready.then_some(peer)
        })
    }

    /// Whether every batch named in `after` is applied here, or its sender is dead (its claims
    /// are dropped, or about to be).
    fn dependencies_met(&self, after: &[(Peer, Seq)]) -> bool {
        self.mutated(Mutation::IgnoreDependencies)
            || after.iter().all(|&(peer, seq)| {
                peer == self.me
                    || self.dead_set.contains(&peer)
                    || self.members.get(&peer).is_some_and(|m| m.snapshot && m.applied >= seq)
            })
    }

    fn apply_batch(&mut self, from: Peer, batch: Batch) {
        let entries_max = self.limits.contribution_entries_max;
        let net = match self.view.check(from, &batch.changes, self.ts_min, entries_max) {
            Ok(net) => net,
            Err(refusal) => return self.fault(from, refusal),
        };
        self.view.apply(from, &net);
        self.view.raise_watermark(batch.watermark);
        self.members.get_mut(&from).expect("applying member").applied = batch.seq;
        let me = self.me;
        for took in batch.took.iter().filter(|t| t.mover == me) {
            if self.carries.get(&took.id).is_some_and(|c| c.to == from) {
                // The release must not overtake the takeover anywhere.
                self.add_after((from, batch.seq));
                self.release_carry(took.id);
            }
        }
        for declined in batch.declined.iter().filter(|t| t.mover == me) {
            if self.carries.get(&declined.id).is_some_and(|c| c.to == from) {
                self.release_carry(declined.id);
            }
        }
        self.note_fences(from, &batch.fenced, batch.seq);
    }

    fn fault(&mut self, peer: Peer, refusal: MeshRefusal) {
        if let Some(member) = self.members.get_mut(&peer) {
            member.faulted = true;
            member.pending.clear();
        }
        self.push_event(Event::Faulted { peer, refusal });
    }
}
