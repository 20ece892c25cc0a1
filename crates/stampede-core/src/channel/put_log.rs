//! A channel's log of its latest puts — when each came and how large it was — kept only once
//! someone asked for it (`stampede hz`, `Channel::put_log`), and bounded by [`PUT_LOG_MAX`]:
//! what a rate, its jitter and a bandwidth are computed from on the channel's node, without a
//! payload moving or a reader holding GC back. The time is the caller's (the engine's monotonic
//! clock): this module reads no clock.

use std::collections::VecDeque;

use super::ChannelState;
use crate::time::Timestamp;

/// Most puts a channel's log keeps (the oldest go first).
pub const PUT_LOG_MAX: usize = 1024;

/// One put of a channel's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PutRecord {
    /// When it was put, in µs of the channel's runtime's monotonic clock.
    pub at_us: u64,
    pub ts: Timestamp,
    /// Its payload's size.
    pub bytes: u64,
}

impl ChannelState {
    /// Notes a put that just succeeded, timed by `now_us` (called only while the log is on).
    pub fn note_put(&mut self, ts: Timestamp, bytes: usize, now_us: impl FnOnce() -> u64) {
        let Some(log) = &mut self.put_log else { return };
        if log.len() == PUT_LOG_MAX {
            log.pop_front();
        }
        log.push_back(PutRecord { at_us: now_us(), ts, bytes: bytes as u64 });
        debug_assert!(log.len() <= PUT_LOG_MAX);
    }

    /// The log's puts, oldest first; turns the log on if it was off (from then on every put is
    /// noted: a channel nobody asked about costs nothing).
    pub fn put_log(&mut self) -> Vec<PutRecord> {
        self.put_log.get_or_insert_with(|| VecDeque::with_capacity(PUT_LOG_MAX)).iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Limits, Retention};

    /// Off until asked for; then every put, the newest PUT_LOG_MAX of them.
    #[test]
    fn the_log_is_kept_once_asked_for_and_bounded() {
        let mut channel = ChannelState::new("c".into(), Limits::unbounded(), Retention::default());
        channel.note_put(0, 10, || unreachable!("no clock is read while the log is off"));
        assert!(channel.put_log().is_empty());
        for ts in 0..(PUT_LOG_MAX as Timestamp + 5) {
            channel.note_put(ts, 100, || ts as u64 * 1000);
        }
        let log = channel.put_log();
        assert_eq!(log.len(), PUT_LOG_MAX);
        assert_eq!(log[0], PutRecord { at_us: 5000, ts: 5, bytes: 100 });
        assert_eq!(log.last().unwrap().ts, PUT_LOG_MAX as Timestamp + 4);
    }
}
