//! Requests at most once: the replies of a session's numbered requests, kept until the client
//! says it read them, so that a request repeated after its reply was lost is answered with the
//! first answer instead of running again (a put is not stored twice, a queue item taken by a get
//! whose reply was lost reaches that getter's retry).
//!
//! Guarantees, for one session:
//! - a numbered request (`seq` ≠ 0) runs at most once: a repeat that comes while the first runs
//!   waits for it, one that comes after gets the same reply;
//! - a reply is kept until the client acknowledges it (`RequestHeader::acks`) or the session ends;
//! - at most [`REPLIES_KEPT_MAX`] replies are kept: past that the lowest-numbered is forgotten,
//!   and a request numbered at or below a forgotten one that is not kept is refused, never run
//!   (it may have run already): the node then ends the session, which gives back whatever the
//!   first run may have taken (`stampede-node`'s `serve.rs`).
//!
//! Pure bookkeeping: no I/O, no clock, no waiting (the caller waits). `S` is what the node keeps
//! of a reply: its header and the payloads that follow it.

use std::collections::BTreeMap;

#[cfg(feature = "mutations")]
use super::Mutation;

/// Most replies a session keeps unacknowledged. A client acknowledges each reply with its next
/// request, so an honest one has about as many unacknowledged as it has calls under way.
pub const REPLIES_KEPT_MAX: usize = 4096;

/// A numbered request's state on the node.
#[derive(Debug)]
enum Kept<S> {
    /// Under way; its reply is not known yet.
    Running,
    /// Answered with this.
    Answered(S),
}

/// What to do with a numbered request.
#[derive(Debug)]
pub enum Turn<S> {
    /// Its first coming: run it, then [`Replies::answered`] (or [`Replies::abandoned`]).
    Run,
    /// A repeat of one under way: look again once it may have ended.
    Wait,
    /// A repeat of one answered: this is its reply.
    Answered(S),
    /// At or below a forgotten number and not kept: it may have run; refuse it.
    Forgotten,
}

/// The numbered requests of one session that the client has not acknowledged.
#[derive(Debug)]
pub struct Replies<S> {
    kept: BTreeMap<u64, Kept<S>>,
    /// The highest number forgotten to keep within [`REPLIES_KEPT_MAX`] (0: none).
    forgotten_through: u64,
    #[cfg(feature = "mutations")]
    mutation: Option<Mutation>,
}

impl<S> Default for Replies<S> {
    fn default() -> Self {
        Replies {
            kept: BTreeMap::new(),
            forgotten_through: 0,
            #[cfg(feature = "mutations")]
            mutation: None,
        }
    }
}

impl<S: Clone> Replies<S> {
    /// Forgets the replies the client says it read.
    pub fn acknowledge(&mut self, acks: &[u64]) {
        for seq in acks {
            self.kept.remove(seq);
        }
    }

    /// Switches on a session-rule fault (tests of the checker only).
    #[cfg(feature = "mutations")]
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation = Some(mutation);
    }

    /// Whether repeats run again (the `RunRepeats` mutation; never without the `mutations`
    /// feature).
    fn runs_repeats(&self) -> bool {
        #[cfg(feature = "mutations")]
        return self.mutation == Some(Mutation::RunRepeats);
        #[cfg(not(feature = "mutations"))]
        false
    }

    /// What to do with request `seq` (≠ 0); a first coming is recorded as under way.
    pub fn turn(&mut self, seq: u64) -> Turn<S> {
        debug_assert_ne!(seq, 0, "unnumbered requests are not kept");
        match self.kept.get(&seq) {
            Some(Kept::Answered(_)) if self.runs_repeats() => Turn::Run,
            Some(Kept::Answered(served)) => Turn::Answered(served.clone()),
            Some(Kept::Running) => Turn::Wait,
            None if seq <= self.forgotten_through => Turn::Forgotten,
            None => {
                self.kept.insert(seq, Kept::Running);
                while self.kept.len() > REPLIES_KEPT_MAX {
                    let Some((oldest, _)) = self.kept.pop_first() else { break };
                    self.forgotten_through = self.forgotten_through.max(oldest);
                }
                debug_assert!(self.kept.len() <= REPLIES_KEPT_MAX);
                Turn::Run
            }
        }
    }

    /// Request `seq` ran and got `served`: kept for its repeats (unless forgotten meanwhile).
    pub fn answered(&mut self, seq: u64, served: &S) {
        if let Some(kept) = self.kept.get_mut(&seq) {
            *kept = Kept::Answered(served.clone());
        }
    }

    /// Request `seq` stopped before it had a reply (the node is closing): a repeat runs it anew.
    pub fn abandoned(&mut self, seq: u64) {
        if matches!(self.kept.get(&seq), Some(Kept::Running)) {
            self.kept.remove(&seq);
        }
    }

    /// How many replies are kept (answered or under way).
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether no reply is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(n: u64) -> (u64, Vec<u8>) {
        (n, vec![n as u8; 3])
    }

    #[test]
    fn a_request_runs_once_and_its_repeats_get_its_reply() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        assert!(matches!(replies.turn(7), Turn::Run));
        assert!(matches!(replies.turn(7), Turn::Wait), "a repeat while it runs waits");
        replies.answered(7, &served(70));
        let Turn::Answered(again) = replies.turn(7) else { panic!("a repeat after the reply gets it") };
        assert_eq!(again, served(70));
        replies.acknowledge(&[7]);
        assert_eq!(replies.len(), 0, "an acknowledged reply is forgotten");
    }

    #[test]
    fn an_abandoned_request_runs_again() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        assert!(matches!(replies.turn(3), Turn::Run));
        replies.abandoned(3);
        assert!(matches!(replies.turn(3), Turn::Run));
        replies.answered(3, &served(1));
        replies.abandoned(3);
        assert!(matches!(replies.turn(3), Turn::Answered(_)), "an answered request is not abandoned");
    }

    #[test]
    fn past_the_bound_the_oldest_are_forgotten_and_never_run_again() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        for seq in 1..=REPLIES_KEPT_MAX as u64 + 10 {
            assert!(matches!(replies.turn(seq), Turn::Run));
            replies.answered(seq, &served(seq));
        }
        assert_eq!(replies.len(), REPLIES_KEPT_MAX);
        assert!(matches!(replies.turn(1), Turn::Forgotten));
        assert!(matches!(replies.turn(10), Turn::Forgotten));
        assert!(matches!(replies.turn(11), Turn::Answered(_)));
        assert!(matches!(replies.turn(REPLIES_KEPT_MAX as u64 + 11), Turn::Run), "a new number runs");
    }
}
