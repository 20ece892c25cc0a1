//! [`Runtime`]: channels, queues, names, tasks and GC — embedded in this process by default
//! (docs/NODES.md, "Embedded by default, one API everywhere": nothing to install or start), or a
//! client's session on a node through [`connect`], with the same API.

use std::path::PathBuf;
use std::time::Duration;

use stampede_core::{Error, Item, Result, Timestamp};

#[cfg(not(feature = "remote"))]
use crate::backend::Never as RemoteRuntime;
use crate::backend::{forward, remote, Backend};
use crate::channel::Channel;
use crate::queue::Queue;
#[cfg(feature = "remote")]
use crate::remote::runtime::{RemoteContainer, RemoteRuntime};
use crate::task::Task;
use crate::wait::Changed;
use crate::watch::Watch;
use stampede_engine as engine;

pub use stampede_engine::options::{ChannelOptions, Info, QueueOptions, RuntimeStats, DESCRIPTION_BYTES_MAX};

/// What a name refers to.
#[derive(Clone, Debug)]
pub enum Container {
    Channel(Channel),
    Queue(Queue),
}

impl Container {
    /// The channel's or queue's name.
    pub fn name(&self) -> &str {
        match self {
            Container::Channel(c) => c.name(),
            Container::Queue(q) => q.name(),
        }
    }
}

/// A Stampede runtime: embedded ([`Runtime::new`]) or a session on a node ([`connect`]). Cheap
/// to clone; every clone is the same runtime.
#[derive(Clone)]
pub struct Runtime(pub(crate) Backend<engine::Runtime, RemoteRuntime>);

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

/// How [`connect_with`] reaches a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// How long to keep trying to reach the node (`None`: as long as it takes).
    pub timeout: Option<Duration>,
    /// The node to open the session on, reached through the one at the endpoint and the mesh of
    /// nodes connected to it (`None`: the node at the endpoint).
    pub node: Option<String>,
    /// The TLS files for a `tls/` endpoint (`None`: trust only the public web PKI roots, present
    /// no certificate). Given with another kind of endpoint: `InvalidArgument`.
    pub tls: Option<ClientTls>,
    /// The user to open the session as, on a node with an access policy (`docs/SECURITY.md`);
    /// `None` on a node without one. A wrong password, or none where one is required, fails
    /// `PermissionDenied`.
    pub user: Option<Credentials>,
    /// The node channels and queues are created on when `create_channel` / `create_queue` name
    /// none (`None`: the node of the session; docs/NODES.md "One task, several nodes"), and the
    /// first one [`Runtime::lookup`] asks.
    pub placement: Option<String>,
    /// Carry every request in a zenoh query, even where the node offers its own sockets (the
    /// direct path, `docs/ARCHITECTURE.md` "The request path"): to compare the two, or where
    /// only zenoh's port is open between client and node.
    pub zenoh_only: bool,
    /// The prefetch policy of this client's channel inputs that choose none
    /// (`InputOptions::prefetch`; docs/PREFETCH.md): `auto` by default.
    pub prefetch: crate::Prefetch,
    /// Replies this client drops on arrival, as if lost (tests of lost replies only).
    #[cfg(feature = "faults")]
    pub lose_replies: Option<std::sync::Arc<crate::remote::faults::LoseReplies>>,
}

/// A user name and password, for a node with an access policy.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl Credentials {
    /// Credentials from a binding's two optional arguments: both or neither (`InvalidArgument`
    /// naming `endpoint` for one alone).
    pub fn pair(user: Option<String>, password: Option<String>, endpoint: &str) -> Result<Option<Credentials>> {
        match (user, password) {
            (Some(user), Some(password)) => Ok(Some(Credentials { user, password })),
            (None, None) => Ok(None),
            _ => Err(Error::InvalidArgument {
                op: "connect",
                name: endpoint.to_owned(),
                reason: "a user and a password go together".into(),
            }),
        }
    }
}

/// The password is never printed.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("user", &self.user).finish_non_exhaustive()
    }
}

/// A client's TLS files (PEM), for a `tls/<host>:<port>` endpoint (see `docs/SECURITY.md`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA certificate that signed the node's certificate (the public web PKI roots are
    /// trusted besides). The node's certificate must name the endpoint's host (IP or DNS name).
    pub root_ca: Option<PathBuf>,
    /// The client's certificate, for a node that requires mutual TLS (with `private_key`).
    pub certificate: Option<PathBuf>,
    /// The private key of `certificate`.
    pub private_key: Option<PathBuf>,
}

impl ClientTls {
    /// The files a binding passes as optional paths; `None` when none is given.
    pub fn from_paths(
        root_ca: Option<String>,
        certificate: Option<String>,
        private_key: Option<String>,
    ) -> Option<ClientTls> {
        if root_ca.is_none() && certificate.is_none() && private_key.is_none() {
            return None;
        }
        Some(ClientTls {
            root_ca: root_ca.map(Into::into),
            certificate: certificate.map(Into::into),
            private_key: private_key.map(Into::into),
        })
    }
}

#[cfg(feature = "remote")]
/// Connects to the node listening on `endpoint` (`tcp/127.0.0.1:7447`, `tls/<host>:<port>`,
/// `unixsock-stream/<path>`; `stampede serve` or an embedded runtime serving clients) and opens a
/// session there, as `options` say: the returned runtime's channels, queues and tasks live on that
/// node, and its API is the embedded one. Errors: `Unreachable` when no node answers within
/// `options.timeout` (for a `tls/` endpoint: naming TLS and what to check — the CA, the
/// certificate's names, a client certificate for mutual TLS), `InvalidArgument` for a malformed
/// endpoint, unusable TLS files, or a node of another release (wire version mismatch).
///
/// A remote runtime's blocking calls block the calling thread (call them outside async code);
/// the `_async` forms and readiness futures do not. See `docs/NODES.md` and `docs/SECURITY.md`.
pub fn connect_with(endpoint: &str, options: &ConnectOptions) -> Result<Runtime> {
    crate::trace::enable_from_env();
    Ok(Runtime(Backend::Remote(crate::remote::client::connect(endpoint, options)?)))
}

#[cfg(feature = "remote")]
/// [`connect_with`] the node at `endpoint`, trying for `timeout` (`None`: as long as it takes),
/// without TLS files.
pub fn connect(endpoint: &str, timeout: Option<Duration>) -> Result<Runtime> {
    connect_with(endpoint, &ConnectOptions { timeout, ..ConnectOptions::default() })
}

#[cfg(feature = "remote")]
/// [`connect_with`] the node called `node`, reached through the node at `endpoint` and the mesh
/// of nodes connected to it (`stampede serve --connect …`): the session, its channels, queues
/// and tasks are on `node`. `Unreachable` when `node` does not answer there within `timeout`.
pub fn connect_to(endpoint: &str, node: &str, timeout: Option<Duration>) -> Result<Runtime> {
    connect_with(endpoint, &ConnectOptions { timeout, node: Some(node.to_owned()), ..ConnectOptions::default() })
}

/// The facade over an engine, e.g. the one a node serves (`stampede_node::Node::runtime`): the
/// same runtime, not a copy.
impl From<engine::Runtime> for Runtime {
    fn from(engine: engine::Runtime) -> Runtime {
        Runtime(Backend::Local(engine))
    }
}

impl Runtime {
    /// A new, empty runtime in this process. Several may coexist; they share nothing.
    pub fn new() -> Runtime {
        crate::trace::enable_from_env();
        Runtime(Backend::Local(engine::Runtime::new()))
    }

    /// The engine of an embedded runtime: what a node (`stampede_node::Node::serve`) serves to
    /// clients in other processes, running their operations on it directly. `InvalidArgument` for
    /// a client of a node, which has no engine here.
    pub fn engine(&self) -> Result<engine::Runtime> {
        match &self.0 {
            Backend::Local(rt) => Ok(rt.clone()),
            Backend::Remote(rt) => remote!(rt => Err(Error::InvalidArgument {
                op: "engine",
                name: "runtime".into(),
                reason: format!(
                    "the runtime is a client of node {}; serve an embedded runtime (Runtime::new())",
                    rt.node()
                ),
            })),
        }
    }

    /// The node this runtime is a session on (`None` when embedded).
    pub fn node(&self) -> Option<&str> {
        match &self.0 {
            Backend::Local(_) => None,
            Backend::Remote(rt) => remote!(rt => Some(rt.node())),
        }
    }

    /// How many requests this session has sent its node so far, each answered by one reply
    /// (tries of a retried call count each; `None` when embedded): for measuring what prefetch and
    /// deferred consumes save (docs/PREFETCH.md).
    pub fn requests_sent(&self) -> Option<u64> {
        match &self.0 {
            Backend::Local(_) => None,
            Backend::Remote(rt) => remote!(rt => Some(rt.requests_sent())),
        }
    }

    /// The user this runtime connected as (`ConnectOptions::user`); `None` when embedded or
    /// connected without one.
    pub fn user(&self) -> Option<&str> {
        match &self.0 {
            Backend::Local(_) => None,
            Backend::Remote(rt) => remote!(rt => rt.user()),
        }
    }

    /// Creates a channel with bounds ([`Limits`](crate::Limits)) or full [`ChannelOptions`].
    /// Names are `/`-separated segments (`camera/left`, see [`stampede_core::name`]); a bad name
    /// or a zero bound is `InvalidArgument`, a name in use `AlreadyExists`, a closed runtime
    /// `Closed`.
    ///
    /// Placement: a channel lives on the runtime's node (a session's node; this process when
    /// embedded). `options.node` may name that node; another node is `InvalidArgument` (connect
    /// to it: [`connect_to`]), since a task cannot span nodes yet.
    pub fn create_channel(&self, name: &str, options: impl Into<ChannelOptions>) -> Result<Channel> {
        let options = options.into();
        self.check_placement("create_channel", name, options.node.as_deref())?;
        Ok(match &self.0 {
            Backend::Local(rt) => Channel(Backend::Local(rt.create_channel(name, options)?)),
            Backend::Remote(rt) => remote!(rt => Channel(Backend::Remote(rt.create_channel(name, options)?))),
        })
    }

    /// Creates a queue with bounds ([`Limits`](crate::Limits)) or full [`QueueOptions`] (names, bounds and
    /// placement as [`create_channel`](Self::create_channel)).
    pub fn create_queue(&self, name: &str, options: impl Into<QueueOptions>) -> Result<Queue> {
        let options = options.into();
        self.check_placement("create_queue", name, options.node.as_deref())?;
        Ok(match &self.0 {
            Backend::Local(rt) => Queue(Backend::Local(rt.create_queue(name, options)?)),
            Backend::Remote(rt) => remote!(rt => Queue(Backend::Remote(rt.create_queue(name, options)?))),
        })
    }

    /// `Ok` when `node` is `None`, or this runtime is a client (which reaches any node of its
    /// mesh); an embedded runtime places containers in this process only.
    fn check_placement(&self, op: &'static str, name: &str, node: Option<&str>) -> Result<()> {
        let (Some(node), Backend::Local(_)) = (node, &self.0) else { return Ok(()) };
        let reason = format!(
            "cannot place it on node {node}: this runtime is embedded in this process; connect to the mesh \
             (stampede::connect / stampede.connect(endpoint)) and create it with node={node:?}"
        );
        Err(Error::InvalidArgument { op, name: name.to_owned(), reason })
    }

    /// Watches the names under `prefix` (hierarchical, as [`names`](Self::names)): yields a
    /// `Created` event for each channel and queue there now, then one per creation and
    /// destruction, and — through a client — `NodeUp`/`NodeDown` for the nodes it reaches
    /// (`NodeUp` for each at the start). Iterating ends when nothing happens for `timeout`
    /// (`None`: never) or the runtime closes; [`Watch::next_event`] waits as asked.
    pub fn watch(&self, prefix: &str, timeout: Option<Duration>) -> Result<Watch> {
        match &self.0 {
            Backend::Local(rt) => {
                let (snapshot, feed) = rt.watch(prefix);
                Ok(Watch::local(prefix, timeout, snapshot, feed))
            }
            Backend::Remote(rt) => remote!(rt => rt.watch(prefix, timeout)),
        }
    }

    /// The nodes on the fabric this runtime reaches, sorted (empty when embedded).
    pub fn nodes(&self) -> Result<Vec<String>> {
        match &self.0 {
            Backend::Local(_) => Ok(Vec::new()),
            Backend::Remote(rt) => remote!(rt => rt.nodes()),
        }
    }

    /// The channel or queue called `name` (`NotFound` otherwise; `InvalidArgument` for a name
    /// no container can have; `Closed` once the runtime is closed).
    pub fn lookup(&self, name: &str) -> Result<Container> {
        Ok(match &self.0 {
            Backend::Local(rt) => match rt.lookup(name)? {
                engine::Container::Channel(ch) => Container::Channel(Channel(Backend::Local(ch))),
                engine::Container::Queue(q) => Container::Queue(Queue(Backend::Local(q))),
            },
            Backend::Remote(rt) => remote!(rt => match rt.lookup(name)? {
                RemoteContainer::Channel(ch) => Container::Channel(Channel(Backend::Remote(ch))),
                RemoteContainer::Queue(q) => Container::Queue(Queue(Backend::Remote(q))),
            }),
        })
    }

    /// The channel called `name`.
    pub fn channel(&self, name: &str) -> Result<Channel> {
        match self.lookup(name)? {
            Container::Channel(ch) => Ok(ch),
            Container::Queue(_) => Err(Error::NotFound { name: format!("{name} (a queue, not a channel)") }),
        }
    }

    /// The queue called `name`.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        match self.lookup(name)? {
            Container::Queue(q) => Ok(q),
            Container::Channel(_) => Err(Error::NotFound { name: format!("{name} (a channel, not a queue)") }),
        }
    }

    /// Names of the channels and queues `prefix` selects, sorted. Hierarchical
    /// ([`stampede_core::name::under`]): `""` selects all; `"camera/"` the names under `camera/`
    /// (not `cameraX`); `"camera"` `camera` itself and the names under it (not `cameras`).
    /// Embedded this never fails; remotely it is `Unreachable` when the node cannot be reached.
    pub fn names(&self, prefix: &str) -> Result<Vec<String>> {
        match &self.0 {
            Backend::Local(rt) => Ok(rt.names(prefix)),
            Backend::Remote(rt) => remote!(rt => rt.names(prefix)),
        }
    }

    /// A root task at `virtual_time` (`INFINITY` allowed). It must be `>= ts_min`: nothing below
    /// ts_min may ever be put again.
    pub fn task(&self, virtual_time: Timestamp) -> Result<Task> {
        Ok(match &self.0 {
            Backend::Local(rt) => Task(Backend::Local(rt.task(virtual_time)?)),
            Backend::Remote(rt) => remote!(rt => Task(Backend::Remote(rt.task(virtual_time)?))),
        })
    }

    /// The mesh's epoch on this process's clock (docs/NODES.md, "Time across hosts"): a
    /// [`Pacer::since`](crate::Pacer::since) it numbers frames as paced sources on every other
    /// host of the mesh do. Embedded, the runtime's own (its making, or its node's mesh's once
    /// the node serves); remotely, the node's mesh's, estimated from exchanges with the node
    /// (off by at most half their least round trip). `Unreachable` while the node's clock is not
    /// synced with its mesh (try again); `Closed` once the runtime is closed.
    pub fn epoch(&self) -> Result<crate::Epoch> {
        match &self.0 {
            Backend::Local(rt) if rt.is_closed() => {
                Err(Error::Closed { name: "runtime".into(), reason: "the runtime was closed" })
            }
            Backend::Local(rt) => rt.clock().epoch().ok_or_else(|| Error::Unreachable {
                op: "epoch",
                name: "runtime".into(),
                reason: "this runtime's node has not synced its clock with its mesh yet; try again".into(),
            }),
            Backend::Remote(rt) => remote!(rt => rt.epoch()),
        }
    }

    /// Current ts_min: no existing or future task can get an item below it. Remotely, the node's;
    /// the last one seen when the node cannot be reached (ts_min never decreases, so that is a
    /// safe lower bound).
    pub fn ts_min(&self) -> Timestamp {
        forward!(&self.0, rt => rt.ts_min())
    }

    /// Runs a GC pass now; returns the number of items reclaimed. Reclamation already happens
    /// within the operation that makes an item garbage, so this normally returns 0; it exists
    /// so that tests and tools can be deterministic.
    pub fn collect(&self) -> usize {
        forward!(&self.0, rt => rt.collect())
    }

    /// Registers a GC handler for every channel and queue: `handler(name, item)`. Through a client
    /// the handler runs on the client, for items reclaimed on the node (see `docs/NODES.md`).
    pub fn on_reclaim(&self, handler: impl Fn(&str, &Item) + Send + Sync + 'static) -> Result<()> {
        match &self.0 {
            Backend::Local(rt) => {
                rt.on_reclaim(handler);
                Ok(())
            }
            Backend::Remote(rt) => remote!(rt => rt.on_reclaim(handler)),
        }
    }

    /// What the runtime holds now — tasks with their connections, channels and queues with
    /// their counters ([`Graph`](crate::graph::Graph)); a remote runtime's is its node's.
    /// `Unreachable` when the node cannot be reached.
    pub fn graph(&self) -> Result<crate::graph::Graph> {
        match &self.0 {
            Backend::Local(rt) => Ok(rt.graph()),
            Backend::Remote(rt) => remote!(rt => rt.graph()),
        }
    }

    /// Node-wide counters (remotely: the last ones seen when the node cannot be reached).
    pub fn stats(&self) -> RuntimeStats {
        forward!(&self.0, rt => rt.stats())
    }

    /// Embedded: ends the runtime — every channel and queue is destroyed (blocked operations
    /// wake with `Closed`), every task closed. Remote: ends this client's session — its tasks on
    /// the node are closed (claims released, open items back) by the time this returns, and the
    /// client leaves the fabric. Idempotent.
    pub fn close(&self) {
        forward!(&self.0, rt => rt.close());
        crate::trace::flush();
    }

    /// Checks, under the locks that make each comparison atomic, that every live task's
    /// visibility is at or above ts_min (docs/PROGRESS.md, "Invariants and why they hold").
    /// Panics naming the task otherwise (remotely: the node checks and the report comes back). For
    /// tests and the interleaving scheduler.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        forward!(&self.0, rt => rt.check_invariants())
    }

    /// Completes at the next put or claim change anywhere in the runtime (remotely: or after a
    /// wait slice); registered when created, may complete spuriously. What joins wait for; a
    /// node serves it to its clients' joins.
    #[doc(hidden)]
    pub fn progressed(&self) -> Changed {
        forward!(&self.0, rt => rt.progressed())
    }

    /// `true` once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        forward!(&self.0, rt => rt.is_closed())
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Backend::Local(_) => f.debug_struct("Runtime").finish_non_exhaustive(),
            Backend::Remote(rt) => remote!(rt => rt.fmt(f)),
        }
    }
}
