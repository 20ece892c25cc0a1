//! The core's values on the wire: selectors, retention, counters and bounds, with their
//! conversions both ways.

use serde::{Deserialize, Serialize};
use stampede_core::{Limits, Retention, Selector, Stats, Timestamp};

/// [`Selector`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireSelector {
    At(Timestamp),
    Oldest,
    Newest,
    OldestUnseen,
    NewestUnseen,
}

impl From<Selector> for WireSelector {
    fn from(s: Selector) -> Self {
        match s {
            Selector::At(ts) => WireSelector::At(ts),
            Selector::Oldest => WireSelector::Oldest,
            Selector::Newest => WireSelector::Newest,
            Selector::OldestUnseen => WireSelector::OldestUnseen,
            Selector::NewestUnseen => WireSelector::NewestUnseen,
        }
    }
}

impl From<WireSelector> for Selector {
    fn from(s: WireSelector) -> Self {
        match s {
            WireSelector::At(ts) => Selector::At(ts),
            WireSelector::Oldest => Selector::Oldest,
            WireSelector::Newest => Selector::Newest,
            WireSelector::OldestUnseen => Selector::OldestUnseen,
            WireSelector::NewestUnseen => Selector::NewestUnseen,
        }
    }
}

/// [`Retention`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireRetention {
    History,
    CurrentReaders,
}

impl From<Retention> for WireRetention {
    fn from(r: Retention) -> Self {
        match r {
            Retention::History => WireRetention::History,
            Retention::CurrentReaders => WireRetention::CurrentReaders,
        }
    }
}

impl From<WireRetention> for Retention {
    fn from(r: WireRetention) -> Self {
        match r {
            WireRetention::History => Retention::History,
            WireRetention::CurrentReaders => Retention::CurrentReaders,
        }
    }
}

/// [`Stats`] on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStats {
    pub live_items: u64,
    pub live_bytes: u64,
    pub reclaimed: u64,
    pub puts: u64,
    pub gets: u64,
    pub inputs: u64,
    pub outputs: u64,
    pub tombstones: u64,
    pub tombstone_runs: u64,
    pub claim: Option<Timestamp>,
    pub ts_min: Timestamp,
}

impl From<&Stats> for WireStats {
    fn from(s: &Stats) -> Self {
        WireStats {
            live_items: s.live_items as u64,
            live_bytes: s.live_bytes as u64,
            reclaimed: s.reclaimed,
            puts: s.puts,
            gets: s.gets,
            inputs: s.inputs as u64,
            outputs: s.outputs as u64,
            tombstones: s.tombstones as u64,
            tombstone_runs: s.tombstone_runs as u64,
            claim: s.claim,
            ts_min: s.ts_min,
        }
    }
}

impl From<&WireStats> for Stats {
    fn from(s: &WireStats) -> Self {
        Stats {
            live_items: size(s.live_items),
            live_bytes: size(s.live_bytes),
            reclaimed: s.reclaimed,
            puts: s.puts,
            gets: s.gets,
            inputs: size(s.inputs),
            outputs: size(s.outputs),
            tombstones: size(s.tombstones),
            tombstone_runs: size(s.tombstone_runs),
            claim: s.claim,
            ts_min: s.ts_min,
        }
    }
}

/// A count from the wire as a `usize`, saturated (only a 32-bit client could ever saturate).
pub fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// [`Limits`] from the wire; `None` when a bound does not fit this machine's `usize`.
pub fn limits(capacity: Option<u64>, bytes_max: Option<u64>) -> Option<Limits> {
    let convert = |n: Option<u64>| n.map(usize::try_from).transpose();
    Some(Limits { capacity: convert(capacity).ok()?, bytes_max: convert(bytes_max).ok()? })
}
