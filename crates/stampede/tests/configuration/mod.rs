//! The conformance switch (SPEC §7 location transparency): the semantic suites take their runtime
//! from [`runtime`], which is embedded by default and, with `STAMPEDE_CONFIGURATION=serve`, a
//! client of a fresh `stampede serve` process — one node per runtime, since ts_min is global and
//! monotone on a node. The suites then run unchanged against the node.
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

/// Longest wait for a node to start listening, and for a client to reach it.
const NODE_START: Duration = Duration::from_secs(30);

/// Which runtimes [`runtime`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Configuration {
    Embedded,
    Serve,
}

/// The configuration `STAMPEDE_CONFIGURATION` selects (`embedded` when unset).
pub fn configuration() -> Configuration {
    match std::env::var("STAMPEDE_CONFIGURATION").as_deref() {
        Err(_) | Ok("embedded") => Configuration::Embedded,
        Ok("serve") => Configuration::Serve,
        Ok(other) => panic!("STAMPEDE_CONFIGURATION={other:?}: use embedded or serve"),
    }
}

/// A fresh runtime of the configuration in force. Dereferences to [`Runtime`]; dropping it
/// closes the runtime and stops its node.
pub fn runtime() -> TestRuntime {
    match configuration() {
        Configuration::Embedded => TestRuntime { runtime: Runtime::new(), node: None },
        Configuration::Serve => {
            let node = NodeProcess::start();
            let runtime = stampede::connect(&node.endpoint, Some(NODE_START)).expect("the client reaches the node");
            TestRuntime { runtime, node: Some(node) }
        }
    }
}

/// `true` when the configuration in force is embedded: for the few properties only a runtime in
/// this process has (say why at the call).
pub fn embedded() -> bool {
    configuration() == Configuration::Embedded
}

/// A runtime and, in the `serve` configuration, the node process it is a client of.
pub struct TestRuntime {
    runtime: Runtime,
    node: Option<NodeProcess>,
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
        drop(self.node.take());
    }
}

/// A `stampede serve` process on a Unix socket of its own; killed when dropped.
struct NodeProcess {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl NodeProcess {
    fn start() -> NodeProcess {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
        let mut child = Command::new(binary())
            .args(["serve", "--listen", &endpoint, "--name", "conformance"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("stampede serve starts");
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
