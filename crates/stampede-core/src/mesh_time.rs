//! Mesh time (docs/NODES.md, "Time across hosts"): one clock and one epoch that every node of a
//! mesh agrees on, so that paced sources on different hosts number their frames alike — frame
//! `n` is due at `epoch + n × tick` of mesh time, whichever host puts it.
//!
//! A node reads its own *base clock* (monotonic, ns); its mesh time is that plus an offset. A node
//! is *synced* once it founded the mesh's time or took it from a synced peer. The rule
//! ([`MeshTime::decide`]), run on every look at the live peers:
//!
//! - an unsynced node follows the lowest-named synced peer; with no synced peer, the
//!   lowest-named of itself and its peers *founds* (offset 0, epoch = now) and the others wait;
//! - a synced node follows the lowest-named synced peer named below itself, and keeps its time
//!   when there is none (it is then the others' reference).
//!
//! So every node follows a lower name (no cycle), the lowest-named synced node is everyone's
//! reference, and a reference that dies is replaced by the next name, whose time is already the
//! mesh's: mesh time does not jump. A node that follows takes its reference's epoch too, so two
//! meshes that founded their time apart agree once they meet (the lower-named reference wins).
//!
//! Following is the NTP estimate ([`Exchange`]): of a round of exchanges the least-delay one
//! gives the offset, wrong by at most half its delay whatever the asymmetry of the links.
//!
//! Guarantees: pure arithmetic on i128 inside (never overflows, never panics); a round with no
//! exchange changes nothing.

/// One timestamp exchange with the reference clock, each time in ns of its own clock.
///
/// This side reads its clock (`t0`) and sends; the reference side reads its clock on receipt
/// (`t1`) and on reply (`t2`); this side reads its clock on receipt (`t3`). With equal delays
/// each way the offset is `((t1 - t0) + (t2 - t3)) / 2`, and whatever the asymmetry it is wrong by
/// at most half the round trip spent on the network, `((t3 - t0) - (t2 - t1)) / 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Sent, on this clock.
    pub t0: u64,
    /// Received, on the reference clock.
    pub t1: u64,
    /// Replied, on the reference clock.
    pub t2: u64,
    /// Reply received, on this clock.
    pub t3: u64,
}

impl Exchange {
    /// The reference clock minus this clock, ns, by this exchange.
    pub fn offset(&self) -> i128 {
        ((self.t1 as i128 - self.t0 as i128) + (self.t2 as i128 - self.t3 as i128)) / 2
    }

    /// The round trip spent outside the reference side, ns (never below 0).
    pub fn delay(&self) -> i128 {
        ((self.t3 as i128 - self.t0 as i128) - (self.t2 as i128 - self.t1 as i128)).max(0)
    }

    /// This clock's time at the exchange's middle.
    pub fn middle(&self) -> i128 {
        (self.t0 as i128 + self.t3 as i128) / 2
    }
}

/// What a node answers a clock question with: its mesh time on receipt and on reply, its epoch,
/// and whether it is synced (an unsynced node's times are its base clock's, followed by nobody).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClockReading {
    pub received_ns: u64,
    pub replied_ns: u64,
    pub epoch_ns: u64,
    pub synced: bool,
}

/// What a node does on a look at its live peers ([`MeshTime::decide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeStep<'a> {
    /// Found the mesh's time: offset 0, epoch now.
    Found,
    /// Take this peer's time and epoch ([`MeshTime::follow`]).
    Follow(&'a str),
    /// Nothing to do: the node is the reference, or waits for a lower-named peer to found.
    Keep,
}

/// A node's mesh time: its base clock plus an offset, the epoch, and whether it is synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshTime {
    offset_ns: i128,
    epoch_ns: u64,
    synced: bool,
    error_ns: u64,
}

impl MeshTime {
    /// A node that has not looked at its peers yet.
    pub const UNSYNCED: MeshTime = MeshTime { offset_ns: 0, epoch_ns: 0, synced: false, error_ns: 0 };

    /// A clock alone, founded at `base_now`: an embedded runtime's (one host, one clock).
    pub fn founded(base_now: u64) -> MeshTime {
        let mut time = MeshTime::UNSYNCED;
        time.found(base_now);
        time
    }

    /// What to do, given the live peers `(name, synced)` other than `me` (see the module doc).
    pub fn decide<'a>(&self, me: &str, peers: &'a [(String, bool)]) -> TimeStep<'a> {
        let lowest_synced = peers.iter().filter(|(_, synced)| *synced).map(|(name, _)| name.as_str()).min();
        match lowest_synced {
            Some(reference) if !self.synced || reference < me => TimeStep::Follow(reference),
            Some(_) => TimeStep::Keep,
            None if !self.synced && peers.iter().all(|(name, _)| me < name.as_str()) => TimeStep::Found,
            None => TimeStep::Keep,
        }
    }

    /// Founds the mesh's time at `base_now`: the base clock is mesh time, and its epoch is now.
    pub fn found(&mut self, base_now: u64) {
        *self = MeshTime { offset_ns: 0, epoch_ns: base_now, synced: true, error_ns: 0 };
    }

    /// Takes the time of a reference whose epoch is `epoch_ns` from a round of `exchanges`
    /// (`t0`, `t3` on this node's base clock; `t1`, `t2` on the reference's mesh time): the
    /// least-delay one gives the offset. `false` (nothing changed) without any exchange.
    pub fn follow(&mut self, exchanges: &[Exchange], epoch_ns: u64) -> bool {
        let Some(best) = exchanges.iter().min_by_key(|e| e.delay()) else { return false };
        let error_ns = u64::try_from(best.delay() / 2).unwrap_or(u64::MAX);
        *self = MeshTime { offset_ns: best.offset(), epoch_ns, synced: true, error_ns };
        true
    }

    /// Mesh time when the base clock reads `base` (clamped to the u64 range).
    pub fn now(&self, base: u64) -> u64 {
        (base as i128 + self.offset_ns).clamp(0, u64::MAX as i128) as u64
    }

    /// Mesh time since the epoch when the base clock reads `base`, ns (negative before it).
    pub fn since_epoch(&self, base: u64) -> i128 {
        base as i128 + self.offset_ns - self.epoch_ns as i128
    }

    /// This node's answer to a clock question received and replied at these base times.
    pub fn reading(&self, received_base: u64, replied_base: u64) -> ClockReading {
        ClockReading {
            received_ns: self.now(received_base),
            replied_ns: self.now(replied_base),
            epoch_ns: self.epoch_ns,
            synced: self.synced,
        }
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// Mesh time minus the base clock, ns.
    pub fn offset_ns(&self) -> i128 {
        self.offset_ns
    }

    /// The bound on the offset's error, ns (half the least delay of the round that set it).
    pub fn error_ns(&self) -> u64 {
        self.error_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(list: &[(&str, bool)]) -> Vec<(String, bool)> {
        list.iter().map(|(name, synced)| ((*name).to_owned(), *synced)).collect()
    }

    #[test]
    fn the_lowest_name_founds_and_the_others_wait_for_it() {
        let unsynced = MeshTime::UNSYNCED;
        assert_eq!(unsynced.decide("a", &peers(&[("b", false), ("c", false)])), TimeStep::Found);
        assert_eq!(unsynced.decide("b", &peers(&[("a", false), ("c", false)])), TimeStep::Keep);
        assert_eq!(unsynced.decide("a", &[]), TimeStep::Found, "alone, a node founds");
    }

    #[test]
    fn every_node_follows_the_lowest_synced_name_and_nobody_follows_a_higher_one() {
        let synced = MeshTime::founded(5);
        let list = peers(&[("c", true), ("b", true), ("d", false)]);
        assert_eq!(MeshTime::UNSYNCED.decide("a", &list), TimeStep::Follow("b"), "unsynced: the lowest synced");
        assert_eq!(synced.decide("a", &list), TimeStep::Keep, "the reference keeps its time");
        assert_eq!(synced.decide("e", &list), TimeStep::Follow("b"));
        assert_eq!(synced.decide("c", &peers(&[("b", true), ("a", false)])), TimeStep::Follow("b"));
    }

    #[test]
    fn following_takes_the_least_delay_offset_and_the_epoch() {
        // The reference is 5 s ahead; the first exchange's way back was slow.
        let offset = 5_000_000_000u64;
        let slow = Exchange { t0: 1_000, t1: 1_100 + offset, t2: 1_200 + offset, t3: 9_000 };
        let fast = Exchange { t0: 10_000, t1: 10_050 + offset, t2: 10_060 + offset, t3: 10_110 };
        let mut time = MeshTime::UNSYNCED;
        assert!(!time.follow(&[], 7), "no exchange, no change");
        assert!(!time.synced());
        assert!(time.follow(&[slow, fast], 42));
        assert_eq!(time.offset_ns(), offset as i128);
        assert_eq!(time.error_ns(), 50);
        assert_eq!((time.epoch_ns(), time.synced()), (42, true));
        assert_eq!(time.now(20_000), 20_000 + offset);
        assert_eq!(time.since_epoch(0), offset as i128 - 42);
        let reading = time.reading(100, 200);
        assert_eq!((reading.received_ns, reading.replied_ns, reading.epoch_ns), (100 + offset, 200 + offset, 42));
    }

    #[test]
    fn extreme_readings_never_overflow() {
        let ahead = Exchange { t0: 0, t1: u64::MAX, t2: u64::MAX, t3: 0 };
        let mut time = MeshTime::UNSYNCED;
        assert!(time.follow(&[ahead], 0));
        assert_eq!(time.offset_ns(), u64::MAX as i128);
        assert_eq!(time.now(u64::MAX), u64::MAX, "clamped");
        assert_eq!(time.since_epoch(u64::MAX), 2 * u64::MAX as i128);
        let behind = Exchange { t0: u64::MAX, t1: 0, t2: 0, t3: u64::MAX };
        assert!(time.follow(&[behind], u64::MAX));
        assert_eq!(time.now(0), 0, "clamped");
        assert_eq!(time.since_epoch(0), -2 * u64::MAX as i128);
    }
}
