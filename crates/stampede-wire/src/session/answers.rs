//! The answers a client's prefetch caches gave ([`CacheAnswers`]), reported to the node until a
//! reply confirms that it applied them: the rule the client (`stampede`'s
//! `remote/client/push.rs`) and the whole-path simulation both follow.
//!
//! Why until confirmed, and not once: a node runs a session's requests concurrently, so the
//! request that first reported an answer may run after a later request of the session that relies
//! on it — a put at the item's timestamp by a task whose visibility is that item, held open (a
//! reader at INFINITY putting its results at the frame's timestamp). Every request built while an
//! answer is unconfirmed reports it, so whichever runs first applies it; the node applies a report
//! again as a no-op (the item is open already, or consumed since). An outcome in reply to a call
//! confirms what its *first* try reported: a repeat the node answers from the first run's reply
//! applied none of what a later try added, and an error may come from a refusal before the
//! request ran.
//!
//! Bounded: at most [`OPENED_MAX`] unconfirmed answers; past it caches answer nothing (the client
//! asks the node, whose replies confirm). Generic over the caller's clock `T`.

use stampede_core::{Handle, Timestamp};

use crate::request::{Opened, OPENED_MAX};

/// The unconfirmed answers of a session's caches, in the order given, each with when.
#[derive(Clone, Debug)]
pub struct CacheAnswers<T> {
    answers: Vec<(Opened, T)>,
}

impl<T> Default for CacheAnswers<T> {
    fn default() -> Self {
        CacheAnswers { answers: Vec::new() }
    }
}

impl<T: Copy> CacheAnswers<T> {
    /// Whether a cache may answer now: fewer than [`OPENED_MAX`] answers await confirmation.
    pub fn may_answer(&self) -> bool {
        self.answers.len() < OPENED_MAX
    }

    /// A cache answered a `NEWEST_UNSEEN` get on `connection` with the item at `ts`, at `at`.
    pub fn answered(&mut self, connection: Handle, ts: Timestamp, at: T) {
        debug_assert!(self.may_answer(), "a cache answered past OPENED_MAX unconfirmed answers");
        self.answers.push((Opened { connection, ts, ago_us: 0 }, at));
    }

    /// What a request's header reports: every unconfirmed answer, oldest first, with how long ago
    /// (µs) it was given, as `ago` says.
    pub fn reports(&self, ago: impl Fn(T) -> u64) -> Vec<Opened> {
        self.answers.iter().map(|&(opened, at)| Opened { ago_us: ago(at), ..opened }).collect()
    }

    /// An outcome was read in reply to a call whose first try reported `first_try`: the node
    /// applied them (an error may come from a refusal before the request ran: it confirms
    /// nothing).
    pub fn confirm(&mut self, first_try: &[Opened]) {
        let reported = |o: &Opened| first_try.iter().any(|r| (r.connection, r.ts) == (o.connection, o.ts));
        self.answers.retain(|(opened, _)| !reported(opened));
    }

    /// How many answers await confirmation.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_reported_by_every_request_until_a_first_try_that_reported_it_is_answered() {
        let mut answers = CacheAnswers::default();
        answers.answered(1, 32, 10u64);
        let first = answers.reports(|at| 100 - at);
        assert_eq!(first, vec![Opened { connection: 1, ts: 32, ago_us: 90 }]);
        answers.answered(1, 33, 20);
        // Another call, sent meanwhile, reports both: it may run first.
        assert_eq!(answers.reports(|_| 0).len(), 2);
        answers.confirm(&first);
        assert_eq!(answers.reports(|_| 0), vec![Opened { connection: 1, ts: 33, ago_us: 0 }]);
        answers.confirm(&[]);
        assert_eq!(answers.len(), 1, "a call whose first try reported nothing confirms nothing");
    }

    #[test]
    fn past_the_bound_caches_answer_nothing() {
        let mut answers = CacheAnswers::default();
        for ts in 0..OPENED_MAX as Timestamp {
            assert!(answers.may_answer());
            answers.answered(2, ts, ());
        }
        assert!(!answers.may_answer());
        answers.confirm(&answers.reports(|()| 0)[..1]);
        assert!(answers.may_answer());
    }
}
