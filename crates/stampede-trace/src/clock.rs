//! A log's clock mapped onto a reference clock (another process's or host's), from timestamp
//! exchanges made at the start and at the end of a run — the NTP estimate, each exchange giving
//! an offset and the bound on its error.
//!
//! An exchange: this side reads its clock (`t0`) and sends; the reference side reads its clock on
//! receipt (`t1`) and on reply (`t2`); this side reads its clock on receipt (`t3`). With equal
//! delays each way the offset is `((t1 - t0) + (t2 - t3)) / 2`, and whatever the asymmetry it is
//! wrong by at most half the round trip spent on the network, `((t3 - t0) - (t2 - t1)) / 2`. Of
//! several exchanges the one with the least delay is kept. Exchanges at both ends of a run also
//! give the drift between the two clocks.
//!
//! Guarantees: [`ClockMap::estimate`] never divides by zero and never overflows (times are i128
//! inside); a map from no exchange is the identity, said by `None`.

/// One timestamp exchange with the reference clock (the same estimate keeps the nodes of a
/// mesh on one time, live: `stampede_core::mesh_time`).
pub use stampede_core::mesh_time::Exchange;

/// `reference = t + offset + drift × (t − at)`: this clock's times on the reference clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockMap {
    /// The offset at `at`, ns.
    pub offset_ns: i128,
    /// This clock's time at which `offset_ns` holds.
    pub at: i128,
    /// Reference ns gained per ns of this clock (0: no drift measured).
    pub drift: f64,
    /// The bound on the offset's error, ns (half the least delay).
    pub error_ns: i128,
}

impl ClockMap {
    /// The identity: a log on the reference clock itself.
    pub const IDENTITY: ClockMap = ClockMap { offset_ns: 0, at: 0, drift: 0.0, error_ns: 0 };

    /// The map the exchanges give: the least-delay exchange of `start`, and with `end` the drift
    /// between the two. `None` without any exchange.
    pub fn estimate(start: &[Exchange], end: &[Exchange]) -> Option<ClockMap> {
        let best = |exchanges: &[Exchange]| exchanges.iter().copied().min_by_key(Exchange::delay);
        let first = best(start).or_else(|| best(end))?;
        let mut map =
            ClockMap { offset_ns: first.offset(), at: first.middle(), drift: 0.0, error_ns: first.delay() / 2 };
        if let (Some(first), Some(last)) = (best(start), best(end)) {
            let span = last.middle() - first.middle();
            if span > 0 {
                map.drift = (last.offset() - first.offset()) as f64 / span as f64;
                map.error_ns = map.error_ns.max(last.delay() / 2);
            }
        }
        Some(map)
    }

    /// `t` of this clock on the reference clock, ns.
    pub fn to_reference(&self, t: u64) -> i128 {
        self.apply(t as i128)
    }

    fn apply(&self, t: i128) -> i128 {
        let since = t - self.at;
        t + self.offset_ns + (self.drift * since as f64).round() as i128
    }

    /// This map, then `next` (this clock onto a middle clock, then that onto `next`'s reference).
    pub fn then(&self, next: &ClockMap) -> ClockMap {
        // next(self(t)) = t + o1 + d1 (t - a1) + o2 + d2 (t + o1 + d1 (t - a1) - a2), at a1.
        ClockMap {
            offset_ns: self.offset_ns
                + next.offset_ns
                + (next.drift * (self.at + self.offset_ns - next.at) as f64).round() as i128,
            at: self.at,
            drift: self.drift + next.drift + self.drift * next.drift,
            error_ns: self.error_ns + next.error_ns,
        }
    }

    /// The reference clock's times on this clock (the map the other way).
    pub fn inverse(&self) -> ClockMap {
        // t = u - o + (u - (a + o)) (1 / (1 + d) - 1); a drift of -1 or below is no clock.
        let rate = 1.0 + self.drift;
        let drift = if rate > 0.0 { 1.0 / rate - 1.0 } else { 0.0 };
        ClockMap { offset_ns: -self.offset_ns, at: self.at + self.offset_ns, drift, error_ns: self.error_ns }
    }
}

/// A writer's counter read together with its host's monotonic clock, at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub ticks: u64,
    pub ns: u64,
}

/// A writer's counter (the cycle counter) on its host's monotonic clock, from the readings the
/// writer logged: linear between two consecutive readings, and beyond the first or last by the
/// rate of the nearest pair — so the logs of every process of a host share one clock, whatever
/// each writer's counter.
///
/// Guarantees: readings that go back on either clock are ignored; with one reading the counter
/// is taken to tick in ns; with none, its values are ns already. Never panics, never overflows.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TickMap {
    readings: Vec<Reading>,
}

impl TickMap {
    pub fn new(mut readings: Vec<Reading>) -> TickMap {
        readings.sort_by_key(|r| (r.ticks, r.ns));
        let mut kept: Vec<Reading> = Vec::with_capacity(readings.len());
        for reading in readings {
            if kept.last().is_none_or(|last| reading.ticks > last.ticks && reading.ns >= last.ns) {
                kept.push(reading);
            }
        }
        TickMap { readings: kept }
    }

    /// `ticks` on the host's monotonic clock, ns.
    pub fn ns(&self, ticks: u64) -> u64 {
        let (a, b) = match self.readings.as_slice() {
            [] => return ticks,
            [only] => {
                return (only.ns as i128 + (ticks as i128 - only.ticks as i128)).clamp(0, u64::MAX as i128) as u64
            }
            readings => {
                let after = readings.partition_point(|r| r.ticks <= ticks).clamp(1, readings.len() - 1);
                (readings[after - 1], readings[after])
            }
        };
        let rate = (b.ns - a.ns) as f64 / (b.ticks - a.ticks) as f64;
        let ns = a.ns as f64 + (ticks as f64 - a.ticks as f64) * rate;
        ns.round().clamp(0.0, u64::MAX as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exchange with a clock `offset` ahead and `drift`, delays `out` and `back`, sent at `t0`.
    fn exchange(t0: u64, offset: i64, drift: f64, out: u64, back: u64) -> Exchange {
        let reference = |t: u64| (t as f64 + offset as f64 + drift * t as f64).round() as u64;
        let t1 = reference(t0 + out);
        let t2 = t1 + 1_000;
        Exchange { t0, t1, t2, t3: t0 + out + 1_000 + back }
    }

    #[test]
    fn symmetric_delays_give_the_offset_exactly() {
        let map = ClockMap::estimate(&[exchange(1_000_000, 5_000_000, 0.0, 30_000, 30_000)], &[]).unwrap();
        assert_eq!(map.offset_ns, 5_000_000);
        assert_eq!(map.to_reference(2_000_000), 7_000_000);
        assert_eq!(map.error_ns, 30_000);
    }

    #[test]
    fn asymmetric_delays_stay_within_the_bound_and_the_least_delay_wins() {
        let exchanges = [
            exchange(10_000_000, -3_000_000, 0.0, 90_000, 10_000),
            exchange(20_000_000, -3_000_000, 0.0, 12_000, 8_000),
            exchange(30_000_000, -3_000_000, 0.0, 400_000, 10_000),
        ];
        let map = ClockMap::estimate(&exchanges, &[]).unwrap();
        assert!((map.offset_ns - -3_000_000).abs() <= map.error_ns, "{map:?}");
        assert_eq!(map.error_ns, 10_000, "the second exchange has the least delay");
    }

    #[test]
    fn exchanges_at_both_ends_give_the_drift() {
        let drift = 50e-6; // 50 ppm
        let start = [exchange(1_000_000_000, 7_000, drift, 20_000, 20_000)];
        let end = [exchange(61_000_000_000, 7_000, drift, 20_000, 20_000)];
        let map = ClockMap::estimate(&start, &end).unwrap();
        assert!((map.drift - drift).abs() < 1e-9, "{map:?}");
        for t in [1_000_000_000u64, 31_000_000_000, 61_000_000_000] {
            let expected = (t as f64 + 7_000.0 + drift * t as f64).round() as i128;
            assert!((map.to_reference(t) - expected).abs() <= 1_000, "t {t}: {} vs {expected}", map.to_reference(t));
        }
    }

    /// Composition and inverse agree with applying the maps one after the other.
    #[test]
    fn maps_compose_and_invert() {
        let f = ClockMap { offset_ns: 3_700_000_000, at: 5_000_000_000, drift: 40e-6, error_ns: 10 };
        let g = ClockMap { offset_ns: -1_200_000, at: 9_000_000_000, drift: -15e-6, error_ns: 20 };
        for t in [0u64, 5_000_000_000, 60_000_000_000] {
            let through = g.apply(f.to_reference(t));
            assert!((f.then(&g).to_reference(t) - through).abs() <= 2, "t {t}");
            assert!((f.inverse().apply(f.to_reference(t)) - t as i128).abs() <= 2, "t {t}");
        }
        assert_eq!(f.then(&g).error_ns, 30);
    }

    /// The counter maps onto the monotonic clock through the readings, beyond them by the
    /// nearest pair's rate; readings that go back are ignored.
    #[test]
    fn ticks_map_through_the_readings() {
        let r = |ticks, ns| Reading { ticks, ns };
        let map = TickMap::new(vec![r(3_000, 2_000), r(1_000, 1_000), r(2_000, 900), r(5_000, 2_500)]);
        assert_eq!(map.ns(1_000), 1_000);
        assert_eq!(map.ns(2_000), 1_500);
        assert_eq!(map.ns(4_000), 2_250);
        assert_eq!(map.ns(0), 500);
        assert_eq!(map.ns(7_000), 3_000);
        assert_eq!(TickMap::new(vec![]).ns(42), 42);
        assert_eq!(TickMap::new(vec![r(10, 100)]).ns(15), 105);
        let _ = TickMap::new(vec![r(0, u64::MAX), r(u64::MAX, u64::MAX)]).ns(u64::MAX);
    }

    #[test]
    fn no_exchange_no_map_and_extremes_do_not_overflow() {
        assert_eq!(ClockMap::estimate(&[], &[]), None);
        let wild = Exchange { t0: u64::MAX, t1: 0, t2: u64::MAX, t3: 0 };
        let map = ClockMap::estimate(&[wild], &[wild]).unwrap();
        let _ = map.to_reference(u64::MAX);
    }
}
