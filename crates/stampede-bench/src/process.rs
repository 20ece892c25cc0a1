//! The processes of a cross-process benchmark: this program re-executed in a *role* (the echo,
//! consumer or producer side of an exchange), a `stampede serve` node, and any other server a
//! reference needs (`redis-server`). Every one is a [`Spawned`] child: killed and reaped when
//! dropped (so also on an error or a panic), and asked by the kernel to die with this process
//! (`PR_SET_PDEATHSIG`), so a benchmark killed outright leaves nothing behind.
//!
//! A role talks to its parent in lines. It prints `ready[ <info>]` on stdout once set up, then
//! (if it needs a common start) waits for `go` on stdin; it exits when its work is done, or at
//! once when its stdin closes (the parent finished with it, or died). Every wait on the other
//! side is bounded: [`START_TIMEOUT`] for `ready`, [`EXIT_TIMEOUT`] for the exit.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::BoxResult;

/// The hidden first argument that runs this program in a role instead of the benchmark.
pub const ROLE_FLAG: &str = "--role";

/// Longest wait for a child to say `ready` (a zenoh session opened, a node listening).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait for a child to exit once its work is done and its stdin is closed.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest wait for one message of an exchange (a reply, a frame) before the run is declared
/// stuck: far above any figure measured, so it only ends runs that would otherwise hang.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);

/// A child process, killed and reaped when dropped. Its stdout is read line by line by a thread
/// of its own (so the child never blocks on a full pipe); [`line`](Self::line) takes the next one.
pub struct Spawned {
    /// What the child is, for messages (`"tcp-echo"`, `"stampede serve"`).
    pub what: String,
    child: Child,
    /// The child's stdin; dropped by [`finish`](Self::finish) to tell a role to exit.
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Spawned {
    /// Spawns `command` with stdin and stdout piped, stderr inherited, and the kernel told to
    /// kill it if this process dies first.
    pub fn spawn(what: &str, mut command: Command) -> BoxResult<Spawned> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        // SAFETY: the closure runs in the child between fork and exec, and only makes one
        // async-signal-safe system call (prctl) on the child's own state; it allocates nothing
        // and takes no lock.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start {what}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (send, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The parent may have stopped listening; the child's lines are then dropped.
                let _ = send.send(line);
            }
        });
        Ok(Spawned { what: what.to_owned(), child, stdin, lines })
    }

    /// This program re-executed in `role` with `args` (see [`Role`]).
    pub fn role(role: &str, args: &[String]) -> BoxResult<Spawned> {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg(ROLE_FLAG).arg(role).args(args);
        Spawned::spawn(role, command)
    }

    /// The next line the child prints, waiting at most `timeout`; `None` once its output ended
    /// (it exited, or closed its stdout), an error on the timeout.
    pub fn next_line(&mut self, timeout: Duration) -> BoxResult<Option<String>> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Timeout) => Err(format!("{}: no line within {timeout:?}", self.what).into()),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
        }
    }

    /// The next line the child prints, waiting at most `timeout`; an error naming the child's
    /// exit status if it ends its output first.
    pub fn line(&mut self, timeout: Duration) -> BoxResult<String> {
        match self.next_line(timeout)? {
            Some(line) => Ok(line),
            None => {
                let status = self.wait_until(Instant::now() + EXIT_TIMEOUT);
                Err(format!("{} ended its output ({})", self.what, describe(status)).into())
            }
        }
    }

    /// Waits (at most [`START_TIMEOUT`]) for the role's `ready[ <info>]` line; returns `<info>`.
    pub fn ready(&mut self) -> BoxResult<String> {
        let line = self.line(START_TIMEOUT)?;
        match line.strip_prefix("ready") {
            Some(info) => Ok(info.trim().to_owned()),
            None => Err(format!("{} said {line:?} instead of ready", self.what).into()),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells the role to start (`go` on its stdin).
    pub fn go(&mut self) -> BoxResult<()> {
        let stdin = self.stdin.as_mut().ok_or("go after finish")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        Ok(())
    }

    /// Closes the child's stdin and waits (at most [`EXIT_TIMEOUT`]) for it to exit; an error
    /// unless it exits with status 0 (then it is killed).
    pub fn finish(mut self) -> BoxResult<()> {
        self.stdin = None;
        match self.wait_until(Instant::now() + EXIT_TIMEOUT) {
            Some(status) if status.success() => Ok(()),
            status => Err(format!("{} {}", self.what, describe(status)).into()),
        }
    }

    /// Whether the child is still running (not exited, or not yet reaped).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit status, polled until `deadline`; `None` if the child is still running then.
    fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => format!("exited: {status}"),
        None => format!("did not exit within {EXIT_TIMEOUT:?}"),
    }
}

/// `stampede serve` on a free loopback TCP port; killed when dropped.
pub struct Node {
    /// `tcp/127.0.0.1:<port>`.
    pub endpoint: String,
    process: Spawned,
}

impl Node {
    /// Starts the `stampede` binary found by [`stampede_binary`] and waits for it to listen.
    pub fn start() -> BoxResult<Node> {
        let endpoint = format!("tcp/127.0.0.1:{}", free_port()?);
        let mut command = Command::new(stampede_binary()?);
        command.args(["serve", "--listen", &endpoint, "--name", "bench"]);
        let mut process = Spawned::spawn("stampede serve", command)?;
        let line = process.line(START_TIMEOUT)?;
        if line.trim() != format!("listening on {endpoint}") {
            return Err(format!("stampede serve said {line:?}").into());
        }
        Ok(Node { endpoint, process })
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// The `stampede` CLI: `$STAMPEDE_BIN` if set, else the one beside this program (so a debug
/// benchmark runs a debug node, and a release one a release node).
pub fn stampede_binary() -> BoxResult<PathBuf> {
    if let Some(path) = std::env::var_os("STAMPEDE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let binary = exe.with_file_name("stampede");
    if binary.exists() {
        return Ok(binary);
    }
    let release = exe.parent().and_then(Path::file_name) == Some(OsStr::new("release"));
    let build = if release { "cargo build --release -p stampede-cli" } else { "cargo build -p stampede-cli" };
    Err(format!("{} is missing: {build} first (or set STAMPEDE_BIN)", binary.display()).into())
}

/// A loopback TCP port free a moment ago (bound, then released: another process could take it
/// in between, which a benchmark accepts).
pub fn free_port() -> BoxResult<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `program` if it is an executable file in a directory of `$PATH`.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The child's side: a role's arguments and its line protocol with the parent.
pub struct Role {
    /// The role's name (the argument after [`ROLE_FLAG`]).
    pub name: String,
    args: Vec<String>,
    go: Receiver<()>,
}

impl Role {
    /// `Some` when this process was started as a role (`<program> --role <name> <args>...`):
    /// starts watching stdin, exiting the process when it closes.
    pub fn from_args() -> Option<Role> {
        let mut args = std::env::args().skip(1);
        if args.next().as_deref() != Some(ROLE_FLAG) {
            return None;
        }
        let name = args.next().unwrap_or_default();
        let (send, go) = mpsc::channel();
        thread::spawn(move || {
            let mut stdin = BufReader::new(std::io::stdin());
            let mut line = String::new();
            loop {
                line.clear();
                match stdin.read_line(&mut line) {
                    Ok(n) if n > 0 => {
                        let _ = send.send(());
                    }
                    // The parent is done with this child, or gone: nothing left to do.
                    _ => std::process::exit(0),
                }
            }
        });
        Some(Role { name, args: args.collect(), go })
    }

    /// Argument `index` parsed as a `T`; `what` names it in the error.
    pub fn arg<T: FromStr>(&self, index: usize, what: &str) -> BoxResult<T> {
        let text = self.args.get(index).ok_or_else(|| format!("role {}: argument {what} missing", self.name))?;
        text.parse().map_err(|_| format!("role {}: bad {what} {text:?}", self.name).into())
    }

    /// Tells the parent this side is set up, with `info` if not empty.
    pub fn ready(&self, info: &str) -> BoxResult<()> {
        let mut stdout = std::io::stdout().lock();
        if info.is_empty() {
            writeln!(stdout, "ready")?;
        } else {
            writeln!(stdout, "ready {info}")?;
        }
        stdout.flush()?;
        Ok(())
    }

    /// Waits (at most [`START_TIMEOUT`]) for the parent's `go`.
    pub fn wait_go(&self) -> BoxResult<()> {
        self.go
            .recv_timeout(START_TIMEOUT)
            .map_err(|_| format!("role {}: no go within {START_TIMEOUT:?}", self.name))?;
        Ok(())
    }
}
