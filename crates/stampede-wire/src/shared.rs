//! Shared memory for large payloads between processes on one host (docs/NODES.md, "The fabric"): a
//! payload of at least [`SHARED_BYTES_MIN`] travels on the direct Unix socket as a sealed memfd,
//! passed with the frame (`SCM_RIGHTS`), instead of as bytes. The producer writes it once; the node
//! and every getter map the same pages read-only, so a 6 MB frame is never copied on the way and a
//! `get` costs the same at any size.
//!
//! Guarantees:
//! - A segment is immutable once made or received: it must bear the seals that forbid writing,
//!   shrinking and growing it ([`SEALS`]), which no process can remove. A mapping can therefore
//!   never change under a reader nor fault (`SIGBUS`) past a truncated end, whoever sent it; a
//!   file descriptor without them — another kind of file, an unsealed memfd — is refused with
//!   the reason, never mapped.
//! - A payload made here or received is a [`Bytes`] over the mapping: cloning and slicing it
//!   shares the pages; the pages and the descriptor go when its last reference drops.
//! - A process keeps at most [`SEGMENTS_MAX`] segments' descriptors open at once. Past that a
//!   received segment is copied into memory and its descriptor closed, and no new one is made
//!   (the payload travels as bytes): shared memory never exhausts a process's file descriptors.
//! - [`descriptor`] finds the segment of a payload that is one (the whole of it), so that a
//!   node passes on the very segment a client put, and a client re-putting an item it got
//!   passes on the segment it received.

use std::collections::HashMap;
use std::fs::File;
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, LazyLock, Weak};

use bytes::Bytes;
use memmap2::Mmap;
use parking_lot::Mutex;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::reply::FRAME_LENGTH_BYTES;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

/// Smallest payload sent as a shared-memory segment on the direct Unix socket; smaller ones are
/// written into the socket. Measured (`docs/BENCHMARKS.md`, "remote"): a stream of frames moves
/// faster through the socket up to ~2 MB (a segment's fresh pages, mappings and unmappings cost
/// more than the socket's copies into warm buffers) and through segments at 6 MB, while a get
/// through a segment costs the same at any size; from 1 MiB on, the get's latency wins.
pub const SHARED_BYTES_MIN: usize = 1024 * 1024;

/// Most segments whose descriptors a process keeps open at once (a quarter of the usual soft
/// limit of 1 024 descriptors).
pub const SEGMENTS_MAX: usize = 256;

/// The seals a segment must bear: no write, no shrink, no grow, no seal removed or added.
pub const SEALS: SealFlags = SealFlags::WRITE.union(SealFlags::SHRINK).union(SealFlags::GROW).union(SealFlags::SEAL);

/// A mapped segment: the pages and the descriptor that names them to other processes.
struct Segment {
    map: Mmap,
    /// Held, not read: the descriptor lives as long as the pages (the registry's entry is weak).
    _descriptor: Arc<OwnedFd>,
}

impl AsRef<[u8]> for Segment {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // Before the pages are unmapped: no other segment can be mapped at this address while
        // the entry is there.
        SEGMENTS.lock().remove(&(self.map.as_ptr() as usize));
    }
}

/// The live segments of this process, by the address of their mapping: its length and its
/// descriptor.
type Registry = HashMap<usize, (usize, Weak<OwnedFd>)>;
static SEGMENTS: LazyLock<Mutex<Registry>> = LazyLock::new(Default::default);

/// A sealed segment holding `parts`, concatenated, as a payload; `None` when the process holds
/// [`SEGMENTS_MAX`] already or the system refuses one (the caller sends the bytes instead).
pub fn make(parts: &[&[u8]]) -> Option<Bytes> {
    if SEGMENTS.lock().len() >= SEGMENTS_MAX {
        return None;
    }
    let len: usize = parts.iter().map(|part| part.len()).sum();
    let descriptor = rustix::fs::memfd_create("stampede-item", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).ok()?;
    let mut file = File::from(descriptor);
    // The kernel copies the parts into the segment's pages: the one copy.
    file.set_len(len as u64).ok()?;
    for part in parts {
        file.write_all(part).ok()?;
    }
    rustix::fs::fcntl_add_seals(&file, SEALS).ok()?;
    map(OwnedFd::from(file), len).ok()
}

/// Maps the segment `descriptor` names, at most `len_max` bytes, as a payload, after checking
/// its seals. `Err`: why it is refused (the descriptor is closed). The crate's one `unsafe`
/// (mapping a file), allowed here alone.
#[allow(unsafe_code)]
pub fn map(descriptor: OwnedFd, len_max: usize) -> Result<Bytes, String> {
    let seals = rustix::fs::fcntl_get_seals(&descriptor)
        .map_err(|e| format!("the file descriptor passed is not a sealed memfd ({e})"))?;
    if !seals.contains(SEALS) {
        return Err(format!("the memfd passed is not sealed against writing, shrinking and growing ({seals:?})"));
    }
    let len = rustix::fs::fstat(&descriptor).map_err(|e| format!("the memfd passed cannot be read: {e}"))?.st_size;
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > len_max {
        return Err(format!("a shared payload of {len} bytes (at most {len_max})"));
    }
    if len == 0 {
        return Ok(Bytes::new());
    }
    let file = File::from(descriptor);
    // SAFETY: the seals checked above forbid anyone to write, shrink or grow the file for as long
    // as it exists, so the mapping is never changed under us and never faults past its end.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| format!("the memfd passed cannot be mapped: {e}"))?;
    debug_assert_eq!(map.len(), len);
    let mut segments = SEGMENTS.lock();
    if segments.len() >= SEGMENTS_MAX {
        // Keep the pages, not the descriptor.
        return Ok(Bytes::copy_from_slice(&map));
    }
    let descriptor = Arc::new(OwnedFd::from(file));
    segments.insert(map.as_ptr() as usize, (len, Arc::downgrade(&descriptor)));
    drop(segments);
    Ok(Bytes::from_owner(Segment { map, _descriptor: descriptor }))
}

/// The descriptor of the segment `payload` is, if it is one whole segment of this process.
pub fn descriptor(payload: &Bytes) -> Option<Arc<OwnedFd>> {
    if payload.len() < SHARED_BYTES_MIN {
        return None;
    }
    let segments = SEGMENTS.lock();
    let (len, descriptor) = segments.get(&(payload.as_ptr() as usize))?;
    (*len == payload.len()).then(|| descriptor.upgrade()).flatten()
}

/// Live segments of this process (for tests and statistics).
pub fn segments() -> usize {
    SEGMENTS.lock().len()
}

/// The segment to pass for `payload`, about to be sent on a Unix socket, and the payload it
/// holds: its own segment if it is one, else a new one copying it. `None`: too small to be
/// worth it, or no segment can be made (it is sent as bytes).
pub fn share(payload: &Bytes) -> Option<(Arc<OwnedFd>, Bytes)> {
    if payload.len() < SHARED_BYTES_MIN {
        return None;
    }
    if let Some(descriptor) = descriptor(payload) {
        return Some((descriptor, payload.clone()));
    }
    let segment = make(&[payload])?;
    Some((descriptor(&segment)?, segment))
}

/// Sends the start of `parts`, concatenated, on the Unix socket `socket` with `descriptor`, in
/// one `sendmsg`: how many bytes went (the descriptor went with them). The caller writes the
/// rest; a reader receives the descriptor with the first of these bytes.
pub fn send_with(socket: impl AsFd, parts: &[&[u8]], descriptor: BorrowedFd<'_>) -> std::io::Result<usize> {
    let slices: Vec<IoSlice<'_>> = parts.iter().map(|part| IoSlice::new(part)).collect();
    let passed = [descriptor];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let pushed = control.push(SendAncillaryMessage::ScmRights(&passed));
    debug_assert!(pushed, "the space holds one descriptor");
    loop {
        match rustix::net::sendmsg(&socket, &slices, &mut control, SendFlags::NOSIGNAL) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(sent) => return Ok(sent),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receives up to `buf.len()` bytes from the Unix socket `socket` with one `recvmsg`, and the
/// descriptor passed with them, if any: `(0, None)` at the end of the stream. More than one
/// descriptor is an error (the kernel closes those that did not fit; the others are closed
/// here).
pub fn receive_with(socket: impl AsFd, buf: &mut [u8]) -> std::io::Result<(usize, Option<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    loop {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received =
            match rustix::net::recvmsg(&socket, &mut [IoSliceMut::new(buf)], &mut control, RecvFlags::CMSG_CLOEXEC) {
                Ok(received) => received,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
        let mut descriptors = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(passed) = message {
                descriptors.extend(passed);
            }
        }
        if received.flags.contains(ReturnFlags::CTRUNC) || descriptors.len() > 1 {
            return Err(std::io::Error::other("more than one file descriptor passed with a frame"));
        }
        return Ok((received.bytes, descriptors.pop()));
    }
}

/// A frame's length prefix as it arrives from a Unix socket, in one piece or several, with the
/// segment passed with it: at most one, else the frame is refused.
#[derive(Default)]
pub struct Prefix {
    bytes: [u8; FRAME_LENGTH_BYTES],
    filled: usize,
    passed: Option<OwnedFd>,
}

impl Prefix {
    /// Where the next piece goes; empty once the prefix is whole.
    pub fn unfilled(&mut self) -> &mut [u8] {
        &mut self.bytes[self.filled..]
    }

    /// Takes what one [`receive_with`] into [`unfilled`](Self::unfilled) returned.
    pub fn received(&mut self, (bytes, descriptor): (usize, Option<OwnedFd>)) -> std::io::Result<()> {
        if bytes == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.filled += bytes;
        if descriptor.is_some() && std::mem::replace(&mut self.passed, descriptor).is_some() {
            return Err(std::io::Error::other("two file descriptors passed with one frame"));
        }
        Ok(())
    }

    /// Whether the prefix is whole.
    pub fn is_whole(&self) -> bool {
        self.filled == FRAME_LENGTH_BYTES
    }

    /// The frame's length and the segment passed with it.
    pub fn into_parts(self) -> (usize, Option<OwnedFd>) {
        debug_assert!(self.is_whole());
        (u32::from_le_bytes(self.bytes) as usize, self.passed)
    }
}
