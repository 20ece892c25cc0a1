//! The disk tier's side of a channel (docs/RECORDING.md, "The disk tier: history beyond memory"):
//! which items' payloads are still in memory, the oldest of them handed to the driver to write out,
//! their bytes swapped for the disk's copy, and items recovered from disk put back when the channel
//! is created. Where an item's bytes live changes nothing else.

use crate::channel::{ChannelState, Stored};
use crate::error::{Error, Result};
use crate::item::{Item, Payload};
use crate::time::{is_item_ts, Timestamp};

impl ChannelState {
    /// Keeps track of which items are in memory, for a disk tier: every item put from now on is
    /// in memory until [`moved_to_disk`](Self::moved_to_disk).
    pub fn with_disk_tier(mut self) -> ChannelState {
        self.in_memory = Some(self.items.keys().copied().collect());
        self
    }

    /// With a disk tier, the oldest items whose payload is in memory beyond the newest `keep`
    /// of them, in timestamp order: what the driver writes to disk next. Empty without a tier.
    pub fn spill_candidates(&self, keep: usize) -> Vec<Item> {
        let Some(in_memory) = &self.in_memory else { return Vec::new() };
        let excess = in_memory.len().saturating_sub(keep);
        in_memory.iter().take(excess).map(|&ts| Item { ts, payload: self.items[&ts].payload.clone() }).collect()
    }

    /// Swaps the in-memory bytes of the item at `ts` for `on_disk`, the same bytes read from the
    /// disk tier. Nothing changes if the item was reclaimed meanwhile or is not in memory.
    pub fn moved_to_disk(&mut self, ts: Timestamp, on_disk: bytes::Bytes) {
        let Some(in_memory) = self.in_memory.as_mut() else { return };
        let Some(stored) = self.items.get_mut(&ts) else { return };
        if !in_memory.remove(&ts) {
            return;
        }
        assert_eq!(stored.payload.data.len(), on_disk.len(), "\"{}\" ts={ts}: the disk copy differs", self.name);
        debug_assert!(stored.payload.data == on_disk, "\"{}\" ts={ts}: the disk copy differs", self.name);
        stored.payload.data = on_disk;
    }

    /// Puts back an item recovered from the disk tier when the channel is created (before any
    /// connection attaches, so no connection holds it yet); the driver raises the watermark as
    /// for a put. A timestamp already present is `DuplicateTimestamp`.
    pub fn restore(&mut self, ts: Timestamp, payload: Payload) -> Result<()> {
        self.check_open()?;
        if !is_item_ts(ts) {
            return Err(Error::InvalidTimestamp { op: "restore", name: self.name.to_string(), ts });
        }
        if !(self.inputs.is_empty() && self.outputs.is_empty()) {
            return Err(Error::InvalidArgument {
                op: "restore",
                name: self.name.to_string(),
                reason: "items are restored before any connection attaches".into(),
            });
        }
        if self.items.contains_key(&ts) {
            return Err(Error::DuplicateTimestamp { name: self.name.to_string(), ts });
        }
        self.live_bytes += payload.len();
        self.items.insert(ts, Stored { payload, refs_left: None, holders: 0 });
        Ok(())
    }
}
