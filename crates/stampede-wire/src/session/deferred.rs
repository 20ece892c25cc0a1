//! The consumes a client defers into its session's next request ([`Deferred`]): the rule the
//! client (`stampede`'s `remote/client/consumes.rs`) and the whole-path simulation both follow.
//!
//! Guarantees: every request the session sends takes the consumes deferred before it was built
//! (at most [`CONSUMED_MAX`], oldest first; the rest ride on the next), so the node applies them
//! before anything the client asks later; a consume waits at most [`CONSUME_DELAY_MAX`] after
//! the oldest deferred one (the client sends them then, whatever its application does); holding
//! [`CONSUMED_MAX`] the client sends them at once; consumes an exchange carried that failed are
//! deferred again, before newer ones, in their order; only a connection that consumes more often
//! than every half [`CONSUME_DELAY_MAX`] defers ([`worth_deferring`]). Generic over the caller's
//! clock `T`.

use crate::request::{Consumed, CONSUMED_MAX, CONSUME_DELAY_MAX};

/// The consumes a session deferred, in the order they were made, and since when the oldest waits.
#[derive(Clone, Debug)]
pub struct Deferred<T> {
    consumed: Vec<Consumed>,
    since: Option<T>,
}

impl<T> Default for Deferred<T> {
    fn default() -> Self {
        Deferred { consumed: Vec::new(), since: None }
    }
}

impl<T: Copy + Ord> Deferred<T> {
    /// Defers `consumed`, made at `now`: `true` when the client must send what it holds now
    /// ([`CONSUMED_MAX`] deferred).
    pub fn defer(&mut self, consumed: Consumed, now: T) -> bool {
        self.consumed.push(consumed);
        self.since = Some(self.since.map_or(now, |since| since.min(now)));
        self.consumed.len() >= CONSUMED_MAX
    }

    /// Since when the oldest deferred consume waits (`None`: none does). The client sends them
    /// once [`CONSUME_DELAY_MAX`] passed since.
    pub fn since(&self) -> Option<T> {
        self.since
    }

    /// Whether nothing is deferred.
    pub fn is_empty(&self) -> bool {
        self.consumed.is_empty()
    }

    /// The consumes for a request's header: the oldest [`CONSUMED_MAX`], in order. What is left
    /// keeps its `since` (it is no older than it).
    pub fn take(&mut self) -> Vec<Consumed> {
        let n = self.consumed.len().min(CONSUMED_MAX);
        let taken: Vec<Consumed> = self.consumed.drain(..n).collect();
        if self.consumed.is_empty() {
            self.since = None;
        }
        taken
    }

    /// The newest deferred consume, to send as a request of its own (the others ride in its
    /// header, and are applied before it).
    pub fn pop(&mut self) -> Option<Consumed> {
        let newest = self.consumed.pop();
        if self.consumed.is_empty() {
            self.since = None;
        }
        newest
    }

    /// The consumes of an exchange that failed, deferred again before the newer ones, as if made
    /// at `at` (when the exchange started, or earlier).
    pub fn restore(&mut self, back: Vec<Consumed>, at: T) {
        if back.is_empty() {
            return;
        }
        self.consumed.splice(0..0, back);
        self.since = Some(self.since.map_or(at, |since| since.min(at)));
    }
}

/// Whether a consume is deferred, the connection's previous one made `since_previous` before
/// (`None`: it is its first): only when consumes come more often than every half
/// [`CONSUME_DELAY_MAX`]. A slower reader would send each consume alone all the same — nothing
/// saved — and its cache answers, which ride with them, would reach the node's tape late: the
/// node predicts the reader's next get from it (`stampede_core::prefetch::Pusher`), and pushes
/// frames it will skip when its latest reads are not heard of yet.
pub fn worth_deferring(since_previous: Option<std::time::Duration>) -> bool {
    since_previous.is_some_and(|since| since < CONSUME_DELAY_MAX / 2)
}

/// When consumes deferred since `since` must be sent, on a clock counting from an origin in
/// microseconds (the simulation's).
pub fn due_us(since: u64) -> u64 {
    since.saturating_add(u64::try_from(CONSUME_DELAY_MAX.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consume(ts: i64) -> Consumed {
        Consumed { connection: 1, ts, until: ts % 2 == 0 }
    }

    #[test]
    fn a_request_takes_the_oldest_in_order_and_a_failure_puts_them_back_first() {
        let mut deferred = Deferred::default();
        assert_eq!(deferred.since(), None);
        assert!(!deferred.defer(consume(1), 10u64));
        assert!(!deferred.defer(consume(2), 12));
        assert_eq!(deferred.since(), Some(10));
        let carried = deferred.take();
        assert_eq!(carried, vec![consume(1), consume(2)]);
        assert_eq!(deferred.since(), None);
        assert!(!deferred.defer(consume(3), 20));
        deferred.restore(carried, 11);
        assert_eq!(deferred.take(), vec![consume(1), consume(2), consume(3)]);
        assert!(deferred.is_empty());
    }

    #[test]
    fn holding_the_bound_sends_at_once_and_a_header_carries_at_most_the_bound() {
        let mut deferred = Deferred::default();
        let full: Vec<bool> = (0..CONSUMED_MAX as i64 + 1).map(|ts| deferred.defer(consume(ts), ts)).collect();
        assert_eq!(full.iter().position(|&f| f), Some(CONSUMED_MAX - 1));
        assert_eq!(deferred.take().len(), CONSUMED_MAX);
        assert_eq!(deferred.take(), vec![consume(CONSUMED_MAX as i64)]);
        assert_eq!(due_us(5), 5 + CONSUME_DELAY_MAX.as_micros() as u64);
    }

    #[test]
    fn only_a_reader_faster_than_half_the_delay_defers() {
        assert!(!worth_deferring(None));
        assert!(worth_deferring(Some(CONSUME_DELAY_MAX / 3)));
        assert!(!worth_deferring(Some(CONSUME_DELAY_MAX / 2)));
        assert!(!worth_deferring(Some(CONSUME_DELAY_MAX)));
    }
}
