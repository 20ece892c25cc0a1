//! The plain data of the runtime's API, shared by the engine and every backend of the facade:
//! how a channel or queue is created ([`ChannelOptions`], [`QueueOptions`]), how an item is put
//! ([`PutOptions`]), what the name service tells of a container ([`Info`]) and a runtime's
//! counters ([`RuntimeStats`]).

use std::time::Duration;

use stampede_core::{BudgetUse, Codec, Limits, Retention, Timestamp};

use crate::disk::DiskTier;

/// How a channel is created: its bounds, its retention policy, and what the name service says
/// of it (docs/NODES.md, "The name service").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelOptions {
    /// Bounds on items and bytes (default: unbounded).
    pub limits: Limits,
    /// When items above ts_min may be reclaimed (default: [`Retention::History`]).
    pub retention: Retention,
    /// The codec every payload must have (`None`: any). A put of another codec is
    /// `InvalidArgument`.
    pub codec: Option<Codec>,
    /// What the channel carries, for people ([`Channel::info`](crate::Channel::info)).
    pub description: String,
    /// The node to place it on (`None`: the runtime's own). Only a client reaches another
    /// (`stampede::Runtime::create_channel`); the engine never reads it.
    pub node: Option<String>,
    /// Keep history beyond memory in a disk tier (`None`: memory only). Embedded runtimes only;
    /// see [`DiskTier`] and `docs/RECORDING.md`.
    pub disk: Option<DiskTier>,
}

impl From<Limits> for ChannelOptions {
    fn from(limits: Limits) -> Self {
        ChannelOptions { limits, ..ChannelOptions::default() }
    }
}

impl From<Retention> for ChannelOptions {
    fn from(retention: Retention) -> Self {
        ChannelOptions { retention, ..ChannelOptions::default() }
    }
}

/// How a queue is created: its bounds and what the name service says of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueOptions {
    /// Bounds on items and bytes (default: unbounded).
    pub limits: Limits,
    /// What the queue carries, for people ([`Queue::info`](crate::Queue::info)).
    pub description: String,
    /// The node to place it on (`None`: the runtime's own; as [`ChannelOptions::node`]).
    pub node: Option<String>,
}

impl From<Limits> for QueueOptions {
    fn from(limits: Limits) -> Self {
        QueueOptions { limits, ..QueueOptions::default() }
    }
}

/// Longest description a channel or queue may have.
pub const DESCRIPTION_BYTES_MAX: usize = 4096;

/// What the name service tells of a channel or queue ([`Channel::info`](crate::Channel::info),
/// [`Queue::info`](crate::Queue::info)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    /// `"channel"` or `"queue"`.
    pub kind: &'static str,
    /// The node it lives on (`None`: this process's embedded runtime).
    pub node: Option<String>,
    pub limits: Limits,
    /// The codec its payloads must have, if it declares one (channels only).
    pub codec: Option<Codec>,
    pub description: String,
}

/// Options of a put.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Number of consumptions after which the item is reclaimed, even above ts_min
    /// (docs/SEMANTICS.md, "Virtual time, visibility, GC").
    pub refcount: Option<u32>,
    /// How long to wait for room in a full bounded channel: `None` waits as long as needed,
    /// `Some(Duration::ZERO)` fails `Full` at once.
    pub timeout: Option<Duration>,
}

/// Node-wide counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Current ts_min.
    pub ts_min: Timestamp,
    /// Channels and queues registered.
    pub containers: usize,
    /// Claims on ts_min held (tasks plus channels and queues with unconsumed items).
    pub claims: usize,
    /// Through a node: the session's byte budget and the node's, their live bytes against their
    /// maximums (`None` embedded, where nothing is budgeted).
    pub budget: Option<BudgetUse>,
}
