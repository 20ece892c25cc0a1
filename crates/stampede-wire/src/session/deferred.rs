//! The consumes a client defers into its session's requests ([`Deferred`]): the rule the client
//! (`stampede`'s `remote/client/consumes.rs`) and the whole-path simulation both follow.
//!
//! Why every request carries a consume until a reply confirms it, and not one request: a node
//! runs a session's requests concurrently, so the request that first carried a consume — another
//! thread's, still on its way — may run after a later request that relies on it (a get of the
//! consumed timestamp, answered with the item instead of `AlreadyConsumed`). Carried by every
//! request built while it is unconfirmed, it is applied by whichever runs first; each consume has
//! its number, and the node applies each number once (`stampede-node`'s `serve/moves.rs`): a
//! consume made once is counted once on its connection's tape, whose recent reads the node
//! predicts the reader's next get from, and costs the node once. A reply to a call
//! confirms what its *first* try carried: a repeat the node answers from the first run's reply
//! applied none of what a later try added.
//!
//! Guarantees: at most [`CONSUMED_MAX`] consumes await confirmation (past it [`may_defer`] says
//! no and the client sends the consume at once); they are carried oldest first, numbered from 1
//! in the order made; the client sends a request that carries them once the oldest waited
//! [`CONSUME_DELAY_MAX`], or as long since its last such send ([`sent`]); only a connection that
//! consumes more often than every half [`CONSUME_DELAY_MAX`] defers ([`worth_deferring`]). Generic
//! over the caller's clock `T`.
//!
//! [`may_defer`]: Deferred::may_defer
//! [`sent`]: Deferred::sent

use stampede_core::{Handle, Timestamp};

use crate::request::{Consumed, CONSUMED_MAX, CONSUME_DELAY_MAX};

/// The consumes a session deferred that no reply confirmed yet, in the order they were made, and
/// since when the client counts their delay.
#[derive(Clone, Debug)]
pub struct Deferred<T> {
    unconfirmed: Vec<Consumed>,
    /// The number the next deferred consume takes.
    next: u64,
    since: Option<T>,
}

impl<T> Default for Deferred<T> {
    fn default() -> Self {
        Deferred { unconfirmed: Vec::new(), next: 1, since: None }
    }
}

impl<T: Copy + Ord> Deferred<T> {
    /// Whether a consume may be deferred now: fewer than [`CONSUMED_MAX`] await confirmation.
    pub fn may_defer(&self) -> bool {
        self.unconfirmed.len() < CONSUMED_MAX
    }

    /// Defers a consume of `connection` at `ts` (`consume_until` when `until`), made at `now`.
    pub fn defer(&mut self, connection: Handle, ts: Timestamp, until: bool, now: T) {
        debug_assert!(self.may_defer(), "a consume deferred past CONSUMED_MAX unconfirmed ones");
        self.unconfirmed.push(Consumed { connection, ts, until, number: self.next });
        self.next += 1;
        self.since = Some(self.since.map_or(now, |since| since.min(now)));
    }

    /// Since when the client counts the delay of what is deferred (`None`: nothing is). It sends
    /// a request that carries them once [`CONSUME_DELAY_MAX`] passed since.
    pub fn since(&self) -> Option<T> {
        self.since
    }

    /// What a request's header carries: every unconfirmed consume, oldest first.
    pub fn carried(&self) -> Vec<Consumed> {
        debug_assert!(self.unconfirmed.len() <= CONSUMED_MAX);
        self.unconfirmed.clone()
    }

    /// An outcome was read in reply to a call whose first try carried `first_try`: the node
    /// applied them (an error may come from a refusal before the request ran: it confirms
    /// nothing).
    pub fn confirm(&mut self, first_try: &[Consumed]) {
        self.unconfirmed.retain(|c| !first_try.iter().any(|f| f.number == c.number));
        if self.unconfirmed.is_empty() {
            self.since = None;
        }
    }

    /// The client sent a request to carry them at `now`: the next is due a delay later, if its
    /// reply does not confirm them first.
    pub fn sent(&mut self, now: T) {
        if !self.unconfirmed.is_empty() {
            self.since = Some(now);
        }
    }

    /// How many consumes await confirmation.
    pub fn len(&self) -> usize {
        self.unconfirmed.len()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.unconfirmed.is_empty()
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

    #[test]
    fn every_request_carries_a_consume_until_a_first_try_that_carried_it_is_answered() {
        let mut deferred = Deferred::default();
        assert_eq!(deferred.since(), None);
        deferred.defer(1, 4, true, 10u64);
        let first = deferred.carried();
        assert_eq!(first, vec![Consumed { connection: 1, ts: 4, until: true, number: 1 }]);
        deferred.defer(1, 5, false, 12);
        assert_eq!(deferred.since(), Some(10));
        // Another call, sent meanwhile, carries both: it may run first.
        assert_eq!(deferred.carried().iter().map(|c| c.number).collect::<Vec<_>>(), vec![1, 2]);
        deferred.confirm(&first);
        assert_eq!(deferred.carried(), vec![Consumed { connection: 1, ts: 5, until: false, number: 2 }]);
        deferred.confirm(&[]);
        assert_eq!(deferred.len(), 1, "a call whose first try carried nothing confirms nothing");
        deferred.sent(30);
        assert_eq!(deferred.since(), Some(30), "sent: the next send is a delay later");
        deferred.confirm(&deferred.carried());
        assert!(deferred.is_empty());
        assert_eq!(deferred.since(), None);
        deferred.defer(2, 9, true, 40);
        assert_eq!(deferred.carried()[0].number, 3, "numbers are never reused");
    }

    #[test]
    fn past_the_bound_nothing_is_deferred_and_a_header_carries_at_most_the_bound() {
        let mut deferred = Deferred::default();
        for ts in 0..CONSUMED_MAX as i64 {
            assert!(deferred.may_defer());
            deferred.defer(1, ts, true, ts);
        }
        assert!(!deferred.may_defer());
        assert_eq!(deferred.carried().len(), CONSUMED_MAX);
        deferred.confirm(&deferred.carried()[..1]);
        assert!(deferred.may_defer());
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
