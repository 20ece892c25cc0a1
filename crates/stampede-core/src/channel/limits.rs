//! What a channel is configured with: its bounds ([`Limits`], checked on put; queues share them)
//! and its retention policy ([`Retention`]: when an item above ts_min may be reclaimed).

use crate::error::{Error, Result};
use crate::time::Timestamp;

/// Bounds of a channel, checked on put. `None` means unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most items stored at once.
    pub capacity: Option<usize>,
    /// Most payload bytes stored at once.
    pub bytes_max: Option<usize>,
}

impl Limits {
    /// No bound at all.
    pub fn unbounded() -> Limits {
        Limits::default()
    }

    /// At most `capacity` items.
    pub fn items(capacity: usize) -> Limits {
        Limits { capacity: Some(capacity), bytes_max: None }
    }

    /// Adds a bound of `bytes_max` payload bytes.
    pub fn with_bytes(self, bytes_max: usize) -> Limits {
        Limits { bytes_max: Some(bytes_max), ..self }
    }

    /// Bounds given as 64-bit counts (an [`Op`](crate::Op)'s); `None` when one does not fit this
    /// machine's `usize`.
    pub fn from_counts(capacity: Option<u64>, bytes_max: Option<u64>) -> Option<Limits> {
        let convert = |n: Option<u64>| n.map(usize::try_from).transpose();
        Some(Limits { capacity: convert(capacity).ok()?, bytes_max: convert(bytes_max).ok()? })
    }

    /// Refuses bounds nothing could ever fit in (`capacity` or `bytes_max` of 0): every put
    /// would fail. `op` and `name` are the creation's, for the error.
    pub fn check(&self, op: &'static str, name: &str) -> Result<()> {
        let zero = match (self.capacity, self.bytes_max) {
            (Some(0), _) => "capacity",
            (_, Some(0)) => "max_bytes",
            _ => return Ok(()),
        };
        Err(Error::InvalidArgument {
            op,
            name: name.to_owned(),
            reason: format!("{zero}=0 would refuse every item; give a positive bound, or None for unbounded"),
        })
    }

    /// Fails `Full { can_never_fit: true }` when an item of `payload_bytes` at `ts` could never
    /// fit in container `name`, however much is reclaimed: check this before copying a payload.
    pub fn check_fits(&self, name: &str, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        match self.bytes_max {
            Some(bytes_max) if payload_bytes > bytes_max => Err(Error::Full {
                name: name.to_owned(),
                ts,
                reason: format!("the item's {payload_bytes} bytes exceed max_bytes={bytes_max}; it can never fit"),
                can_never_fit: true,
            }),
            _ => Ok(()),
        }
    }

    /// Fails `Full` when an item of `len` bytes at `ts` does not fit next to `items`/`bytes`
    /// already stored in container `name`; `can_never_fit` when no reclamation could make room.
    pub fn check_room(&self, name: &str, ts: Timestamp, items: usize, bytes: usize, len: usize) -> Result<()> {
        self.check_fits(name, ts, len)?;
        let full = |reason: String| Error::Full { name: name.to_owned(), ts, reason, can_never_fit: false };
        if let Some(bytes_max) = self.bytes_max {
            if bytes.saturating_add(len) > bytes_max {
                return Err(full(format!("{bytes} of max_bytes={bytes_max} bytes in use, the item needs {len}")));
            }
        }
        match self.capacity {
            Some(capacity) if items >= capacity => Err(full(format!("holds capacity={capacity} items"))),
            _ => Ok(()),
        }
    }
}

/// When a channel may reclaim an item above ts_min (docs/CORRELATION.md,
/// "Demand feedback and the current-readers policy").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Retention {
    /// Late joiners may read the past: an item lives until ts_min passes it (or its reference
    /// count is reached).
    #[default]
    History,
    /// Only current readers count: an item is reclaimed as soon as every input connection
    /// attached now has consumed it (at once if none is attached). A late joiner sees only what
    /// is still present.
    CurrentReaders,
}
