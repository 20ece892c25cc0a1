//! What the node tests share: a watchdog that turns a hang into a named failure, and a node
//! serving a fresh runtime on a Unix socket of its own (so parallel tests never collide).
#![allow(dead_code)]

use std::time::Duration;

use stampede::Runtime;
use stampede::{connect, Runtime as RemoteRuntime};
use stampede_node::{Node, NodeOptions};

/// The watchdog and the bounded wait every Stampede test crate shares.
#[path = "../../../stampede/tests/support/mod.rs"]
mod shared;

#[allow(unused_imports)] // not every test file waits
pub use shared::eventually;

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
        let node = Node::serve(runtime.clone(), options).expect("the node serves");
        TestNode { node, runtime, endpoint, _dir: dir }
    }

    /// A new client session on this node.
    pub fn client(&self) -> RemoteRuntime {
        connect(&self.endpoint, Some(CONNECT_TIMEOUT)).expect("the client connects")
    }
}
