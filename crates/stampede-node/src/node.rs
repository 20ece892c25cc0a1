//! [`Node`]: an embedded [`Runtime`] served to remote clients over Zenoh.
//!
//! The node declares a queryable on `stampede/<node>/rpc`; each query is one request
//! ([`stampede_wire`]), answered by a task on the node's own tokio runtime (never on zenoh's
//! callback threads), where blocking operations use the runtime's async forms for at most
//! [`REMOTE_WAIT_SLICE`](stampede_wire::REMOTE_WAIT_SLICE). A liveliness subscriber on
//! `stampede/<node>/session/*` closes a client's session when its token disappears.

use stampede_engine::trace::{Kind, Phase};
use stampede_engine::MeshLink;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use stampede_core::name::check_name;
use stampede_core::{Error, Result};
use stampede_engine::Runtime;
use zenoh::pubsub::Subscriber;
use zenoh::query::{Query, Queryable};
use zenoh::sample::SampleKind;
use zenoh::Wait;

use crate::access::AccessPolicy;
use crate::budget::Budgets;
use crate::mesh::MeshDriver;
use crate::names::Names;
use crate::reclaim::{self, Reclaims};
use crate::serve;
use stampede_wire::fabric;

pub use stampede_wire::fabric::LIVELINESS_TIMEOUT_DEFAULT;
/// The shortest liveliness timeout a node accepts: a client's zenoh session sends a keep-alive
/// every quarter of it, and below this a loaded host's scheduling delays alone would end live
/// sessions.
pub const LIVELINESS_TIMEOUT_MIN: Duration = Duration::from_millis(100);
/// The longest: a client that vanished holds its claims on ts_min this long at most.
pub const LIVELINESS_TIMEOUT_MAX: Duration = Duration::from_secs(3600);
/// Largest payload of one put a node accepts, by default.
pub const PAYLOAD_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;
/// Largest `payload_bytes_max` a node may be given (zenoh's largest message, less room for headers).
pub const PAYLOAD_BYTES_MAX_LIMIT: usize = (1 << 30) - (1 << 20);
/// Most client sessions a node serves at once, by default.
pub const SESSIONS_MAX_DEFAULT: usize = 256;
/// Most tasks, connections and containers one session holds, by default.
pub const SESSION_HANDLES_MAX_DEFAULT: usize = 4096;
/// Most threads answering a node's requests ([`NodeOptions::workers`]).
pub const WORKERS_MAX: usize = 64;

/// Threads answering a node's requests when [`NodeOptions::workers`] says none: half the
/// processors this process may use, at least one. Its clients on the same host need the other
/// half, and each request handed from one worker to another is a wake-up: on 2 processors one
/// worker made a hand-off through the node 20 % faster than two (docs/BENCHMARKS.md, "hops").
pub fn workers_default() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).clamp(1, WORKERS_MAX)
}

/// How a node serves: where, under which name, within which bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeOptions {
    /// The node's name: its key expressions are `stampede/<name>/…`. One segment of a Stampede
    /// name (letters, digits, `_ - . :`).
    pub name: String,
    /// Endpoints to listen on: `tcp/127.0.0.1:7447`, `tls/127.0.0.1:7447` (with
    /// [`tls`](Self::tls)), `unixsock-stream/<path>`. At least one.
    pub listen: Vec<String>,
    /// Endpoints of other nodes to connect to.
    pub connect: Vec<String>,
    /// How long after a client vanishes without closing its link (host down, cable cut) its
    /// session is closed. A killed client process closes its link at once.
    /// [`LIVELINESS_TIMEOUT_MIN`] ..= [`LIVELINESS_TIMEOUT_MAX`].
    pub liveliness_timeout: Duration,
    /// Largest payload of one put (at most [`PAYLOAD_BYTES_MAX_LIMIT`]): a larger one fails `Full`
    /// (it can never fit), a larger message is refused unread.
    pub payload_bytes_max: usize,
    /// Most client sessions at once; one more fails `InvalidArgument` on connect.
    pub sessions_max: usize,
    /// Most tasks, connections and containers one session holds; one more fails `InvalidArgument`.
    pub session_handles_max: usize,
    /// Threads answering requests (`--workers`, 1 ..= [`WORKERS_MAX`]; blocking work goes to
    /// separate threads, waits are async). `None`: [`workers_default`]. A node whose clients
    /// are on other hosts may use every processor.
    pub workers: Option<usize>,
    /// Live payload bytes the sessions' puts may hold together (`--max-live-bytes`; at least
    /// `BUDGET_BYTES_MIN`). `None`: half of the lower of the machine's memory and its cgroup's
    /// limit. At the limit a put waits for room, then fails `Full` naming the budget.
    pub max_live_bytes: Option<u64>,
    /// Live payload bytes one session's puts may hold (`--max-session-live-bytes`; at most the
    /// node's). `None`: a quarter of the node's.
    pub max_session_live_bytes: Option<u64>,
    /// Certificates for the `tls/<host>:<port>` and `quic/<host>:<port>` endpoints (required when one is listened on;
    /// `None`: no TLS). See `docs/SECURITY.md`.
    pub tls: Option<TlsOptions>,
    /// The node is its runtime's only user (`stampede serve`): it holds a door to its mesh only
    /// while a client session is open (docs/PROTOCOL.md, "Doors"), so that a node used alone
    /// reclaims inside the operation that made an item garbage. Otherwise (`false`, the
    /// default) an application embeds the runtime and may start root tasks at any time: the
    /// node keeps its door.
    pub serve_only: bool,
    /// Shifts this node's base clock by this many ns, as on a host whose clock is off: a test aid
    /// for mesh time (docs/NODES.md, "Time across hosts"). 0 by default.
    pub clock_skew_ns: i64,
    /// Who may connect and what each user may do with which names (`docs/SECURITY.md`); `None`:
    /// anyone who reaches the node may do anything — allowed only where nobody else can reach
    /// it (every endpoint loopback or a Unix socket) or with [`allow_anonymous`](Self::allow_anonymous).
    pub access: Option<AccessPolicy>,
    /// Serve without an access policy on endpoints other machines can reach (`--allow-anonymous`):
    /// anyone who reaches the node may then create, read, write and destroy every channel. Off
    /// by default: such a node is refused unless it has a policy. The node warns when it is used.
    pub allow_anonymous: bool,
    /// Where the node takes browser clients (`--websocket`, docs/BROWSER.md): `[host:]port`, a
    /// bare port on 127.0.0.1 (`0`: a free port, [`Node::websocket_address`]). `None`: no
    /// WebSocket endpoint. Beyond loopback it needs an access policy as any endpoint does.
    pub websocket: Option<String>,
    /// Web origins (`https://viewer.example`) whose pages may open the WebSocket endpoint
    /// (`--allow-origin`); a program (no `Origin`) always may, another page never.
    pub allowed_origins: Vec<String>,
}

/// A node's TLS files (PEM) for its `tls/` endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// The node's certificate (chain), presented to clients and to the nodes it connects to. It
    /// must name the host clients connect to (IP address or DNS name, as in their endpoint).
    pub certificate: PathBuf,
    /// The private key of `certificate`.
    pub private_key: PathBuf,
    /// The CA certificate trusted for client certificates (mutual TLS) and for the certificates
    /// of the nodes this one connects to (the public web PKI roots are trusted besides).
    pub root_ca: Option<PathBuf>,
    /// Clients must present a certificate signed by `root_ca`; one without is refused at the
    /// handshake (it sees `Unreachable`).
    pub mutual: bool,
    /// The common names of the mesh's node certificates (requires `mutual`). When given, only
    /// links that present a certificate with one of them may publish, query, answer or declare
    /// anything on the distributed ts_min's keys (`stampede/<node>/mesh/**`): zenoh's access
    /// control refuses it to clients, whose certificates bear other names. Every link between
    /// nodes must then be a mutual TLS one. Empty: those keys are open to anyone on the fabric.
    pub mesh_node_cn: Vec<String>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            name: "node".into(),
            listen: Vec::new(),
            connect: Vec::new(),
            liveliness_timeout: LIVELINESS_TIMEOUT_DEFAULT,
            payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT,
            sessions_max: SESSIONS_MAX_DEFAULT,
            session_handles_max: SESSION_HANDLES_MAX_DEFAULT,
            workers: None,
            max_live_bytes: None,
            max_session_live_bytes: None,
            tls: None,
            serve_only: false,
            clock_skew_ns: 0,
            access: None,
            allow_anonymous: false,
            websocket: None,
            allowed_origins: Vec::new(),
        }
    }
}

impl NodeOptions {
    /// The defaults, listening on `endpoint`.
    pub fn listen(endpoint: &str) -> NodeOptions {
        NodeOptions { listen: vec![endpoint.to_owned()], ..NodeOptions::default() }
    }

    /// Refuses options no node can serve with (`InvalidArgument` naming the option).
    fn check(&self) -> Result<()> {
        let refuse = |reason: String| Err(Error::InvalidArgument { op: "serve", name: self.name.clone(), reason });
        check_name("serve", &self.name)?;
        if self.name.contains('/') {
            return refuse("a node name is one segment (no '/'), e.g. \"camera-host\"".into());
        }
        if self.listen.is_empty() {
            return refuse("a node listens on at least one endpoint, e.g. tcp/127.0.0.1:7447".into());
        }
        if !(LIVELINESS_TIMEOUT_MIN..=LIVELINESS_TIMEOUT_MAX).contains(&self.liveliness_timeout) {
            return refuse(format!(
                "liveliness_timeout (--liveliness-timeout) of {:?} is outside {LIVELINESS_TIMEOUT_MIN:?} ..= \
                 {LIVELINESS_TIMEOUT_MAX:?} (LIVELINESS_TIMEOUT_MIN, LIVELINESS_TIMEOUT_MAX); the default is \
                 {LIVELINESS_TIMEOUT_DEFAULT:?}",
                self.liveliness_timeout
            ));
        }
        if let (None, false, Some(open)) = (&self.access, self.allow_anonymous, self.reachable_endpoint()) {
            return refuse(format!(
                "{open} can be reached from other machines and the node has no access policy: anyone could create, \
                 read, write and destroy every channel. Give it a policy (--access policy.toml, docs/SECURITY.md), \
                 listen on 127.0.0.1 or a Unix socket, or accept that with --allow-anonymous (Python: \
                 allow_anonymous=True)"
            ));
        }
        if self.payload_bytes_max == 0 || self.payload_bytes_max > PAYLOAD_BYTES_MAX_LIMIT {
            return refuse(format!("payload_bytes_max must be 1 ..= {PAYLOAD_BYTES_MAX_LIMIT}"));
        }
        if self.sessions_max == 0 || self.session_handles_max == 0 {
            return refuse("sessions_max and session_handles_max must be positive".into());
        }
        if let Some(address) = &self.websocket {
            if let Err(reason) = crate::websocket::listen_address(address) {
                return refuse(reason);
            }
        }
        if self.workers.is_some_and(|workers| !(1..=WORKERS_MAX).contains(&workers)) {
            return refuse(format!("workers (--workers) must be 1 ..= {WORKERS_MAX} (WORKERS_MAX)"));
        }
        if let Some(tls) = self.tls.as_ref().filter(|tls| !tls.mesh_node_cn.is_empty()) {
            if !tls.mutual {
                return refuse("mesh_node_cn (--mesh-node-cn) needs mutual TLS (--tls-mutual): nodes are told from clients by their certificates".into());
            }
            if tls.mesh_node_cn.iter().any(|cn| cn.trim().is_empty()) {
                return refuse("an empty certificate common name in mesh_node_cn (--mesh-node-cn)".into());
            }
        }
        Ok(())
    }
}

impl NodeOptions {
    /// The first endpoint (listened on or connected to, or the WebSocket endpoint) that other
    /// machines can reach, if any (`fabric::is_local`).
    pub fn reachable_endpoint(&self) -> Option<String> {
        let endpoints = self.listen.iter().chain(&self.connect).filter(|endpoint| !fabric::is_local(endpoint));
        let websocket = (self.websocket.iter())
            .filter_map(|address| crate::websocket::listen_address(address).ok())
            .filter(|address| !address.ip().is_loopback())
            .map(|address| format!("websocket {address}"));
        endpoints.cloned().chain(websocket).next()
    }
}

/// A node serving an embedded runtime to remote clients. Dropping it closes it.
pub struct Node {
    shared: Arc<NodeShared>,
    serving: Mutex<Option<Serving>>,
}

/// What the node declared on the fabric and the threads answering, ended by [`Node::close`].
struct Serving {
    mesh: MeshDriver,
    _queryable: Queryable<()>,
    _sessions: Subscriber<()>,
    /// Tells nodes that join this one's wire version and policy digest.
    _hello: zenoh::liveliness::LivelinessToken,
    names: Names,
    workers: tokio::runtime::Runtime,
}

/// What the request handlers share.
pub(crate) struct NodeShared {
    pub(crate) runtime: Runtime,
    /// When it started: its clock for what counts time itself (the tapes).
    pub(crate) origin: std::time::Instant,
    pub(crate) options: NodeOptions,
    pub(crate) zenoh: zenoh::Session,
    /// Its clients' sessions (`desk.rs`).
    pub(crate) desk: crate::desk::Desk,
    /// The byte budgets every session's puts are charged to.
    pub(crate) budgets: Budgets,
    pub(crate) reclaims: Reclaims,
    /// The node's participant in the distributed ts_min: every node of a mesh shares one
    /// (docs/PROTOCOL.md). Set before the node serves anyone.
    pub(crate) mesh: OnceLock<MeshLink>,
    /// Its door, which a session's open waits for.
    pub(crate) door: OnceLock<Arc<crate::mesh::Door>>,
    /// Tags and checks every payload on the mesh's keys (`mesh/seal.rs`): with an access policy,
    /// only nodes serving it speak there.
    pub(crate) seal: crate::mesh::Seal,
    /// The node's own sockets ([`crate::direct`]), announced in its hello once open.
    pub(crate) direct: OnceLock<stampede_wire::DirectPath>,
    /// Where its WebSocket endpoint listens ([`crate::websocket`]), once open.
    pub(crate) websocket: OnceLock<std::net::SocketAddr>,
    /// Requests served on the direct path.
    pub(crate) direct_requests: std::sync::atomic::AtomicU64,
    /// Push events written on clients' streams of them (`push.rs`).
    pub(crate) streamed_pushes: Arc<std::sync::atomic::AtomicU64>,
}

impl NodeShared {
    /// Ends the session `id`, if open: its tasks are closed, its connections detached.
    pub(crate) fn close_session(&self, id: &str) {
        let Some(moves) = self.desk.close(id) else { return };
        if let Some(door) = self.door.get() {
            door.changed();
        }
        if let Some(link) = self.mesh.get() {
            for taken in moves {
                crate::mesh::decline_there((&self.zenoh, &self.seal), link, &taken);
            }
        }
    }
}

impl Node {
    /// Serves `runtime` on the fabric as `options` say, until [`close`](Self::close). Call it
    /// outside async code (it waits for zenoh to open). Errors: `InvalidArgument` for bad
    /// options or endpoints, `Unreachable` when zenoh cannot open (an endpoint in use).
    ///
    /// `runtime` is the engine of an embedded `stampede::Runtime` (`Runtime::engine`): the node
    /// runs its clients' operations on it directly, not through the public API.
    pub fn serve(runtime: Runtime, options: NodeOptions) -> Result<Node> {
        options.check()?;
        let budgets = Budgets::of(&options)?;
        // Said once at start, where the operator looks (the defaults come from the machine).
        eprintln!(
            "stampede: node {}: live payload bytes budget {} (max_live_bytes), {} per session \
             (max_session_live_bytes)",
            options.name,
            budgets.node.node().max(),
            budgets.session_bytes
        );
        if let (None, Some(open)) = (&options.access, options.reachable_endpoint()) {
            // Asked for (allow_anonymous): said once, where the operator looks.
            eprintln!(
                "stampede: warning: node {} serves {open} without an access policy (--allow-anonymous): anyone who \
                 reaches it may create, read, write and destroy every channel",
                options.name
            );
        }
        let mut config = fabric::node_config(
            &options.listen,
            &options.connect,
            options.liveliness_timeout,
            options.payload_bytes_max,
            options.tls.as_ref().map(|tls| fabric::Tls {
                root_ca: tls.root_ca.as_deref(),
                identity: Some((tls.certificate.as_path(), tls.private_key.as_path())),
                mutual: tls.mutual,
            }),
        )?;
        if let Some(tls) = options.tls.as_ref().filter(|tls| !tls.mesh_node_cn.is_empty()) {
            crate::mesh::keep_keys_to_nodes(&mut config, &tls.mesh_node_cn)?;
        }
        let unreachable = |reason: String| Error::Unreachable { op: "serve", name: options.listen.join(" "), reason };
        let workers = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.workers.unwrap_or_else(workers_default))
            .thread_name("stampede-node")
            // In the event log, a worker waiting for work is blocking, not the node's own code.
            .on_thread_park(|| stampede_engine::trace::event(Kind::Wait, Phase::Begin, 0, 0, 0))
            .on_thread_unpark(|| stampede_engine::trace::event(Kind::Wait, Phase::End, 0, 0, 0))
            .enable_all()
            .build()
            .map_err(|e| unreachable(format!("the node's worker threads could not start: {e}")))?;
        let zenoh = zenoh::open(config).wait().map_err(|e| unreachable(format!("zenoh could not open: {e}")))?;
        // Before anything of its own is declared: a node of another version or policy stays out.
        let hello = crate::join::Hello::of(options.access.as_ref());
        if let Err(e) = crate::join::check(&zenoh, &options.name, &hello) {
            let _ = zenoh.close().wait();
            return Err(e);
        }
        let shared = Arc::new(NodeShared {
            runtime,
            origin: std::time::Instant::now(),
            options: options.clone(),
            zenoh,
            desk: crate::desk::Desk::new(&options.name, options.sessions_max),
            budgets,
            reclaims: Reclaims::default(),
            mesh: OnceLock::new(),
            door: OnceLock::new(),
            seal: crate::mesh::Seal::of(options.access.as_ref()),
            direct: OnceLock::new(),
            websocket: OnceLock::new(),
            direct_requests: Default::default(),
            streamed_pushes: Default::default(),
        });
        let mesh = {
            let (dead, expelled, owner, doors) =
                (Arc::downgrade(&shared), Arc::downgrade(&shared), Arc::downgrade(&shared), Arc::downgrade(&shared));
            let looked = Arc::downgrade(&shared);
            // A client takes a get's reply within its lease of sending the request at most
            // (`stampede_wire::session::LEASE_SHARE`): what a closing shadow holds stays until then.
            let hold = options.liveliness_timeout;
            let hooks = crate::mesh::Hooks {
                dead: Arc::new(move |peer, now| {
                    if let Some(node) = dead.upgrade() {
                        node.desk.close_shadows_of(peer, now + hold);
                    }
                }),
                expelled: Arc::new(move |now| {
                    if let Some(node) = expelled.upgrade() {
                        node.desk.leave_mesh(now + hold);
                    }
                }),
                look: Arc::new(move |now| {
                    if let Some(node) = looked.upgrade() {
                        node.desk.settle(now);
                    }
                }),
                owns_move: Arc::new(move |to, id, proof| {
                    owner.upgrade().is_some_and(|node| node.desk.owns_move(to, id, proof))
                }),
                door_wanted: Arc::new(move || {
                    doors.upgrade().is_some_and(|node| !node.options.serve_only || node.desk.len() > 0)
                }),
            };
            shared.runtime.clock().set_skew(options.clock_skew_ns);
            let (seal, timeout) = (shared.seal.clone(), options.liveliness_timeout);
            match MeshDriver::start(&shared.zenoh, &shared.runtime, &options.name, timeout, hooks, seal) {
                Ok(mesh) => {
                    let _ = shared.mesh.set(mesh.link().clone());
                    let _ = shared.door.set(mesh.door().clone());
                    mesh
                }
                Err(e) => {
                    let _ = shared.zenoh.close().wait();
                    return Err(e);
                }
            }
        };
        workers.spawn(reclaim::run(Arc::downgrade(&shared), shared.reclaims.pending.clone()));
        match crate::direct::start(&shared, workers.handle()) {
            Ok(direct) => {
                let _ = shared.direct.set(direct);
            }
            Err(e) => {
                let _ = shared.zenoh.close().wait();
                return Err(e);
            }
        }
        if let Some(address) = &options.websocket {
            match crate::websocket::start(&shared, workers.handle(), address) {
                Ok(bound) => {
                    let _ = shared.websocket.set(bound);
                }
                Err(e) => {
                    let _ = shared.zenoh.close().wait();
                    return Err(e);
                }
            }
        }
        let declared = declare(&shared, workers.handle());
        let (queryable, sessions) = match declared {
            Ok(declared) => declared,
            Err(e) => {
                let _ = shared.zenoh.close().wait();
                return Err(unreachable(format!("zenoh refused a declaration: {e}")));
            }
        };
        let names = match Names::start(&shared.zenoh, &shared.seal, &options.name, &shared.runtime) {
            Ok(names) => names,
            Err(e) => {
                let _ = shared.zenoh.close().wait();
                return Err(unreachable(format!("zenoh refused the node's liveliness or names: {e}")));
            }
        };
        let hello = match crate::join::declare(&shared.zenoh, &options.name, &hello) {
            Ok(hello) => hello,
            Err(e) => {
                let _ = shared.zenoh.close().wait();
                return Err(unreachable(format!("zenoh refused the node's hello: {e}")));
            }
        };
        let serving = Serving { mesh, _queryable: queryable, _sessions: sessions, _hello: hello, names, workers };
        Ok(Node { shared, serving: Mutex::new(Some(serving)) })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.shared.options.name
    }

    /// The endpoints the node listens on.
    pub fn endpoints(&self) -> &[String] {
        &self.shared.options.listen
    }

    /// The runtime served.
    pub fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    /// Reclaim events dropped because a client's outbox was full (see `OUTBOX_MAX` in
    /// `docs/NODES.md`).
    pub fn reclaim_events_dropped(&self) -> u64 {
        self.shared.reclaims.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the mesh driver dropped so far (malformed, refused, and over-bound messages); `None`
    /// once the node is closed.
    pub fn mesh_counters(&self) -> Option<Arc<crate::mesh::MeshCounters>> {
        self.serving.lock().as_ref().map(|s| s.mesh.counters.clone())
    }

    /// Requests served on the node's own sockets (the direct path); the others came as zenoh
    /// queries.
    pub fn direct_requests(&self) -> u64 {
        self.shared.direct_requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Push events (docs/PREFETCH.md) written on clients' streams of them on the direct path;
    /// the others went on the fabric.
    pub fn streamed_pushes(&self) -> u64 {
        self.shared.streamed_pushes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Where the WebSocket endpoint listens (`NodeOptions::websocket`), if it has one.
    pub fn websocket_address(&self) -> Option<std::net::SocketAddr> {
        self.shared.websocket.get().copied()
    }

    /// The WebSocket endpoint's URL (`ws://<address>`, `wss://` on a node with TLS), if it has one.
    pub fn websocket_url(&self) -> Option<String> {
        let scheme = if self.shared.options.tls.is_some() { "wss" } else { "ws" };
        self.websocket_address().map(|address| format!("{scheme}://{address}"))
    }

    /// Client sessions open now.
    pub fn session_count(&self) -> usize {
        self.shared.desk.len()
    }

    /// Stops serving: the node leaves the fabric and every client session is closed (their tasks
    /// closed, their claims released). The runtime itself stays open. Idempotent.
    pub fn close(&self) {
        let Some(serving) = self.serving.lock().take() else { return };
        let Serving { mesh, _queryable, _sessions, _hello, names, workers } = serving;
        drop((_queryable, _sessions, _hello));
        names.stop();
        self.shared.desk.close_all();
        workers.shutdown_background();
        drop(mesh);
        let _ = self.shared.zenoh.close().wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.name()).field("endpoints", &self.endpoints()).finish()
    }
}

/// Declares the request queryable and the session liveliness subscriber. Their callbacks hold
/// the node weakly (so that the node can be dropped) and only spawn work.
fn declare(
    shared: &Arc<NodeShared>,
    workers: &tokio::runtime::Handle,
) -> zenoh::Result<(Queryable<()>, Subscriber<()>)> {
    let name = &shared.options.name;
    let (node, spawner) = (Arc::downgrade(shared), workers.clone());
    let queryable = shared
        .zenoh
        .declare_queryable(fabric::rpc_key(name))
        .callback(move |query| {
            if let Some(node) = node.upgrade() {
                spawner.spawn(answer(node, query));
            }
        })
        .wait()?;
    let (node, spawner): (Weak<NodeShared>, _) = (Arc::downgrade(shared), workers.clone());
    let sessions = shared
        .zenoh
        .liveliness()
        .declare_subscriber(fabric::sessions_key(name))
        .callback(move |sample| {
            if sample.kind() != SampleKind::Delete {
                return;
            }
            let Some(id) = fabric::session_of(sample.key_expr().as_str()).map(str::to_owned) else { return };
            if let Some(node) = node.upgrade() {
                // Closing tasks may run GC handlers: not on zenoh's thread.
                spawner.spawn_blocking(move || node.close_session(&id));
            }
        })
        .wait()?;
    Ok((queryable, sessions))
}

/// Answers one query: decodes, serves, replies. A reply that cannot be sent means the client is
/// gone; its session closes through liveliness.
///
/// The reply is handed to zenoh on a blocking thread: zenoh blocks the thread that sends into a
/// full link until the link drains or closes, and a stopped client's link stays full — on a
/// worker, two such replies would stall every client of the node.
async fn answer(node: Arc<NodeShared>, query: Query) {
    let message = query.payload().map(|p| p.to_bytes()).unwrap_or_default();
    let reply = serve::serve(&node, &message).await;
    drop(message);
    let _ = tokio::task::spawn_blocking(move || query.reply(query.key_expr().clone(), reply).wait()).await;
}
