//! A channel's disk tier (docs/RECORDING.md, "The disk tier: history beyond memory"): history
//! beyond memory, striped in extents over several directories (one per disk), read back without
//! copying.
//!
//! Guarantees:
//! - **Transparent.** An item moved to disk keeps its timestamp, codec, bytes and item states;
//!   `get`, `get_range` and `item.array()` hand out a view of the file's mapping (no copy; the
//!   page cache holds it, not the process heap). GC is unchanged: ts_min, reference counts and
//!   retention reclaim items on disk as in memory, and an extent is deleted once every item in it
//!   is reclaimed.
//! - **Acknowledged means durable.** A batch of items is written and `fdatasync`ed before any of
//!   them is swapped for its disk copy; a crash afterwards loses none of them: creating the
//!   channel again with the same directories restores them. The newest
//!   `memory_items` items are in memory only.
//! - **Errors lose nothing.** A full disk, a missing or unwritable directory or another runtime
//!   holding the directories is [`Error::Storage`] naming the directory and the OS error; what the
//!   channel held stays held, in memory.
//! - **Reclaimed stays reclaimed.** A reclaimed item's record is marked dead (best effort,
//!   synced with the next batch written), so recovery skips it.
//!
//! Layout: `store.rs` (extent files, striping, recovery) and `record.rs` (the bytes of one item).
//! GC never waits for a put's disk I/O: a reclaimed item's place is freed by the reclaiming
//! call when the store is free (a one-byte write, perhaps an unlink), else queued for the put
//! holding it, which frees it before it lets go (`Held`).

mod record;
mod store;

use std::path::PathBuf;

use stampede_core::{Error, Item, Result, Timestamp};

use crate::sync::{Mutex, MutexGuard};

#[doc(hidden)]
pub use record::{decode_records, encode as encode_record, Record, HEADER_BYTES};
pub(crate) use store::Store;

/// How a channel keeps history beyond memory ([`crate::ChannelOptions::disk`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskTier {
    /// One directory per disk; extents are striped over them in turn. Each must exist.
    pub dirs: Vec<PathBuf>,
    /// Size of each extent file (the unit of allocation, striping and deletion).
    pub extent_bytes: u64,
    /// How many of the newest items stay in memory; older ones move to disk.
    pub memory_items: usize,
}

impl DiskTier {
    /// Default extent size: 64 MiB, as GigaView's extents were large sequential runs.
    pub const EXTENT_BYTES_DEFAULT: u64 = 64 << 20;
    /// Smallest extent size accepted.
    pub const EXTENT_BYTES_MIN: u64 = 64 << 10;
    /// Largest extent size accepted.
    pub const EXTENT_BYTES_MAX: u64 = 1 << 40;
    /// Default number of newest items kept in memory.
    pub const MEMORY_ITEMS_DEFAULT: usize = 16;
    /// Most directories a tier stripes over.
    pub const DIRS_MAX: usize = 64;

    /// A tier over `dirs` with the default extent size and memory horizon.
    pub fn new(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> DiskTier {
        DiskTier {
            dirs: dirs.into_iter().map(Into::into).collect(),
            extent_bytes: DiskTier::EXTENT_BYTES_DEFAULT,
            memory_items: DiskTier::MEMORY_ITEMS_DEFAULT,
        }
    }

    /// Refuses settings outside the documented ranges (`InvalidArgument`).
    pub(crate) fn check(&self, op: &'static str, name: &str) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidArgument { op, name: name.to_owned(), reason });
        if self.dirs.is_empty() || self.dirs.len() > DiskTier::DIRS_MAX {
            return invalid(format!(
                "a disk tier needs 1 to DIRS_MAX={} directories, got {}",
                DiskTier::DIRS_MAX,
                self.dirs.len()
            ));
        }
        if !(DiskTier::EXTENT_BYTES_MIN..=DiskTier::EXTENT_BYTES_MAX).contains(&self.extent_bytes) {
            return invalid(format!(
                "extent_bytes={} is outside {}..={}",
                self.extent_bytes,
                DiskTier::EXTENT_BYTES_MIN,
                DiskTier::EXTENT_BYTES_MAX
            ));
        }
        if self.memory_items == 0 {
            return invalid("memory_items=0: at least the newest item stays in memory; give 1 or more".into());
        }
        Ok(())
    }
}

/// What a channel's disk tier holds now ([`crate::Channel::disk_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Items whose bytes are on disk.
    pub items: usize,
    /// Their payload bytes.
    pub bytes: usize,
    /// Extent files in use.
    pub extents: usize,
    /// Items written so far (recovered ones not counted).
    pub written: u64,
    /// Items recovered from the directories when the channel was created.
    pub recovered: usize,
}

/// A channel's disk tier as the driver holds it: the store, and the timestamps reclaimed and not
/// yet freed.
pub(crate) struct Tier {
    store: Mutex<Store>,
    /// Reclaimed timestamps whose places are not freed yet: GC queues them here, under a lock
    /// never held across I/O, so reclaiming never waits for a put's disk I/O.
    reclaimed: Mutex<Vec<Timestamp>>,
}

impl Tier {
    pub(crate) fn new(store: Store) -> Tier {
        Tier { store: Mutex::new(store), reclaimed: Mutex::new(Vec::new()) }
    }

    /// The store, with the places of every item reclaimed so far freed; those queued while it
    /// is held are freed when it is let go.
    pub(crate) fn lock(&self) -> Held<'_> {
        Held::new(self, self.store.lock())
    }

    /// Queues the places of reclaimed items to be freed, and frees them now unless the store
    /// is held (a put moving items to disk): its holder frees them when it lets go.
    pub(crate) fn reclaimed(&self, items: &[Item]) {
        self.reclaimed.lock().extend(items.iter().map(|item| item.ts));
        if let Some(store) = self.store.try_lock() {
            drop(Held::new(self, store));
        }
    }

    fn take_reclaimed(&self) -> Vec<Timestamp> {
        std::mem::take(&mut *self.reclaimed.lock())
    }
}

/// The store, held. Letting go frees what was queued meanwhile, and looks again after unlocking:
/// a reclaim queued while the store was held (whose own attempt to free it failed) is freed by
/// whoever holds the store last, so no queued item waits for a later caller.
pub(crate) struct Held<'a> {
    tier: &'a Tier,
    store: Option<MutexGuard<'a, Store>>,
}

impl<'a> Held<'a> {
    fn new(tier: &'a Tier, mut store: MutexGuard<'a, Store>) -> Held<'a> {
        store.forget(&tier.take_reclaimed());
        Held { tier, store: Some(store) }
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("held until dropped")
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        while let Some(mut store) = self.store.take() {
            store.forget(&self.tier.take_reclaimed());
            drop(store);
            // A reclaim queued after the line above failed to take the store, so it is ours to
            // free: take the store again unless someone else holds it (they will free it).
            if !self.tier.reclaimed.lock().is_empty() {
                self.store = self.tier.store.try_lock();
            }
        }
    }
}
