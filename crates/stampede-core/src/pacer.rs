//! Loose synchrony of virtual time with real time (docs/SEMANTICS.md, "Pacing"; after Beehive's
//! ticks).
//!
//! Pure arithmetic: given the time elapsed since the pacer's start, decide whether a task at
//! virtual time `vt` is early (and for how long it should wait), on time, or late beyond the
//! tolerance. The driver owns the clock and the sleeping.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::time::Timestamp;

/// Nanoseconds in a second.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Where a task stands against real time at one `sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// Ahead of real time: wait this long.
    Early(Duration),
    /// Behind by at most the tolerance.
    OnTime(Duration),
    /// Behind by more than the tolerance, by this much.
    Late(Duration),
}

/// `tick` of real time per unit of virtual time, and how late counts as late.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaceRule {
    tick: Duration,
    tolerance: Duration,
}

impl PaceRule {
    /// A rule; `tick` must be positive.
    pub fn new(tick: Duration, tolerance: Duration) -> Result<PaceRule> {
        if tick.is_zero() {
            return Err(Error::InvalidArgument {
                op: "Pacer",
                name: "pacer".into(),
                reason: "tick must be positive".into(),
            });
        }
        Ok(PaceRule { tick, tolerance })
    }

    /// When, after the start, virtual time `vt` is due (a negative `vt` at the start); `None`
    /// when that is beyond what a [`Duration`] can hold (never, for any practical purpose).
    pub fn due(&self, vt: Timestamp) -> Option<Duration> {
        let nanos = self.tick.as_nanos().checked_mul(u128::from(vt.max(0).unsigned_abs()))?;
        let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
        Some(Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
    }

    /// Decides for a task at `vt` when `elapsed` has passed since the start.
    pub fn decide(&self, vt: Timestamp, elapsed: Duration) -> Pace {
        let Some(due) = self.due(vt) else { return Pace::Early(Duration::MAX) };
        if elapsed < due {
            return Pace::Early(due - elapsed);
        }
        let lateness = elapsed - due;
        if lateness > self.tolerance {
            Pace::Late(lateness)
        } else {
            Pace::OnTime(lateness)
        }
    }

    /// The virtual time that is due at `elapsed` (the last tick passed): where a late task can
    /// skip ahead to.
    pub fn vt_at(&self, elapsed: Duration) -> Timestamp {
        let vt = elapsed.as_nanos() / self.tick.as_nanos();
        Timestamp::try_from(vt).unwrap_or(crate::time::TS_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Early, on time and late are told apart at the tolerance boundary.
    #[test]
    fn decides_early_on_time_late() {
        let rule = PaceRule::new(Duration::from_millis(10), Duration::from_millis(2)).unwrap();
        assert_eq!(rule.decide(3, Duration::from_millis(25)), Pace::Early(Duration::from_millis(5)));
        assert_eq!(rule.decide(3, Duration::from_millis(32)), Pace::OnTime(Duration::from_millis(2)));
        assert_eq!(rule.decide(3, Duration::from_millis(33)), Pace::Late(Duration::from_millis(3)));
        assert_eq!(rule.vt_at(Duration::from_millis(57)), 5);
        assert!(PaceRule::new(Duration::ZERO, Duration::ZERO).is_err());
    }

    /// Huge ticks and virtual times never overflow: a due time beyond a `Duration` is `None`
    /// (always early), and the exact value is kept where it fits.
    #[test]
    fn huge_ticks_and_virtual_times_do_not_overflow() {
        let huge = PaceRule::new(Duration::MAX, Duration::MAX).unwrap();
        assert_eq!(huge.due(2), None);
        assert_eq!(huge.decide(Timestamp::MAX, Duration::MAX), Pace::Early(Duration::MAX));
        assert_eq!(huge.decide(Timestamp::MIN, Duration::ZERO), Pace::OnTime(Duration::ZERO));
        assert_eq!(huge.vt_at(Duration::MAX), 1);
        let nano = PaceRule::new(Duration::from_nanos(1), Duration::ZERO).unwrap();
        assert_eq!(nano.due(Timestamp::MAX), Some(Duration::from_nanos(i64::MAX as u64)));
        assert_eq!(nano.vt_at(Duration::MAX), crate::time::TS_MAX);
    }
}
