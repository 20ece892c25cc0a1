//! A runtime's mesh time ([`stampede_core::mesh_time`]) on this host: the base clock it is read
//! from, and the epoch as this process's [`Instant`]s see it ([`Epoch`], what a
//! `Pacer` numbers frames from).
//!
//! An embedded runtime's clock is founded when the runtime is made: one host, one clock. A node
//! re-syncs its runtime's clock with its mesh (the node's mesh driver sets it here); a client
//! estimates its node's epoch on its own clock from exchanges (the `stampede` crate's remote
//! runtime). The base clock is monotonic, read as ns since the Unix epoch at the clock's making
//! plus the time elapsed since — so it never goes back — plus an injected skew (a test's
//! stand-in for a host whose clock is off).
//!
//! Guarantees: reading never blocks on anything but the clock's own short lock; nothing
//! overflows (times saturate).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use stampede_core::{ClockReading, MeshTime};

/// A runtime's mesh time and its base clock.
#[derive(Debug)]
pub struct MeshClock {
    origin: Instant,
    /// The base clock at `origin`, ns.
    origin_ns: u64,
    /// Added to every base reading, ns.
    skew_ns: AtomicI64,
    time: Mutex<MeshTime>,
}

impl MeshClock {
    /// A clock founded now (an embedded runtime's).
    pub fn founded() -> MeshClock {
        let origin_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, saturating_ns);
        let clock = MeshClock {
            origin: Instant::now(),
            origin_ns,
            skew_ns: AtomicI64::new(0),
            time: Mutex::new(MeshTime::UNSYNCED),
        };
        clock.set(MeshTime::founded(clock.base_ns()));
        clock
    }

    /// The base clock now, ns.
    pub fn base_ns(&self) -> u64 {
        let base = self.origin_ns as i128 + saturating_ns(self.origin.elapsed()) as i128;
        (base + i128::from(self.skew_ns.load(Ordering::Relaxed))).clamp(0, u64::MAX as i128) as u64
    }

    /// Shifts the base clock by `skew_ns` from now on: a host whose clock is off, for tests.
    pub fn set_skew(&self, skew_ns: i64) {
        self.skew_ns.store(skew_ns, Ordering::Relaxed);
    }

    /// The mesh time as it is.
    pub fn time(&self) -> MeshTime {
        *self.time.lock()
    }

    pub fn set(&self, time: MeshTime) {
        *self.time.lock() = time;
    }

    /// The answer to a clock question received at base time `received_base`, read now.
    pub fn reading(&self, received_base: u64) -> ClockReading {
        let time = self.time();
        time.reading(received_base, self.base_ns())
    }

    /// The epoch on this process's clock; `None` while the clock is not synced.
    pub fn epoch(&self) -> Option<Epoch> {
        let time = self.time();
        let at = Instant::now();
        time.synced().then(|| Epoch { at, since_ns: time.since_epoch(self.base_ns()) })
    }
}

/// Mesh time's epoch as this process sees it: at the instant `at`, `since_ns` ns of mesh time had
/// passed since the epoch (negative: the epoch was still to come).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub at: Instant,
    pub since_ns: i128,
}

impl Epoch {
    /// The epoch of a clock whose mesh time starts now (what a pacer without a mesh counts from).
    pub fn now() -> Epoch {
        Epoch { at: Instant::now(), since_ns: 0 }
    }

    /// Mesh time since the epoch at `now`, ns (negative before it).
    pub fn since_at(&self, now: Instant) -> i128 {
        self.since_ns + saturating_ns(now.saturating_duration_since(self.at)) as i128
    }
}

fn saturating_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_founded_clock_is_synced_with_its_epoch_now() {
        let clock = MeshClock::founded();
        let epoch = clock.epoch().expect("founded: synced");
        assert!((0..1_000_000_000).contains(&epoch.since_ns), "{epoch:?}");
        let later = epoch.at + Duration::from_millis(5);
        assert_eq!(epoch.since_at(later), epoch.since_ns + 5_000_000);
    }

    #[test]
    fn a_skew_moves_the_base_clock_not_the_epoch_instant() {
        let clock = MeshClock::founded();
        let before = clock.base_ns();
        clock.set_skew(5_000_000_000);
        assert!(clock.base_ns() >= before + 5_000_000_000);
        clock.set(MeshTime::UNSYNCED);
        assert_eq!(clock.epoch(), None, "unsynced: no epoch");
    }
}
