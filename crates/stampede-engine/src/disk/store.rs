//! A channel's extents: files, striping, allocation, syncing, deletion and recovery.
//!
//! Extents are files `<dir>/<channel>/<seq>.extent` (`seq` in 16 digits; a `/` in the channel
//! name becomes `%`, which names cannot hold), the `seq`-th on `dirs[seq % dirs.len()]`,
//! preallocated to `extent_bytes` (an item larger than that gets an extent of its own size) and
//! mapped once; items on disk are slices of the mapping. Each channel directory holds a `LOCK`
//! file, `flock`ed while a runtime uses it.
//!
//! Invariants: every item on disk has a place (`located`) in an extent whose `live` count
//! includes it; an extent other than the one being written is deleted when its count reaches
//! zero. A record whose item is gone is marked dead when the store is next let go (see
//! `Held` in `disk/mod.rs`); a failed batch marks its records dead; a duplicate found at
//! recovery is marked dead. Extents are known by an id of this store (files in different
//! directories may carry the same number, after disks were combined).

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use stampede_core::{Error, Item, Payload, Result, Timestamp};

use super::record::{self, decode_records, DEAD, STATE_AT};
use super::{DiskStats, DiskTier};

/// Characters of an extent's sequence number in its file name.
const SEQ_DIGITS: usize = 16;

/// An extent file in use.
struct Extent {
    /// Items on disk in it.
    live: usize,
    path: PathBuf,
    /// Open for writing records and marking them dead.
    file: File,
}

/// The extent being appended to.
struct Current {
    /// Its id in `Store::extents`.
    id: u64,
    /// The whole file, mapped read-only; items are slices of it.
    mapped: Bytes,
    /// Bytes written so far (the next record's offset).
    written: usize,
}

/// Where an item on disk is.
#[derive(Clone, Copy)]
struct Place {
    /// Its extent's id.
    extent: u64,
    /// Where its record starts.
    at: usize,
    /// Its payload's length.
    len: usize,
}

/// A channel's extents: where each item on disk is, and what may be deleted.
pub(crate) struct Store {
    /// The channel's name, for errors.
    name: String,
    tier: DiskTier,
    /// `<dir>/<channel>` for each directory, in stripe order.
    dirs: Vec<PathBuf>,
    /// The `LOCK` files, `flock`ed while this store lives.
    locks: Vec<File>,
    current: Option<Current>,
    /// The number in the next new extent's file name.
    next_seq: u64,
    /// The id of the next extent opened or recovered.
    next_id: u64,
    extents: HashMap<u64, Extent>,
    located: HashMap<Timestamp, Place>,
    /// Extents with records marked dead since their last sync.
    unsynced: BTreeSet<u64>,
    /// Directories with extents deleted since their last sync.
    unsynced_dirs: BTreeSet<PathBuf>,
    /// Payload bytes on disk.
    bytes: usize,
    /// Items written so far.
    written: u64,
    /// Items recovered when the channel was created.
    recovered: usize,
}

impl Store {
    /// Opens the tier of channel `name`: creates `<dir>/<channel>` in each directory, locks it,
    /// and reads back the live records of the extents found there, returned in timestamp order
    /// for the channel to restore (or to [`forget`](Self::forget) if it cannot take them).
    pub(crate) fn open(name: &str, tier: &DiskTier) -> Result<(Store, Vec<Item>)> {
        let storage = |dir: &Path, what: &str, e: io::Error| storage_error("create_channel", name, dir, what, e);
        if let Some(dir) = tier.dirs.iter().find(|dir| !dir.is_dir()) {
            let e = io::Error::new(io::ErrorKind::NotFound, "not a directory; create it or give another");
            return Err(storage(dir, "open the disk tier directory", e));
        }
        let canonical: Vec<PathBuf> = tier.dirs.iter().map(|dir| dir.canonicalize().unwrap_or(dir.clone())).collect();
        if let Some(i) = (1..canonical.len()).find(|&i| canonical[..i].contains(&canonical[i])) {
            return Err(Error::InvalidArgument {
                op: "create_channel",
                name: name.to_owned(),
                reason: format!("{} names a directory given before; give each directory once", tier.dirs[i].display()),
            });
        }
        let escaped = name.replace('/', "%");
        let mut dirs = Vec::with_capacity(tier.dirs.len());
        let mut locks = Vec::with_capacity(tier.dirs.len());
        for dir in &tier.dirs {
            let channel_dir = dir.join(&escaped);
            let opened = std::fs::create_dir_all(&channel_dir)
                .map_err(|e| storage(&channel_dir, "create", e))
                // The channel directory's entry must be durable, or a crash could lose its extents.
                .and_then(|()| sync_dir(dir).map_err(|e| storage(dir, "sync", e)))
                .and_then(|()| lock(&channel_dir).map_err(|e| storage(&channel_dir, "lock", e)));
            match opened {
                Ok(lock) => locks.push(lock),
                Err(e) => {
                    // Leave no trace in the directories done so far (they hold nothing yet).
                    drop(locks);
                    dirs.iter().for_each(remove_channel_dir);
                    return Err(e);
                }
            }
            dirs.push(channel_dir);
        }
        let mut store = Store {
            name: name.to_owned(),
            tier: tier.clone(),
            dirs,
            locks,
            current: None,
            next_seq: 0,
            next_id: 0,
            extents: HashMap::new(),
            located: HashMap::new(),
            unsynced: BTreeSet::new(),
            unsynced_dirs: BTreeSet::new(),
            bytes: 0,
            written: 0,
            recovered: 0,
        };
        let items = store.recover()?;
        Ok((store, items))
    }

    /// How many in-memory items a put may leave besides its own: the memory horizon.
    pub(crate) fn keep(&self) -> usize {
        self.tier.memory_items - 1
    }

    /// Appends `items` to the extents and syncs them; returns each one's bytes on disk, to swap
    /// for the in-memory ones. On error nothing is returned, the items stay where they are, the
    /// records written are marked dead and the extent being written is abandoned (after a failed
    /// write or sync its pages may be gone, so nothing more is appended to it).
    pub(crate) fn write(&mut self, items: &[Item]) -> Result<Vec<(Timestamp, Bytes)>> {
        let mut placed = Vec::with_capacity(items.len());
        if let Err(e) = self.append(items, &mut placed).and_then(|()| self.sync()) {
            let abandoned = self.current.take();
            let places: Vec<Place> = placed.iter().map(|&(_, place, _)| place).collect();
            places.into_iter().for_each(|place| self.free(place));
            if let Some(abandoned) = abandoned.filter(|c| self.extents.get(&c.id).is_some_and(|e| e.live == 0)) {
                self.delete(abandoned.id);
            }
            return Err(e);
        }
        let mut on_disk = Vec::with_capacity(placed.len());
        for (ts, place, data) in placed {
            self.located.insert(ts, place);
            self.bytes += place.len;
            self.written += 1;
            on_disk.push((ts, data));
        }
        Ok(on_disk)
    }

    /// The items at `reclaimed` are gone: their records are marked dead (synced with the next
    /// batch written) and their places freed, deleting each extent with nothing live left. A
    /// no-op for items not on disk.
    pub(crate) fn forget(&mut self, reclaimed: &[Timestamp]) {
        for ts in reclaimed {
            if let Some(place) = self.located.remove(ts) {
                self.bytes -= place.len;
                self.free(place);
            }
        }
    }

    /// Lets go of the directories: the channel was destroyed, so everything it held is
    /// reclaimed (some reclaims may still be on their way to the queue: they find nothing), and
    /// its extents, `LOCK` files and directories are removed.
    pub(crate) fn release(&mut self) {
        self.current = None;
        self.located.clear();
        self.bytes = 0;
        self.unsynced.clear();
        for (_, extent) in self.extents.drain() {
            let _ = std::fs::remove_file(extent.path);
        }
        self.dirs.iter().for_each(remove_channel_dir);
        for dir in &self.tier.dirs {
            let _ = sync_dir(dir);
        }
        self.locks.clear();
    }

    /// What the tier holds now.
    pub(crate) fn stats(&self) -> DiskStats {
        DiskStats {
            items: self.located.len(),
            bytes: self.bytes,
            extents: self.extents.len(),
            written: self.written,
            recovered: self.recovered,
        }
    }

    /// Reads back every extent in the directories, in `seq` order; files not named like an
    /// extent, and anything that is not a regular file, are left alone.
    fn recover(&mut self) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        for dir in &self.dirs {
            let entries = std::fs::read_dir(dir).map_err(|e| self.error("create_channel", dir, "list", e))?;
            for entry in entries.flatten() {
                let seq = entry.file_name().to_str().and_then(extent_seq);
                if let Some(seq) = seq.filter(|_| entry.file_type().is_ok_and(|t| t.is_file())) {
                    found.push((seq, entry.path()));
                }
            }
        }
        found.sort();
        let mut items: Vec<Item> = Vec::new();
        for (seq, path) in found {
            self.next_seq = self.next_seq.max(seq + 1);
            let id = self.next_id;
            self.next_id += 1;
            let opened = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(&path);
            let file = opened.map_err(|e| self.error("create_channel", &path, "open", e))?;
            let mapped = map(&file).map_err(|e| self.error("create_channel", &path, "map", e))?;
            let mut live = 0;
            for record in decode_records(&mapped) {
                if self.located.contains_key(&record.ts) {
                    // Best effort, as every dead mark: a later recovery skips it either way.
                    let _ = file.write_all_at(&[DEAD], (record.at + STATE_AT) as u64);
                    continue;
                }
                let data = mapped.slice(record.payload);
                self.located.insert(record.ts, Place { extent: id, at: record.at, len: data.len() });
                self.bytes += data.len();
                items.push(Item { ts: record.ts, payload: Payload { data, codec: record.codec } });
                live += 1;
            }
            if live == 0 {
                let _ = std::fs::remove_file(&path);
            } else {
                self.extents.insert(id, Extent { live, path, file });
            }
        }
        items.sort_by_key(|item| item.ts);
        self.recovered = items.len();
        Ok(items)
    }

    /// Writes a record per item, rotating extents as they fill; each placed record counts as
    /// live in its extent at once, so a rotation in the same batch does not delete it.
    fn append(&mut self, items: &[Item], placed: &mut Vec<(Timestamp, Place, Bytes)>) -> Result<()> {
        for item in items {
            let (record, payload_at) =
                record::encode(item.ts, item.payload.codec.name().as_bytes(), &item.payload.data);
            if self.current.as_ref().is_none_or(|c| c.written + record.len() > c.mapped.len()) {
                self.rotate(record.len())?;
            }
            let current = self.current.as_mut().expect("rotate opened an extent");
            let (id, at) = (current.id, current.written);
            let extent = self.extents.get_mut(&id).expect("the current extent is in use");
            if let Err(e) = extent.file.write_all_at(&record, at as u64) {
                let path = extent.path.clone();
                return Err(self.error("put", &path, "write", e));
            }
            current.written += record.len();
            extent.live += 1;
            let data = current.mapped.slice(at + payload_at..at + payload_at + item.payload.len());
            placed.push((item.ts, Place { extent: id, at, len: data.len() }, data));
        }
        Ok(())
    }

    /// Syncs the extent being written (its records: an error fails the batch), and, best
    /// effort, the extents with records marked dead and the directories with extents deleted
    /// since their last sync.
    fn sync(&mut self) -> Result<()> {
        for id in std::mem::take(&mut self.unsynced) {
            if let Some(extent) = self.extents.get(&id) {
                let _ = extent.file.sync_data();
            }
        }
        for dir in std::mem::take(&mut self.unsynced_dirs) {
            let _ = sync_dir(&dir);
        }
        let Some(current) = &self.current else { return Ok(()) };
        let extent = &self.extents[&current.id];
        extent.file.sync_data().map_err(|e| self.error("put", &extent.path, "sync", e))
    }

    /// Syncs and seals the current extent (deleting it if nothing in it is live) and opens the
    /// next one, on the next directory, with room for at least `record_bytes`.
    fn rotate(&mut self, record_bytes: usize) -> Result<()> {
        self.sync()?;
        if let Some(sealed) = self.current.take() {
            if self.extents.get(&sealed.id).is_some_and(|extent| extent.live == 0) {
                self.delete(sealed.id);
            }
        }
        let seq = self.next_seq;
        let dir = &self.dirs[(seq % self.dirs.len() as u64) as usize];
        let path = dir.join(format!("{seq:0SEQ_DIGITS$}.extent"));
        let size = self.tier.extent_bytes.max(record_bytes as u64);
        let fail = |what: &str, e: io::Error| storage_error("put", &self.name, &path, what, e);
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| fail("create", e))?;
        let opened = crate::os::allocate(&file, size).map_err(|e| fail("allocate", e)).and_then(|()| {
            // The new file's directory entry must be durable too, or a crash could lose the
            // extent whose records were synced.
            sync_dir(dir).map_err(|e| fail("sync the directory of", e))?;
            map(&file).map_err(|e| fail("map", e))
        });
        let mapped = match opened {
            Ok(mapped) => mapped,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let id = self.next_id;
        (self.next_seq, self.next_id) = (seq + 1, id + 1);
        self.extents.insert(id, Extent { live: 0, path, file });
        self.current = Some(Current { id, mapped, written: 0 });
        Ok(())
    }

    /// One item fewer in `place`'s extent: its record is marked dead, and the extent deleted if
    /// nothing in it is live and it is not being written.
    fn free(&mut self, place: Place) {
        let Some(extent) = self.extents.get_mut(&place.extent) else {
            debug_assert!(false, "\"{}\": an item's extent {} is not in use", self.name, place.extent);
            return;
        };
        extent.live -= 1;
        // Best effort: a mark that does not reach the disk only lets recovery bring the item back.
        let _ = extent.file.write_all_at(&[DEAD], (place.at + STATE_AT) as u64);
        let writing = self.current.as_ref().is_some_and(|c| c.id == place.extent);
        if extent.live == 0 && !writing {
            self.delete(place.extent);
        } else {
            self.unsynced.insert(place.extent);
        }
    }

    /// Deletes an extent with nothing live; its directory is synced with the next batch, so a
    /// crash before then may bring back its file, whose dead marks were written.
    fn delete(&mut self, id: u64) {
        if let Some(extent) = self.extents.remove(&id) {
            // Deleting only returns disk space: a failure leaves a file of dead records.
            let _ = std::fs::remove_file(&extent.path);
            if let Some(dir) = extent.path.parent() {
                self.unsynced_dirs.insert(dir.to_owned());
            }
        }
        self.unsynced.remove(&id);
    }

    fn error(&self, op: &'static str, path: &Path, what: &str, e: io::Error) -> Error {
        storage_error(op, &self.name, path, what, e)
    }
}

/// The sequence number of an extent file's name: exactly [`SEQ_DIGITS`] digits and `.extent`.
fn extent_seq(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_suffix(".extent")?;
    (digits.len() == SEQ_DIGITS && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}

/// `Error::Storage` for `op` on channel `name`, saying what failed on `path` and what to do.
fn storage_error(op: &'static str, name: &str, path: &Path, what: &str, e: io::Error) -> Error {
    let hint = match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => "; free space or add a directory on another disk",
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => "; make it writable or give another",
        Some(libc::EWOULDBLOCK) => "; another runtime uses this channel's extents",
        Some(libc::ENOMEM) if what == "map" => "; too many mappings (vm.max_map_count): use larger extents",
        _ => "",
    };
    Error::Storage { op, name: name.to_owned(), reason: format!("could not {what} {}: {e}{hint}", path.display()) }
}

/// Maps `file` read-only and shared: writes through the file are visible in the mapping.
fn map(file: &File) -> io::Result<Bytes> {
    Ok(Bytes::from_owner(crate::os::map_extent(file)?))
}

/// Removes a channel directory's `LOCK` file and the directory if nothing else is in it.
fn remove_channel_dir(dir: &PathBuf) {
    let _ = std::fs::remove_file(dir.join("LOCK"));
    let _ = std::fs::remove_dir(dir);
}

/// Makes `dir`'s entries durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens and exclusively `flock`s `<dir>/LOCK`, without waiting.
fn lock(dir: &Path) -> io::Result<File> {
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
    crate::os::lock_exclusive(&file)?;
    Ok(file)
}
