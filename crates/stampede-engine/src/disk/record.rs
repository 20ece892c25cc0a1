//! One item on disk: a record of an extent, and the decoding recovery trusts.
//!
//! A record is a [`HEADER_BYTES`] header — magic `STX1` (4), CRC32 (4), timestamp (8), payload
//! length (8), codec name length (2), state (1: [`LIVE`] or [`DEAD`]), reserved (5, zero) — then the
//! codec name, then the payload at an [`ALIGN`]-byte boundary (so arrays read in place stay
//! aligned), padded to the next boundary. The CRC covers the timestamp, lengths, codec name and
//! payload; not the state byte, which is rewritten in place when the item is reclaimed.
//!
//! Decoding is safe on any bytes: records end at the first one that is incomplete, corrupt, of
//! an unknown state or zero (the preallocated rest of an extent), and dead ones are skipped.

use std::ops::Range;

use stampede_core::time::is_item_ts;
use stampede_core::{Codec, Timestamp, CODEC_NAME_BYTES_MAX};

/// Alignment of records and payloads in an extent.
pub const ALIGN: usize = 64;
/// Bytes of a record's header.
pub const HEADER_BYTES: usize = 32;
const MAGIC: &[u8; 4] = b"STX1";
/// Offset of the state byte in the header.
pub(crate) const STATE_AT: usize = 26;
/// The state of a record whose item is live.
const LIVE: u8 = 0;
/// The state of a record whose item was reclaimed.
pub(crate) const DEAD: u8 = 1;

/// A record found by [`decode_records`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Where the record starts in the extent.
    pub at: usize,
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The item's codec.
    pub codec: Codec,
    /// Where its payload lies in the extent.
    pub payload: Range<usize>,
}

/// Where a record's payload starts, and the record's whole size, both multiples of [`ALIGN`];
/// `None` if that size does not fit in memory.
pub(crate) fn layout(codec_bytes: usize, payload_bytes: usize) -> Option<(usize, usize)> {
    let payload_at = (HEADER_BYTES + codec_bytes).checked_next_multiple_of(ALIGN)?;
    Some((payload_at, payload_at.checked_add(payload_bytes)?.checked_next_multiple_of(ALIGN)?))
}

/// The record of a live item, padded to its layout's size, and where its payload starts in it.
/// The codec name is at most `CODEC_NAME_BYTES_MAX` bytes (checked when the item was put).
pub fn encode(ts: Timestamp, codec: &[u8], data: &[u8]) -> (Vec<u8>, usize) {
    assert!(codec.len() <= CODEC_NAME_BYTES_MAX, "codec names are bounded when put");
    let (payload_at, record_bytes) = layout(codec.len(), data.len()).expect("an item in memory fits a record");
    let mut record = vec![0u8; record_bytes];
    record[0..4].copy_from_slice(MAGIC);
    record[8..16].copy_from_slice(&ts.to_le_bytes());
    record[16..24].copy_from_slice(&(data.len() as u64).to_le_bytes());
    record[24..26].copy_from_slice(&(codec.len() as u16).to_le_bytes());
    record[STATE_AT] = LIVE;
    record[HEADER_BYTES..HEADER_BYTES + codec.len()].copy_from_slice(codec);
    record[payload_at..payload_at + data.len()].copy_from_slice(data);
    let crc = checksum(&record[8..STATE_AT], codec, data);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
    (record, payload_at)
}

fn checksum(header: &[u8], codec: &[u8], data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header);
    hasher.update(codec);
    hasher.update(data);
    hasher.finalize()
}

/// The live records of an extent, in order (see the module doc).
pub fn decode_records(extent: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while let Some(header) = at.checked_add(HEADER_BYTES).and_then(|end| extent.get(at..end)) {
        if &header[0..4] != MAGIC {
            break;
        }
        let word = |range: Range<usize>| {
            let mut bytes = [0u8; 8];
            bytes[..range.len()].copy_from_slice(&header[range]);
            u64::from_le_bytes(bytes)
        };
        let (crc, ts, len, codec_len) = (word(4..8) as u32, word(8..16) as i64, word(16..24), word(24..26) as usize);
        let state = header[STATE_AT];
        let Some(len) = usize::try_from(len).ok().filter(|&len| len <= extent.len()) else { break };
        let reserved_zero = header[STATE_AT + 1..].iter().all(|&b| b == 0);
        if codec_len > CODEC_NAME_BYTES_MAX || !matches!(state, LIVE | DEAD) || !reserved_zero {
            break;
        }
        let Some((payload_at, record_bytes)) = layout(codec_len, len) else { break };
        let Some(record) = at.checked_add(record_bytes).and_then(|end| extent.get(at..end)) else { break };
        let codec = &record[HEADER_BYTES..HEADER_BYTES + codec_len];
        let data = &record[payload_at..payload_at + len];
        let Ok(codec_name) = std::str::from_utf8(codec) else { break };
        if checksum(&header[8..STATE_AT], codec, data) != crc || !is_item_ts(ts) {
            break;
        }
        if state == LIVE {
            let payload = at + payload_at..at + payload_at + len;
            records.push(Record { at, ts, codec: Codec::from_name(codec_name), payload });
        }
        at += record_bytes;
    }
    records
}
