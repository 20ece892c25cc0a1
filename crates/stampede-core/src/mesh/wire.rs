//! What participants send each other — snapshots and batches, tagged by sender and incarnation —
//! and the checks any message from the fabric passes before the machine looks at its content:
//! sizes within [`MeshLimits`], timestamps in `0 ..= INFINITY`, no zero deltas, only sites a
//! peer may report. A message that fails is refused with a [`MeshRefusal`]; nothing here panics.

use crate::mesh::{MeshLimits, MeshRefusal};
use crate::progress::Location;
use crate::time::{Timestamp, INFINITY};

/// A participant — a node or a client session — in one life. A restart is a new incarnation;
/// incarnations of one `id` only grow (the driver derives them from a boot counter or clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Peer {
    pub id: u64,
    pub incarnation: u64,
}

/// Position of a batch in its sender's stream: 1, 2, … per incarnation.
pub type Seq = u64;

/// Names one hand-over of data from its sender (the mover) to one receiver: 1, 2, … per
/// incarnation of the mover and receiver, so that a receiver sees each mover's ids without gaps.
pub type MoveId = u64;

/// Where a claim lives within its owner's contribution. Every site belongs to the participant
/// that reports it: no batch ever changes another participant's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Site {
    /// A claim of the owner's local progress machine (task, hand-over, input connection, queue).
    /// Never `Watermark` (batches carry it as a field) nor `Peer` (the driver's mirror of this
    /// machine inside its local `Progress`).
    Local(Location),
    /// The owner's door: the floor at or above which it may start root tasks. Every
    /// participant's view includes every door, so no view passes it.
    Door,
    /// Covers data handed to `to` as move `id` until `to` reports that it took the data over
    /// (or declined it), or `to` is dead.
    Carry { to: Peer, id: MoveId },
}

/// One change of a contribution: `delta` claims appear (+) or vanish (−) at `ts` at `site`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Change {
    pub site: Site,
    pub ts: Timestamp,
    pub delta: i64,
}

/// One move of one mover, as named in a takeover or a refusal of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MoveRef {
    pub mover: Peer,
    pub id: MoveId,
}

/// One batch of a sender's stream, applied at most once and in `seq` order: its claims and
/// markers when its turn comes, its releases after the batches named in `after`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Batch {
    pub seq: Seq,
    /// Changes of the sender's own contribution; new claims come before releases.
    pub changes: Vec<Change>,
    /// The sender's view of `1 +` the highest timestamp ever put (gossip; only rises).
    pub watermark: Timestamp,
    /// Moves the sender took over in this batch: their movers may release their carries.
    pub took: Vec<MoveRef>,
    /// Moves the sender refused: nothing was claimed, their movers may release their carries.
    pub declined: Vec<MoveRef>,
    /// Incarnations the sender has fenced: it takes nothing over from them any more, and every
    /// takeover it did from them came in an earlier batch.
    pub fenced: Vec<Peer>,
    /// Batches of other senders this one must be applied after (a carry released because of a
    /// takeover comes after the takeover, everywhere).
    pub after: Vec<(Peer, Seq)>,
}

/// A sender's whole contribution as of its batch `seq`, sent once to each peer it learns of:
/// the peer then applies the sender's batches after `seq`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot {
    pub seq: Seq,
    /// The sender's claims as changes with positive counts.
    pub claims: Vec<Change>,
    pub watermark: Timestamp,
    /// Incarnations the sender has fenced (those dying and the dead it remembers).
    pub fenced: Vec<Peer>,
    /// The highest batch of each peer that any batch up to `seq` had to be applied after: a
    /// snapshot may show a carry already released, and the data it covered is covered at the
    /// receiver only once these are applied there.
    pub after: Vec<(Peer, Seq)>,
    /// The incarnations the sender knows and has not fenced: it may still take data over from
    /// them, so the receiver must know them too (they may have died before it started).
    pub live: Vec<Peer>,
}

/// What one participant sends another over the fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Message {
    Snapshot(Snapshot),
    Batch(Batch),
    /// The sender, about to open its door, asks the receiver to hold its ts_min where it is
    /// until that door is in its view: the round its batch `after` began (docs/PROTOCOL.md,
    /// "Doors"). Answered by `Paused`.
    Pause {
        after: Seq,
    },
    /// The receiver of a `Pause` holds its ts_min at or below `ts_min` for round `after`.
    Paused {
        after: Seq,
        ts_min: Timestamp,
    },
    /// The sender's door of round `after` opened in its batch `seq`: the receiver's pause ends
    /// once that batch's claims are applied there.
    Opened {
        after: Seq,
        seq: Seq,
    },
}

/// A message to send, and to whom.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Transmit {
    pub to: Vec<Peer>,
    pub message: Message,
}

impl Message {
    /// The participants its sender says it fenced.
    pub fn fenced(&self) -> &[Peer] {
        match self {
            Message::Snapshot(s) => &s.fenced,
            Message::Batch(b) => &b.fenced,
            Message::Pause { .. } | Message::Paused { .. } | Message::Opened { .. } => &[],
        }
    }

    /// Checks what can be checked without state: sizes, timestamps, sites, deltas.
    pub fn validate(&self, limits: &MeshLimits) -> Result<(), MeshRefusal> {
        match self {
            Message::Snapshot(s) => {
                if s.seq == Seq::MAX {
                    return Err(MeshRefusal::InvalidChange { reason: "sequence numbers stay below u64::MAX" });
                }
                bounded("snapshot claims", s.claims.len(), limits.contribution_entries_max)?;
                let markers = s.fenced.len() + s.after.len() + s.live.len();
                bounded("snapshot markers", markers, limits.batch_markers_max)?;
                valid_ts(s.watermark)?;
                for change in &s.claims {
                    valid_change(change)?;
                    if change.delta < 0 {
                        return Err(MeshRefusal::InvalidChange { reason: "a snapshot holds only positive counts" });
                    }
                }
                Ok(())
            }
            Message::Batch(b) => {
                if b.seq == 0 {
                    return Err(MeshRefusal::InvalidChange { reason: "batch sequence numbers start at 1" });
                }
                if b.seq == Seq::MAX {
                    return Err(MeshRefusal::InvalidChange { reason: "sequence numbers stay below u64::MAX" });
                }
                bounded("batch changes", b.changes.len(), limits.batch_changes_max)?;
                let markers = b.took.len() + b.declined.len() + b.fenced.len() + b.after.len();
                bounded("batch markers", markers, limits.batch_markers_max)?;
                valid_ts(b.watermark)?;
                b.changes.iter().try_for_each(valid_change)
            }
            Message::Pause { after } => valid_seq(*after),
            Message::Paused { after, ts_min } => {
                valid_seq(*after)?;
                valid_ts(*ts_min)
            }
            Message::Opened { after, seq } => {
                valid_seq(*after)?;
                valid_seq(*seq)?;
                if seq <= after {
                    return Err(MeshRefusal::InvalidChange { reason: "a door opens in a batch after its round began" });
                }
                Ok(())
            }
        }
    }
}

fn valid_seq(seq: Seq) -> Result<(), MeshRefusal> {
    if seq == Seq::MAX {
        return Err(MeshRefusal::InvalidChange { reason: "sequence numbers stay below u64::MAX" });
    }
    Ok(())
}

fn bounded(what: &'static str, len: usize, max: usize) -> Result<(), MeshRefusal> {
    if len > max {
        return Err(MeshRefusal::Oversized { what, len, max });
    }
    Ok(())
}

fn valid_ts(ts: Timestamp) -> Result<(), MeshRefusal> {
    if !(0..=INFINITY).contains(&ts) {
        return Err(MeshRefusal::InvalidTimestamp { ts });
    }
    Ok(())
}

fn valid_change(change: &Change) -> Result<(), MeshRefusal> {
    valid_ts(change.ts)?;
    if change.delta == 0 {
        return Err(MeshRefusal::InvalidChange { reason: "a change of zero" });
    }
    match change.site {
        Site::Local(Location::Watermark) => {
            Err(MeshRefusal::InvalidChange { reason: "the watermark travels as a field, not a claim" })
        }
        Site::Local(Location::Peer(_)) => {
            Err(MeshRefusal::InvalidChange { reason: "peer locations are a node's mirror, never sent" })
        }
        _ => Ok(()),
    }
}
