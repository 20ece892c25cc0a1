//! The client's side of the session protocol: it numbers its requests, acknowledges the replies
//! it read, sends a request whose reply was lost once more, and decides what a reply (or its
//! absence) means from how long after sending the request it came.
//!
//! The rules:
//! - Every request but `Open` carries a number ([`ClientSession::number`]); a reply read, late or
//!   not, is acknowledged in a later header ([`ClientSession::acks`], at most [`ACKS_MAX`] per
//!   header), and the node then forgets it.
//! - A numbered request whose reply was lost is sent again, with its number, [`REQUEST_RETRIES`]
//!   times — while the client is open and less than a lease passed since it was sent (the node
//!   may have ended the session after that).
//! - The node ends a silent session no sooner than a lease after the last message of the
//!   client's zenoh session, which sends one at least every quarter lease. So the reply to a
//!   request that may hold something on the node ([`Request::holds_on_node`]) is taken only
//!   within [`LEASE_SHARE`] of the lease after it was sent, and within the call's wait plus
//!   [`QUERY_MARGIN`] ([`Reading::Late`] else); a lost reply of such a request ends the session,
//!   so that what the reply carried goes back on the node. Other replies are taken late: their
//!   effect on the node happened either way.

use std::time::Duration;

use crate::request::{Request, ACKS_MAX};

/// How much longer than the wait it asks for a client waits for a reply before it declares the
/// node unreachable: room for the fabric's latency, the transfer of the payloads, and a loaded
/// node.
pub const QUERY_MARGIN: Duration = Duration::from_secs(5);

/// How many times a request whose reply was lost is sent again (with its number, so that the
/// node answers it without running it twice) before the call gives up.
pub const REQUEST_RETRIES: u32 = 1;

/// The share of the lease after sending a request that may hold something on the node within
/// which its reply is taken. The node ends a silent session a lease after the last message of
/// the client's zenoh session, which sends one (a keep-alive, if nothing else) at least every
/// quarter lease — a request on the direct path is not one of them: so not before ¾ of the lease
/// after any request. The rest is room for the two hosts' clocks and the instants between this
/// check and the caller.
pub const LEASE_SHARE: f64 = 0.5;

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

/// The numbering and acknowledgement state of one client session, and its lease.
#[derive(Debug)]
pub struct ClientSession {
    next_seq: u64,
    /// Numbers of replies read and not yet acknowledged to the node.
    acks: Vec<u64>,
    lease: Duration,
}

impl ClientSession {
    /// A session whose node ends it after `lease` of silence.
    pub fn new(lease: Duration) -> ClientSession {
        ClientSession { next_seq: 1, acks: Vec::new(), lease }
    }

    /// After how long without a message from this client the node ends its session.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The number of a new request: 0 for `Open` (answered before the session exists).
    pub fn number(&mut self, request: &Request) -> u64 {
        match request {
            Request::Open { .. } => 0,
            _ => {
                let seq = self.next_seq;
                self.next_seq += 1;
                seq
            }
        }
    }

    /// The reply of request `seq` was read, late or not: the node may forget it.
    pub fn read(&mut self, seq: u64) {
        if seq != 0 {
            self.acks.push(seq);
        }
    }

    /// The acknowledgements the next header carries: the newest [`ACKS_MAX`] not said yet (the
    /// rest go with later headers).
    pub fn acks(&mut self) -> Vec<u64> {
        let keep = self.acks.len().saturating_sub(ACKS_MAX);
        self.acks.split_off(keep)
    }

    /// How long after sending a request its reply is waited for: the wait the node may take plus
    /// [`QUERY_MARGIN`], and for a request that may hold something on the node at most
    /// [`LEASE_SHARE`] of the lease.
    pub fn reply_deadline(&self, holds_on_node: bool, wait: Duration) -> Duration {
        let deadline = wait.saturating_add(QUERY_MARGIN);
        match holds_on_node {
            true => deadline.min(self.lease.mul_f64(LEASE_SHARE)),
            false => deadline,
        }
    }

    /// Whether to send request `seq` again after a try that ended `taken` after sending it:
    /// its reply was `lost`, it is numbered, retries are left (counted in `tries`), the client is
    /// not `closed`, and the node cannot have ended the session meanwhile.
    pub fn retries(&self, seq: u64, lost: bool, taken: Duration, tries: &mut u32, closed: bool) -> bool {
        let retry = lost && seq != 0 && *tries < REQUEST_RETRIES && !closed && taken < self.lease;
        *tries += u32::from(retry);
        retry
    }

    /// What the exchange of a request means: `replied` or not, `taken` after it was sent, for a
    /// request that `holds_on_node` or not and asked the node to wait at most `wait`.
    pub fn reading(&self, holds_on_node: bool, wait: Duration, replied: bool, taken: Duration) -> Reading {
        let late = holds_on_node
            && match replied {
                true => taken > self.reply_deadline(true, wait),
                false => taken >= self.lease,
            };
        match (replied, late) {
            (_, true) => Reading::Late,
            (true, false) => Reading::Take,
            (false, false) => Reading::Lost { end_session: holds_on_node },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(4);

    #[test]
    fn a_reply_that_may_hold_something_is_taken_only_within_half_the_lease() {
        let session = ClientSession::new(LEASE);
        let half = LEASE.mul_f64(LEASE_SHARE);
        assert_eq!(session.reading(true, Duration::ZERO, true, half), Reading::Take);
        assert_eq!(session.reading(true, Duration::ZERO, true, half + Duration::from_millis(1)), Reading::Late);
        assert_eq!(session.reading(false, Duration::ZERO, true, LEASE * 10), Reading::Take, "a put's reply stands");
        assert_eq!(session.reading(true, Duration::ZERO, false, LEASE), Reading::Late, "lost for a whole lease");
        assert_eq!(session.reading(true, Duration::ZERO, false, half), Reading::Lost { end_session: true });
        assert_eq!(session.reading(false, Duration::ZERO, false, half), Reading::Lost { end_session: false });
    }

    #[test]
    fn numbers_rise_and_acknowledgements_are_bounded_per_header() {
        let mut session = ClientSession::new(LEASE);
        assert_eq!(session.number(&Request::Open { user: None, password: None }), 0);
        let seqs: Vec<u64> = (0..ACKS_MAX + 5).map(|_| session.number(&Request::TsMin)).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
        seqs.iter().for_each(|&seq| session.read(seq));
        session.read(0);
        assert_eq!(session.acks().len(), ACKS_MAX);
        assert_eq!(session.acks().len(), 5, "the rest go with the next header");
        assert!(session.acks().is_empty());
    }

    #[test]
    fn a_retry_needs_a_lost_numbered_reply_an_open_client_and_time_within_the_lease() {
        let session = ClientSession::new(LEASE);
        let short = Duration::from_millis(10);
        assert!(!session.retries(0, true, short, &mut 0, false), "unnumbered");
        assert!(!session.retries(3, false, short, &mut 0, false), "answered");
        assert!(!session.retries(3, true, short, &mut 0, true), "closed");
        assert!(!session.retries(3, true, LEASE, &mut 0, false), "a lease passed");
        assert!(!session.retries(3, true, short, &mut REQUEST_RETRIES.clone(), false), "no retries left");
        assert!(session.retries(3, true, short, &mut 0, false));
    }
}
