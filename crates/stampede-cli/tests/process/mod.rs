//! What the tests that start `stampede serve` and client processes share: a child process read
//! line by line and killed when dropped, the watchdog that kills them before it aborts a hung test,
//! a node on a Unix socket of the test's own, and bounded waits. (Each test file compiles its own
//! copy and uses part of it.)
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// The watchdog every Stampede test crate shares.
#[path = "../../../stampede/tests/support/mod.rs"]
mod shared;
use stampede::{connect, Runtime as RemoteRuntime};

/// Longest any one test may run before the watchdog kills its processes and aborts.
pub const WATCHDOG: Duration = Duration::from_secs(120);
/// Longest wait for a process's line, a node, or a condition.
pub const WAIT: Duration = Duration::from_secs(30);
/// Processes started by this test binary and not yet reaped, for the watchdog.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Runs `body` under the shared watchdog: if it has not returned within [`WATCHDOG`], this
/// binary's child processes are killed and the process aborts, naming `test`.
pub fn with_watchdog<T>(test: &'static str, body: impl FnOnce() -> T) -> T {
    shared::with_watchdog_for(test, WATCHDOG, kill_children, body)
}

/// Kills every child process this binary started and has not reaped.
pub fn kill_children() {
    for pid in CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
}

/// A child process, killed and reaped when dropped; its stdout read line by line on a thread.
pub struct Process {
    child: Child,
    lines: Receiver<String>,
}

impl Process {
    pub fn spawn(command: &mut Command) -> Process {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("the process starts");
        CHILDREN.lock().unwrap().push(child.id());
        let stdout = child.stdout.take().expect("piped stdout");
        Process { child, lines: read_lines(stdout) }
    }

    /// The next line of stdout that `wanted` accepts (others are skipped), within [`WAIT`].
    pub fn line(&self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return line,
                Ok(_) => {}
                Err(e) => panic!("no expected line from the process within {WAIT:?}: {e}"),
            }
        }
    }

    /// Sends `signal` (`TERM`, `KILL`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status();
        assert!(status.expect("kill runs").success());
    }

    /// Stops the process (`SIGSTOP`) and returns once every one of its threads is stopped
    /// (within [`WAIT`]).
    ///
    /// `kill` returning is not enough: in a process of several threads the stop takes effect
    /// when one thread, woken by the signal, runs and stops the others. On a loaded machine that
    /// thread may wait for a CPU for milliseconds, while another thread of the process, woken by
    /// a reply, runs on and returns it to the caller.
    pub fn stop(&self) {
        self.signal("STOP");
        let threads = format!("/proc/{}/task", self.child.id());
        eventually("the stopped process's threads all stop", || {
            std::fs::read_dir(&threads).expect("the process's threads are listed").all(|thread| {
                let stat = std::fs::read_to_string(thread.expect("a thread's entry").path().join("stat"));
                // The thread may have exited meanwhile; its state follows its name's `)`.
                stat.map_or(true, |stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')))
            })
        });
    }

    /// Waits (within [`WAIT`]) for the process to exit; its exit status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the process did not exit within {WAIT:?}");
            // The poll interval: a child's exit has no signal but `try_wait` here (bounded by WAIT).
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).retain(|&pid| pid != self.child.id());
    }
}

pub fn read_lines(stdout: ChildStdout) -> Receiver<String> {
    let (send, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// `stampede serve` on `endpoint`, once it printed that it listens.
pub fn serve(endpoint: &str, extra: &[&str]) -> Process {
    let process =
        Process::spawn(Command::new(env!("CARGO_BIN_EXE_stampede")).args(["serve", "--listen", endpoint]).args(extra));
    let line = process.line(|_| true);
    assert_eq!(line, format!("listening on {endpoint}"));
    process
}

/// A Unix-socket endpoint in `dir`.
pub fn unix_endpoint(dir: &tempfile::TempDir) -> String {
    format!("unixsock-stream/{}", dir.path().join("node.sock").display())
}

/// A client of the node at `endpoint`, connected within [`WAIT`].
pub fn client(endpoint: &str) -> RemoteRuntime {
    connect(endpoint, Some(WAIT)).expect("the client connects")
}

/// Waits (within [`WAIT`]) until `condition` holds.
pub fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        // The poll interval of `eventually`: the condition has no signal to wait on (bounded by WAIT).
        thread::sleep(Duration::from_millis(20));
    }
}
