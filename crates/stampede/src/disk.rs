//! A channel's disk tier (SPEC §10): history beyond memory, striped in extents over several
//! directories (one per disk), read back without copying.
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
//!
//! Layout: extents are files `<dir>/<channel>/<seq>.extent` (a `/` in the channel name becomes
//! `%`, which names cannot hold), the `seq`-th on `dirs[seq % dirs.len()]`, preallocated to
//! `extent_bytes` (an item larger than that gets an extent of its own size) and mapped once.
//! A record is a [`HEADER_BYTES`] header (magic, CRC32, timestamp, length, codec name length),
//! the codec name, then the payload at a [`ALIGN`]-byte boundary, so arrays read in place stay
//! aligned. Each channel directory holds a `LOCK` file, `flock`ed while a runtime uses it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use stampede_core::{Codec, Error, Item, Payload, Result, Timestamp};

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

/// Alignment of records and payloads in an extent.
pub const ALIGN: usize = 64;
/// Bytes of a record's header: magic (4), CRC32 (4), timestamp (8), payload length (8), codec
/// name length (2), reserved (6).
pub const HEADER_BYTES: usize = 32;
const MAGIC: &[u8; 4] = b"STX1";
/// Longest codec name a record holds.
const CODEC_BYTES_MAX: usize = 1024;

/// One extent file and its mapping.
struct Extent {
    seq: u64,
    file: File,
    /// The whole file, mapped read-only; items are slices of it.
    mapped: Bytes,
    /// Bytes written so far (the next record's offset).
    written: usize,
}

/// A channel's extents: where each item on disk is, and what may be deleted.
pub(crate) struct Store {
    name: String,
    tier: DiskTier,
    /// `<dir>/<channel>` for each directory, in stripe order.
    dirs: Vec<PathBuf>,
    /// The `LOCK` files, `flock`ed while this store lives.
    locks: Vec<File>,
    /// The extent being appended to.
    current: Option<Extent>,
    next_seq: u64,
    /// Items on disk per extent (`seq`), and its path; an extent other than `current` whose count
    /// reaches zero is deleted.
    live: HashMap<u64, (usize, PathBuf)>,
    /// Extent and length of each item on disk.
    located: HashMap<Timestamp, (u64, usize)>,
    bytes: usize,
    written: u64,
    recovered: usize,
}

impl Store {
    /// Opens the tier of channel `name`: creates `<dir>/<channel>` in each directory, locks it,
    /// and reads back the items of the extents found there (records up to the first bad one in
    /// each), returned in timestamp order for the channel to restore.
    pub(crate) fn open(name: &str, tier: &DiskTier) -> Result<(Store, Vec<Item>)> {
        let storage = |dir: &Path, what: &str, e: io::Error| storage_error("create_channel", name, dir, what, e);
        let escaped = name.replace('/', "%");
        let mut dirs = Vec::with_capacity(tier.dirs.len());
        let mut locks = Vec::with_capacity(tier.dirs.len());
        if let Some(dir) = tier.dirs.iter().find(|dir| !dir.is_dir()) {
            let e = io::Error::new(io::ErrorKind::NotFound, "not a directory; create it or give another");
            return Err(storage(dir, "open the disk tier directory", e));
        }
        for dir in &tier.dirs {
            let channel_dir = dir.join(&escaped);
            std::fs::create_dir_all(&channel_dir).map_err(|e| storage(&channel_dir, "create", e))?;
            locks.push(lock(&channel_dir).map_err(|e| storage(&channel_dir, "lock", e))?);
            dirs.push(channel_dir);
        }
        let mut store = Store {
            name: name.to_owned(),
            tier: tier.clone(),
            dirs,
            locks,
            current: None,
            next_seq: 0,
            live: HashMap::new(),
            located: HashMap::new(),
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
    /// for the in-memory ones. On error nothing is returned and the items stay where they are.
    pub(crate) fn write(&mut self, items: &[Item]) -> Result<Vec<(Timestamp, Bytes)>> {
        let mut placed = Vec::with_capacity(items.len());
        if let Err(e) = self.append(items, &mut placed).and_then(|()| self.sync_current()) {
            // Their records stay in the extents as garbage: nothing points at them.
            for (_, seq, _) in &placed {
                if let Some((count, _)) = self.live.get_mut(seq) {
                    *count -= 1;
                }
            }
            return Err(e);
        }
        let mut on_disk = Vec::with_capacity(placed.len());
        for (ts, seq, data) in placed {
            self.located.insert(ts, (seq, data.len()));
            self.bytes += data.len();
            self.written += 1;
            on_disk.push((ts, data));
        }
        Ok(on_disk)
    }

    /// Writes a record per item, rotating extents as they fill; each placed record counts as
    /// live in its extent at once, so a rotation in the same batch does not delete it.
    fn append(&mut self, items: &[Item], placed: &mut Vec<(Timestamp, u64, Bytes)>) -> Result<()> {
        for item in items {
            let codec = item.payload.codec.name().as_bytes();
            if codec.len() > CODEC_BYTES_MAX {
                return Err(Error::Storage {
                    op: "put",
                    name: self.name.clone(),
                    reason: format!("codec name of {} bytes exceeds CODEC_BYTES_MAX={CODEC_BYTES_MAX}", codec.len()),
                });
            }
            let (payload_at, record_bytes) = record_layout(codec.len(), item.payload.len());
            let room = self.current.as_ref().is_some_and(|e| e.written + record_bytes <= e.mapped.len());
            if !room {
                self.rotate(record_bytes)?;
            }
            let record = encode_record(item.ts, codec, &item.payload.data, payload_at, record_bytes);
            let extent = self.current.as_mut().expect("rotate opened an extent");
            let (seq, at) = (extent.seq, extent.written);
            if let Err(e) = extent.file.write_all_at(&record, at as u64) {
                return Err(self.io_error("write", seq, e));
            }
            extent.written += record_bytes;
            let data = extent.mapped.slice(at + payload_at..at + payload_at + item.payload.len());
            self.live.get_mut(&seq).expect("the extent was opened").0 += 1;
            placed.push((item.ts, seq, data));
        }
        Ok(())
    }

    /// The item at `ts` is gone (reclaimed, or never swapped in): frees its place, deleting its
    /// extent once nothing in it is live. Idempotent; a no-op for items not on disk.
    pub(crate) fn forget(&mut self, ts: Timestamp) {
        let Some((seq, len)) = self.located.remove(&ts) else { return };
        self.bytes -= len;
        let Some((count, _)) = self.live.get_mut(&seq) else { return };
        *count -= 1;
        let is_current = self.current.as_ref().is_some_and(|e| e.seq == seq);
        if *count == 0 && !is_current {
            let (_, path) = self.live.remove(&seq).expect("present");
            // Deleting is reclaiming disk space only: a failure leaves a file recovery would read
            // back as history, never a lost item, so it is not an error of the reclaiming call.
            let _ = std::fs::remove_file(path);
        }
    }

    /// Lets go of the directories' locks and the extent being written: the channel was
    /// destroyed (everything it held was reclaimed first), so another may use them.
    pub(crate) fn release(&mut self) {
        self.current = None;
        self.live.retain(|_, (count, path)| {
            if *count == 0 {
                let _ = std::fs::remove_file(path);
            }
            *count > 0
        });
        self.locks.clear();
    }

    /// What the tier holds now.
    pub(crate) fn stats(&self) -> DiskStats {
        DiskStats {
            items: self.located.len(),
            bytes: self.bytes,
            extents: self.live.len(),
            written: self.written,
            recovered: self.recovered,
        }
    }

    /// Reads back every extent in the directories, in `seq` order.
    fn recover(&mut self) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        for dir in &self.dirs {
            let entries =
                std::fs::read_dir(dir).map_err(|e| storage_error("create_channel", &self.name, dir, "list", e))?;
            for entry in entries.flatten() {
                let path = entry.path();
                let seq = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".extent"))
                    .and_then(|n| n.parse::<u64>().ok());
                if let Some(seq) = seq {
                    found.push((seq, path));
                }
            }
        }
        found.sort();
        let mut items: Vec<Item> = Vec::new();
        for (seq, path) in found {
            self.next_seq = self.next_seq.max(seq + 1);
            let file = File::open(&path).map_err(|e| storage_error("create_channel", &self.name, &path, "open", e))?;
            let mapped = map(&file).map_err(|e| storage_error("create_channel", &self.name, &path, "map", e))?;
            let mut count = 0;
            for (ts, codec, range) in decode_records(&mapped) {
                if self.located.contains_key(&ts) {
                    continue;
                }
                let data = mapped.slice(range);
                self.located.insert(ts, (seq, data.len()));
                self.bytes += data.len();
                items.push(Item { ts, payload: Payload { data, codec } });
                count += 1;
            }
            if count == 0 {
                let _ = std::fs::remove_file(&path);
            } else {
                self.live.insert(seq, (count, path));
            }
        }
        items.sort_by_key(|item| item.ts);
        self.recovered = items.len();
        Ok(items)
    }

    /// Syncs and seals the current extent (deleting it if nothing in it is live) and opens the
    /// next one, on the next directory, with room for at least `record_bytes`.
    fn rotate(&mut self, record_bytes: usize) -> Result<()> {
        self.sync_current()?;
        if let Some(sealed) = self.current.take() {
            if self.live.get(&sealed.seq).is_none_or(|(count, _)| *count == 0) {
                if let Some((_, path)) = self.live.remove(&sealed.seq) {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        let seq = self.next_seq;
        let dir = &self.dirs[(seq % self.dirs.len() as u64) as usize];
        let path = dir.join(format!("{seq:016}.extent"));
        let size = self.tier.extent_bytes.max(record_bytes as u64);
        let fail = |what: &str, e: io::Error| storage_error("put", &self.name, &path, what, e);
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| fail("create", e))?;
        let opened = allocate(&file, size).map_err(|e| fail("allocate", e)).and_then(|()| {
            // The new file's directory entry must be durable too, or a crash could lose the
            // extent whose records were synced.
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| fail("sync the directory of", e))?;
            map(&file).map_err(|e| fail("map", e))
        });
        let mapped = match opened {
            Ok(mapped) => mapped,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        self.next_seq += 1;
        self.live.insert(seq, (0, path));
        self.current = Some(Extent { seq, file, mapped, written: 0 });
        Ok(())
    }

    fn sync_current(&self) -> Result<()> {
        let Some(extent) = &self.current else { return Ok(()) };
        extent.file.sync_data().map_err(|e| self.io_error("sync", extent.seq, e))
    }

    fn io_error(&self, what: &str, seq: u64, e: io::Error) -> Error {
        let path = self.live.get(&seq).map_or_else(|| self.dirs[0].clone(), |(_, path)| path.clone());
        storage_error("put", &self.name, &path, what, e)
    }
}

/// `Error::Storage` for `op` on channel `name`, saying what failed on `path` and what to do.
fn storage_error(op: &'static str, name: &str, path: &Path, what: &str, e: io::Error) -> Error {
    let hint = match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => "; free space or add a directory on another disk",
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => "; make it writable or give another",
        Some(libc::EWOULDBLOCK) => "; another runtime uses this channel's extents",
        _ => "",
    };
    Error::Storage { op, name: name.to_owned(), reason: format!("could not {what} {}: {e}{hint}", path.display()) }
}

/// Where a record's payload starts, and the record's whole size, both multiples of [`ALIGN`].
fn record_layout(codec_bytes: usize, payload_bytes: usize) -> (usize, usize) {
    let payload_at = (HEADER_BYTES + codec_bytes).next_multiple_of(ALIGN);
    (payload_at, (payload_at + payload_bytes).next_multiple_of(ALIGN))
}

/// One record, padded to `record_bytes`.
fn encode_record(ts: Timestamp, codec: &[u8], data: &[u8], payload_at: usize, record_bytes: usize) -> Vec<u8> {
    let mut record = vec![0u8; record_bytes];
    record[0..4].copy_from_slice(MAGIC);
    record[8..16].copy_from_slice(&ts.to_le_bytes());
    record[16..24].copy_from_slice(&(data.len() as u64).to_le_bytes());
    record[24..26].copy_from_slice(&(codec.len() as u16).to_le_bytes());
    record[HEADER_BYTES..HEADER_BYTES + codec.len()].copy_from_slice(codec);
    record[payload_at..payload_at + data.len()].copy_from_slice(data);
    let crc = checksum(&record[8..HEADER_BYTES], codec, data);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
    record
}

fn checksum(header: &[u8], codec: &[u8], data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header);
    hasher.update(codec);
    hasher.update(data);
    hasher.finalize()
}

/// The records of an extent, up to the first one that is incomplete, corrupt or zero (the
/// preallocated rest): timestamp, codec and the payload's range. Safe on any bytes.
pub fn decode_records(extent: &[u8]) -> Vec<(Timestamp, Codec, std::ops::Range<usize>)> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while let Some(header) = extent.get(at..at + HEADER_BYTES) {
        if &header[0..4] != MAGIC {
            break;
        }
        let word = |range: std::ops::Range<usize>| {
            let mut bytes = [0u8; 8];
            bytes[..range.len()].copy_from_slice(&header[range]);
            u64::from_le_bytes(bytes)
        };
        let (crc, ts, len, codec_len) = (word(4..8) as u32, word(8..16) as i64, word(16..24), word(24..26) as usize);
        let Ok(len) = usize::try_from(len) else { break };
        if codec_len > CODEC_BYTES_MAX || len > extent.len() {
            break;
        }
        let (payload_at, record_bytes) = record_layout(codec_len, len);
        let Some(record) = extent.get(at..at.saturating_add(record_bytes)) else { break };
        let codec = &record[HEADER_BYTES..HEADER_BYTES + codec_len];
        let data = &record[payload_at..payload_at + len];
        let Ok(codec_name) = std::str::from_utf8(codec) else { break };
        if checksum(&header[8..HEADER_BYTES], codec, data) != crc || !stampede_core::time::is_item_ts(ts) {
            break;
        }
        records.push((ts, Codec::from_name(codec_name), at + payload_at..at + payload_at + len));
        at += record_bytes;
    }
    records
}

/// Maps `file` read-only and shared: writes through the file are visible in the mapping.
fn map(file: &File) -> io::Result<Bytes> {
    // SAFETY: the mapping is of an extent file this store created or recovered under the
    // channel directory's lock; records are only appended past what is mapped into items, and
    // the file is never truncated while mapped (deleting unlinks it, the mapping stays valid).
    let mapping = unsafe { memmap2::Mmap::map(file)? };
    Ok(Bytes::from_owner(mapping))
}

/// Reserves `size` bytes for `file` on its disk, so a full disk fails here, before any item
/// depends on the extent.
fn allocate(file: &File, size: u64) -> io::Result<()> {
    let size = libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: a valid open file descriptor; posix_fallocate touches no memory of ours.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Opens and exclusively `flock`s `<dir>/LOCK`, without waiting.
fn lock(dir: &Path) -> io::Result<File> {
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
    // SAFETY: a valid open file descriptor; flock touches no memory of ours.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}
