//! Real-time pacing (docs/SEMANTICS.md, "Pacing"): `sync(vt)` sleeps until `start + vt * tick` when
//! early and calls `on_late(vt, lateness)` when later than the tolerance. A due time too far away
//! for the clock to represent (a huge tick or virtual time) is waited for like any other: the sleep
//! does not end.
//!
//! `start` is when the pacer was made (or reset), or an [`Epoch`] — the mesh's, from
//! [`Runtime::epoch`](crate::Runtime::epoch): pacers on different hosts that count from it number
//! the same instant alike (docs/NODES.md, "Time across hosts"). Before its epoch a pacer counts
//! virtual time 0 as due.

use std::time::{Duration, Instant};

use stampede_core::{Pace, PaceRule, Result, Timestamp};
pub use stampede_engine::Epoch;

/// Called with the virtual time and how late it is, when later than the tolerance.
pub type OnLate = Box<dyn FnMut(Timestamp, Duration) + Send>;

/// Paces a task's virtual time against real time.
pub struct Pacer {
    rule: PaceRule,
    start: Epoch,
    on_late: Option<OnLate>,
}

impl Pacer {
    /// A pacer starting now; `tick` is the real time of one virtual time unit (1/30 s for a 30 fps
    /// camera whose virtual time is the frame number).
    pub fn new(tick: Duration, tolerance: Duration) -> Result<Pacer> {
        Pacer::since(Epoch::now(), tick, tolerance)
    }

    /// A pacer whose virtual time 0 is due at `epoch`: with the mesh's epoch
    /// ([`Runtime::epoch`](crate::Runtime::epoch)), sources on different hosts number frames
    /// alike.
    pub fn since(epoch: Epoch, tick: Duration, tolerance: Duration) -> Result<Pacer> {
        Ok(Pacer { rule: PaceRule::new(tick, tolerance)?, start: epoch, on_late: None })
    }

    /// Sets the handler called when `sync` finds the task late beyond the tolerance.
    pub fn on_late(mut self, handler: impl FnMut(Timestamp, Duration) + Send + 'static) -> Pacer {
        self.on_late = Some(Box::new(handler));
        self
    }

    /// Waits until `vt` is due if early; calls `on_late` if late beyond the tolerance. Returns
    /// what it found.
    pub fn sync(&mut self, vt: Timestamp) -> Pace {
        let pace = self.rule.decide(vt, self.elapsed());
        match pace {
            Pace::Early(wait) => {
                let _sleeping = crate::trace::span(crate::trace::Kind::PacerSleep, 0, vt as u64, 0);
                sleep_until(self.due_at(vt), wait);
            }
            Pace::Late(lateness) => {
                let late_ns = u64::try_from(lateness.as_nanos()).unwrap_or(u64::MAX);
                crate::trace::event(crate::trace::Kind::LateFrame, crate::trace::Phase::Instant, 0, vt as u64, late_ns);
                if let Some(on_late) = self.on_late.as_mut() {
                    on_late(vt, lateness);
                }
            }
            Pace::OnTime(_) => {}
        }
        pace
    }

    /// How long until `vt` is due (`None`: due already). Lets a caller sleep in slices of its own
    /// (to stay responsive to a stop) before calling [`sync`](Self::sync).
    pub fn until(&self, vt: Timestamp) -> Option<Duration> {
        match self.rule.decide(vt, self.elapsed()) {
            Pace::Early(wait) => Some(wait),
            Pace::OnTime(_) | Pace::Late(_) => None,
        }
    }

    /// The virtual time due now: where a late source can skip ahead to.
    pub fn vt_now(&self) -> Timestamp {
        self.rule.vt_at(self.elapsed())
    }

    /// When `vt` is due on this process's clock (`None`: beyond what the clock can represent).
    pub fn due_at(&self, vt: Timestamp) -> Option<Instant> {
        let due = i128::try_from(self.rule.due(vt)?.as_nanos()).ok()?;
        let from_at = due - self.start.since_ns;
        let magnitude = Duration::from_nanos(u64::try_from(from_at.unsigned_abs()).ok()?);
        if from_at >= 0 {
            self.start.at.checked_add(magnitude)
        } else {
            self.start.at.checked_sub(magnitude)
        }
    }

    /// Restarts the clock: virtual time 0 is due now.
    pub fn reset(&mut self) {
        self.start = Epoch::now();
    }

    /// Time since the start (0 before it).
    fn elapsed(&self) -> Duration {
        let since = self.start.since_at(Instant::now());
        Duration::from_nanos(u64::try_from(since.max(0)).unwrap_or(u64::MAX))
    }
}

/// Sleeps for most of `wait`, then yields until `deadline`: `thread::sleep` alone overshoots by
/// the timer slack (~50–100 µs here), the last stretch keeps the wake-up error small. With no
/// representable deadline, `wait` is all there is.
fn sleep_until(deadline: Option<Instant>, wait: Duration) {
    const SPIN: Duration = Duration::from_micros(200);
    if wait > SPIN {
        std::thread::sleep(wait - SPIN);
    }
    while deadline.is_some_and(|deadline| Instant::now() < deadline) {
        std::thread::yield_now();
    }
}
