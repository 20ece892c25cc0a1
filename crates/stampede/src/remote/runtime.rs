//! [`RemoteRuntime`]: a client's session on a node, the remote form of [`crate::Runtime`].
//!
//! Queries that cannot fail embedded (`ts_min`, `stats`, `collect`) answer, when the node cannot
//! be reached, from what this client last learned: ts_min never decreases, so the last one seen
//! is a safe lower bound; `collect` reclaimed nothing the client knows of (0).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::runtime::ConnectOptions;
use crate::{ChannelOptions, Codec, Error, Limits, QueueOptions, Result, RuntimeStats, Timestamp};

use crate::remote::channel::RemoteChannel;
use crate::remote::client::{blocking, Client, Registration};
use crate::remote::connection::ContainerRef;
use crate::remote::queue::RemoteQueue;
use crate::remote::reclaim::GlobalHandler;
use crate::remote::task::RemoteTask;
use crate::remote::watch::Subscription;
use crate::remote::LIVELINESS_TIMEOUT_DEFAULT;
use crate::watch::{self, Watch};
use stampede_core::mesh_time::Exchange;
use stampede_wire::{self as wire, ContainerInfo, Op, Outcome};

/// Exchanges with the node per [`RemoteRuntime::epoch`]: the least-delay one is kept.
pub const EPOCH_EXCHANGES: usize = 5;

/// A client session on a node: channels, queues and tasks there, through the fabric. Cheap to
/// clone; every clone is the same session. The session ends with [`close`](Self::close), or when
/// the last handle (runtime, task, channel, connection) is dropped.
///
/// Channels and queues placed on other nodes (`node=`), or found there by
/// [`lookup`](Self::lookup), are reached through sessions of this runtime on those nodes, opened
/// on first use the way this one was (through the same endpoint) and closed with it
/// (docs/NODES.md, "Surrogate sessions": each remote client has a session on the nodes it uses).
#[derive(Clone)]
pub(crate) struct RemoteRuntime {
    pub(crate) client: Arc<Client>,
    /// The node's counters when last asked, for when it cannot be reached.
    known: Arc<Mutex<RuntimeStats>>,
    /// How this session was opened: sessions on other nodes are opened the same way.
    options: Arc<ConnectOptions>,
    /// This runtime's sessions on other nodes, and its runtime-wide GC handlers (they run for
    /// every node it uses).
    others: Arc<Mutex<Others>>,
}

#[derive(Default)]
struct Others {
    sessions: BTreeMap<String, RemoteRuntime>,
    handlers: Vec<GlobalHandler>,
}

/// What a name refers to on the node.
#[derive(Clone, Debug)]
pub(crate) enum RemoteContainer {
    Channel(RemoteChannel),
    Queue(RemoteQueue),
}

impl RemoteRuntime {
    /// The user it connected as, if any.
    pub(crate) fn user(&self) -> Option<&str> {
        self.options.user.as_ref().map(|credentials| credentials.user.as_str())
    }

    pub(crate) fn new(client: Client, options: &ConnectOptions) -> RemoteRuntime {
        let known = RuntimeStats { ts_min: 0, containers: 0, claims: 0, budget: None };
        RemoteRuntime {
            client: Arc::new(client),
            known: Arc::new(Mutex::new(known)),
            options: Arc::new(options.clone()),
            others: Arc::default(),
        }
    }

    /// The session a container goes to when `node` (else the runtime's placement) is another
    /// node than this session's; `None` when it goes here.
    fn placed(&self, op: &'static str, node: Option<&str>) -> Result<Option<RemoteRuntime>> {
        match node.or(self.options.placement.as_deref()) {
            Some(node) if node != self.node() => self.on_node(op, Some(node)).map(Some),
            _ => Ok(None),
        }
    }

    /// This runtime's session on `node`: this one for `None` or its own node, else one opened
    /// through the same endpoint on first use (within the connect timeout, or
    /// [`LIVELINESS_TIMEOUT_DEFAULT`] without one). `Unreachable` at once for a node that does not
    /// answer on the fabric.
    pub(crate) fn on_node(&self, op: &'static str, node: Option<&str>) -> Result<RemoteRuntime> {
        let Some(node) = node.filter(|node| *node != self.node()) else { return Ok(self.clone()) };
        self.client.check_open(op)?;
        let mut others = self.others.lock();
        if let Some(session) = others.sessions.get(node).filter(|session| !session.is_closed()) {
            return Ok(session.clone());
        }
        // A name no node answers to fails now rather than after the timeout.
        let reachable = self.nodes()?;
        if !reachable.iter().any(|there| there == node) {
            let reason = format!(
                "node {node} does not answer on the fabric (nodes reachable: {}); start it, or check the name",
                reachable.join(", ")
            );
            return Err(Error::Unreachable { op, name: node.to_owned(), reason });
        }
        let options = ConnectOptions {
            node: Some(node.to_owned()),
            placement: None,
            timeout: Some(self.options.timeout.unwrap_or(LIVELINESS_TIMEOUT_DEFAULT)),
            ..(*self.options).clone()
        };
        let session = crate::remote::client::connect(self.endpoint(), &options)?;
        for handler in &others.handlers {
            session.client.on_reclaim(Registration::Global(handler.clone()))?;
        }
        others.sessions.insert(node.to_owned(), session.clone());
        Ok(session)
    }

    /// The name of the node this client is connected to.
    pub fn node(&self) -> &str {
        self.client.node()
    }

    /// Requests sent to the node so far (see `Runtime::requests_sent`).
    pub fn requests_sent(&self) -> u64 {
        self.client.requests_sent()
    }

    /// The endpoint this client connected to.
    pub fn endpoint(&self) -> &str {
        self.client.endpoint()
    }

    /// Creates a channel on the node (as [`crate::Runtime::create_channel`]).
    pub fn create_channel(&self, name: &str, options: ChannelOptions) -> Result<RemoteChannel> {
        if let Some(there) = self.placed("create_channel", options.node.as_deref())? {
            return there.create_channel(name, ChannelOptions { node: None, ..options });
        }
        let ChannelOptions { limits, retention, codec, description, node: _, disk } = options;
        if disk.is_some() {
            return Err(Error::InvalidArgument {
                op: "create_channel",
                name: name.to_owned(),
                reason: "a disk tier is for channels of an embedded runtime; a client cannot give one to a node's \
                         channel yet"
                    .into(),
            });
        }
        let (capacity, bytes_max) = bounds(limits);
        let codec = codec.map(|codec| codec.name().to_owned());
        let request = Op::CreateChannel { name: name.to_owned(), capacity, bytes_max, retention, codec, description };
        match self.container(request)? {
            RemoteContainer::Channel(channel) => Ok(channel),
            RemoteContainer::Queue(_) => Err(unexpected("create_channel", self.node())),
        }
    }

    /// Creates a queue on the node (as [`crate::Runtime::create_queue`]).
    pub fn create_queue(&self, name: &str, options: QueueOptions) -> Result<RemoteQueue> {
        if let Some(there) = self.placed("create_queue", options.node.as_deref())? {
            return there.create_queue(name, QueueOptions { node: None, ..options });
        }
        let QueueOptions { limits, description, node: _ } = options;
        let (capacity, bytes_max) = bounds(limits);
        match self.container(Op::CreateQueue { name: name.to_owned(), capacity, bytes_max, description })? {
            RemoteContainer::Queue(queue) => Ok(queue),
            RemoteContainer::Channel(_) => Err(unexpected("create_queue", self.node())),
        }
    }

    /// A watch of the names under `prefix` on every node of the mesh, and of every node's
    /// changes and liveliness (see [`crate::watch`]).
    pub fn watch(&self, prefix: &str, timeout: Option<Duration>) -> Result<Watch> {
        let mut subscription =
            blocking(|| Subscription::start(&self.client, prefix)).map_err(|e| Error::Unreachable {
                op: "watch",
                name: self.node().to_owned(),
                reason: format!("zenoh refused the watch's subscribers: {e}"),
            })?;
        // The names now on every node of the mesh (the node asks the others); the subscription,
        // started before, streams every node's changes.
        let request = Op::Listing { prefix: prefix.to_owned() };
        let listing = match self.client.call_after_declarations(request)?.0 {
            Outcome::Listing(listing) => listing,
            _ => return Err(unexpected("watch", self.node())),
        };
        let snapshot: Vec<_> = listing
            .into_iter()
            .flat_map(|listed| {
                let kind = if listed.queue { "queue" } else { "channel" };
                let node = listed.node.unwrap_or_else(|| self.node().to_owned());
                watch::snapshot([(listed.name, kind)], Some(&node))
            })
            .collect();
        subscription.admit(&snapshot);
        Ok(Watch::remote(prefix, timeout, snapshot, subscription))
    }

    /// The nodes reachable on the fabric from here, sorted.
    pub fn nodes(&self) -> Result<Vec<String>> {
        self.client.nodes()
    }

    /// The channel or queue called `name`: on the placement node if there is one, else on this
    /// session's node, else on the first other node that has it (sessions this runtime has
    /// first, then every node reachable, in name order); `NotFound` when none has it.
    pub fn lookup(&self, name: &str) -> Result<RemoteContainer> {
        if let Some(there) = self.placed("lookup", None)? {
            if let Ok(container) = there.container(Op::Lookup { name: name.to_owned() }) {
                return Ok(container);
            }
        }
        let here = self.container(Op::Lookup { name: name.to_owned() });
        if !matches!(here, Err(Error::NotFound { .. })) {
            return here;
        }
        let mut nodes: Vec<String> = self.others.lock().sessions.keys().cloned().collect();
        for node in self.nodes().unwrap_or_default() {
            if node != self.node() && !nodes.contains(&node) {
                nodes.push(node);
            }
        }
        for node in nodes {
            let opened = self.others.lock().sessions.get(&node).is_none_or(RemoteRuntime::is_closed);
            // A node gone meanwhile, or one this user may not use, is not where the name is.
            let Ok(there) = self.on_node("lookup", Some(&node)) else { continue };
            if let Ok(container) = there.container(Op::Lookup { name: name.to_owned() }) {
                return Ok(container);
            }
            if opened {
                self.close_if_unused(&node, there);
            }
        }
        here
    }

    /// Closes `session`, this runtime's session on `node`, if nothing but the runtime holds it
    /// (no container, connection or task of it, no call under way): a lookup that did not find
    /// its name there leaves no session behind.
    fn close_if_unused(&self, node: &str, session: RemoteRuntime) {
        let mut others = self.others.lock();
        // Held by the table and by `session`: nobody else can take it while the table is locked.
        let unused = others.sessions.get(node).is_some_and(|listed| Arc::ptr_eq(&listed.client, &session.client))
            && Arc::strong_count(&session.client) == 2;
        if unused {
            others.sessions.remove(node);
            drop(others);
            session.close();
        }
    }

    /// Names of the channels and queues `prefix` selects on every node of the mesh (those the
    /// user may see), sorted (hierarchical, as [`crate::Runtime::names`]): the node asks the
    /// others, and leaves out one that does not answer within its `LISTING_WAIT` (500 ms).
    pub fn names(&self, prefix: &str) -> Result<Vec<String>> {
        match self.client.call(Op::Names { prefix: prefix.to_owned() }, None, Duration::ZERO)?.0 {
            Outcome::Names(names) => Ok(names),
            _ => Err(unexpected("names", self.node())),
        }
    }

    /// A root task on the node at `virtual_time`, owned by this session.
    pub fn task(&self, virtual_time: Timestamp) -> Result<RemoteTask> {
        let handle = self.client.handle(Op::Task { virtual_time })?;
        Ok(RemoteTask::new(self.client.clone(), handle, virtual_time))
    }

    /// The mesh's epoch on this process's clock, from [`EPOCH_EXCHANGES`] exchanges with the
    /// node (see [`crate::Runtime::epoch`]): the least-delay one, whose error is at most half
    /// its round trip.
    pub fn epoch(&self) -> Result<crate::Epoch> {
        let base = Instant::now();
        let since_base = || u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut exchanges = Vec::with_capacity(EPOCH_EXCHANGES);
        for _ in 0..EPOCH_EXCHANGES {
            let t0 = since_base();
            let reading = match self.client.call(Op::MeshTime, None, Duration::ZERO)?.0 {
                Outcome::MeshTime(reading) => reading,
                _ => return Err(unexpected("epoch", self.node())),
            };
            let exchange = Exchange { t0, t1: reading.received_ns, t2: reading.replied_ns, t3: since_base() };
            exchanges.push((exchange, reading.epoch_ns));
        }
        let best = exchanges.into_iter().min_by_key(|(exchange, _)| exchange.delay());
        let Some((exchange, epoch_ns)) = best else { return Err(unexpected("epoch", self.node())) };
        // The exchange's middle: on this clock, and on the node's mesh time.
        let at = base + Duration::from_nanos(u64::try_from(exchange.middle()).unwrap_or(u64::MAX));
        let mesh_middle = (i128::from(exchange.t1) + i128::from(exchange.t2)) / 2;
        Ok(crate::Epoch { at, since_ns: mesh_middle - i128::from(epoch_ns) })
    }

    /// The node's ts_min (the last one seen when the node cannot be reached).
    /// The lowest ts_min of the nodes this runtime uses (the last one seen of a node that cannot
    /// be reached): nothing below it is left on any of them.
    pub fn ts_min(&self) -> Timestamp {
        let here = match self.client.call(Op::TsMin, None, Duration::ZERO) {
            Ok((Outcome::Timestamp(ts), _)) => {
                let mut known = self.known.lock();
                known.ts_min = known.ts_min.max(ts);
                known.ts_min
            }
            _ => self.known.lock().ts_min,
        };
        self.other_sessions().iter().map(RemoteRuntime::ts_min).fold(here, Timestamp::min)
    }

    /// Runs a GC pass on every node this runtime uses; returns the number of items reclaimed (0
    /// on a node that cannot be reached).
    pub fn collect(&self) -> usize {
        let here = match self.client.call(Op::Collect, None, Duration::ZERO) {
            Ok((Outcome::Count(n), _)) => wire::size(n),
            _ => 0,
        };
        here + self.other_sessions().iter().map(RemoteRuntime::collect).sum::<usize>()
    }

    /// The counters of the nodes this runtime uses (the last ones seen of a node that cannot be
    /// reached): the lowest ts_min, containers and claims summed.
    pub fn stats(&self) -> RuntimeStats {
        if let Ok((Outcome::RuntimeStats { ts_min, containers, claims, budget }, _)) =
            self.client.call(Op::Stats, None, Duration::ZERO)
        {
            let mut known = self.known.lock();
            *known = RuntimeStats {
                ts_min: ts_min.max(known.ts_min),
                containers: wire::size(containers),
                claims: wire::size(claims),
                budget,
            };
        }
        let here = self.known.lock().clone();
        // The budget shown is this session's and its node's (the one it connected to).
        self.other_sessions().iter().map(RemoteRuntime::stats).fold(here, |all, there| RuntimeStats {
            ts_min: all.ts_min.min(there.ts_min),
            containers: all.containers + there.containers,
            claims: all.claims + there.claims,
            budget: all.budget,
        })
    }

    /// This runtime's sessions on other nodes, now.
    fn other_sessions(&self) -> Vec<RemoteRuntime> {
        self.others.lock().sessions.values().cloned().collect()
    }

    /// The node's graph: its tasks, connections and containers.
    ///
    /// With sessions on other nodes, one graph of them all: their containers (in name order), their
    /// tasks, the lowest ts_min, and each of this runtime's tasks with the connections of its
    /// shadows (which are not listed apart).
    pub fn graph(&self) -> Result<crate::graph::Graph> {
        let mut graph = self.node_graph()?;
        let shadows = self.client.shadows.lock().clone();
        for session in self.other_sessions() {
            let there = session.node_graph()?;
            graph.ts_min = graph.ts_min.min(there.ts_min);
            graph.containers.extend(there.containers);
            for task in there.tasks {
                match shadows.get(&(session.node().to_owned(), task.id)) {
                    Some(home) => {
                        if let Some(own) = graph.tasks.iter_mut().find(|t| t.id == *home) {
                            own.connections.extend(task.connections);
                        }
                    }
                    None => graph.tasks.push(task),
                }
            }
        }
        graph.containers.sort_by(|x, y| x.name.cmp(&y.name));
        Ok(graph)
    }

    /// The graph of this session's node alone.
    fn node_graph(&self) -> Result<crate::graph::Graph> {
        match self.client.call(Op::Graph, None, Duration::ZERO)? {
            (Outcome::Graph(graph), _) => Ok(graph),
            _ => Err(unexpected("graph", self.client.node())),
        }
    }

    /// Runs the node runtime's invariant check; panics with the node's report if it fails (the
    /// contract of [`crate::Runtime::check_invariants`]). A node that cannot be reached checks
    /// nothing.
    pub fn check_invariants(&self) {
        if let Err(e @ Error::InvalidArgument { .. }) = self.client.call(Op::CheckInvariants, None, Duration::ZERO) {
            panic!("the node's invariants do not hold: {e}");
        }
    }

    /// Runs `handler(name, item)` on this client for each item any channel or queue of the node
    /// reclaims.
    pub fn on_reclaim(&self, handler: impl Fn(&str, &crate::Item) + Send + Sync + 'static) -> Result<()> {
        let handler: GlobalHandler = Arc::new(handler);
        let mut others = self.others.lock();
        self.client.on_reclaim(Registration::Global(handler.clone()))?;
        for session in others.sessions.values() {
            session.client.on_reclaim(Registration::Global(handler.clone()))?;
        }
        others.handlers.push(handler);
        Ok(())
    }

    /// Completes at the next put or claim change on the node, or after a wait slice.
    pub fn progressed(&self) -> crate::Changed {
        self.client.progressed()
    }

    /// Ends the session: its tasks on the node are closed (claims released, open items back) by
    /// the time this returns, and the client leaves the fabric. Later calls fail `Closed`.
    /// Idempotent.
    pub fn close(&self) {
        let others = std::mem::take(&mut self.others.lock().sessions);
        for session in others.values() {
            session.close();
        }
        self.client.close();
    }

    /// `true` once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn container(&self, request: Op) -> Result<RemoteContainer> {
        let op = request.name();
        match self.client.call(request, None, Duration::ZERO)?.0 {
            Outcome::Container(info) => RemoteContainer::new(&self.client, info, op),
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
        let limits = Limits::from_counts(info.capacity, info.bytes_max).ok_or_else(|| unexpected(op, client.node()))?;
        let container = ContainerRef {
            client: client.clone(),
            id: info.id,
            name: info.name.into(),
            limits,
            retention: info.retention,
            codec: info.codec.as_deref().map(Codec::from_name),
            description: info.description.into(),
            known: Arc::default(),
        };
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
