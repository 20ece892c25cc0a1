//! Where one thread's time went (docs/TRACING.md; the third seed's Figures 7–8): its wall time
//! split into application logic, blocking, runtime (allocation, locking and GC inside it, and the
//! rest) and messaging.
//!
//! Each interval between two consecutive records of the thread belongs to the innermost span
//! open over it: a wait or a pacer's sleep is blocking; a send, a receive or a (de)serialisation
//! is messaging; an allocation, a lock or a GC sweep is that part of the runtime; any other
//! runtime call (put, get, consume, a claim's move, a join) is the runtime's own; a user span, a
//! GC handler (the application's code) or no span at all is application logic.
//!
//! Guarantees: the parts add up to the wall time exactly (`t` of the last record minus the
//! first's, for a log whose times never go back); spans left open (a log cut by a crash) end at
//! the last record; an end without its begin is counted in [`Breakdown::unbalanced`], never a
//! panic.

use crate::record::{Kind, Phase, Record};

/// One thread's time, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    /// From its first record to its last.
    pub wall: u64,
    /// Its own code: outside every runtime call, or in a user span or GC handler.
    pub application: u64,
    /// Waiting inside a call (for an item, for room) or for a pacer's tick.
    pub blocking: u64,
    /// Inside runtime calls, outside the parts below.
    pub runtime: u64,
    /// Allocating, waiting for locks, sweeping (inside runtime calls).
    pub allocation: u64,
    pub locking: u64,
    pub gc: u64,
    /// Sending, receiving, encoding and decoding messages.
    pub messaging: u64,
    /// Ends without their begin, and times that went back (their interval counts as 0).
    pub unbalanced: usize,
}

impl Breakdown {
    /// The parts' sum: equals [`wall`](Self::wall).
    pub fn sum(&self) -> u64 {
        self.application + self.blocking + self.runtime + self.allocation + self.locking + self.gc + self.messaging
    }

    /// Everything inside the runtime, its parts included.
    pub fn runtime_total(&self) -> u64 {
        self.runtime + self.allocation + self.locking + self.gc
    }

    /// The breakdown of one thread's records, in the order it wrote them.
    pub fn of_thread(records: &[Record]) -> Breakdown {
        let mut breakdown = Breakdown::default();
        let mut open: Vec<Kind> = Vec::new();
        let mut previous: Option<u64> = None;
        for record in records {
            if let Some(t) = previous {
                match record.t.checked_sub(t) {
                    Some(dt) => {
                        *breakdown.part(open.last().copied()) += dt;
                        breakdown.wall += dt;
                    }
                    None => breakdown.unbalanced += 1,
                }
            }
            previous = Some(previous.map_or(record.t, |t| t.max(record.t)));
            match record.phase {
                Phase::Begin => open.push(record.kind),
                Phase::End => match open.iter().rposition(|kind| *kind == record.kind) {
                    Some(at) => {
                        // Spans inside it that never ended end with it.
                        breakdown.unbalanced += open.len() - 1 - at;
                        open.truncate(at);
                    }
                    None => breakdown.unbalanced += 1,
                },
                Phase::Instant => {}
            }
        }
        breakdown
    }

    fn part(&mut self, innermost: Option<Kind>) -> &mut u64 {
        match innermost {
            None | Some(Kind::User | Kind::GcHandler) => &mut self.application,
            Some(Kind::Wait | Kind::PacerSleep) => &mut self.blocking,
            Some(Kind::Send | Kind::Receive | Kind::Serialise) => &mut self.messaging,
            Some(Kind::Alloc) => &mut self.allocation,
            Some(Kind::Lock) => &mut self.locking,
            Some(Kind::GcSweep) => &mut self.gc,
            Some(Kind::Put | Kind::Get | Kind::Consume | Kind::Claim | Kind::Join) => &mut self.runtime,
            // Instants are never open.
            Some(Kind::Reclaim | Kind::LateFrame) => &mut self.application,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn span(t: u64, kind: Kind, phase: Phase) -> Record {
        Record { t, kind, phase, name: 0, ts: 0, bytes: 0 }
    }

    /// A tracker's loop: 100 ns of its own code, a get (20 ns of runtime, 50 of waiting, 5 of
    /// locking, 10 receiving), 30 ns in a user span, a put (15 ns, 5 of allocation).
    #[test]
    fn a_known_loop_splits_as_built() {
        use Kind::*;
        use Phase::*;
        let records = [
            span(0, User, Instant),
            span(100, Get, Begin),
            span(110, Wait, Begin),
            span(160, Wait, End),
            span(162, Lock, Begin),
            span(167, Lock, End),
            span(170, Receive, Begin),
            span(180, Receive, End),
            span(183, Get, End),
            span(183, User, Begin),
            span(213, User, End),
            span(213, Put, Begin),
            span(220, Alloc, Begin),
            span(225, Alloc, End),
            span(228, Put, End),
        ];
        let b = Breakdown::of_thread(&records);
        let expected = Breakdown {
            wall: 228,
            application: 130,
            blocking: 50,
            runtime: 28,
            allocation: 5,
            locking: 5,
            gc: 0,
            messaging: 10,
            unbalanced: 0,
        };
        assert_eq!(b, expected);
        assert_eq!(b.sum(), b.wall);
    }

    #[test]
    fn a_log_cut_by_a_crash_and_stray_ends_still_add_up() {
        use Kind::*;
        use Phase::*;
        let records = [
            span(10, Get, Begin),
            span(20, Wait, Begin),
            span(25, Put, End),
            span(40, Wait, End),
            span(5, Consume, Begin),
        ];
        let b = Breakdown::of_thread(&records);
        assert_eq!((b.wall, b.runtime, b.blocking, b.unbalanced), (30, 10, 20, 2));
        assert_eq!(b.sum(), b.wall);
    }

    proptest! {
        /// Whatever the records, the parts add up to the wall time.
        #[test]
        fn the_parts_always_add_up(steps in proptest::collection::vec((0..1_000u64, 0..17usize, 0..3u8), 0..200)) {
            let mut t = 0;
            let records: Vec<_> = steps
                .into_iter()
                .map(|(dt, kind, phase)| {
                    t += dt;
                    let kind = Kind::from_code(kind as u16).unwrap();
                    let phase = [Phase::Begin, Phase::End, Phase::Instant][phase as usize];
                    span(t, kind, phase)
                })
                .collect();
            let b = Breakdown::of_thread(&records);
            prop_assert_eq!(b.sum(), b.wall);
            let expected_wall = match (records.first(), records.last()) {
                (Some(first), Some(last)) => last.t - first.t,
                _ => 0,
            };
            prop_assert_eq!(b.wall, expected_wall);
        }
    }
}
