//! Copy-in with recycled buffers.
//!
//! `put` copies borrowed data exactly once. For large payloads (video frames) that copy goes
//! into a buffer recycled from earlier items of the same channel: when the last reference to a
//! reclaimed item's bytes drops — in whichever thread — its buffer returns to the channel's
//! pool instead of to the allocator. Without this, every 230 KB frame is a fresh allocation that
//! glibc may serve with new pages (page faults) and hand back to the OS on free, which costs
//! more than the copy itself. The pool holds at most [`POOL_BUFFERS_MAX`] buffers; small
//! payloads (under [`POOL_BYTES_MIN`]) bypass it. A pool may instead put its largest copies in
//! memory shared with another process ([`Segments`]: a client's, whose node is on this host).

use std::sync::{Arc, Weak};

use crate::sync::Mutex;
use bytes::Bytes;
use stampede_core::{Codec, Error, Payload, Result, Timestamp, CODEC_NAME_BYTES_MAX};

/// Most free buffers a pool keeps.
pub const POOL_BUFFERS_MAX: usize = 8;
/// Smallest payload copied through the pool; smaller ones use the allocator directly.
pub const POOL_BYTES_MIN: usize = 16 * 1024;
/// Largest payload copied into one allocation with its reference count: a `Vec`'s bytes need a
/// second allocation for the count the first time an item is shared (its first get).
pub const INLINE_BYTES_MAX: usize = 64;

/// A pool of payload buffers owned by one channel or queue.
#[derive(Default)]
pub struct Buffers {
    free: Mutex<Vec<Vec<u8>>>,
    /// Where the largest copies go instead of the pool's buffers: the pool of a remote output
    /// whose node is on this host, which passes them instead of their bytes.
    segments: Option<Segments>,
}

/// Shared-memory segments for a pool's largest copies (the client's are `stampede_wire::shared`).
#[derive(Clone, Copy, Debug)]
pub struct Segments {
    /// Copies `parts`, concatenated, into a segment; `None` when it cannot (the pool copies then).
    pub make: fn(&[&[u8]]) -> Option<Bytes>,
    /// Smallest copy made a segment.
    pub bytes_min: usize,
}

impl Buffers {
    /// A pool whose copies of at least `segments.bytes_min` are shared-memory segments.
    pub fn with_segments(segments: Segments) -> Buffers {
        Buffers { free: Mutex::default(), segments: Some(segments) }
    }

    /// Copies `parts`, concatenated, into one buffer (recycled when large enough to matter).
    pub fn copy(self: &Arc<Self>, parts: &[&[u8]]) -> Bytes {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // In the event log: the runtime's allocation (a buffer taken, and the bytes copied in).
        let _allocating = crate::trace::span(crate::trace::Kind::Alloc, 0, 0, len as u64);
        if len <= INLINE_BYTES_MAX {
            return Bytes::from_owner(Inline::of(parts, len));
        }
        if len < POOL_BYTES_MIN {
            return Bytes::from(parts.concat());
        }
        let segments = self.segments.filter(|segments| len >= segments.bytes_min);
        if let Some(segment) = segments.and_then(|segments| (segments.make)(parts)) {
            return segment;
        }
        let mut buf = self.take(len);
        for part in parts {
            buf.extend_from_slice(part);
        }
        Bytes::from_owner(Recycled { buf, pool: Arc::downgrade(self) })
    }

    /// A cleared buffer with room for `len` bytes: a pooled one that fits without wasting more
    /// than half of it, else a new one.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut free = self.free.lock();
        match free.iter().position(|b| b.capacity() >= len && b.capacity() / 2 <= len) {
            Some(i) => free.swap_remove(i),
            None => Vec::with_capacity(len),
        }
    }
}

/// The bytes of a small item, held in the same allocation as their reference count.
struct Inline {
    len: usize,
    bytes: [u8; INLINE_BYTES_MAX],
}

impl Inline {
    /// `parts` concatenated; their lengths sum to `len`, at most [`INLINE_BYTES_MAX`].
    fn of(parts: &[&[u8]], len: usize) -> Inline {
        assert!(len <= INLINE_BYTES_MAX, "an inline payload of {len} bytes");
        let mut inline = Inline { len, bytes: [0; INLINE_BYTES_MAX] };
        let mut at = 0;
        for part in parts {
            inline.bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        debug_assert_eq!(at, len, "the parts' lengths sum to len");
        inline
    }
}

impl AsRef<[u8]> for Inline {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The bytes of one item; gives its buffer back to the pool when the last reference drops.
struct Recycled {
    buf: Vec<u8>,
    pool: Weak<Buffers>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let Some(pool) = self.pool.upgrade() else { return };
        let mut free = pool.free.lock();
        if free.len() < POOL_BUFFERS_MAX {
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            free.push(buf);
        }
    }
}

/// Anything `put` accepts: borrowed bytes and text are copied once (through the container's
/// buffer pool); owned `Vec<u8>`, [`Bytes`] and [`Payload`] are taken without a copy.
pub trait IntoPayload {
    /// The payload's size in bytes, known before any copy: `put` refuses an item that can never
    /// fit a `max_bytes` bound without copying it first.
    fn payload_bytes(&self) -> usize;

    /// Makes the payload, copying borrowed data into a buffer from `buffers`.
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload;
}

impl IntoPayload for &[u8] {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        Payload { data: buffers.copy(&[self]), codec: Codec::Raw }
    }
}

impl<const N: usize> IntoPayload for &[u8; N] {
    fn payload_bytes(&self) -> usize {
        N
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        self.as_slice().into_payload(buffers)
    }
}

impl IntoPayload for &Vec<u8> {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        self.as_slice().into_payload(buffers)
    }
}

impl IntoPayload for &str {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        Payload { data: buffers.copy(&[self.as_bytes()]), codec: Codec::Utf8 }
    }
}

impl IntoPayload for Vec<u8> {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, _: &Arc<Buffers>) -> Payload {
        Payload::from(self)
    }
}

impl IntoPayload for Bytes {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, _: &Arc<Buffers>) -> Payload {
        Payload::from(self)
    }
}

impl IntoPayload for Payload {
    fn payload_bytes(&self) -> usize {
        self.len()
    }
    fn into_payload(self, _: &Arc<Buffers>) -> Payload {
        self
    }
}

/// Several byte slices stored as one payload (e.g. a header and an array), copied once.
pub struct Parts<'a> {
    pub parts: &'a [&'a [u8]],
    pub codec: Codec,
}

impl IntoPayload for Parts<'_> {
    fn payload_bytes(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        Payload { data: buffers.copy(self.parts), codec: self.codec }
    }
}

/// Takes a put's payload in: refuses one that can never fit (`check_fits`, before the copy),
/// copies it (once), refuses one whose codec is not the container's `declared` one, and an `npy`
/// payload whose header is malformed or declares object data (docs/SEMANTICS.md, "npy payloads":
/// every reader, in every language, may then trust the header).
pub fn admit(
    name: &str,
    ts: Timestamp,
    payload: impl IntoPayload,
    declared: Option<&Codec>,
    buffers: &Arc<Buffers>,
    check_fits: impl FnOnce(usize) -> Result<()>,
) -> Result<Payload> {
    check_fits(payload.payload_bytes())?;
    let payload = payload.into_payload(buffers);
    check_payload(name, ts, &payload, declared)?;
    Ok(payload)
}

/// Checks what every stored payload obeys: a bounded codec name, the channel's declared codec,
/// and a valid header for `npy` (docs/SEMANTICS.md, "Payloads and codecs").
pub(crate) fn check_payload(name: &str, ts: Timestamp, payload: &Payload, declared: Option<&Codec>) -> Result<()> {
    check_codec_name("put", name, &payload.codec)?;
    if let Some(declared) = declared.filter(|declared| **declared != payload.codec) {
        let reason = format!(
            "the channel declares codec {:?}; this payload's codec is {:?} (put a {:?} payload, or create the \
             channel without a codec)",
            declared.name(),
            payload.codec.name(),
            declared.name()
        );
        return Err(Error::InvalidArgument { op: "put", name: name.to_owned(), reason });
    }
    if payload.codec == Codec::Npy {
        crate::npy::check(name, ts, &payload.data)?;
    }
    Ok(())
}

/// Refuses a codec name longer than [`CODEC_NAME_BYTES_MAX`] (`InvalidArgument` from `op`).
pub(crate) fn check_codec_name(op: &'static str, name: &str, codec: &Codec) -> Result<()> {
    let len = codec.name().len();
    if len <= CODEC_NAME_BYTES_MAX {
        return Ok(());
    }
    let reason =
        format!("a codec name is at most CODEC_NAME_BYTES_MAX={CODEC_NAME_BYTES_MAX} bytes, this one has {len}");
    Err(Error::InvalidArgument { op, name: name.to_owned(), reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large payload's buffer comes back to the pool when its last reference drops, and the
    /// next copy of that size reuses it.
    #[test]
    fn large_buffers_are_recycled() {
        let pool = Arc::new(Buffers::default());
        let frame = vec![7u8; 230_400];
        let first = pool.copy(&[&frame]);
        let address = first.as_ptr();
        let view = first.clone();
        drop(first);
        assert!(pool.free.lock().is_empty(), "a view is still alive");
        drop(view);
        assert_eq!(pool.free.lock().len(), 1);
        let second = pool.copy(&[&frame[..1000], &frame[1000..]]);
        assert_eq!(second.as_ptr(), address);
        assert_eq!(&second[..], &frame[..]);
        assert_eq!(&pool.copy(&[b"small"])[..], b"small");
    }

    /// Small payloads are copied whole, in parts, up to and across [`INLINE_BYTES_MAX`], and a
    /// clone shares the bytes (no copy when an item is got).
    #[test]
    fn small_payloads_are_copied_whole_and_shared() {
        let pool = Arc::new(Buffers::default());
        for len in [0, 1, 8, INLINE_BYTES_MAX - 1, INLINE_BYTES_MAX, INLINE_BYTES_MAX + 1, 1000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let (head, tail) = data.split_at(len / 3);
            let copy = pool.copy(&[head, &[], tail]);
            assert_eq!(&copy[..], &data[..], "{len} bytes");
            let got = copy.clone();
            assert_eq!(got.as_ptr(), copy.as_ptr(), "{len} bytes: a clone shares them");
        }
    }
}
