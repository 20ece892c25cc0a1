//! A participant's view: the sum of every batch it applied, kept per owner (the participant that
//! reported it) so that a dead owner's claims can be dropped exactly, and over all owners as two
//! multisets — doors and every other claim — whose minimums give the frontier at once.
//!
//! Every count in a view is the owner's own: batches only change their sender's contribution, so
//! no count is ever negative, not even for a moment (a release is checked against what its owner
//! holds before anything changes; see `docs/PROTOCOL.md` for why the protocol never needs the
//! transient negative counts of Timely Dataflow).

use std::collections::BTreeMap;

use crate::claims::Claims;
use crate::id_map::IdMap;
use crate::mesh::wire::{Change, MoveId, Peer, Site};
use crate::mesh::MeshRefusal;
use crate::time::{Timestamp, INFINITY};

/// Highest count one owner may hold at one site and timestamp. It keeps every sum over owners
/// far from overflow (`PEERS_MAX` owners × entries × this < `i64::MAX`), whatever peers send.
pub const CLAIM_COUNT_MAX: i64 = 1 << 32;

/// One owner's net counts by site and timestamp (all positive).
type Contribution = IdMap<(Site, Timestamp), i64>;

/// The net effect of one batch on its owner, checked and ready to apply.
pub(crate) type Net = Vec<(Site, Timestamp, i64)>;

#[derive(Debug, Default)]
pub(crate) struct View {
    owners: BTreeMap<Peer, Contribution>,
    /// Every claim but doors, over all owners.
    claims: Claims,
    /// Every owner's door.
    doors: Claims,
    /// `1 +` the highest timestamp ever put that this view heard of. Kept when owners die: the
    /// puts happened.
    watermark: Timestamp,
}

impl View {
    /// The lowest non-door claim, capped by the watermark: what a door may rise to.
    pub(crate) fn frontier(&self) -> Timestamp {
        self.claims.min().map_or(self.watermark, |claim| claim.min(self.watermark))
    }

    /// The frontier, held down by every door: this view's global ts_min.
    pub(crate) fn ts_min(&self) -> Timestamp {
        self.frontier().min(self.doors.min().unwrap_or(INFINITY))
    }

    /// The timestamp of `owner`'s carry of move `id` to `to`, if this view holds it.
    pub(crate) fn carried(&self, owner: Peer, to: Peer, id: MoveId) -> Option<Timestamp> {
        let contribution = self.owners.get(&owner)?;
        contribution.keys().find(|(site, _)| *site == Site::Carry { to, id }).map(|&(_, ts)| ts)
    }

    pub(crate) fn watermark(&self) -> Timestamp {
        self.watermark
    }

    /// Raises the watermark to `ts` if that is higher; returns whether it rose.
    pub(crate) fn raise_watermark(&mut self, ts: Timestamp) -> bool {
        let raised = ts > self.watermark;
        self.watermark = self.watermark.max(ts);
        raised
    }

    /// Checks `changes` against what `owner` holds: no count below zero or above
    /// [`CLAIM_COUNT_MAX`], no new claim below `ts_min`, at most `entries_max` entries. (An owner
    /// may show two doors for a while — a rise's claim applied, its release not yet — which only
    /// holds the view lower.) Changes nothing; returns the net effect to [`apply`](Self::apply).
    pub(crate) fn check(
        &self,
        owner: Peer,
        changes: &[Change],
        ts_min: Timestamp,
        entries_max: usize,
    ) -> Result<Net, MeshRefusal> {
        let mut net: Net = Vec::with_capacity(changes.len());
        for change in changes {
            match net.iter_mut().find(|(site, ts, _)| *site == change.site && *ts == change.ts) {
                Some(entry) => entry.2 = entry.2.checked_add(change.delta).ok_or(MeshRefusal::CountOverflow)?,
                None => net.push((change.site, change.ts, change.delta)),
            }
        }
        net.retain(|&(_, _, delta)| delta != 0);
        let held = self.owners.get(&owner);
        let count = |site: Site, ts: Timestamp| held.and_then(|c| c.get(&(site, ts)).copied()).unwrap_or(0);
        let mut entries = held.map_or(0, |c| c.len());
        for &(site, ts, delta) in &net {
            let before = count(site, ts);
            let after = before.checked_add(delta).ok_or(MeshRefusal::CountOverflow)?;
            if after < 0 {
                return Err(MeshRefusal::ReleaseWithoutClaim { owner, site, ts });
            }
            if after > CLAIM_COUNT_MAX {
                return Err(MeshRefusal::CountOverflow);
            }
            if delta > 0 && ts < ts_min {
                return Err(MeshRefusal::BelowFrontier { owner, ts, ts_min });
            }
            entries = entries + usize::from(after > 0) - usize::from(before > 0);
        }
        if entries > entries_max {
            return Err(MeshRefusal::TooManyEntries { owner, max: entries_max });
        }
        Ok(net)
    }

    /// Applies a net effect returned by [`check`](Self::check) for the same owner, with nothing
    /// applied in between.
    pub(crate) fn apply(&mut self, owner: Peer, net: &Net) {
        let counts = self.owners.entry(owner).or_default();
        for &(site, ts, delta) in net {
            let count = counts.entry((site, ts)).or_insert(0);
            *count += delta;
            assert!((0..=CLAIM_COUNT_MAX).contains(count), "{owner:?} {site:?} ts={ts}: count {count} (unchecked)");
            if *count == 0 {
                counts.remove(&(site, ts));
            }
            let aggregate = if site == Site::Door { &mut self.doors } else { &mut self.claims };
            aggregate.apply_count(ts, delta);
        }
    }

    /// Forgets everything `owner` reported (a dead participant): exactly its counts go.
    pub(crate) fn drop_owner(&mut self, owner: Peer) {
        for ((site, ts), count) in self.owners.remove(&owner).unwrap_or_default() {
            let aggregate = if site == Site::Door { &mut self.doors } else { &mut self.claims };
            aggregate.apply_count(ts, -count);
        }
    }

    /// `owner`'s claims, as the changes of a snapshot.
    pub(crate) fn contribution(&self, owner: Peer) -> Vec<Change> {
        let Some(counts) = self.owners.get(&owner) else { return Vec::new() };
        counts.iter().map(|(&(site, ts), &delta)| Change { site, ts, delta }).collect()
    }
}
