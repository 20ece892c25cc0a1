//! Releases: what the node gives back when a client gave up on a get's reply (its call's timeout
//! passed, or the reply came too late to be taken) and said so by the get's number in a later
//! header (`RequestHeader::released`, docs/NODES.md "A call's timeout").
//!
//! **Guarantees.** A released get leaves its connection as if it had not run: a channel item it
//! opened that is still open there is unseen again (`stampede_core::ChannelState::give_back`), a
//! queue item it took that is still open goes back to the head of the queue
//! (`stampede_core::QueueState::give_back`). Each get is given back at most once, whether its
//! release comes after its reply was made (given back then) or while it still runs (given back
//! when it ends: `stampede_wire::session::Replies::release`); a copy of it that comes after its
//! release is never run. Only gets are released (`Op::releasable`); what any other request holds
//! goes back with its session.

use stampede_core::{Handle, Op, Outcome, Selector, Timestamp};
use stampede_engine::session::Connection;
use stampede_wire::Reply;

use crate::serve::Served;
use crate::session::Session;

/// A numbered request's reply as the node keeps it for repeats: the reply, and what a release of
/// the request gives back.
pub(crate) type Kept = (Served, Option<Given>);

/// What a get's reply gave the client on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Given {
    /// Channel items opened on input connection `connection`.
    Channel { connection: Handle, ts: Vec<Timestamp> },
    /// Queue item `seq` taken on input connection `connection`.
    Queue { connection: Handle, seq: u64 },
}

/// What a request may give out, known before it runs (the request is moved into its run): a
/// get's connection, and the items open there that it may return without opening them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Taking {
    connection: Option<Handle>,
    open_before: Vec<Timestamp>,
}

impl Taking {
    /// What `op`, about to run in `session`, may give out: on its connection if it is a get.
    pub(crate) fn of(op: &Op, session: &Session) -> Taking {
        let (connection, selector, range) = match *op {
            // Returns only unseen items, which it opens: nothing to look up (the common get).
            Op::Get { connection, selector: Selector::OldestUnseen | Selector::NewestUnseen, .. }
            | Op::QueueGet { connection, .. } => {
                return Taking { connection: Some(connection), open_before: Vec::new() }
            }
            Op::Get { connection, selector, .. } => (connection, selector, None),
            Op::GetRange { connection, t0, t1 } => (connection, Selector::Oldest, Some((t0, t1))),
            _ => return Taking::default(),
        };
        let open_before = match session.handles.connection("release", connection) {
            Ok(Connection::ChannelInput(input)) => input.open_for(selector, range),
            _ => Vec::new(),
        };
        Taking { connection: Some(connection), open_before }
    }

    /// What the request's reply `served` gave out (`None`: nothing, or an error): the items it
    /// opened, not those open before it ran.
    pub(crate) fn given(self, served: &Served) -> Option<Given> {
        let connection = self.connection?;
        let opened = |ts: &mut dyn Iterator<Item = Timestamp>| -> Vec<Timestamp> {
            ts.filter(|ts| !self.open_before.contains(ts)).collect()
        };
        match &served.0 {
            Reply::Outcome(Outcome::Item(item)) => {
                Some(Given::Channel { connection, ts: opened(&mut std::iter::once(item.ts)) })
            }
            Reply::Outcome(Outcome::Items(items)) => {
                Some(Given::Channel { connection, ts: opened(&mut items.iter().map(|item| item.ts)) })
            }
            Reply::Outcome(Outcome::QueueItem { seq, .. }) => Some(Given::Queue { connection, seq: *seq }),
            _ => None,
        }
    }
}

impl Session {
    /// Gives back what a released get gave out, if its connection is still attached. Returns how
    /// many items went back.
    pub(crate) fn give_back(&self, given: &Given) -> usize {
        let connection = match given {
            Given::Channel { connection, .. } | Given::Queue { connection, .. } => *connection,
        };
        match (self.handles.connection("release", connection), given) {
            (Ok(Connection::ChannelInput(input)), Given::Channel { ts, .. }) => input.give_back(ts),
            (Ok(Connection::QueueInput(input)), Given::Queue { seq, .. }) => usize::from(input.give_back(*seq)),
            // Detached (what it held went back then), or another kind: nothing to give back.
            _ => 0,
        }
    }
}
