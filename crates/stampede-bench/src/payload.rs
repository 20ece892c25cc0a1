//! Payload sizes and the receiver's read.

use std::hint::black_box;

/// One 320×240 RGB frame: the seeds' image size (SPEC §13).
pub const IMAGE_BYTES: usize = 230_400;

/// A small message: one 64-bit word.
pub const SMALL_BYTES: usize = 8;

/// The case name of a payload size, e.g. `"8B"`, `"230400B"`.
pub fn case_name(payload_bytes: usize) -> String {
    format!("{payload_bytes}B")
}

/// A source buffer of `payload_bytes` bytes with a recognisable pattern.
pub fn source(payload_bytes: usize, seed: u8) -> Vec<u8> {
    (0..payload_bytes).map(|i| (i as u8).wrapping_add(seed)).collect()
}

/// Reads the first and last byte of what was received, through `black_box`, so that the
/// optimizer cannot drop a receive and every receiver pays for bringing the payload's edges
/// into its cache. Returns them XORed (0 for an empty payload).
#[inline]
pub fn touch(data: &[u8]) -> u8 {
    let data = black_box(data);
    match (data.first(), data.last()) {
        (Some(&a), Some(&b)) => black_box(a ^ b),
        _ => 0,
    }
}
