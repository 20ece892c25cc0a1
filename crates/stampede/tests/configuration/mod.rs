//! The conformance switch (location transparency: docs/NODES.md,
//! "Embedded by default, one API everywhere"): the semantic suites take their runtime from
//! [`runtime`], and run unchanged against, with `STAMPEDE_CONFIGURATION` =
//!
//! - `embedded` (the default): a runtime in this process;
//! - `serve`: a client of a fresh `stampede serve` process;
//! - `mesh`: a client attached to node B whose session, channels and queues are on node A, in a
//!   mesh of three `stampede serve` processes A ← B ← C (B connects to A, C to B);
//! - `split`: the same mesh, a client whose session and tasks
//!   are on node B and whose channels and queues are on node A (placement `a`): every
//!   connection is a task's shadow on A (docs/NODES.md "One task, several nodes").
//!
//! `STAMPEDE_PREFETCH` (`off`, `newest`, `auto`: the default) sets the client's prefetch policy
//! for channel inputs that choose none (docs/PREFETCH.md); CI runs the suites with `auto` in
//! every configuration and with `off` in one.
//!
//! Every node runs with its name and endpoints only: the nodes of a mesh share one ts_min
//! (docs/PROTOCOL.md). Nodes are fresh per runtime: ts_min is global and monotone on a node. A
//! node holds a door only while it has a session, so in `serve` and `mesh` — sessions on one node
//! — reclamation happens inside the operation, as embedded; in `split` the nodes follow each
//! other's claims a message round later.
//!
//! The binary is `$STAMPEDE_BIN`, else the workspace's debug build (built if missing).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use stampede::Runtime;

#[path = "../support/mod.rs"]
mod support;

/// Longest wait for a node to start listening, and for a client to reach it.
const NODE_START: Duration = Duration::from_secs(30);

/// Which runtimes [`runtime`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Configuration {
    Embedded,
    Serve,
    Mesh,
    Split,
}

/// The configuration `STAMPEDE_CONFIGURATION` selects (`embedded` when unset).
pub fn configuration() -> Configuration {
    match std::env::var("STAMPEDE_CONFIGURATION").as_deref() {
        Err(_) | Ok("embedded") => Configuration::Embedded,
        Ok("serve") => Configuration::Serve,
        Ok("mesh") => Configuration::Mesh,
        Ok("split") => Configuration::Split,
        Ok(other) => panic!("STAMPEDE_CONFIGURATION={other:?}: use embedded, serve, mesh or split"),
    }
}

/// The prefetch policy of the client's channel inputs that choose none: `STAMPEDE_PREFETCH`
/// (`off`, `newest` or `auto`; `auto` when unset), docs/PREFETCH.md.
pub fn prefetch() -> stampede::Prefetch {
    match std::env::var("STAMPEDE_PREFETCH") {
        Err(_) => stampede::Prefetch::default(),
        Ok(name) => stampede::Prefetch::parse(&name).unwrap_or_else(|why| panic!("STAMPEDE_PREFETCH={why}")),
    }
}

/// A fresh runtime of the configuration in force. Dereferences to [`Runtime`]; dropping it
/// closes the runtime and stops its node.
pub fn runtime() -> TestRuntime {
    let nodes = match configuration() {
        Configuration::Embedded => return TestRuntime { runtime: Runtime::new(), nodes: Vec::new() },
        Configuration::Serve => NodeProcess::start_mesh(&["conformance"]),
        Configuration::Mesh | Configuration::Split => NodeProcess::start_mesh(&["a", "b", "c"]),
    };
    TestRuntime { runtime: client_of(&nodes), nodes }
}

/// A client session of `nodes`, reached as the configuration in force reaches them.
fn client_of(nodes: &[NodeProcess]) -> Runtime {
    let options = stampede::ConnectOptions {
        timeout: Some(NODE_START),
        prefetch: prefetch(),
        ..stampede::ConnectOptions::default()
    };
    let (endpoint, options) = match configuration() {
        Configuration::Embedded => unreachable!("an embedded runtime has no nodes"),
        Configuration::Serve => (&nodes[0].endpoint, options),
        // Node a's sessions, through node b.
        Configuration::Mesh => (&nodes[1].endpoint, stampede::ConnectOptions { node: Some("a".into()), ..options }),
        // Sessions on node b, containers on node a.
        Configuration::Split => {
            (&nodes[1].endpoint, stampede::ConnectOptions { placement: Some("a".into()), ..options })
        }
    };
    stampede::connect_with(endpoint, &options).expect("the client reaches its node")
}
/// How long the split configuration's nodes may take to reclaim once the last blocker moved: a
/// few message rounds on loopback (docs/PROTOCOL.md, "Why it is live": within a bounded time).
pub const MESH_SETTLE: Duration = Duration::from_secs(10);

/// `value()` once it is `expected`, else its last value. Read at once where reclamation happens
/// inside the operation that makes an item garbage (embedded, serve, mesh: one node's ts_min);
/// polled for at most [`MESH_SETTLE`] in the split configuration, whose nodes share ts_min over
/// the fabric and follow each other's claims a message round later (docs/NODES.md).
pub fn settled<T: PartialEq>(expected: T, mut value: impl FnMut() -> T) -> T {
    if configuration() == Configuration::Split {
        support::eventually(MESH_SETTLE, || value() == expected);
    }
    value()
}

/// The node a runtime of this configuration places channels and queues on (`None`: embedded).
pub fn placement(rt: &Runtime) -> Option<String> {
    match configuration() {
        Configuration::Split => Some("a".into()),
        _ => rt.node().map(str::to_owned),
    }
}

/// `true` when the configuration in force is embedded: for the few properties only a runtime in
/// this process has (say why at the call).
pub fn embedded() -> bool {
    configuration() == Configuration::Embedded
}

/// A runtime and the node processes it is a client of (none when embedded).
pub struct TestRuntime {
    runtime: Runtime,
    nodes: Vec<NodeProcess>,
}

impl TestRuntime {
    /// Another client session of the same nodes, reached the same way (`None` embedded): what it
    /// sees of the containers, this runtime's session did not ask for.
    pub fn another_client(&self) -> Option<Runtime> {
        (!self.nodes.is_empty()).then(|| client_of(&self.nodes))
    }
}

impl Deref for TestRuntime {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        self.runtime.close();
        self.nodes.clear();
    }
}

/// A `stampede serve` process on a Unix socket of its own; killed when dropped.
struct NodeProcess {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl NodeProcess {
    /// Nodes called `names`, each connected to the one before it.
    fn start_mesh(names: &[&str]) -> Vec<NodeProcess> {
        let mut nodes: Vec<NodeProcess> = Vec::new();
        for name in names {
            let connect = nodes.last().map(|node| node.endpoint.clone());
            nodes.push(NodeProcess::start(name, connect.as_deref()));
        }
        nodes
    }

    fn start(name: &str, connect: Option<&str>) -> NodeProcess {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
        let mut command = Command::new(binary());
        command.args(["serve", "--listen", &endpoint, "--name", name]);
        if let Some(connect) = connect {
            command.args(["--connect", connect]);
        }
        let mut child = command.stdout(Stdio::piped()).spawn().expect("stampede serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (said, listening) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = said.send(line);
        });
        let node = NodeProcess { child, endpoint, _dir: dir };
        let line = listening.recv_timeout(NODE_START).expect("stampede serve says it listens");
        assert!(line.starts_with("listening on"), "stampede serve said {line:?}");
        node
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STAMPEDE_BIN") {
        return path.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("target/debug/stampede");
    if !path.exists() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "stampede-cli"])
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(built.success(), "building stampede-cli failed");
    }
    path
}
