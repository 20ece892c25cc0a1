//! Payload sizes and the receiver's read.

use std::hint::black_box;

/// One 320×240 RGB frame: the seeds' image size (docs/BENCHMARKS.md,
/// "How every benchmark measures and reports").
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

/// Fills `buf` with pseudo-random bytes (splitmix64 from `seed`): distinct content per seed, so
/// no two frames are alike and nothing along the way can share or compress them.
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut words = buf.chunks_exact_mut(8);
    for word in &mut words {
        word.copy_from_slice(&next().to_le_bytes());
    }
    let tail = words.into_remainder();
    let last = next().to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}

/// Reads every byte of `data` (a wrapping sum of its little-endian 64-bit words, then of the
/// tail bytes), through `black_box`: what a receiver pays to look at a whole payload, and a
/// check that it is the one that was sent.
pub fn checksum(data: &[u8]) -> u64 {
    let data = black_box(data);
    let words = data.chunks_exact(8);
    let tail = words.remainder().iter().fold(0u64, |sum, &b| sum.wrapping_add(u64::from(b)));
    let sum = words.fold(0u64, |sum, w| sum.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes"))));
    black_box(sum.wrapping_add(tail))
}
