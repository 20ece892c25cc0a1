//! Requests at most once: the replies of a session's numbered requests, kept until the client
//! says it read them, so that a request repeated after its reply was lost is answered with the
//! first answer instead of running again (a put is not stored twice, a queue item taken by a get
//! whose reply was lost reaches that getter's retry).
//!
//! Guarantees, for one session:
//! - a numbered request (`seq` ≠ 0) runs at most once: a repeat that comes while the first runs
//!   waits for it, one that comes after gets the same reply, and one that comes after the client
//!   read that reply ([`Turn::Stale`]: acknowledged, or below the client's floor) is not run;
//! - a reply is kept until the client acknowledges it (`RequestHeader::acks`) or the session ends;
//!   then its number is kept (at most [`REPLIES_KEPT_MAX`]) until the client's floor
//!   (`RequestHeader::floor`, its lowest number still under way) passes it, and a reply the
//!   client never read is dropped once the floor passes it. A request numbered below the floor
//!   was concluded by the client: a late copy of it (on the direct path a retry takes another
//!   connection and may overtake it) is refused;
//! - at most [`REPLIES_KEPT_MAX`] replies are kept: past that the lowest-numbered is forgotten,
//!   and a request numbered at or below a forgotten one that is not kept is refused, never run
//!   (it may have run already): the node then ends the session, which gives back whatever the
//!   first run may have taken (`stampede-node`'s `serve.rs`);
//! - a request the client released (a get it gave up on, `RequestHeader::released`) is handed
//!   back for the node to give back what it took exactly once: its reply at once if it was
//!   answered ([`Replies::release`]), or when it ends if it still runs ([`Replies::answered`]);
//!   a copy of it that comes later is not run ([`Turn::Stale`]). Apply a header's releases before
//!   its floor: the floor drops what lies below it.
//!
//! Pure bookkeeping: no I/O, no clock, no waiting (the caller waits). `S` is what the node keeps
//! of a reply: its header and the payloads that follow it.

use std::collections::{BTreeMap, BTreeSet};

use super::Mutation;
use stampede_core::mutation::Switch;

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
    /// Under way, and released by the client: what it takes goes back when it ends.
    Released,
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
    /// A late copy of one the client concluded (it read the reply, or gave up): not run.
    Stale,
    /// At or below a forgotten number and not kept: it may have run; refuse it.
    Forgotten,
}

/// The numbered requests of one session that the client has not acknowledged.
#[derive(Debug)]
pub struct Replies<S> {
    kept: BTreeMap<u64, Kept<S>>,
    /// Numbers at or above `floor` whose replies the client acknowledged (at most
    /// [`REPLIES_KEPT_MAX`]).
    acknowledged: BTreeSet<u64>,
    /// The highest floor a header carried: every number below it was concluded by the client.
    floor: u64,
    /// The highest number forgotten to keep within [`REPLIES_KEPT_MAX`] (0: none).
    forgotten_through: u64,
    mutation: Switch<Mutation>,
}

impl<S> Default for Replies<S> {
    fn default() -> Self {
        Replies {
            kept: BTreeMap::new(),
            acknowledged: BTreeSet::new(),
            floor: 0,
            forgotten_through: 0,
            mutation: Switch::default(),
        }
    }
}

impl<S: Clone> Replies<S> {
    /// Forgets the replies the client says it read, keeping their numbers while the floor is
    /// below them.
    pub fn acknowledge(&mut self, acks: &[u64]) {
        for &seq in acks {
            self.kept.remove(&seq);
            if seq >= self.floor {
                self.acknowledged.insert(seq);
            }
        }
        while self.acknowledged.len() > REPLIES_KEPT_MAX {
            let Some(oldest) = self.acknowledged.pop_first() else { break };
            self.forgotten_through = self.forgotten_through.max(oldest);
        }
        debug_assert!(self.acknowledged.len() <= REPLIES_KEPT_MAX);
    }

    /// The client's floor, from a request's header: the numbers below it need no keeping, nor
    /// their replies (the client concluded those calls: it retries none of them).
    pub fn advance(&mut self, floor: u64) {
        if floor > self.floor {
            self.floor = floor;
            // Pops what lies below (a reply or two per request, usually): no new map per request.
            while self.acknowledged.first().is_some_and(|&seq| seq < floor) {
                self.acknowledged.pop_first();
            }
            // A released request still running stays: what it takes goes back when it ends.
            let mut running = Vec::new();
            while let Some(entry) = self.kept.first_entry().filter(|entry| *entry.key() < floor) {
                if let (seq, Kept::Released) = entry.remove_entry() {
                    running.push(seq);
                }
            }
            self.kept.extend(running.into_iter().map(|seq| (seq, Kept::Released)));
        }
    }

    /// Switches on a session-rule fault (tests of the checker only).
    #[cfg(feature = "mutations")]
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation.set(mutation);
    }

    /// Whether `mutation` is switched on (never, without the `mutations` feature): for a fault the
    /// node's serving code acts out.
    pub fn mutated(&self, mutation: Mutation) -> bool {
        self.mutation.is(mutation)
    }

    /// What to do with request `seq` (≠ 0); a first coming is recorded as under way.
    pub fn turn(&mut self, seq: u64) -> Turn<S> {
        debug_assert_ne!(seq, 0, "unnumbered requests are not kept");
        match self.kept.get(&seq) {
            Some(Kept::Answered(_)) if self.mutation.is(Mutation::RunRepeats) => Turn::Run,
            Some(Kept::Answered(served)) => Turn::Answered(served.clone()),
            Some(Kept::Running) => Turn::Wait,
            Some(Kept::Released) => Turn::Stale,
            None if seq <= self.forgotten_through => Turn::Forgotten,
            None if (seq < self.floor || self.acknowledged.contains(&seq))
                && !self.mutation.is(Mutation::RunLateCopies) =>
            {
                Turn::Stale
            }
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
    /// Returns it back when the client released the request while it ran: give back what it gave
    /// out now (it is not kept).
    pub fn answered(&mut self, seq: u64, served: S) -> Option<S> {
        match self.kept.get_mut(&seq) {
            Some(Kept::Released) => {
                self.kept.remove(&seq);
                self.acknowledge(&[seq]);
                Some(served)
            }
            Some(kept) => {
                *kept = Kept::Answered(served);
                None
            }
            None => None,
        }
    }

    /// The client released request `seq` (it gave up on its reply): its reply, if it was
    /// answered, whose gifts to give back now — once; a request still under way gives back when
    /// it ends ([`answered`](Self::answered)). Either way it is concluded: a copy that comes
    /// later is not run.
    pub fn release(&mut self, seq: u64) -> Option<S> {
        if seq == 0 || self.mutation.is(Mutation::IgnoreReleases) {
            return None;
        }
        match self.kept.remove(&seq) {
            Some(Kept::Running | Kept::Released) => {
                self.kept.insert(seq, Kept::Released);
                None
            }
            Some(Kept::Answered(served)) => {
                self.acknowledge(&[seq]);
                Some(served)
            }
            None => {
                self.acknowledge(&[seq]);
                None
            }
        }
    }

    /// Request `seq` stopped before it had a reply (the node is closing): a repeat runs it anew.
    pub fn abandoned(&mut self, seq: u64) {
        if matches!(self.kept.get(&seq), Some(Kept::Running | Kept::Released)) {
            self.kept.remove(&seq);
        }
    }

    /// The reply of request `seq` if it was answered and is kept.
    pub fn answer(&self, seq: u64) -> Option<&S> {
        match self.kept.get(&seq) {
            Some(Kept::Answered(served)) => Some(served),
            _ => None,
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
        replies.answered(7, served(70));
        let Turn::Answered(again) = replies.turn(7) else { panic!("a repeat after the reply gets it") };
        assert_eq!(again, served(70));
        replies.acknowledge(&[7]);
        assert_eq!(replies.len(), 0, "an acknowledged reply is forgotten");
    }

    /// A late copy of a request whose reply the client read (acknowledged, or below its floor)
    /// is not run; the floor frees the numbers below it.
    #[test]
    fn a_late_copy_of_a_concluded_request_is_not_run() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        for seq in 1..=3 {
            assert!(matches!(replies.turn(seq), Turn::Run));
            replies.answered(seq, served(seq));
        }
        replies.acknowledge(&[2]);
        assert!(matches!(replies.turn(2), Turn::Stale), "acknowledged: a late copy is refused");
        assert!(matches!(replies.turn(1), Turn::Answered(_)), "kept: answered");
        replies.advance(4);
        replies.acknowledge(&[1, 3]);
        assert!(replies.acknowledged.is_empty() && replies.is_empty(), "below the floor nothing is kept");
        for seq in 1..=3 {
            assert!(matches!(replies.turn(seq), Turn::Stale), "#{seq} is below the floor");
        }
        assert!(matches!(replies.turn(4), Turn::Run));
        replies.advance(2);
        assert!(matches!(replies.turn(3), Turn::Stale), "the floor never goes back");
    }

    #[test]
    fn an_abandoned_request_runs_again() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        assert!(matches!(replies.turn(3), Turn::Run));
        replies.abandoned(3);
        assert!(matches!(replies.turn(3), Turn::Run));
        replies.answered(3, served(1));
        replies.abandoned(3);
        assert!(matches!(replies.turn(3), Turn::Answered(_)), "an answered request is not abandoned");
    }

    #[test]
    fn past_the_bound_the_oldest_are_forgotten_and_never_run_again() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        for seq in 1..=REPLIES_KEPT_MAX as u64 + 10 {
            assert!(matches!(replies.turn(seq), Turn::Run));
            replies.answered(seq, served(seq));
        }
        assert_eq!(replies.len(), REPLIES_KEPT_MAX);
        assert!(matches!(replies.turn(1), Turn::Forgotten));
        assert!(matches!(replies.turn(10), Turn::Forgotten));
        assert!(matches!(replies.turn(11), Turn::Answered(_)));
        assert!(matches!(replies.turn(REPLIES_KEPT_MAX as u64 + 11), Turn::Run), "a new number runs");
    }

    /// A released request gives back what it took exactly once: at its release if it was
    /// answered, when it ends if it still ran — even once the floor passed it — and a copy of it
    /// that comes later is not run.
    #[test]
    fn a_released_request_gives_back_once_and_never_runs_again() {
        let mut replies: Replies<(u64, Vec<u8>)> = Replies::default();
        assert!(matches!(replies.turn(1), Turn::Run));
        assert_eq!(replies.answered(1, served(10)), None);
        assert_eq!(replies.release(1), Some(served(10)), "answered: given back now");
        assert_eq!(replies.release(1), None, "once");
        assert!(matches!(replies.turn(1), Turn::Stale));

        assert!(matches!(replies.turn(2), Turn::Run));
        assert_eq!(replies.release(2), None, "still running");
        replies.advance(5);
        assert!(matches!(replies.turn(2), Turn::Stale), "a repeat of a released request is not run");
        assert_eq!(replies.answered(2, served(20)), Some(served(20)), "it ends: give back now, past the floor too");
        assert_eq!(replies.answered(2, served(20)), None);
        assert!(replies.is_empty());

        assert_eq!(replies.release(7), None, "not come yet");
        assert!(matches!(replies.turn(7), Turn::Stale), "a first copy after its release is not run");
        assert!(matches!(replies.turn(6), Turn::Run));
        assert_eq!(replies.release(6), None);
        replies.abandoned(6);
        assert!(replies.is_empty(), "a released request abandoned (the node closing) is forgotten");
    }
}
