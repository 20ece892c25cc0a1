//! [`RemoteRuntime`]: a client's view of a node's runtime, mirroring [`stampede::Runtime`].
//!
//! Names and signatures follow the embedded API; calls that cannot fail embedded (`names`,
//! `ts_min`, `stats`, `collect`) return a `Result` here, since the fabric can.

use std::sync::Arc;

use stampede::{ChannelOptions, Error, Limits, Result, RuntimeStats, Timestamp};

use crate::channel::RemoteChannel;
use crate::client::Client;
use crate::connection::ContainerRef;
use crate::queue::RemoteQueue;
use crate::task::RemoteTask;
use crate::wire::{self, ContainerInfo, Reply, Request, WireRetention};

/// A client session on a node: channels, queues and tasks there, through the fabric. Cheap to
/// clone; every clone is the same session. The session ends with [`close`](Self::close), or when
/// the last handle (runtime, task, channel, connection) is dropped.
#[derive(Clone)]
pub struct RemoteRuntime {
    pub(crate) client: Arc<Client>,
}

/// What a name refers to on the node.
#[derive(Clone, Debug)]
pub enum RemoteContainer {
    Channel(RemoteChannel),
    Queue(RemoteQueue),
}

impl RemoteRuntime {
    pub(crate) fn new(client: Client) -> RemoteRuntime {
        RemoteRuntime { client: Arc::new(client) }
    }

    /// The name of the node this client is connected to.
    pub fn node(&self) -> &str {
        self.client.node()
    }

    /// The endpoint this client connected to.
    pub fn endpoint(&self) -> &str {
        self.client.endpoint()
    }

    /// Creates a channel on the node (as [`stampede::Runtime::create_channel`]).
    pub fn create_channel(&self, name: &str, options: impl Into<ChannelOptions>) -> Result<RemoteChannel> {
        let ChannelOptions { limits, retention } = options.into();
        let (capacity, bytes_max) = bounds(limits);
        let retention = WireRetention::from(retention);
        match self.container(Request::CreateChannel { name: name.to_owned(), capacity, bytes_max, retention })? {
            RemoteContainer::Channel(channel) => Ok(channel),
            RemoteContainer::Queue(_) => Err(unexpected("create_channel", self.node())),
        }
    }

    /// Creates a queue on the node (as [`stampede::Runtime::create_queue`]).
    pub fn create_queue(&self, name: &str, limits: Limits) -> Result<RemoteQueue> {
        let (capacity, bytes_max) = bounds(limits);
        match self.container(Request::CreateQueue { name: name.to_owned(), capacity, bytes_max })? {
            RemoteContainer::Queue(queue) => Ok(queue),
            RemoteContainer::Channel(_) => Err(unexpected("create_queue", self.node())),
        }
    }

    /// The channel or queue called `name` on the node (`NotFound` otherwise).
    pub fn lookup(&self, name: &str) -> Result<RemoteContainer> {
        self.container(Request::Lookup { name: name.to_owned() })
    }

    /// The channel called `name`.
    pub fn channel(&self, name: &str) -> Result<RemoteChannel> {
        match self.lookup(name)? {
            RemoteContainer::Channel(ch) => Ok(ch),
            RemoteContainer::Queue(_) => Err(Error::NotFound { name: format!("{name} (a queue, not a channel)") }),
        }
    }

    /// The queue called `name`.
    pub fn queue(&self, name: &str) -> Result<RemoteQueue> {
        match self.lookup(name)? {
            RemoteContainer::Queue(q) => Ok(q),
            RemoteContainer::Channel(_) => Err(Error::NotFound { name: format!("{name} (a channel, not a queue)") }),
        }
    }

    /// Names of the node's channels and queues `prefix` selects, sorted (hierarchical, as
    /// [`stampede::Runtime::names`]).
    pub fn names(&self, prefix: &str) -> Result<Vec<String>> {
        match self.client.call(Request::Names { prefix: prefix.to_owned() }, None, Default::default())?.0 {
            Reply::Names(names) => Ok(names),
            _ => Err(unexpected("names", self.node())),
        }
    }

    /// A root task on the node at `virtual_time`, owned by this session.
    pub fn task(&self, virtual_time: Timestamp) -> Result<RemoteTask> {
        let handle = self.client.handle(Request::Task { virtual_time })?;
        Ok(RemoteTask::new(self.client.clone(), handle))
    }

    /// The node's ts_min.
    pub fn ts_min(&self) -> Result<Timestamp> {
        match self.client.call(Request::TsMin, None, Default::default())?.0 {
            Reply::Timestamp(ts) => Ok(ts),
            _ => Err(unexpected("ts_min", self.node())),
        }
    }

    /// Runs a GC pass on the node; returns the number of items reclaimed.
    pub fn collect(&self) -> Result<usize> {
        match self.client.call(Request::Collect, None, Default::default())?.0 {
            Reply::Count(n) => Ok(wire::size(n)),
            _ => Err(unexpected("collect", self.node())),
        }
    }

    /// The node's counters.
    pub fn stats(&self) -> Result<RuntimeStats> {
        match self.client.call(Request::Stats, None, Default::default())?.0 {
            Reply::RuntimeStats { ts_min, containers, claims } => {
                Ok(RuntimeStats { ts_min, containers: wire::size(containers), claims: wire::size(claims) })
            }
            _ => Err(unexpected("stats", self.node())),
        }
    }

    /// Ends the session: its tasks on the node are closed (claims released, open items back) by
    /// the time this returns, and the client leaves the fabric. Later calls fail `Closed`.
    /// Idempotent.
    pub fn close(&self) {
        self.client.close();
    }

    /// `true` once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn container(&self, request: Request) -> Result<RemoteContainer> {
        let op = request.op();
        match self.client.call(request, None, Default::default())?.0 {
            Reply::Container(info) => RemoteContainer::new(&self.client, info, op),
            _ => Err(unexpected(op, self.node())),
        }
    }
}

impl std::fmt::Debug for RemoteRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRuntime").field("node", &self.node()).field("endpoint", &self.endpoint()).finish()
    }
}

impl RemoteContainer {
    fn new(client: &Arc<Client>, info: ContainerInfo, op: &'static str) -> Result<RemoteContainer> {
        let limits = wire::limits(info.capacity, info.bytes_max).ok_or_else(|| unexpected(op, client.node()))?;
        let container = ContainerRef { client: client.clone(), id: info.id, name: info.name.into(), limits };
        Ok(if info.queue {
            RemoteContainer::Queue(RemoteQueue::new(container))
        } else {
            RemoteContainer::Channel(RemoteChannel::new(container))
        })
    }
}

fn bounds(limits: Limits) -> (Option<u64>, Option<u64>) {
    (limits.capacity.map(|n| n as u64), limits.bytes_max.map(|n| n as u64))
}

/// The error for a reply of the wrong kind: a node that does not follow the wire format.
pub(crate) fn unexpected(op: &'static str, node: &str) -> Error {
    Error::Unreachable { op, name: node.to_owned(), reason: "the node answered with a reply of another kind".into() }
}
