//! Tapes, after Tapeworm's (which recorded a process's accesses to shared data so that the data
//! could move before it was asked for): what one input connection asks for — the selector of
//! each get and the timestamp it returned, the window of each range read, each consume, when
//! each came — recorded by a node for every remote input connection with no annotation from the
//! application, and the access pattern that shows ([`Pattern`]).
//!
//! Guarantees: bounded — counters, and the last [`TAPE_RECENT_MAX`] accesses; pure — the caller
//! says when each access happened (microseconds on its own clock; one that comes out of order is
//! recorded at its predecessor's time), so a simulation records on its virtual clock. A tape decides nothing: it is what a node reads to
//! push items ahead of the gets it predicts, and what tools show (a graph's connections).

use std::collections::VecDeque;

use crate::{Selector, Timestamp};

/// The accesses a tape keeps, the latest ones.
pub const TAPE_RECENT_MAX: usize = 16;

/// Reads (gets and range reads) a pattern is told from, at least.
const PATTERN_READS_MIN: usize = 4;

/// One access of an input connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Access {
    /// A get with `selector`, and the timestamp it returned (`None`: nothing was there).
    Get { selector: Selector, got: Option<Timestamp> },
    /// A range read of `from..=to`, returning `items`.
    Range { from: Timestamp, to: Timestamp, items: u64 },
    /// A consume up to `until` (of the one item there, on a queue).
    Consume { until: Timestamp },
}

/// An access and when it came (µs, on the recorder's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Recorded {
    pub access: Access,
    pub at_us: u64,
}

/// How a connection reads, as its recent reads show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Pattern {
    /// Too few reads to tell.
    #[default]
    Unknown,
    /// The freshest item each time (`NEWEST`, `NEWEST_UNSEEN`): a reader that skips what it
    /// missed — worth at most the newest item ahead, never a backlog.
    Skipping,
    /// Items in timestamp order: `OLDEST_UNSEEN` or `OLDEST`, or exact timestamps rising by
    /// `stride` — worth the next items ahead, within a window.
    InOrder { stride: Option<Timestamp> },
    /// Range reads `width` wide whose start never goes back: worth the next window's new items.
    Window { width: Timestamp },
    /// None of these.
    Mixed,
}

impl std::fmt::Display for Pattern {
    /// In words, as tools print it: `skipping`, `in order`, `in order, stride 3`, `window 30`,
    /// `mixed`, `unknown`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Unknown => f.write_str("unknown"),
            Pattern::Skipping => f.write_str("skipping"),
            Pattern::InOrder { stride: None } => f.write_str("in order"),
            Pattern::InOrder { stride: Some(stride) } => write!(f, "in order, stride {stride}"),
            Pattern::Window { width } => write!(f, "window {width}"),
            Pattern::Mixed => f.write_str("mixed"),
        }
    }
}

/// What one input connection asked for: counters since it was attached, and its latest
/// accesses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Tape {
    pub gets: u64,
    /// Gets that found nothing to return (`NotAvailable`).
    pub misses: u64,
    pub ranges: u64,
    pub consumes: u64,
    /// The pattern of its recent reads ([`Tape::pattern`]).
    pub pattern: Pattern,
    /// The mean time between its recent reads, µs ([`Tape::interval_us`]).
    pub interval_us: Option<u64>,
    /// The latest accesses, oldest first (at most [`TAPE_RECENT_MAX`]).
    pub recent: VecDeque<Recorded>,
}

impl Tape {
    /// Records `access`, made at `at_us` — or when the latest recorded access was made, if that
    /// is later: operations of one connection may run side by side on a node (a get waiting while
    /// its retry or a consume comes), each timed when it started, and their records may come in
    /// another order. A tape's clock never goes back.
    pub fn record(&mut self, access: Access, at_us: u64) {
        let at_us = self.recent.back().map_or(at_us, |last| last.at_us.max(at_us));
        match access {
            Access::Get { got, .. } => {
                self.gets += 1;
                self.misses += u64::from(got.is_none());
            }
            Access::Range { .. } => self.ranges += 1,
            Access::Consume { .. } => self.consumes += 1,
        }
        if self.recent.len() == TAPE_RECENT_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back(Recorded { access, at_us });
        debug_assert!(self.recent.len() <= TAPE_RECENT_MAX);
        (self.pattern, self.interval_us) = (self.reads_pattern(), self.reads_interval());
    }

    /// The pattern of the recent reads: one that three in four of them show (all of them, for a
    /// stride or a window), once there are at least a few.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// The mean time between two recent reads (µs); `None` with fewer than two.
    pub fn interval_us(&self) -> Option<u64> {
        self.interval_us
    }

    /// Whether it read at all, and each of its recent reads was a get of the freshest item
    /// (`NEWEST`, `NEWEST_UNSEEN`).
    pub fn reads_newest(&self) -> bool {
        let newest =
            |r: &Recorded| matches!(r.access, Access::Get { selector: Selector::Newest | Selector::NewestUnseen, .. });
        self.reads().next().is_some() && self.reads().all(newest)
    }

    /// When the latest read (a get or a range read) came, µs.
    pub fn last_read_us(&self) -> Option<u64> {
        self.reads().last().map(|read| read.at_us)
    }

    /// The recent reads (gets and range reads), oldest first.
    fn reads(&self) -> impl Iterator<Item = &Recorded> {
        self.recent.iter().filter(|r| !matches!(r.access, Access::Consume { .. }))
    }

    fn reads_interval(&self) -> Option<u64> {
        let (mut reads, mut first, mut last) = (0u64, None, 0);
        for read in self.reads() {
            reads += 1;
            first.get_or_insert(read.at_us);
            last = read.at_us;
        }
        Some(last.saturating_sub(first?) / reads.checked_sub(1).filter(|&n| n > 0)?)
    }

    fn reads_pattern(&self) -> Pattern {
        let reads: Vec<Access> = self.reads().map(|r| r.access).collect();
        if reads.len() < PATTERN_READS_MIN {
            return Pattern::Unknown;
        }
        let most = |selectors: &[Selector]| {
            let showing = reads
                .iter()
                .filter(|a| matches!(a, Access::Get { selector, .. } if selectors.contains(selector)))
                .count();
            showing * 4 >= reads.len() * 3
        };
        if most(&[Selector::Newest, Selector::NewestUnseen]) {
            return Pattern::Skipping;
        }
        if most(&[Selector::Oldest, Selector::OldestUnseen]) {
            return Pattern::InOrder { stride: None };
        }
        let exact: Vec<Timestamp> = reads
            .iter()
            .filter_map(|a| match a {
                Access::Get { selector: Selector::At(ts), .. } => Some(*ts),
                _ => None,
            })
            .collect();
        if exact.len() == reads.len() {
            let strides: Vec<Option<Timestamp>> = exact.windows(2).map(|w| w[1].checked_sub(w[0])).collect();
            if let Some(Some(stride)) = strides.first().copied().filter(|s| s.is_some_and(|s| s > 0)) {
                if strides.iter().all(|s| *s == Some(stride)) {
                    return Pattern::InOrder { stride: Some(stride) };
                }
            }
        }
        let windows: Vec<(Timestamp, Timestamp)> = reads
            .iter()
            .filter_map(|a| match a {
                Access::Range { from, to, .. } => Some((*from, *to)),
                _ => None,
            })
            .collect();
        if windows.len() == reads.len() && windows.windows(2).all(|w| w[0].0 <= w[1].0) {
            let (from, to) = windows[windows.len() - 1];
            return Pattern::Window { width: to.saturating_sub(from) };
        }
        Pattern::Mixed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(selector: Selector, got: Option<Timestamp>) -> Access {
        Access::Get { selector, got }
    }

    /// A display reading the freshest frame at 30 fps skips: its tape says so, with the time
    /// between its gets; a miss is counted.
    #[test]
    fn a_reader_of_the_newest_frame_skips() {
        let mut tape = Tape::default();
        for (i, ts) in [3, 7, 12, 12, 20].into_iter().enumerate() {
            let got = (i != 3).then_some(ts);
            tape.record(get(Selector::NewestUnseen, got), i as u64 * 33_333);
        }
        assert_eq!(tape.pattern(), Pattern::Skipping);
        assert_eq!((tape.gets, tape.misses), (5, 1));
        assert_eq!(tape.interval_us(), Some(33_333));
    }

    /// A tracker reading in order, by `OLDEST_UNSEEN` or by exact timestamps a stride apart,
    /// consuming as it goes (consumes are not reads).
    #[test]
    fn in_order_readers_show_their_stride() {
        let mut stream = Tape::default();
        let mut exact = Tape::default();
        for i in 0..6 {
            stream.record(get(Selector::OldestUnseen, Some(i)), i as u64 * 10);
            stream.record(Access::Consume { until: i }, i as u64 * 10 + 1);
            exact.record(get(Selector::At(100 + 3 * i), Some(100 + 3 * i)), i as u64 * 10);
        }
        assert_eq!(stream.pattern(), Pattern::InOrder { stride: None });
        assert_eq!(stream.consumes, 6);
        assert_eq!(exact.pattern(), Pattern::InOrder { stride: Some(3) });
    }

    /// A sliding window reader, and readers the tape cannot tell yet or at all.
    #[test]
    fn windows_and_the_rest() {
        let mut window = Tape::default();
        for i in 0..5 {
            window.record(Access::Range { from: 10 * i, to: 10 * i + 30, items: 4 }, i as u64);
        }
        assert_eq!(window.pattern(), Pattern::Window { width: 30 });
        let mut young = Tape::default();
        young.record(get(Selector::Newest, Some(1)), 0);
        assert_eq!(young.pattern(), Pattern::Unknown);
        assert_eq!(young.interval_us(), None);
        let mut mixed = Tape::default();
        for (i, selector) in
            [Selector::At(9), Selector::Oldest, Selector::At(2), Selector::Newest].into_iter().enumerate()
        {
            mixed.record(get(selector, None), i as u64);
        }
        assert_eq!(mixed.pattern(), Pattern::Mixed);
    }

    /// Accesses recorded out of order (a get that waited, timed from its start, after a later
    /// consume) keep the tape's clock from going back.
    #[test]
    fn a_tape_clock_never_goes_back() {
        let mut tape = Tape::default();
        tape.record(Access::Consume { until: 4 }, 500);
        tape.record(get(Selector::OldestUnseen, Some(5)), 300);
        let times: Vec<u64> = tape.recent.iter().map(|r| r.at_us).collect();
        assert_eq!(times, [500, 500]);
    }

    /// However long a connection reads, its tape keeps the latest accesses only.
    #[test]
    fn a_tape_is_bounded() {
        let mut tape = Tape::default();
        for i in 0..(TAPE_RECENT_MAX as i64 * 10) {
            tape.record(get(Selector::OldestUnseen, Some(i)), i as u64);
        }
        assert_eq!(tape.recent.len(), TAPE_RECENT_MAX);
        assert_eq!(tape.gets, TAPE_RECENT_MAX as u64 * 10);
        assert_eq!(tape.recent.front().map(|r| r.at_us), Some(TAPE_RECENT_MAX as u64 * 9));
    }
}
