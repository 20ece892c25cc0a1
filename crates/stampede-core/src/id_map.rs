//! [`IdMap`]: hash maps keyed by ids that are already unique numbers (tasks, connections,
//! containers, locations, peers), hashed by one multiplication instead of SipHash — these maps are
//! touched on every put, get and consume. Not for keys an adversary chooses.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes ids that are already unique `u64`s by one multiplication (the default SipHash costs
/// more than the rest of an update).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    // An enum's discriminant (a `Location`'s) is hashed as an `isize`, which the default hashes
    // byte by byte.
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A hash map keyed by node-unique ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
