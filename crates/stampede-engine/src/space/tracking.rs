//! [`Tracking`]: the participant (progress machine and mesh), the GC sweep index and the mesh
//! driver's wake-up, kept together under the progress lock.
//!
//! The sweep index lists every channel holding something under a lower bound of its oldest
//! stored-or-tombstoned timestamp; a refused progress batch is a driver bug and panics.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use crate::mesh_link::MeshWake;
use crate::sync::AtomicI64;
use stampede_core::{ContainerKey, Participant, Progress, Timestamp, Update, INFINITY};

use super::containers::Listing;

/// Channels due for a sweep, with the timestamp each was listed under.
pub(super) type Due = smallvec::SmallVec<[(Timestamp, ContainerKey); 4]>;

/// The participant (progress machine and mesh) and the sweep index, under one lock.
pub(super) struct Tracking {
    pub(super) participant: Participant,
    /// Channels listed under a lower bound of their oldest stored-or-tombstoned timestamp: what
    /// a sweep visits. Channels with nothing stored are not listed (idle channels cost nothing).
    listed: BTreeSet<(Timestamp, ContainerKey)>,
    /// The driver's wake-up when this space is a node in a mesh ([`crate::mesh_link`]).
    pub(super) wake: Option<MeshWake>,
}

/// A permanent last entry of the sweep index: it keeps the index's root node allocated when no
/// channel is listed (a pipeline's channel is listed and unlisted on every frame), and no ts_min
/// ever passes it.
const LISTED_SENTINEL: (Timestamp, ContainerKey) = (INFINITY, ContainerKey::MAX);

impl Default for Tracking {
    fn default() -> Self {
        Tracking { participant: Participant::default(), listed: BTreeSet::from([LISTED_SENTINEL]), wake: None }
    }
}

impl Tracking {
    /// Lists (or re-lists lower) a container in the sweep index.
    pub(super) fn list(&mut self, listing: Option<Listing<'_>>) {
        let Some(Listing { key, listed_at, oldest }) = listing else { return };
        let before = listed_at.swap(oldest, Ordering::AcqRel);
        if before != INFINITY {
            self.listed.remove(&(before, key));
        }
        self.listed.insert((oldest, key));
    }

    /// Takes off the index every channel listed below `ts_min`: they are due for a sweep.
    pub(super) fn take_due(&mut self, ts_min: Timestamp) -> Due {
        let mut due = Due::new();
        while let Some(&(listed, key)) = self.listed.first() {
            if listed >= ts_min {
                break;
            }
            self.listed.pop_first();
            due.push((listed, key));
        }
        due
    }

    /// Removes a container from the sweep index.
    pub(super) fn unlist(&mut self, key: ContainerKey, listed_at: &AtomicI64) {
        let before = listed_at.swap(INFINITY, Ordering::AcqRel);
        if before != INFINITY {
            self.listed.remove(&(before, key));
        }
    }

    /// Settles the participant ([`Participant::settle`]) and wakes the mesh's driver when the
    /// mesh took claim changes; returns the new local ts_min if settling let it advance.
    pub(super) fn settle(&mut self) -> Option<Timestamp> {
        let settled = self.participant.settle();
        if settled.handed {
            self.wake();
        }
        settled.advanced
    }

    /// Wakes the mesh's driver, if linked.
    pub(super) fn wake(&self) {
        if let Some(wake) = &self.wake {
            wake();
        }
    }

    pub(super) fn progress(&self) -> &Progress {
        self.participant.progress()
    }

    pub(super) fn progress_mut(&mut self) -> &mut Progress {
        self.participant.progress_mut()
    }

    /// Applies a batch the driver built; a refusal is a driver bug (it would let GC reclaim a
    /// reachable item), so it panics with the offending claim.
    pub(super) fn apply(&mut self, batch: &[Update]) -> Option<Timestamp> {
        match self.participant.apply(batch) {
            Ok(advanced) => advanced,
            Err(refusal) => panic!("progress batch refused: {refusal:?}"),
        }
    }
}
