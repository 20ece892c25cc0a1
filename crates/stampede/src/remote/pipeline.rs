//! Pipelined puts: an output connection attached with a window (`OutputOptions::put_window`)
//! sends up to that many puts on the node's direct path without waiting for their replies
//! (docs/NODES.md, "Pipelined puts").
//!
//! Guarantees:
//! - Order. A pipelined put is a send (`client/sends.rs`): the node applies it before every later
//!   request of this client, and applies a connection's puts in the order they were made. A put
//!   is pipelined only on the direct path, whose connection the node serves one request after
//!   another; as zenoh queries (no direct path, or one cooling down after a failure) the node
//!   serves requests concurrently, so there every put waits for its reply.
//! - No error is lost. A pipelined put's error is kept, with the put's timestamp, once its reply
//!   is read, and raised by the connection's next `put` or `flush` (each raises one, oldest
//!   first, and does nothing else). A put reads replies when the window is full, before it
//!   raises, so with a window of N the error of a put is raised at the latest N puts later; and
//!   `flush` waits until every reply is in. A reply that can never come (its connection failed,
//!   the client closed) is an `Unreachable` error naming the put: it may or may not have landed.
//!   Errors kept at once are bounded by the window (a put raises before it sends).
//! - Bounded waits. A pipelined put waits for room on the node at most one wait slice
//!   (`REMOTE_WAIT_SLICE`), within its own timeout: its reply is then read within the slice and
//!   the reply margin, and never holds later calls longer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::remote::client::{micros, Client};
use crate::remote::direct::OnReply;
use crate::remote::{QUERY_MARGIN, REMOTE_WAIT_SLICE};
use crate::{Error, Result, Timestamp};
use stampede_wire::{decode_reply, Op, Outcome, Reply};

/// What became of a put made on a pipeline.
pub(crate) enum Pipelined {
    /// The put was sent (`Ok`), or may have been (`Unreachable`).
    Sent(Result<()>),
    /// An earlier put's error, raised instead: this put was not made.
    Raised(Error),
}

/// The pipelined puts of one output connection.
pub(crate) struct Pipeline {
    window: usize,
    state: Arc<Mutex<State>>,
}

/// Puts sent and not yet answered, and the errors of answered ones not yet raised.
#[derive(Default)]
struct State {
    in_flight: usize,
    failed: VecDeque<Error>,
}

impl Pipeline {
    /// A pipeline of `window` puts (at least 1).
    pub(crate) fn new(window: usize) -> Pipeline {
        debug_assert!(window >= 1, "a window of no puts pipelines nothing");
        Pipeline { window, state: Arc::default() }
    }

    /// The oldest error of a pipelined put not yet raised.
    pub(crate) fn raise(&self) -> Result<()> {
        self.state.lock().failed.pop_front().map_or(Ok(()), Err)
    }

    /// Sends the put `op` (at `ts`) with `payload` and returns before its reply, once fewer than
    /// `window` puts are on their way and no earlier put's error is left to raise (else it
    /// raises that error and sends nothing). `None`: it could not be pipelined now (no direct
    /// path, and no error to raise): the caller makes it as a call.
    pub(crate) fn put(
        &self,
        client: &Client,
        ts: Timestamp,
        timeout: Option<Duration>,
        payload: &Bytes,
        op: impl FnOnce(u64) -> Op,
    ) -> Option<Pipelined> {
        if !client.pipelines() {
            return self.raise().err().map(Pipelined::Raised);
        }
        self.make_room(client);
        if let Err(e) = self.raise() {
            return Some(Pipelined::Raised(e));
        }
        let wait = timeout.map_or(REMOTE_WAIT_SLICE, |t| t.min(REMOTE_WAIT_SLICE));
        let capped = timeout.is_none_or(|t| t > REMOTE_WAIT_SLICE);
        self.state.lock().in_flight += 1;
        let on_reply = self.on_reply(client.node().to_owned(), ts, capped);
        let sent = client.send_put(op(micros(wait)), payload, on_reply);
        if !matches!(sent, Some(Ok(()))) {
            // Not written whole, or not at all (the direct path began cooling down meanwhile):
            // its handler was dropped unrun.
            self.state.lock().in_flight -= 1;
        }
        sent.map(|sent| Pipelined::Sent(sent.map_err(|reason| unreachable_put(client.node(), ts, &reason))))
    }

    /// Waits until every pipelined put was answered (reading their replies), then raises the
    /// oldest error not yet raised.
    pub(crate) fn flush(&self, client: &Client) -> Result<()> {
        self.wait_until(client, |in_flight| in_flight == 0, self.window);
        self.raise()
    }

    /// Waits until fewer than `window` puts are on their way, reading their replies.
    fn make_room(&self, client: &Client) {
        self.wait_until(client, |in_flight| in_flight < self.window, 1);
    }

    /// Reads replies (or waits for another thread to) until `enough` puts on their way, at most
    /// as long as `replies` replies may take.
    fn wait_until(&self, client: &Client, enough: impl Fn(usize) -> bool + Send + Sync, replies: usize) {
        let deadline = Instant::now() + reply_bound(replies);
        let done = || enough(self.state.lock().in_flight);
        while !done() && Instant::now() < deadline {
            client.read_one_owed(done, QUERY_MARGIN);
        }
    }

    /// What the put at `ts` does with its reply: counts it answered and keeps its error.
    /// `capped`: the caller's timeout was longer than the one wait slice a pipelined put waits.
    fn on_reply(&self, node: String, ts: Timestamp, capped: bool) -> OnReply {
        let state = self.state.clone();
        Some(Box::new(move |reply: std::result::Result<Bytes, String>| {
            let outcome = match reply {
                Ok(message) => match decode_reply(&message) {
                    Ok((Reply::Outcome(Outcome::Done), _)) => Ok(()),
                    Ok((Reply::Error(e), _)) => Err(Error::from(e)),
                    Ok(_) => Err(unreachable_put(&node, ts, "the node answered it with something else than done")),
                    Err(e) => Err(unreachable_put(&node, ts, &format!("its reply is unreadable: {e}"))),
                },
                Err(reason) => Err(unreachable_put(&node, ts, &reason)),
            };
            let mut state = state.lock();
            state.in_flight -= 1;
            if let Err(e) = outcome {
                state.failed.push_back(slice_spent(e, capped));
            }
        }))
    }
}

/// Longest a caller waits for `puts` pipelined replies: each put waits at most one slice on the
/// node after the one before it, and its reply comes within the margin.
fn reply_bound(puts: usize) -> Duration {
    (REMOTE_WAIT_SLICE + QUERY_MARGIN).saturating_mul(u32::try_from(puts).unwrap_or(u32::MAX))
}

/// The error of a pipelined put at `ts` whose reply did not come (`reason`): it may have landed.
fn unreachable_put(node: &str, ts: Timestamp, reason: &str) -> Error {
    let reason = format!("no reply to the pipelined put ts={ts} ({reason}): it may or may not have landed");
    Error::Unreachable { op: "put", name: node.to_owned(), reason }
}

/// A put's `Full` after the one wait slice a pipelined put waits, when its caller allowed longer
/// (`capped`), says so and what to do.
fn slice_spent(e: Error, capped: bool) -> Error {
    match e {
        Error::Full { name, ts, reason, can_never_fit: false } if capped => Error::Full {
            name,
            ts,
            reason: format!(
                "{reason}; a pipelined put waits for room at most {REMOTE_WAIT_SLICE:?} (one wait slice): call flush() \
                 before a put that must wait longer, or attach without put_window"
            ),
            can_never_fit: false,
        },
        e => e,
    }
}
