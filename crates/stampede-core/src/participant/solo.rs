//! A participant alone (`Participant`'s module doc, "Alone"): going solo when the mesh is alone
//! and idle, and leaving solo — handing the mesh what changed meanwhile and putting the mirror
//! back — before any input reaches the mesh and every [`SOLO_SETTLES_MAX`] settles.

use super::{Floor, Participant};
use crate::progress::{Location, Update};
use crate::time::Timestamp;

/// Most settles a participant stays solo (see the module doc) before it hands the mesh what
/// changed: it bounds the difference handed over when solo ends, so that the mesh always has room
/// for it (an operation adds a handful of claim entries; half the mesh's bound on entries is
/// 32 768 by default), at the cost of one catch-up per this many operations.
pub const SOLO_SETTLES_MAX: u32 = 1024;

/// A participant alone (see the module doc).
#[derive(Debug)]
pub(super) struct Solo {
    /// The runtime's claims as the mesh holds them: what it was last handed.
    pub(super) given: Vec<Update>,
    /// Settles since it went solo (at most [`SOLO_SETTLES_MAX`]).
    pub(super) settles: u32,
}

impl Participant {
    /// Goes solo (see the module doc) if the mesh is alone and idle, took every claim change,
    /// has room for as many entries again, and holds ts_min where the runtime's own claims do:
    /// the mirror then holds nothing back, and is taken off. Returns the new ts_min if that let
    /// it advance (it does not: the mesh's is the same).
    pub(super) fn go_solo(&mut self) -> Option<Timestamp> {
        let linked = self.linked.as_mut()?;
        if !linked.mesh.alone() || linked.floor != Floor::None || !linked.stash.is_empty() || linked.solo.is_some() {
            return None;
        }
        let held = self.progress.claims_held();
        if held.len() > linked.mesh.limits().contribution_entries_max / 2 {
            return None; // a difference as large again might not fit: the mirror stays
        }
        let own = held
            .iter()
            .filter(|u| !matches!(u.location, Location::Peer(_) | Location::Watermark))
            .map(|u| u.ts)
            .min()
            .map_or(self.progress.watermark(), |claim| claim.min(self.progress.watermark()));
        if linked.mesh.ts_min() != own || linked.mirror != own {
            return None; // the mesh holds ts_min lower (a pause): the mirror stays
        }
        let mirror = [Update { location: Location::Peer(0), ts: linked.mirror, delta: -1 }];
        let advanced = self.progress.apply(&mirror).expect("a release of a held claim");
        debug_assert_eq!(self.progress.ts_min(), own, "the mirror held nothing back");
        self.progress.stop_outbox();
        let given = held.into_iter().filter(|u| !matches!(u.location, Location::Peer(_))).collect();
        linked.solo = Some(Solo { given, settles: 0 });
        advanced
    }

    /// Leaves solo (see the module doc): hands the mesh the difference between the claims it
    /// holds and those held now (new claims first), records again, and puts the mirror back at
    /// the mesh's ts_min — the runtime's own, as the mesh now holds exactly its claims.
    pub(super) fn leave_solo(&mut self) {
        let Some(linked) = self.linked.as_mut() else { return };
        let Some(Solo { given, .. }) = linked.solo.take() else { return };
        let mut net: std::collections::BTreeMap<(Location, Timestamp), i64> = std::collections::BTreeMap::new();
        for u in given {
            *net.entry((u.location, u.ts)).or_default() -= u.delta;
        }
        for u in self.progress.claims_held() {
            *net.entry((u.location, u.ts)).or_default() += u.delta;
        }
        let mut changes: Vec<Update> = net
            .into_iter()
            .filter(|&(_, delta)| delta != 0)
            .map(|((location, ts), delta)| Update { location, ts, delta })
            .collect();
        changes.sort_by_key(|u| u.delta < 0); // new claims before releases, as the outbox has them
        linked.stash = changes;
        // It takes them: it was alone and idle when solo began, no input reached it since, and
        // the difference fits in its bound (`SOLO_SETTLES_MAX`).
        let fed = linked.flush_stash();
        debug_assert!(fed, "a mesh alone and idle takes its own claims");
        let ts_min = self.progress.ts_min();
        // The mesh holds exactly the runtime's claims now, so its ts_min is the runtime's.
        let mirror = linked.mesh.ts_min().max(ts_min);
        debug_assert_eq!(linked.mesh.ts_min(), ts_min, "the mesh holds the runtime's claims");
        self.progress.record_outbox();
        let claim = [Update { location: Location::Peer(0), ts: mirror, delta: 1 }];
        self.progress.apply(&claim).expect("a claim at ts_min is always covered");
        self.progress.take_outbox();
        linked.mirror = mirror;
    }
}
