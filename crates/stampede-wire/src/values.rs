//! Counts from the wire as this machine's `usize`.

/// A count from the wire as a `usize`, saturated (only a 32-bit client could ever saturate).
pub fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
