//! Observable counters of a channel or queue (reclamation is observable: docs/SEMANTICS.md,
//! "Virtual time, visibility, GC").

use crate::time::Timestamp;

/// A snapshot of one channel's or queue's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stats {
    /// Items stored now.
    pub live_items: usize,
    /// Payload bytes stored now.
    pub live_bytes: usize,
    /// Items reclaimed so far (by ts_min, by reference count, or by consumption in a queue).
    pub reclaimed: u64,
    /// Items accepted by `put` so far.
    pub puts: u64,
    /// Successful gets so far.
    pub gets: u64,
    /// Input connections attached now.
    pub inputs: usize,
    /// Output connections attached now.
    pub outputs: usize,
    /// Timestamps reclaimed early by reference count and still remembered to reject duplicates.
    pub tombstones: usize,
    /// Runs of consecutive tombstoned timestamps: what the tombstones cost in memory (bounded
    /// by `stampede_core::tombstones::TOMBSTONE_RUNS_MAX`).
    pub tombstone_runs: usize,
    /// This container's lowest claim on ts_min (lowest unseen or open item on any input
    /// connection; for a queue, the lowest item not yet consumed), if any.
    pub claim: Option<Timestamp>,
    /// The node's ts_min when the snapshot was taken (filled in by the runtime).
    pub ts_min: Timestamp,
}

/// What went through one connection so far (for tools: dashboards, `stampede ls`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Items gotten (input) or put (output) through it; a get of an item already open counts
    /// again.
    pub items: u64,
    /// Input only: items that stopped being unseen here without being gotten — consumed while
    /// unseen (`consume_until` past them: a `NEWEST_UNSEEN` reader skipping stale frames) or
    /// reclaimed early by other readers' reference counts.
    pub skipped: u64,
}

/// Live payload bytes charged to byte budgets, against their maximums: through a node, the
/// calling session's budget and its node's (docs/LIMITS.md, "Byte budgets").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BudgetUse {
    /// Live bytes charged to the node, from every session.
    pub node_live_bytes: u64,
    /// The node's budget (`max_live_bytes`).
    pub node_max_bytes: u64,
    /// Live bytes charged to the session.
    pub session_live_bytes: u64,
    /// The session's budget (`max_session_live_bytes`).
    pub session_max_bytes: u64,
}
