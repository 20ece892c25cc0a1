//! Ping-pong on a Unix stream socket, the floor of a local socket: the same exchange as the raw
//! TCP ping-pong ([`super::tcp`]: one write of the payload, the answer read whole and touched,
//! an echo process answering the same size back) without the TCP/IP stack. One way = round
//! trip / 2.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::tcp::{echo, timed_exchanges};
use crate::kernel::Probe;
use crate::process::{Role, Spawned, EXCHANGE_TIMEOUT};

use crate::BoxResult;

/// The role of the echo process: `<socket path> <payload_bytes> <round_trips>`.
pub const ECHO_ROLE: &str = "unix-echo";

/// The socket file, removed when dropped.
struct SocketPath(PathBuf);

impl SocketPath {
    /// A path in the temporary directory unique to this process and call.
    fn fresh() -> SocketPath {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        SocketPath(std::env::temp_dir().join(format!("stampede-bench-{}-{n}.sock", std::process::id())))
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Round-trip times in ns of `round_trips` ping-pongs of `payload_bytes` each way with an echo
/// process, after `warmup` untimed ones. `probe` samples its processes and the echo (`"echo"`)
/// around every round trip, warm-up included.
pub fn ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize, probe: &mut Probe) -> BoxResult<Vec<u64>> {
    let path = SocketPath::fresh();
    let listener = UnixListener::bind(&path.0)?;
    let path_text = path.0.to_str().ok_or("the temporary directory's path is not UTF-8")?;
    let args = [path_text.to_owned(), payload_bytes.to_string(), (warmup + round_trips).to_string()];
    let mut echo = Spawned::role(ECHO_ROLE, &args)?;
    echo.ready()?;
    let (mut stream, _) = listener.accept()?;
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    probe.add("echo", echo.pid());
    probe.start()?;
    let rtt_ns = timed_exchanges(&mut stream, payload_bytes, warmup, round_trips)?;
    probe.stop()?;
    echo.finish()?;
    Ok(rtt_ns)
}

/// The echo process of [`ping_pong()`].
pub fn echo_role(role: &Role) -> BoxResult<()> {
    let path: PathBuf = role.arg(0, "socket path")?;
    let (payload_bytes, total): (usize, usize) = (role.arg(1, "payload_bytes")?, role.arg(2, "round_trips")?);
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    role.ready("")?;
    echo(&mut stream, payload_bytes, total)
}
