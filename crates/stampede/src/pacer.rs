//! Real-time pacing (docs/SEMANTICS.md, "Pacing"): `sync(vt)` sleeps until `start + vt * tick` when
//! early and calls `on_late(vt, lateness)` when later than the tolerance. A due time too far away
//! for the clock to represent (a huge tick or virtual time) is waited for like any other: the sleep
//! does not end.

use std::time::{Duration, Instant};

use stampede_core::{Pace, PaceRule, Result, Timestamp};

/// Called with the virtual time and how late it is, when later than the tolerance.
pub type OnLate = Box<dyn FnMut(Timestamp, Duration) + Send>;

/// Paces a task's virtual time against real time.
pub struct Pacer {
    rule: PaceRule,
    start: Instant,
    on_late: Option<OnLate>,
}

impl Pacer {
    /// A pacer starting now; `tick` is the real time of one virtual time unit (1/30 s for a 30 fps
    /// camera whose virtual time is the frame number).
    pub fn new(tick: Duration, tolerance: Duration) -> Result<Pacer> {
        Ok(Pacer { rule: PaceRule::new(tick, tolerance)?, start: Instant::now(), on_late: None })
    }

    /// Sets the handler called when `sync` finds the task late beyond the tolerance.
    pub fn on_late(mut self, handler: impl FnMut(Timestamp, Duration) + Send + 'static) -> Pacer {
        self.on_late = Some(Box::new(handler));
        self
    }

    /// Waits until `vt` is due if early; calls `on_late` if late beyond the tolerance. Returns
    /// what it found.
    pub fn sync(&mut self, vt: Timestamp) -> Pace {
        let pace = self.rule.decide(vt, self.start.elapsed());
        match pace {
            Pace::Early(wait) => {
                let _sleeping = crate::trace::span(crate::trace::Kind::PacerSleep, 0, vt as u64, 0);
                sleep_until(self.rule.due(vt).and_then(|due| self.start.checked_add(due)), wait);
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
        match self.rule.decide(vt, self.start.elapsed()) {
            Pace::Early(wait) => Some(wait),
            Pace::OnTime(_) | Pace::Late(_) => None,
        }
    }

    /// The virtual time due now: where a late source can skip ahead to.
    pub fn vt_now(&self) -> Timestamp {
        self.rule.vt_at(self.start.elapsed())
    }

    /// Restarts the clock: virtual time 0 is due now.
    pub fn reset(&mut self) {
        self.start = Instant::now();
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
