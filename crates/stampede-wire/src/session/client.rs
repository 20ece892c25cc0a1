//! The client's side of the session protocol: it numbers its requests, acknowledges the replies
//! it read, sends a request whose reply was lost once more, and decides what a reply (or its
//! absence) means from how long after sending the request it came.
//!
//! The rules:
//! - Every request but `Open` carries a number ([`ClientSession::call`]); a reply read, late or
//!   not, is acknowledged in a later header ([`ClientSession::acks`], at most [`ACKS_MAX`] per
//!   header), and the node then forgets it.
//! - A numbered request whose reply was lost is sent again, with its number, [`REQUEST_RETRIES`]
//!   times — while the client is open, less than a lease passed since it was first sent (the
//!   node may have ended the session after that) and its reply deadline (the wait it asked for
//!   plus [`QUERY_MARGIN`]) has not passed: a retry waits only for what is left of it, so no call
//!   outlives its deadline, whichever try is under way.
//! - The node ends a silent session no sooner than a lease after the last message of the
//!   client's zenoh session, which sends one at least every quarter lease. So the reply to a
//!   request that may hold something on the node ([`Request::holds_on_node`]) is taken only
//!   within [`LEASE_SHARE`] of the lease after it was first sent, and within the call's wait plus
//!   [`QUERY_MARGIN`] ([`Reading::Late`] else) — whichever try the reply answers, so a retry
//!   waits only for what is left of that ([`Call`]); a lost reply of such a request ends the session,
//!   so that what the reply carried goes back on the node. Other replies are taken whenever they
//!   come within the deadline: their effect on the node happened either way.
//! - A call given a timeout gives up on its reply [`REPLY_GRACE`] after the caller's deadline
//!   ([`Call::bound`]), whatever the node does. A get ([`Request::releasable`]) given up on, or
//!   whose reply came past that bound, within [`LEASE_SHARE`] of the lease (its session surely
//!   lives; later the rule above holds) is *released*: its number rides on every header
//!   ([`RequestHeader::released`](crate::RequestHeader::released)) until an outcome confirms it,
//!   and the node gives back what it took; the session lives on ([`Verdict::Released`]). Only past
//!   [`RELEASED_MAX`] numbers unconfirmed does such a call end the session instead.
//! - Every header reports what the client's caches answered and the consumes it deferred
//!   ([`Reports`]) until an outcome confirms them: an outcome in reply to a call confirms what
//!   the call's *first* try reported ([`Call::confirmed`]) — a repeat the node answers from the
//!   first run's reply applied nothing a later try added, and an error may come from a node that
//!   refused the request before running it, having applied nothing.
//!
//! The real client (`stampede::remote::client`) and the whole-path simulation
//! (`stampede-node`'s `sim`) both drive a call through these steps, each with its own I/O:
//! [`ClientSession::call`], then per try [`ClientSession::header`] and after it
//! [`ClientSession::retry`], then [`ClientSession::conclude`] and [`Call::confirmed`].

use std::collections::BTreeSet;
use std::time::Duration;

use super::Mutation;
use crate::request::{Consumed, Opened, Request, RequestHeader, Secret, ACKS_MAX, RELEASED_MAX};
use stampede_core::mutation::Switch;

/// How much longer than the wait it asks for a client waits for a reply before it declares the
/// node unreachable: room for the fabric's latency, the transfer of the payloads, and a loaded
/// node.
pub const QUERY_MARGIN: Duration = Duration::from_secs(5);

/// How many times a request whose reply was lost is sent again (with its number, so that the
/// node answers it without running it twice) before the call gives up.
pub const REQUEST_RETRIES: u32 = 1;

/// How long after the caller's deadline a call gives up on its reply (`Call::bound`): a call
/// given a timeout returns no later than the timeout plus 100 ms whatever the node does; the rest
/// of the 100 ms is the caller's wake-up and the conclusion.
pub const REPLY_GRACE: Duration = Duration::from_millis(80);

/// The share of the lease after sending a request that may hold something on the node within
/// which its reply is taken. The node ends a silent session a lease after the last message of
/// the client's zenoh session, which sends one (a keep-alive, if nothing else) at least every
/// quarter lease — a request on the direct path is not one of them: so not before ¾ of the lease
/// after any request. The rest is room for the two hosts' clocks and the instants between this
/// check and the caller.
pub const LEASE_SHARE: f64 = 0.5;

/// Whether a client's prefetch cache may answer a get (docs/PREFETCH.md) `since` the latest get
/// of its connection that the node served was asked: within [`LEASE_SHARE`] of the `lease` — the
/// connection was open on the node then (a closing one refuses gets), and neither it (a closing
/// shadow's hold) nor the session ends sooner than a lease later, so nothing is delivered after
/// its connection or its session ended.
pub fn cache_may_answer(lease: Duration, since: Duration) -> bool {
    since < lease.mul_f64(LEASE_SHARE)
}

/// What a reply, or its absence, means once the exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The reply stands: hand it (or the node's error in it) to the caller.
    Take,
    /// It came, or went missing, too late for a request that may hold something on the node: the
    /// node may have ended the session and given back what it carried. Drop it and end the
    /// session; the call fails `Closed`.
    Late,
    /// No reply in time: the call fails `Unreachable`, and when `end_session`, the session ends
    /// so that what a lost reply carried goes back on the node.
    Lost { end_session: bool },
}

impl Reading {
    /// Whether the client ends its session over it: a late reply, or a lost one of a request
    /// that may hold something on the node (so that the node gives back what it carried).
    pub fn ends_session(self) -> bool {
        match self {
            Reading::Take => false,
            Reading::Late => true,
            Reading::Lost { end_session } => end_session,
        }
    }
}

/// What one exchange brought, as the rules need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A reply with an outcome.
    Outcome,
    /// A reply with the node's error: it holds nothing on the node.
    Error,
    /// No reply within the try's timeout (or none that could be read).
    Lost,
}

/// Where the client stands when a call's exchange ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// The client was closed (by the application, maybe on another thread).
    pub closed: bool,
    /// The session ended early (another call's lost or late reply).
    pub ended: bool,
}

/// What the call returns, decided by [`ClientSession::conclude`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The reply's outcome, to the caller.
    Deliver,
    /// The node's error, to the caller as it is.
    NodeError,
    /// The reply came, or went missing, too late ([`Reading::Late`]): drop it, end the session;
    /// the call fails `Closed`.
    Late,
    /// The client was closed while the call was under way: it fails `Closed`, and what it may have
    /// taken went back with the session.
    ClientClosed,
    /// The session ended while the call was under way: it fails `Unreachable`, and what its
    /// reply carried went back with the session.
    SessionEnded,
    /// No reply: the call fails `Unreachable`; when `end_session`, the session ends so that what
    /// the lost reply carried goes back on the node.
    Lost { end_session: bool },
    /// A get given up on, or whose reply came late: the reply, if any, is dropped, the call fails
    /// `Unreachable`, and the node gives back what the get took once a header carried its number
    /// ([`ClientSession::released`]); the session lives on.
    Released,
}

impl Verdict {
    /// Whether the client ends its session over it.
    pub fn ends_session(self) -> bool {
        matches!(self, Verdict::Late | Verdict::Lost { end_session: true })
    }
}

/// The numbering and acknowledgement state of one client session, and its lease.
#[derive(Debug)]
pub struct ClientSession {
    next_seq: u64,
    /// Numbers of replies read and not yet acknowledged to the node.
    acks: Vec<u64>,
    /// Numbers of the calls under way (from [`call`](Self::call) to
    /// [`conclude`](Self::conclude)): the lowest is the floor each header carries.
    under_way: BTreeSet<u64>,
    /// Numbers of the calls released ([`Verdict::Released`]) that no outcome confirmed yet: every
    /// header carries them (at most [`RELEASED_MAX`]).
    released: BTreeSet<u64>,
    lease: Duration,
    mutation: Switch<Mutation>,
}

impl ClientSession {
    /// A session whose node ends it after `lease` of silence.
    pub fn new(lease: Duration) -> ClientSession {
        ClientSession {
            next_seq: 1,
            acks: Vec::new(),
            under_way: BTreeSet::new(),
            released: BTreeSet::new(),
            lease,
            mutation: Switch::default(),
        }
    }

    /// Switches on a session-rule fault (tests of the checker only).
    #[cfg(feature = "mutations")]
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation.set(mutation);
    }

    /// After how long without a message from this client the node ends its session.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// A new request sent to wait at most `wait` on the node, numbered: 0 for `Open` (answered
    /// before the session exists), the next number else. `deadline`: how long after its first
    /// send the caller's timeout ends, if it has one — the call gives up [`REPLY_GRACE`] later.
    pub fn call(&mut self, request: &Request, wait: Duration, deadline: Option<Duration>) -> Call {
        let seq = match request {
            Request::Open { .. } => 0,
            _ => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.under_way.insert(seq);
                seq
            }
        };
        Call {
            seq,
            holds_on_node: request.holds_on_node(),
            releasable: request.releasable() && seq != 0,
            wait,
            bound: deadline.map(|d| d.saturating_add(REPLY_GRACE)),
            tries: 0,
            first: None,
        }
    }

    /// The header of `request` of `session` proving `secret`: of a try of `call` (numbered as
    /// it; what the call's first try reports is kept in it, as what an outcome confirms), or
    /// `None`, of a request no reply is waited for (a send, a close: numbered 0). It carries the
    /// acknowledgements and the floor due, `reports`, and the released numbers no outcome
    /// confirmed yet (the session's own: `reports.released` is replaced).
    pub fn header(
        &mut self,
        call: Option<&mut Call>,
        session: &str,
        secret: Secret,
        request: Request,
        reports: Reports,
    ) -> RequestHeader {
        let released = match self.mutation.is(Mutation::ForgetReleases) {
            true => Vec::new(),
            false => self.released.iter().copied().collect(),
        };
        let reports = Reports { released, ..reports };
        let seq = match call {
            Some(call) => {
                call.first.get_or_insert_with(|| reports.clone());
                call.seq
            }
            None => 0,
        };
        let Reports { opened, consumed, released } = reports;
        RequestHeader {
            seq,
            acks: self.acks(),
            floor: self.floor(),
            opened,
            consumed,
            released,
            ..RequestHeader::new(session, secret, request)
        }
    }

    /// The reply of request `seq` was read, late or not: the node may forget it.
    pub fn read(&mut self, seq: u64) {
        if seq != 0 {
            self.acks.push(seq);
        }
    }

    /// The floor the next header carries (`RequestHeader::floor`): the lowest number still under
    /// way, or the next number when none is. Every number below it was concluded: a late copy of
    /// one runs nowhere.
    pub fn floor(&self) -> u64 {
        self.under_way.first().copied().unwrap_or(self.next_seq)
    }

    /// The acknowledgements the next header carries: the newest [`ACKS_MAX`] not said yet (the
    /// rest go with later headers).
    pub fn acks(&mut self) -> Vec<u64> {
        let keep = self.acks.len().saturating_sub(ACKS_MAX);
        self.acks.split_off(keep)
    }

    /// How long after its first send a call's reply is waited for: the wait the node may take
    /// plus [`QUERY_MARGIN`], at most its [`bound`](Call::bound), and for a request that may hold
    /// something on the node at most [`LEASE_SHARE`] of the lease.
    fn reply_deadline(&self, call: &Call) -> Duration {
        let deadline = call.wait.saturating_add(QUERY_MARGIN).min(call.bound.unwrap_or(Duration::MAX));
        match call.holds_on_node {
            true => deadline.min(self.lease.mul_f64(LEASE_SHARE)),
            false => deadline,
        }
    }

    /// The numbers of the calls released and not yet confirmed, which every header carries.
    pub fn released(&self) -> impl Iterator<Item = u64> + '_ {
        self.released.iter().copied()
    }

    /// How long the try of `call` that starts `taken` after its first send waits for its reply:
    /// what is left of its reply deadline (for a request that may hold something on the node, a
    /// reply read later is late whichever try it answers; for any request, the caller's timeout
    /// bounds the whole call, retries included).
    pub fn try_timeout(&self, call: &Call, taken: Duration) -> Duration {
        self.reply_deadline(call).saturating_sub(taken)
    }

    /// The loop of one call, every client's: after a try of `call` ended `taken` after its first
    /// send (`lost`: no reply came), how long its next try waits for a reply — `None`, and the
    /// call concludes ([`conclude`](Self::conclude)), unless the reply was lost, the request is
    /// numbered, retries are left (counted in `call`), the client is not `closed`, the node cannot
    /// have ended the session meanwhile, and the reply deadline has not passed. The first try
    /// waits [`try_timeout`](Self::try_timeout)`(call, 0)`.
    pub fn retry(&self, call: &mut Call, lost: bool, taken: Duration, closed: bool) -> Option<Duration> {
        let in_time = taken < self.lease && taken < self.reply_deadline(call);
        let retry = lost && call.seq != 0 && call.tries < REQUEST_RETRIES && !closed && in_time;
        call.tries += u32::from(retry);
        retry.then(|| self.try_timeout(call, taken))
    }

    /// What the exchange of `call` means: `replied` or not, `taken` after its first send.
    pub fn reading(&self, call: &Call, replied: bool, taken: Duration) -> Reading {
        let late = call.holds_on_node
            && match replied {
                true => taken > self.reply_deadline(call),
                false => taken >= self.lease,
            };
        match (replied, late) {
            (_, true) => Reading::Late,
            (true, false) => Reading::Take,
            (false, false) => Reading::Lost { end_session: call.holds_on_node },
        }
    }

    /// What a call returns once its exchange ended with `answer`, `taken` after its first send,
    /// the client standing as `standing` says. The rule "nothing delivered after its session
    /// ended": the reply of a request that may hold something on the node reaches the caller
    /// only within its reply deadline and while the client is open and its session lives; any
    /// other reply (an error, or an outcome that holds nothing) stands whenever it comes.
    ///
    /// The call is no longer under way: the floor moves past it; a reply read, late or not, is
    /// acknowledged by a later header ([`read`](Self::read)).
    pub fn conclude(&mut self, call: &Call, answer: Answer, taken: Duration, standing: Standing) -> Verdict {
        self.under_way.remove(&call.seq);
        if answer != Answer::Lost {
            self.read(call.seq);
        }
        if let Some(first) = call.confirmed(answer) {
            // The node gave back what the released calls its first try named took.
            for seq in &first.released {
                self.released.remove(seq);
            }
        }
        let reading = match self.reading(call, answer != Answer::Lost, taken) {
            Reading::Late if answer == Answer::Outcome && self.mutation.is(Mutation::TakeLateReplies) => Reading::Take,
            Reading::Lost { .. } if self.mutation.is(Mutation::KeepSessionAfterLostHold) => {
                Reading::Lost { end_session: false }
            }
            reading => reading,
        };
        // A get given up on is released while there is room to say so and its session surely lives
        // (within `LEASE_SHARE` of its request); else its session ends, as for any request that
        // may hold something: a reply read later may come after the node ended the session.
        let release = call.releasable
            && !standing.closed
            && taken < self.lease.mul_f64(LEASE_SHARE)
            && self.released.len() < RELEASED_MAX;
        match answer {
            Answer::Error => Verdict::NodeError,
            Answer::Outcome if !call.holds_on_node => Verdict::Deliver,
            _ if release && matches!(reading, Reading::Late | Reading::Lost { .. }) => {
                self.released.insert(call.seq);
                Verdict::Released
            }
            _ if reading == Reading::Late && !standing.closed => Verdict::Late,
            _ if standing.closed => Verdict::ClientClosed,
            Answer::Outcome if standing.ended => Verdict::SessionEnded,
            Answer::Outcome => Verdict::Deliver,
            Answer::Lost => Verdict::Lost { end_session: reading.ends_session() },
        }
    }
}

/// What a request's header reports beside its operation, each carried by every header until an
/// outcome confirms it: the gets the client's prefetch caches answered (`CacheAnswers`) and the
/// consumes it deferred (`Deferred`), and the calls it released (the session's own,
/// [`ClientSession::header`] fills them in).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reports {
    pub opened: Vec<Opened>,
    pub consumed: Vec<Consumed>,
    pub released: Vec<u64>,
}

/// A request under way, as the rules see it: its number, whether it may hold something on the
/// node (`Request::holds_on_node`), how long it asked the node to wait, the retries sent so far,
/// and what its first try reported. Every time the rules
/// take about it is measured from its first send, whichever try is under way: the node may end
/// the session ¾ of the lease after that send, not after a retry's (a retry on the direct path
/// does not renew the lease).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub seq: u64,
    pub holds_on_node: bool,
    /// A numbered get ([`Request::releasable`]): given up on, it is released, not its session.
    pub releasable: bool,
    pub wait: Duration,
    /// How long after its first send the call gives up on its reply, whatever the node does:
    /// the caller's deadline plus [`REPLY_GRACE`] (`None`: no timeout was given).
    pub bound: Option<Duration>,
    pub tries: u32,
    /// What its first try's header reported ([`ClientSession::header`]).
    pub first: Option<Reports>,
}

impl Call {
    /// What the call's ending with `answer` confirms the node applied: what its first try
    /// reported, on an outcome (the first try's run applied it, or the run a repeat is answered
    /// from); nothing else — an error may come from a node that refused the request before
    /// running it.
    pub fn confirmed(&self, answer: Answer) -> Option<&Reports> {
        self.first.as_ref().filter(|_| answer == Answer::Outcome)
    }
}

#[cfg(test)]
mod tests;
