//! This participant's own changes on their way out: checked against its contribution, applied to
//! its view, merged into the open batch — new claims before releases — and sealed into numbered
//! batches for every live peer (and for those the batch fences).

use crate::mesh::wire::{Change, Message, Site, Transmit};
use crate::mesh::{Mesh, MeshRefusal};
use crate::progress::{Location, Update};

impl Mesh {
    /// Own claim changes from a `Progress` outbox: claims into the contribution, the watermark
    /// into the view.
    pub(super) fn commit_local(&mut self, updates: &[Update]) -> Result<(), MeshRefusal> {
        let mut changes = Vec::with_capacity(updates.len());
        let mut watermark = None;
        for u in updates {
            match u.location {
                Location::Peer(_) => {}
                Location::Watermark if u.delta > 0 => watermark = watermark.max(Some(u.ts)),
                Location::Watermark => {}
                location => changes.push(Change { site: Site::Local(location), ts: u.ts, delta: u.delta }),
            }
        }
        if let Some(ts) = watermark.filter(|ts| !(0..=crate::time::INFINITY).contains(ts)) {
            return Err(MeshRefusal::InvalidTimestamp { ts });
        }
        self.commit_own(&changes)?;
        if let Some(ts) = watermark {
            self.view.raise_watermark(ts);
        }
        Ok(())
    }

    /// Checks and applies changes of this participant's own contribution, and queues them for
    /// the next batch — new claims first, so that any cut of an oversized change is safe.
    pub(super) fn commit_own(&mut self, changes: &[Change]) -> Result<(), MeshRefusal> {
        for change in changes {
            if !(0..=crate::time::INFINITY).contains(&change.ts) {
                return Err(MeshRefusal::InvalidTimestamp { ts: change.ts });
            }
        }
        let mut net = self.view.check(self.me, changes, self.ts_min, self.limits.contribution_entries_max)?;
        self.view.apply(self.me, &net);
        net.sort_by_key(|&(_, _, delta)| delta < 0);
        for (site, ts, delta) in net {
            self.queue_change(Change { site, ts, delta });
        }
        Ok(())
    }

    /// Adds one own change to the open batch, merged with one at the same site and timestamp.
    fn queue_change(&mut self, change: Change) {
        let changes = &mut self.open.changes;
        match changes.iter().position(|c| c.site == change.site && c.ts == change.ts) {
            Some(i) => {
                changes[i].delta += change.delta;
                if changes[i].delta == 0 {
                    changes.remove(i);
                }
            }
            None => changes.push(change),
        }
        self.seal_if_full();
    }

    pub(super) fn seal_if_full(&mut self) {
        let open = &self.open;
        let markers = open.took.len() + open.declined.len() + open.fenced.len() + open.after.len();
        if open.changes.len() >= self.limits.batch_changes_max || markers + 1 >= self.limits.batch_markers_max {
            self.seal();
        }
    }

    /// Seals the open batch (if it holds anything, or the watermark rose) and queues it for
    /// every live peer.
    pub(super) fn seal(&mut self) {
        let open = &self.open;
        let empty = open.changes.is_empty()
            && open.took.is_empty()
            && open.declined.is_empty()
            && open.fenced.is_empty()
            && open.after.is_empty();
        if empty && self.view.watermark() == self.announced {
            return;
        }
        let mut batch = std::mem::take(&mut self.open);
        // Merging may have put a release before a claim: new claims first on the wire.
        batch.changes.sort_by_key(|c| c.delta < 0);
        self.seq += 1;
        batch.seq = self.seq;
        batch.watermark = self.view.watermark();
        self.announced = batch.watermark;
        for &(peer, seq) in &batch.after {
            let highest = self.after_sealed.entry(peer).or_insert(seq);
            *highest = (*highest).max(seq);
        }
        // Those it fences hear of it too — dying here, or finalized at once (nobody else to wait
        // for): a fenced participant that still lives must learn it was expelled (peers that are
        // really dead do not listen).
        let mut to = self.live_peers();
        to.extend(batch.fenced.iter().filter(|p| self.members.contains_key(p) || self.dead_set.contains(p)));
        let message = Message::Batch(batch);
        debug_assert_eq!(message.validate(&self.limits), Ok(()), "a batch this machine sealed");
        if !to.is_empty() {
            self.transmits.push_back(Transmit { to, message });
        }
    }
}
