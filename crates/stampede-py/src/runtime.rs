//! `Runtime`, `Channel` and `Queue` (docs/SEMANTICS.md, "The API in every language"): a runtime —
//! embedded, embedded and serving clients (`Runtime(listen=...)`), or a client's session on a node
//! (`connect`) — its names and containers. `Channel` and `Queue`, the containers' handles, are
//! `crate::container`'s.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{ChannelOptions, Codec, DiskTier, Error, Limits, QueueOptions, Retention, Timestamp};

use crate::args::{self, At};
use crate::container::{Channel, Queue};
use crate::errors::{to_pyerr, IntoPyResult};
use crate::reclaim::{HandlerErrors, Handlers};
use crate::task::Task;
use crate::wait;
use crate::watch::Watch;

/// A Stampede runtime: embedded in this process (optionally serving remote clients), or a
/// session on a node elsewhere. Several may coexist; they share nothing.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Runtime {
    inner: stampede::Runtime,
    /// This runtime's GC handlers written in Python (and the count of their exceptions).
    handlers: Py<Handlers>,
    /// The node serving this embedded runtime to remote clients (`Runtime(listen=...)`).
    node: Mutex<Option<stampede_node::Node>>,
}

impl Runtime {
    /// The Rust runtime this wraps (for the dashboard, which serves it).
    pub(crate) fn rust(&self) -> &stampede::Runtime {
        &self.inner
    }

    fn errors(&self) -> &Arc<HandlerErrors> {
        &self.handlers.get().errors
    }

    fn channel(&self, py: Python<'_>, inner: stampede::Channel) -> Channel {
        Channel { inner, handlers: self.handlers.clone_ref(py) }
    }

    fn queue(&self, py: Python<'_>, inner: stampede::Queue) -> Queue {
        Queue { inner, handlers: self.handlers.clone_ref(py) }
    }
}

#[pymethods]
impl Runtime {
    /// An embedded runtime. With `listen` (an endpoint such as `"tcp/127.0.0.1:7447"`,
    /// `"tls/127.0.0.1:7447"` or `"unixsock-stream/<path>"`, or a list of them) it also serves
    /// remote clients there, as `stampede serve` does: `name` is the node's name,
    /// `liveliness_timeout` (seconds) how long a vanished client's session lives on,
    /// `max_payload_bytes` the largest put it accepts, `max_live_bytes` and
    /// `max_session_live_bytes` the live payload bytes its clients' puts may hold, all together and
    /// each (docs/LIMITS.md, "Byte budgets"). A `tls/` endpoint needs `tls_certificate`
    /// and `tls_private_key` (PEM files); `tls_root_ca` is the CA trusted for client certificates,
    /// and `tls_mutual=True` requires clients to present one it signed; `mesh_node_cn`: the
    /// common names of the mesh's node certificates, to whom the mesh's keys are kept (with
    /// `tls_mutual`; docs/SECURITY.md). `access`: a policy file
    /// (TOML) of users, passwords and rights per name prefix (docs/SECURITY.md). `connect`: other
    /// nodes' endpoints (a mesh, whose nodes share one ts_min: docs/PROTOCOL.md;
    /// `mesh_ts_min=True`, from before that was the default, is accepted and changes nothing).
    /// Without `access`, only loopback and Unix-socket endpoints are served
    /// unless `allow_anonymous=True` (anyone who reaches the node may then do anything).
    #[new]
    #[pyo3(signature = (
        listen=None, *, name=None, liveliness_timeout=None, max_payload_bytes=None,
        max_live_bytes=None, max_session_live_bytes=None, tls_certificate=None, tls_private_key=None, tls_root_ca=None, tls_mutual=false, mesh_node_cn=None,
        access=None, connect=None, mesh_ts_min=None, allow_anonymous=false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        listen: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
        liveliness_timeout: Option<&Bound<'_, PyAny>>,
        max_payload_bytes: Option<&Bound<'_, PyAny>>,
        max_live_bytes: Option<&Bound<'_, PyAny>>,
        max_session_live_bytes: Option<&Bound<'_, PyAny>>,
        tls_certificate: Option<std::path::PathBuf>,
        tls_private_key: Option<std::path::PathBuf>,
        tls_root_ca: Option<std::path::PathBuf>,
        tls_mutual: bool,
        mesh_node_cn: Option<Vec<String>>,
        access: Option<std::path::PathBuf>,
        connect: Option<&Bound<'_, PyAny>>,
        mesh_ts_min: Option<bool>,
        allow_anonymous: bool,
    ) -> PyResult<Runtime> {
        if mesh_ts_min == Some(false) {
            return Err(to_pyerr(Error::InvalidArgument {
                op: "Runtime",
                name: "mesh_ts_min".into(),
                reason:
                    "every node of a mesh shares one ts_min (docs/PROTOCOL.md): a node can no longer keep its own; \
                         leave mesh_ts_min out"
                        .into(),
            }));
        }
        let inner = stampede::Runtime::new();
        let at = At { op: "Runtime", name: "listen" };
        let tls_given = tls_certificate.is_some()
            || tls_private_key.is_some()
            || tls_root_ca.is_some()
            || tls_mutual
            || mesh_node_cn.is_some();
        let node = match listen {
            None if name.is_some()
                || liveliness_timeout.is_some()
                || max_payload_bytes.is_some()
                || max_live_bytes.is_some()
                || max_session_live_bytes.is_some()
                || tls_given
                || access.is_some()
                || connect.is_some()
                || allow_anonymous =>
            {
                return Err(to_pyerr(Error::InvalidArgument {
                    op: "Runtime",
                    name: "listen".into(),
                    reason: "name, liveliness_timeout, max_payload_bytes, max_live_bytes, max_session_live_bytes, \
                             access, allow_anonymous, connect and the tls_ arguments configure \
                             serving: give listen too"
                        .into(),
                }))
            }
            None => None,
            Some(listen) => {
                let mut options = stampede_node::NodeOptions { listen: endpoints(listen)?, ..Default::default() };
                if let Some(name) = name {
                    options.name = name;
                }
                if let Some(timeout) = args::timeout(liveliness_timeout, at)? {
                    options.liveliness_timeout = timeout;
                }
                if let Some(bytes) = args::count(max_payload_bytes, "max_payload_bytes", at)? {
                    options.payload_bytes_max = bytes;
                }
                options.max_live_bytes = args::count(max_live_bytes, "max_live_bytes", at)?;
                options.max_session_live_bytes = args::count(max_session_live_bytes, "max_session_live_bytes", at)?;
                if let Some(connect) = connect {
                    options.connect = endpoints(connect)?;
                }
                options.allow_anonymous = allow_anonymous;
                if let Some(path) = access {
                    options.access = Some(stampede_node::AccessPolicy::load(&path).map_err(to_pyerr)?);
                }
                options.tls = match (tls_certificate, tls_private_key) {
                    (Some(certificate), Some(private_key)) => Some(stampede_node::TlsOptions {
                        certificate,
                        private_key,
                        root_ca: tls_root_ca,
                        mutual: tls_mutual,
                        mesh_node_cn: mesh_node_cn.unwrap_or_default(),
                    }),
                    (None, None) if !tls_given => None,
                    _ => {
                        return Err(to_pyerr(Error::InvalidArgument {
                            op: "Runtime",
                            name: "tls".into(),
                            reason: "a node's TLS needs tls_certificate and tls_private_key together".into(),
                        }))
                    }
                };
                let runtime = inner.engine().map_err(to_pyerr)?;
                Some(wait::released(py, move || stampede_node::Node::serve(runtime, options))?)
            }
        };
        Ok(Runtime { inner, handlers: Handlers::new(py)?, node: Mutex::new(node) })
    }

    /// The node's name: the one this client is connected to, or the one this runtime serves as
    /// (`Runtime(listen=...)`); None for a runtime that only lives in this process.
    #[getter]
    fn node(&self) -> Option<String> {
        match &*self.node.lock() {
            Some(node) => Some(node.name().to_owned()),
            None => self.inner.node().map(str::to_owned),
        }
    }

    /// The endpoints this runtime serves clients on (empty unless `Runtime(listen=...)`).
    #[getter]
    fn endpoints(&self) -> Vec<String> {
        self.node.lock().as_ref().map(|node| node.endpoints().to_vec()).unwrap_or_default()
    }

    /// Creates a channel; `capacity` (items) and `max_bytes` bound it, None = unbounded.
    /// `retention`: "history" (default; late joiners may read the past, items live until ts_min
    /// passes them) or "current_readers" (an item is reclaimed as soon as every input connection
    /// attached now has consumed it). `codec`: the codec every payload must have ("raw", "utf8",
    /// "json", "npy" or an application's name; None = any). `description`: for people
    /// (`info()`). `node`: the node to place it on (None or this runtime's node). `disk`: keep
    /// history beyond memory in a disk tier, `{"dirs": [...], "extent_bytes": n, "memory_items":
    /// n}` (the last two optional; embedded runtimes only, see docs/RECORDING.md).
    #[pyo3(signature = (name, capacity=None, max_bytes=None, retention="history", *, node=None, codec=None, description=None, disk=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments (docs/SEMANTICS.md)
    fn create_channel(
        &self,
        py: Python<'_>,
        name: &str,
        capacity: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
        retention: &str,
        node: Option<String>,
        codec: Option<&str>,
        description: Option<String>,
        disk: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Channel> {
        let at = At { op: "create_channel", name };
        let options = ChannelOptions {
            limits: limits(capacity, max_bytes, at)?,
            retention: parse_retention(retention, at)?,
            codec: codec.map(Codec::from_name),
            description: description.unwrap_or_default(),
            node,
            disk: disk.map(|disk| disk_tier(disk, at)).transpose()?,
        };
        let inner = wait::released(py, || self.inner.create_channel(name, options))?;
        Ok(self.channel(py, inner))
    }

    /// Creates a queue; `capacity` (items) and `max_bytes` bound it, None = unbounded;
    /// `description` and `node` as for channels.
    #[pyo3(signature = (name, capacity=None, max_bytes=None, *, node=None, description=None))]
    fn create_queue(
        &self,
        py: Python<'_>,
        name: &str,
        capacity: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
        node: Option<String>,
        description: Option<String>,
    ) -> PyResult<Queue> {
        let limits = limits(capacity, max_bytes, At { op: "create_queue", name })?;
        let options = QueueOptions { limits, description: description.unwrap_or_default(), node };
        let inner = wait::released(py, || self.inner.create_queue(name, options))?;
        Ok(self.queue(py, inner))
    }

    /// Watches the names under `prefix` (hierarchical): an iterator of event dicts — a
    /// "created" for each channel and queue there now, then "created"/"destroyed" as they come
    /// and, through a client, "node_up"/"node_down". It ends when nothing happens for `timeout`
    /// seconds (None: never) or the runtime closes.
    #[pyo3(signature = (prefix="", timeout=None))]
    fn watch(&self, py: Python<'_>, prefix: &str, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Watch> {
        let timeout = args::timeout(timeout, At { op: "watch", name: prefix })?;
        let inner = wait::released(py, || self.inner.watch(prefix, timeout))?;
        Ok(Watch::new(inner, timeout))
    }

    /// The names of the nodes this runtime reaches on the fabric, sorted (empty when it is
    /// embedded and serves nobody; its own name when it serves).
    fn nodes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        if let Some(node) = &*self.node.lock() {
            return Ok(vec![node.name().to_owned()]);
        }
        wait::released(py, || self.inner.nodes())
    }

    /// The channel or queue called `name` (NotFound otherwise). Equal (`==`) to every other
    /// handle of the same channel or queue.
    fn lookup(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        Ok(match self.inner.lookup(name).py()? {
            stampede::Container::Channel(inner) => self.channel(py, inner).into_pyobject(py)?.into_any().unbind(),
            stampede::Container::Queue(inner) => self.queue(py, inner).into_pyobject(py)?.into_any().unbind(),
        })
    }

    /// Names of channels and queues under `prefix`, sorted. Hierarchical: "camera/" matches
    /// "camera/left" (not "cameras"); "camera" matches "camera" itself and everything under it.
    #[pyo3(signature = (prefix=""))]
    fn names(&self, py: Python<'_>, prefix: &str) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.names(prefix)).map_err(to_pyerr)
    }

    /// The mesh's epoch on this process's clock (docs/NODES.md, "Time across hosts"): pacers
    /// made with `Pacer(tick, epoch=rt.epoch())` on every host of a mesh number frames alike.
    fn epoch(&self, py: Python<'_>) -> PyResult<crate::pacer::Epoch> {
        Ok(wait::released(py, || self.inner.epoch())?.into())
    }

    /// The current global ts_min (an int; INFINITY when nothing holds it back).
    #[getter]
    fn ts_min(&self) -> Timestamp {
        self.inner.ts_min()
    }

    /// Forces a GC pass now; returns the number of items reclaimed.
    fn collect(&self, py: Python<'_>) -> PyResult<usize> {
        wait::released(py, || Ok(self.inner.collect()))
    }

    /// A root task at `virtual_time` (INFINITY allowed; must be >= ts_min).
    #[pyo3(signature = (virtual_time=None, *, name=None))]
    fn task(&self, py: Python<'_>, virtual_time: Option<&Bound<'_, PyAny>>, name: Option<&str>) -> PyResult<Task> {
        let virtual_time = match virtual_time {
            None => 0,
            Some(v) => args::timestamp(v, "virtual_time", At { op: "task", name: "runtime" })?,
        };
        let inner = wait::released(py, || crate::task::named(self.inner.task(virtual_time)?, name))?;
        Ok(Task { inner, handlers: self.handlers.clone_ref(py) })
    }

    /// Sets the GC handler for every channel and queue: `callback(name, ts)`, replacing the
    /// previous one; `None` removes it.
    fn on_reclaim(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        let callback = callback.map(|cb| args::callable(cb, py, "callback")).transpose()?;
        if let Some(trampoline) = Handlers::set_global(self.handlers.bind(py), callback)? {
            if let Err(e) = self.inner.on_reclaim(trampoline) {
                Handlers::set_global(self.handlers.bind(py), None)?;
                return Err(to_pyerr(e));
            }
        }
        Ok(())
    }

    /// What the runtime holds now, as a dict: node, ts_min, tasks (id, name, virtual_time,
    /// visibility, connections: id, container, kind, items, skipped, tape — an input's tape on
    /// its node, docs/NODES.md, "Tapes" — and prefetch — its policy there, items pushed and
    /// used, docs/PREFETCH.md) and containers (name, kind, capacity, max_bytes, codec,
    /// description, live_items, live_bytes, puts, gets, reclaimed, claim).
    fn graph<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let graph = wait::released(py, || self.inner.graph())?;
        let json = serde_json::to_string(&graph).expect("a graph serializes");
        py.import("json")?.call_method1("loads", (json,))
    }

    /// Node-wide counters: ts_min, containers, claims, handler_errors; through a client also the
    /// byte budgets' use (docs/LIMITS.md, "Byte budgets"): live_bytes and max_live_bytes of the
    /// node, session_live_bytes and max_session_live_bytes of this session (`None` embedded).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.stats();
        let dict = PyDict::new(py);
        dict.set_item("ts_min", stats.ts_min)?;
        dict.set_item("containers", stats.containers)?;
        dict.set_item("claims", stats.claims)?;
        dict.set_item("handler_errors", self.errors().total())?;
        let budget = stats.budget;
        dict.set_item("live_bytes", budget.map(|b| b.node_live_bytes))?;
        dict.set_item("max_live_bytes", budget.map(|b| b.node_max_bytes))?;
        dict.set_item("session_live_bytes", budget.map(|b| b.session_live_bytes))?;
        dict.set_item("max_session_live_bytes", budget.map(|b| b.session_max_bytes))?;
        Ok(dict)
    }

    /// Ends the node: channels and queues are destroyed (blocked calls raise Closed), tasks are
    /// closed. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let node = self.node.lock().take();
        wait::released(py, || {
            // Clients first (their sessions end), then the runtime.
            if let Some(node) = node {
                node.close();
            }
            self.inner.close();
            Ok(())
        })
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let stats = self.inner.stats();
        format!("Runtime(containers={}, ts_min={}, closed={})", stats.containers, stats.ts_min, self.inner.is_closed())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)
    }
}

/// Connects to the Stampede node listening on `endpoint` (`"tcp/127.0.0.1:7447"`,
/// `"tls/<host>:<port>"`, `"unixsock-stream/<path>"`): a `Runtime` whose channels, queues and
/// tasks live on that node, with the embedded API. `timeout` (seconds, None = as long as it takes)
/// bounds the wait for the node; Unreachable when none answers in time (for `tls/`: naming TLS and
/// what to check). `node`: open the session on the node of that name instead, reached through the
/// one at `endpoint` and the nodes connected to it (`stampede serve --connect ...`).
/// `tls_root_ca`: the CA (PEM) that signed the node's certificate; `tls_certificate` and
/// `tls_private_key`: this client's certificate and key, for a node that requires mutual TLS.
/// Unusable TLS files raise InvalidArgument (docs/SECURITY.md). `user` and `password`: who to
/// open the session as, on a node with an access policy (PermissionDenied if refused).
/// `placement`: the node `create_channel` and `create_queue` place containers on when they name
/// none (default: the session's node); its tasks still live on the session's node and reach
/// them through shadows (docs/NODES.md "One task, several nodes"). `prefetch`: the policy of the
/// channel inputs that choose none ("off", "newest" or "auto", the default; docs/PREFETCH.md).
#[pyfunction]
#[pyo3(signature = (
    endpoint, timeout=None, *, node=None, tls_root_ca=None, tls_certificate=None, tls_private_key=None,
    user=None, password=None, placement=None, prefetch=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn connect(
    py: Python<'_>,
    endpoint: &str,
    timeout: Option<&Bound<'_, PyAny>>,
    node: Option<String>,
    tls_root_ca: Option<std::path::PathBuf>,
    tls_certificate: Option<std::path::PathBuf>,
    tls_private_key: Option<std::path::PathBuf>,
    user: Option<String>,
    password: Option<String>,
    placement: Option<String>,
    prefetch: Option<&str>,
) -> PyResult<Runtime> {
    let at = At { op: "connect", name: endpoint };
    let timeout = args::timeout(timeout, at)?;
    let prefetch = args::prefetch(prefetch, at)?.unwrap_or_default();
    let user = match (user, password) {
        (Some(user), Some(password)) => Some(stampede::Credentials { user, password }),
        (None, None) => None,
        _ => {
            let reason = "user and password go together".to_owned();
            return Err(to_pyerr(Error::InvalidArgument { op: "connect", name: endpoint.to_owned(), reason }));
        }
    };
    let given = tls_root_ca.is_some() || tls_certificate.is_some() || tls_private_key.is_some();
    let tls = given.then_some(stampede::ClientTls {
        root_ca: tls_root_ca,
        certificate: tls_certificate,
        private_key: tls_private_key,
    });
    let options = stampede::ConnectOptions { timeout, node, tls, user, placement, prefetch, ..Default::default() };
    let inner = wait::released(py, || stampede::connect_with(endpoint, &options))?;
    Ok(Runtime { inner, handlers: Handlers::new(py)?, node: Mutex::new(None) })
}

/// `listen`: one endpoint or a list of them.
fn endpoints(listen: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(one) = listen.extract::<String>() {
        return Ok(vec![one]);
    }
    listen
        .extract::<Vec<String>>()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err("listen must be an endpoint (str) or a list of endpoints"))
}

fn parse_retention(retention: &str, at: At<'_>) -> PyResult<Retention> {
    match retention {
        "history" => Ok(Retention::History),
        "current_readers" => Ok(Retention::CurrentReaders),
        other => Err(to_pyerr(Error::InvalidArgument {
            op: at.op,
            name: at.name.to_owned(),
            reason: format!("retention must be \"history\" or \"current_readers\", not {other:?}"),
        })),
    }
}

/// A disk tier from `{"dirs": [...], "extent_bytes": n, "memory_items": n}`; other keys, a
/// missing `dirs` or values of the wrong type are `InvalidArgument`.
fn disk_tier(disk: &Bound<'_, PyDict>, at: At<'_>) -> PyResult<DiskTier> {
    let mut tier = DiskTier::new(Vec::<std::path::PathBuf>::new());
    let mut dirs = None;
    // A copy: converting a value may run Python code (`__index__`, `__fspath__`) that changes
    // the caller's dict, which iterating it directly would not survive.
    for (key, value) in disk.copy()?.iter() {
        match key.extract::<String>().as_deref() {
            Ok("dirs") => {
                let list = value.extract::<Vec<std::path::PathBuf>>();
                dirs = Some(list.map_err(|_| at.invalid("disk[\"dirs\"] must be a list of directory paths".into()))?);
            }
            Ok("extent_bytes") => {
                tier.extent_bytes =
                    args::count(Some(&value), "disk[\"extent_bytes\"]", at)?.unwrap_or(tier.extent_bytes);
            }
            Ok("memory_items") => {
                tier.memory_items =
                    args::count(Some(&value), "disk[\"memory_items\"]", at)?.unwrap_or(tier.memory_items);
            }
            _ => {
                return Err(at.invalid(format!(
                    "disk has an unknown key {key}; the keys are \"dirs\", \"extent_bytes\", \"memory_items\""
                )))
            }
        }
    }
    tier.dirs = dirs.ok_or_else(|| at.invalid("disk needs \"dirs\": the directories to stripe extents over".into()))?;
    Ok(tier)
}

fn limits(capacity: Option<&Bound<'_, PyAny>>, max_bytes: Option<&Bound<'_, PyAny>>, at: At<'_>) -> PyResult<Limits> {
    Ok(Limits { capacity: args::count(capacity, "capacity", at)?, bytes_max: args::count(max_bytes, "max_bytes", at)? })
}
