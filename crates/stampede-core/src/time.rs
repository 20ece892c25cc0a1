//! Timestamps, the `INFINITY` virtual time, and get selectors (docs/SEMANTICS.md, "Terms" and
//! "Channels").
//!
//! A timestamp is an application-chosen `i64`. Items live at `0 ..= TS_MAX`; `INFINITY` is only
//! ever a virtual time ("this task will not put by itself; it inherits timestamps from what it
//! gets"), so every function that accepts an item timestamp validates it with [`is_item_ts`].

/// An application-chosen index of an item: frame number, sample index, nanoseconds.
pub type Timestamp = i64;

/// The virtual time of a task that never puts on its own (docs/SEMANTICS.md, "Terms"). Never an
/// item timestamp.
pub const INFINITY: Timestamp = i64::MAX;

/// The highest timestamp an item may carry.
pub const TS_MAX: Timestamp = INFINITY - 1;

/// Which item a `get` asks for (docs/SEMANTICS.md, "Channels"). Wildcards consider only items that
/// are present and not consumed on the asking connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Selector {
    /// Exactly this timestamp.
    At(Timestamp),
    /// The lowest timestamp present and not consumed on this connection.
    Oldest,
    /// The highest timestamp present and not consumed on this connection.
    Newest,
    /// The lowest timestamp not yet gotten on this connection: in-order stream reading.
    OldestUnseen,
    /// The highest timestamp not yet gotten on this connection: the freshest frame, skipping the rest.
    NewestUnseen,
}

impl From<Timestamp> for Selector {
    fn from(ts: Timestamp) -> Self {
        Selector::At(ts)
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::At(ts) => write!(f, "ts={ts}"),
            Selector::Oldest => f.write_str("OLDEST"),
            Selector::Newest => f.write_str("NEWEST"),
            Selector::OldestUnseen => f.write_str("OLDEST_UNSEEN"),
            Selector::NewestUnseen => f.write_str("NEWEST_UNSEEN"),
        }
    }
}

/// `true` when `ts` may index an item: `0 ..= TS_MAX`.
pub fn is_item_ts(ts: Timestamp) -> bool {
    (0..=TS_MAX).contains(&ts)
}

/// The lower of two optional timestamps (`None` means "no timestamp", not "lowest").
pub fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Formats a virtual time or ts_min, spelling `INFINITY` out.
pub fn show(ts: Timestamp) -> String {
    if ts == INFINITY {
        "INFINITY".to_owned()
    } else {
        ts.to_string()
    }
}
