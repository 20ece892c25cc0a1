//! What the node tests share: a watchdog that turns a hang into a named failure, and a node
//! serving a fresh runtime on a Unix socket of its own (so parallel tests never collide).
#![allow(dead_code)]

use std::time::Duration;

use stampede::Runtime;
use stampede::{connect, Runtime as RemoteRuntime};
use stampede_node::{Node, NodeOptions};

pub mod pki;

/// The watchdog and the bounded wait every Stampede test crate shares.
#[path = "../../../stampede/tests/support/mod.rs"]
mod shared;

#[allow(unused_imports)] // not every test file waits
pub use shared::{eventually, with_watchdog_for};

/// Longest any one test may run before the watchdog declares it hung.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// How long a client tries to reach a node before failing the test.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `body` under the shared watchdog with the node tests' limit, [`WATCHDOG`].
pub fn with_watchdog<T>(test: &'static str, body: impl FnOnce() -> T) -> T {
    shared::with_watchdog_for(test, WATCHDOG, || {}, body)
}

/// A node serving a fresh runtime on a Unix socket in a directory of its own.
pub struct TestNode {
    pub node: Node,
    pub runtime: Runtime,
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl TestNode {
    pub fn new() -> TestNode {
        TestNode::with(|_| {})
    }

    /// A node with options changed by `adjust`.
    pub fn with(adjust: impl FnOnce(&mut NodeOptions)) -> TestNode {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
        let mut options = NodeOptions::listen(&endpoint);
        options.name = "test".into();
        adjust(&mut options);
        let runtime = Runtime::new();
        let node = Node::serve(runtime.engine().unwrap(), options).expect("the node serves");
        TestNode { node, runtime, endpoint, _dir: dir }
    }

    /// A new client session on this node.
    pub fn client(&self) -> RemoteRuntime {
        connect(&self.endpoint, Some(CONNECT_TIMEOUT)).expect("the client connects")
    }

    /// A new client session on this node that drops the next `count` replies to `op` on arrival
    /// (`LoseReplies`, feature `faults`), on zenoh alone if `zenoh_only`.
    pub fn losing(
        &self,
        op: &'static str,
        count: usize,
        zenoh_only: bool,
    ) -> (RemoteRuntime, std::sync::Arc<stampede::remote::faults::LoseReplies>) {
        let lose = std::sync::Arc::new(stampede::remote::faults::LoseReplies::new(op, count));
        let options = stampede::ConnectOptions {
            timeout: Some(CONNECT_TIMEOUT),
            zenoh_only,
            lose_replies: Some(lose.clone()),
            ..stampede::ConnectOptions::default()
        };
        (stampede::connect_with(&self.endpoint, &options).expect("the client connects"), lose)
    }
}

/// Node a, and node b connected to it; both share ts_min (`--mesh-ts-min`). `adjust` changes both
/// nodes' options. Returns a, node b with its runtime, and b's directory (its socket).
pub fn two_nodes_with(adjust: impl Fn(&mut NodeOptions)) -> (TestNode, Node, Runtime, tempfile::TempDir) {
    let a = TestNode::with(|o| {
        o.name = "a".into();
        adjust(o);
    });
    let b_dir = tempfile::tempdir().unwrap();
    let mut options = NodeOptions::listen(&format!("unixsock-stream/{}", b_dir.path().join("b.sock").display()));
    options.name = "b".into();
    options.connect = vec![a.endpoint.clone()];
    adjust(&mut options);
    let b_rt = Runtime::new();
    let b = Node::serve(b_rt.engine().unwrap(), options).expect("node b joins node a's mesh");
    (a, b, b_rt, b_dir)
}

/// [`two_nodes_with`] the default options.
pub fn two_nodes() -> (TestNode, Node, Runtime, tempfile::TempDir) {
    two_nodes_with(|_| {})
}

/// Items stored now in channel `name` of `rt`.
pub fn live(rt: &Runtime, name: &str) -> usize {
    match rt.lookup(name).unwrap() {
        stampede::Container::Channel(ch) => ch.stats().live_items,
        stampede::Container::Queue(_) => unreachable!("{name} is a channel"),
    }
}

/// The node's hello, asked over zenoh, and a raw connection to its direct Unix socket (what a
/// hostile client would open).
pub fn raw_connection(node: &TestNode) -> (stampede_wire::Hello, std::os::unix::net::UnixStream) {
    use stampede_wire::{decode_reply, encode, Reply, Request, RequestHeader};
    use zenoh::Wait;
    let config = stampede_wire::fabric::client_config(&node.endpoint, Duration::from_secs(10), None).unwrap();
    let zenoh = zenoh::open(config).wait().unwrap();
    let request = encode(&RequestHeader::new("", [0; 16], Request::Hello));
    let reply = zenoh.get(stampede_wire::fabric::rpc_key("test")).payload(request).wait().unwrap().recv().unwrap();
    let bytes = reply.result().unwrap().payload().to_bytes().into_owned();
    let Ok((Reply::Hello(hello), _)) = decode_reply(&bytes) else { panic!("a hello") };
    let stream = direct_connection(&hello);
    (hello, stream)
}

/// Another connection to the Unix socket a node's `hello` offers (no request sent on it).
pub fn direct_connection(hello: &stampede_wire::Hello) -> std::os::unix::net::UnixStream {
    use std::os::linux::net::SocketAddrExt;
    let name = hello.direct.unix.clone().expect("the node offers a Unix socket");
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let stream = std::os::unix::net::UnixStream::connect_addr(&address).unwrap();
    stream.set_read_timeout(Some(CONNECT_TIMEOUT)).unwrap();
    stream
}

/// Gets the node counts as answered by `task`'s input connection's cache (docs/PREFETCH.md).
pub fn pushes_used(rt: &RemoteRuntime, task: &stampede::Task) -> u64 {
    let graph = rt.graph().unwrap();
    let view = graph.tasks.iter().find(|t| t.id == task.id()).expect("the task is in the graph");
    let input = view.connections.iter().find(|c| c.kind == stampede::ConnectionKind::Input).expect("its input");
    input.prefetch.map_or(0, |pushes| pushes.used)
}
