//! The session protocol: the rules a client and a node follow for the requests of one session —
//! numbering and acknowledgements, at most once, retries of a lost reply, and when a reply may be
//! taken. Pure: no I/O, no clock (a caller says how long an exchange took), no waiting; the client
//! (`stampede`'s `remote/client`), the node (`stampede-node`'s `serve`) and any simulation drive
//! these same rules.
//!
//! - [`client`] — [`ClientSession`]: numbers, acknowledgements, retries, and [`Reading`], what a
//!   reply (or its absence) after a given time means.
//! - [`node`] — [`Replies`]: a session's numbered requests run at most once, repeats answered
//!   with the first answer.
//! - [`deferred`] — [`Deferred`]: the consumes a client defers into its requests, carried until
//!   confirmed.
//! - [`answers`] — [`CacheAnswers`]: its prefetch caches' answers, reported until confirmed.
//!
//! The tests below step both sides through a lost reply.

pub mod answers;
pub mod client;
pub mod deferred;
pub mod node;

/// A session-rule fault that the whole-path simulation switches on to show that its checker
/// catches it. Only the `mutations` feature can switch one on (`ClientSession::mutate`,
/// `Replies::mutate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// The client takes a reply that may hold something on the node however late it came.
    TakeLateReplies,
    /// The client keeps its session after a lost reply of a request that may hold something.
    KeepSessionAfterLostHold,
    /// The client's headers never carry the numbers of the gets it released: what those took
    /// stays taken on the node while the session lives.
    ForgetReleases,
    /// The node gives back nothing for a released get.
    IgnoreReleases,
    /// The node runs a repeated request again instead of answering it with the first reply.
    RunRepeats,
    /// The node runs a late copy of a request the client concluded.
    RunLateCopies,
    /// The node, ending a session, declines the open moves of its other sessions' tasks too.
    DeclineOthersMoves,
    /// The node runs a request without the consumes its header carried.
    IgnoreCarriedConsumes,
    /// The node sends no notice when the item it pushed last is no longer the channel's newest,
    /// so the client's cache goes on answering with it.
    SkipStaleNotices,
}

pub use answers::CacheAnswers;
pub use client::{
    cache_may_answer, Answer, Call, ClientSession, Reading, Reports, Standing, Verdict, LEASE_SHARE, QUERY_MARGIN,
    REPLY_GRACE, REQUEST_RETRIES,
};
pub use deferred::Deferred;
pub use node::{Replies, Turn, REPLIES_KEPT_MAX};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use stampede_core::Op;

    /// A get whose reply is lost: the client sends it again with its number; the node answers the
    /// repeat with the first answer (the item it took) without running it again; the client
    /// takes that reply, says so in its next header, and the node forgets it.
    #[test]
    fn a_lost_reply_costs_a_retry_not_a_second_run() {
        let lease = Duration::from_secs(3);
        let mut client = ClientSession::new(lease);
        let mut node: Replies<&'static str> = Replies::default();
        let get = Op::QueueGet { connection: 1, wait_us: 0 }.into();
        let mut call = client.call(&get, Duration::ZERO, None);
        let seq = call.seq;
        assert_ne!(seq, 0);

        // The first run takes the item; its reply is lost on the way.
        assert!(matches!(node.turn(seq), Turn::Run));
        node.answered(seq, "item 7");
        let taken = Duration::from_millis(200);
        let again = client.retry(&mut call, true, taken, false);
        assert_eq!(
            again,
            Some(client.try_timeout(&call, taken)),
            "a lost numbered reply is sent again, for what is left"
        );
        assert_eq!(client.retry(&mut call, true, taken, false), None, "once ({REQUEST_RETRIES} retry)");

        // The repeat gets the first answer: nothing runs twice.
        let Turn::Answered(reply) = node.turn(seq) else { panic!("the repeat is answered") };
        assert_eq!(reply, "item 7");
        assert_eq!(client.reading(&call, true, taken), Reading::Take);
        client.read(seq);

        // The next header acknowledges it; the node forgets it.
        let next = client.call(&Op::TsMin.into(), Duration::ZERO, None).seq;
        assert!(next > seq);
        node.acknowledge(&client.acks());
        assert!(node.is_empty(), "an acknowledged reply is forgotten");
        assert!(client.acks().is_empty(), "each acknowledgement is said once");
    }
}
