//! The operation vocabulary: every operation a client or a tool can ask of a runtime, as plain
//! data ([`Op`]), and what it returns ([`Outcome`]). No I/O: the engine runs an `Op`
//! (`stampede_engine::Runtime::execute`), the wire crate frames it, the node carries it; a new
//! operation is one variant here, one arm in the engine's `execute`, and its typed forms in the
//! facade and the bindings (docs/ARCHITECTURE.md, "Where to add an operation").
//!
//! Handles name what a session holds (tasks, connections, containers): the session's table
//! resolves them, so an `Op` is meaningful only in the session that sent it. Waits (`wait_us`)
//! are what the caller asks; whoever runs the op may clamp them ([`Op::clamp_waits`]).
//!
//! Operations that yield many results are subscriptions in the same vocabulary: one op starts
//! them or waits for the next change, and the results are read again with ordinary ops.
//! [`Op::WaitChanged`] and [`Op::WaitProgress`] complete at the next change a get, a put or a
//! join would wake on (join streams re-run their gets after each); a watch starts with
//! [`Op::Listing`] and then follows the runtime's name events; [`Op::OnReclaim`] subscribes a
//! session to reclaimed items, which its node then sends unasked (`stampede_wire::ReclaimEvent`).

use crate::channel::Retention;
use crate::graph::Graph;
use crate::mesh::Peer;
use crate::stats::{BudgetUse, Stats};
use crate::time::{Selector, Timestamp};

/// Identifies a task, connection or container within one session.
pub type Handle = u64;

/// Random bytes a node hands the client that moved a task ([`Outcome::Moved`]): the move's
/// takeover must present them, so nobody who merely learns a move's id can take it over.
pub type MoveProof = [u8; 16];

/// One operation. Field names are the API's; handles are the session's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Op {
    CreateChannel {
        name: String,
        capacity: Option<u64>,
        bytes_max: Option<u64>,
        retention: Retention,
        codec: Option<String>,
        description: String,
    },
    CreateQueue {
        name: String,
        capacity: Option<u64>,
        bytes_max: Option<u64>,
        description: String,
    },
    Lookup {
        name: String,
    },
    /// The names under `prefix` the session may see: on a node, every node's of its mesh.
    Names {
        prefix: String,
    },
    /// The names under `prefix` with their kinds and nodes (what a watch starts with): on a
    /// node, every node's of its mesh.
    Listing {
        prefix: String,
    },
    ContainerStats {
        container: Handle,
    },
    Destroy {
        container: Handle,
    },
    Task {
        virtual_time: Timestamp,
    },
    Spawn {
        task: Handle,
        virtual_time: Timestamp,
    },
    SetVirtualTime {
        task: Handle,
        virtual_time: Timestamp,
    },
    /// The task's virtual time and visibility.
    Times {
        task: Handle,
    },
    CloseTask {
        task: Handle,
    },
    /// Labels a task for tools.
    SetTaskName {
        task: Handle,
        name: String,
    },
    /// The runtime's [`Graph`].
    Graph,
    /// An input connection; a channel's with its bound on lag (`InputOptions`; none for a queue).
    AttachInput {
        task: Handle,
        container: Handle,
        max_lag_items: Option<u64>,
        max_lag_ts: Option<u64>,
        /// What the node pushes ahead of the connection's gets (a channel's only).
        prefetch: crate::prefetch::Prefetch,
    },
    AttachOutput {
        task: Handle,
        container: Handle,
    },
    Detach {
        connection: Handle,
    },
    /// A put into a channel; the payload travels beside the op.
    Put {
        connection: Handle,
        ts: Timestamp,
        codec: String,
        refcount: Option<u32>,
        wait_us: u64,
    },
    Get {
        connection: Handle,
        selector: Selector,
        wait_us: u64,
    },
    GetRange {
        connection: Handle,
        t0: Timestamp,
        t1: Timestamp,
    },
    Consume {
        connection: Handle,
        ts: Timestamp,
    },
    ConsumeUntil {
        connection: Handle,
        ts: Timestamp,
    },
    /// A put into a queue; the payload travels beside the op.
    QueuePut {
        connection: Handle,
        ts: Timestamp,
        codec: String,
        wait_us: u64,
    },
    QueueGet {
        connection: Handle,
        wait_us: u64,
    },
    /// Consumes the queue item `seq` at `ts`, or (no `seq`) the oldest open one at `ts`.
    QueueConsume {
        connection: Handle,
        seq: Option<u64>,
        ts: Timestamp,
    },
    /// Timestamps of the items a channel stores now.
    Timestamps {
        container: Handle,
    },
    /// A channel's log of its latest puts (turned on by the first ask): when, what, how large.
    PutLog {
        container: Handle,
    },
    /// A channel's settled horizon and whether its producer set is closed.
    Settledness {
        container: Handle,
    },
    CloseProducers {
        container: Handle,
    },
    /// Demand feedback on a channel output connection.
    Demand {
        connection: Handle,
    },
    /// Waits at most `wait_us` for what would wake a get (`selector`; a queue input: none) or a
    /// put (an output: none) blocked on the connection; `Done` either way (a readiness wait may
    /// end spuriously).
    WaitChanged {
        connection: Handle,
        selector: Option<Selector>,
        wait_us: u64,
    },
    /// Waits at most `wait_us` for a put or claim change anywhere in the runtime (what joins
    /// wait for); `Done` either way.
    WaitProgress {
        wait_us: u64,
    },
    TsMin,
    Stats,
    Collect,
    /// The host and its monotonic clock, for a traced client's clock exchange
    /// (docs/TRACING.md).
    TraceClock,
    /// The node's mesh time (docs/NODES.md, "Time across hosts"), for a client's estimate of
    /// the mesh's epoch on its own clock.
    MeshTime,
    /// Runs the runtime's invariant check (a test aid); a violation is answered as an error.
    CheckInvariants,
    /// Moves task `task`'s visibility to node `to_node` (participant `to`), so that a shadow of
    /// the task may start there (docs/PROTOCOL.md "A task spans nodes through shadows"). A node's
    /// operation: it declines the move over the fabric if nothing takes it over.
    MoveTask {
        task: Handle,
        to_node: String,
        to: Peer,
    },
    /// Starts a shadow task at `virtual_time`, taking over the move `id` to participant `to` that
    /// node `from_node` (participant `from`) made, presenting the `proof` its [`Outcome::Moved`]
    /// carried: only the client that moved the task may take the move over. A node's operation:
    /// it asks `from_node` whether the proof is the move's, and waits for the move's carry to reach
    /// its view.
    TakeOverTask {
        from_node: String,
        from: Peer,
        id: u64,
        to: Peer,
        virtual_time: Timestamp,
        proof: MoveProof,
    },
    /// Subscribes the session to the items reclaimed from `container` (`None`: from every channel
    /// and queue). A node's operation: it sends them over the fabric.
    OnReclaim {
        container: Option<Handle>,
    },
}

impl Op {
    /// `true` for the operations a payload travels with.
    pub fn carries_payload(&self) -> bool {
        matches!(self, Op::Put { .. } | Op::QueuePut { .. })
    }

    /// `true` for the operations whose lost outcome leaves the runtime holding what the caller does
    /// not know of: items made open on a connection (gets), a task or connection created or not
    /// closed (its claims hold ts_min), or a task's move to another node (its carry holds every
    /// node's ts_min until the move is taken over or declined). A client that does not see their
    /// reply ends its session so that all of it goes back (docs/NODES.md) — unless it can be
    /// released ([`releasable`](Self::releasable)).
    pub fn holds_on_node(&self) -> bool {
        matches!(
            self,
            Op::Get { .. }
                | Op::GetRange { .. }
                | Op::QueueGet { .. }
                | Op::Task { .. }
                | Op::Spawn { .. }
                | Op::MoveTask { .. }
                | Op::TakeOverTask { .. }
                | Op::AttachInput { .. }
                | Op::AttachOutput { .. }
                | Op::CloseTask { .. }
                | Op::Detach { .. }
        )
    }

    /// `true` for the operations that hold only items on the node (gets): a client that gave up on
    /// their reply asks the node to give the items back (`RequestHeader::released`) and keeps its
    /// session; the node makes them unseen again, or puts a queue item back at the head.
    pub fn releasable(&self) -> bool {
        matches!(self, Op::Get { .. } | Op::GetRange { .. } | Op::QueueGet { .. })
    }

    /// Clamps every wait the op asks for to at most `max_us`.
    pub fn clamp_waits(&mut self, max_us: u64) {
        match self {
            Op::Put { wait_us, .. }
            | Op::Get { wait_us, .. }
            | Op::QueuePut { wait_us, .. }
            | Op::QueueGet { wait_us, .. }
            | Op::WaitChanged { wait_us, .. }
            | Op::WaitProgress { wait_us } => *wait_us = (*wait_us).min(max_us),
            _ => {}
        }
    }

    /// The operation's name in errors: the API's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::CreateChannel { .. } => "create_channel",
            Op::CreateQueue { .. } => "create_queue",
            Op::Lookup { .. } => "lookup",
            Op::Names { .. } => "names",
            Op::ContainerStats { .. } => "stats",
            Op::Destroy { .. } => "destroy",
            Op::Task { .. } => "task",
            Op::Spawn { .. } => "spawn",
            Op::SetVirtualTime { .. } => "set_virtual_time",
            Op::Times { .. } => "virtual_time",
            Op::CloseTask { .. } => "close",
            Op::AttachInput { .. } => "attach_input",
            Op::AttachOutput { .. } => "attach_output",
            Op::Detach { .. } => "detach",
            Op::Put { .. } | Op::QueuePut { .. } => "put",
            Op::Get { .. } | Op::QueueGet { .. } => "get",
            Op::GetRange { .. } => "get_range",
            Op::Consume { .. } | Op::QueueConsume { .. } => "consume",
            Op::ConsumeUntil { .. } => "consume_until",
            Op::Timestamps { .. } => "timestamps",
            Op::PutLog { .. } => "put_log",
            Op::Settledness { .. } => "settled_below",
            Op::CloseProducers { .. } => "close_producers",
            Op::Demand { .. } => "demand",
            Op::WaitChanged { .. } => "changed",
            Op::WaitProgress { .. } => "join",
            Op::CheckInvariants => "check_invariants",
            Op::SetTaskName { .. } => "set_name",
            Op::Graph => "graph",
            Op::Listing { .. } => "watch",
            Op::OnReclaim { .. } => "on_reclaim",
            Op::MoveTask { .. } | Op::TakeOverTask { .. } => "shadow",
            Op::TsMin => "ts_min",
            Op::Stats => "stats",
            Op::Collect => "collect",
            Op::TraceClock => "trace_clock",
            Op::MeshTime => "mesh_time",
        }
    }
}

/// What an operation returns. `I` is how an item travels: the whole item where the op ran, its
/// header on the wire (the payloads follow the header there, uncopied).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Outcome<I> {
    Done,
    Container(ContainerInfo),
    Handle(Handle),
    Times {
        virtual_time: Timestamp,
        visibility: Timestamp,
    },
    /// One channel item.
    Item(I),
    /// Channel items in timestamp order.
    Items(Vec<I>),
    /// One queue item.
    QueueItem {
        seq: u64,
        item: I,
    },
    Names(Vec<String>),
    /// Names with their kinds and nodes.
    Listing(Vec<Listed>),
    Timestamp(Timestamp),
    Timestamps(Vec<Timestamp>),
    /// A channel's latest puts, oldest first.
    PutLog(Vec<crate::channel::PutRecord>),
    Settledness {
        settled_below: Timestamp,
        producers_closed: bool,
    },
    Stats(Stats),
    RuntimeStats {
        ts_min: Timestamp,
        containers: u64,
        claims: u64,
        /// The calling session's byte budget and its node's (`None`: not budgeted).
        budget: Option<BudgetUse>,
    },
    Count(u64),
    Graph(Graph),
    /// A task's visibility moved by node participant `from` as its move `id`; `proof` is what its
    /// takeover must present.
    Moved {
        from: Peer,
        id: u64,
        visibility: Timestamp,
        proof: MoveProof,
    },
    /// The host, and its monotonic clock (ns) when it received the op and when it answered.
    TraceClock {
        host: String,
        received_ns: u64,
        replied_ns: u64,
    },
    /// The node's mesh time when it received the op and when it answered, and its epoch.
    MeshTime(crate::ClockReading),
}

impl<I> Outcome<I> {
    /// The same outcome with each item it carries passed through `f` (in order): an item split
    /// into header and payload for the wire, or joined again from them.
    pub fn map_items<J, E>(self, mut f: impl FnMut(I) -> Result<J, E>) -> Result<Outcome<J>, E> {
        Ok(match self {
            Outcome::Item(item) => Outcome::Item(f(item)?),
            Outcome::Items(items) => Outcome::Items(items.into_iter().map(f).collect::<Result<_, _>>()?),
            Outcome::QueueItem { seq, item } => Outcome::QueueItem { seq, item: f(item)? },
            Outcome::Done => Outcome::Done,
            Outcome::Container(info) => Outcome::Container(info),
            Outcome::Handle(handle) => Outcome::Handle(handle),
            Outcome::Times { virtual_time, visibility } => Outcome::Times { virtual_time, visibility },
            Outcome::Names(names) => Outcome::Names(names),
            Outcome::Listing(listing) => Outcome::Listing(listing),
            Outcome::Timestamp(ts) => Outcome::Timestamp(ts),
            Outcome::Timestamps(ts) => Outcome::Timestamps(ts),
            Outcome::PutLog(log) => Outcome::PutLog(log),
            Outcome::Settledness { settled_below, producers_closed } => {
                Outcome::Settledness { settled_below, producers_closed }
            }
            Outcome::Stats(stats) => Outcome::Stats(stats),
            Outcome::RuntimeStats { ts_min, containers, claims, budget } => {
                Outcome::RuntimeStats { ts_min, containers, claims, budget }
            }
            Outcome::Count(n) => Outcome::Count(n),
            Outcome::Graph(graph) => Outcome::Graph(graph),
            Outcome::Moved { from, id, visibility, proof } => Outcome::Moved { from, id, visibility, proof },
            Outcome::TraceClock { host, received_ns, replied_ns } => {
                Outcome::TraceClock { host, received_ns, replied_ns }
            }
            Outcome::MeshTime(reading) => Outcome::MeshTime(reading),
        })
    }
}

/// One name of a [`Outcome::Listing`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Listed {
    pub name: String,
    /// `true` for a queue, `false` for a channel.
    pub queue: bool,
    /// The node it lives on; `None`: the runtime that answered.
    pub node: Option<String>,
}

/// A channel or queue as a session sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ContainerInfo {
    /// The handle the session knows it by (its id in the runtime).
    pub id: Handle,
    pub queue: bool,
    pub name: String,
    pub capacity: Option<u64>,
    pub bytes_max: Option<u64>,
    /// A channel's retention (a queue's: `History`).
    pub retention: Retention,
    /// The codec its payloads must have, if it declares one.
    pub codec: Option<String>,
    pub description: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_keep_their_order_through_map_items() {
        let outcome: Outcome<u32> = Outcome::Items(vec![1, 2, 3]);
        let mapped = outcome.map_items(|i| Ok::<_, ()>(i * 10)).unwrap();
        assert_eq!(mapped, Outcome::Items(vec![10, 20, 30]));
        let failed = Outcome::QueueItem { seq: 4, item: 1 }.map_items(|_| Err::<u8, _>("no payload"));
        assert_eq!(failed, Err("no payload"));
    }

    #[test]
    fn waits_are_clamped_and_nothing_else_changes() {
        let mut get = Op::Get { connection: 1, selector: Selector::Newest, wait_us: 5_000_000 };
        get.clamp_waits(1_000_000);
        assert_eq!(get, Op::Get { connection: 1, selector: Selector::Newest, wait_us: 1_000_000 });
        let mut consume = Op::Consume { connection: 1, ts: 3 };
        consume.clamp_waits(0);
        assert_eq!(consume, Op::Consume { connection: 1, ts: 3 });
    }
}
