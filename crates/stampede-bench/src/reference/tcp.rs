//! Raw TCP on loopback, the floor under every TCP protocol (Stampede's fabric included):
//!
//! - ping-pong: this process writes the payload on a `TCP_NODELAY` socket and reads the answer;
//!   an echo process ([`ECHO_ROLE`]) reads each payload whole, touches it and writes a payload of
//!   the same size back. No framing, no allocation per message: one `write` and as many `read`s
//!   as the kernel needs, each way. One way = round trip / 2.
//! - stream: writer processes ([`WRITER_ROLE`]) each write `frames` frames back to back on their
//!   own connection; one reader thread per connection here reads each frame whole into one
//!   buffer and touches it. The kernel's socket buffers are the only flow control. Timed from
//!   the common start (`go`) to the last frame read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

use crate::payload::{source, touch};
use crate::ping_pong;
use crate::process::{Role, Spawned, EXCHANGE_TIMEOUT};
use crate::stats::elapsed_ns;

use crate::BoxResult;

/// The role of the echo process: `<address> <payload_bytes> <round_trips>`.
pub const ECHO_ROLE: &str = "tcp-echo";

/// The role of a writer process: `<address> <frames> <frame_bytes>`.
pub const WRITER_ROLE: &str = "tcp-writer";

/// Round-trip times in ns of `round_trips` ping-pongs of `payload_bytes` each way with an echo
/// process, after `warmup` untimed ones.
pub fn ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let args = [listener.local_addr()?.to_string(), payload_bytes.to_string(), (warmup + round_trips).to_string()];
    let mut echo = Spawned::role(ECHO_ROLE, &args)?;
    echo.ready()?;
    // The echo connected before saying ready: the connection waits in the backlog.
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    let rtt_ns = timed_exchanges(&mut stream, payload_bytes, warmup, round_trips)?;
    echo.finish()?;
    Ok(rtt_ns)
}

/// The echo process of [`ping_pong()`].
pub fn echo_role(role: &Role) -> BoxResult<()> {
    let address: SocketAddr = role.arg(0, "address")?;
    let (payload_bytes, total): (usize, usize) = (role.arg(1, "payload_bytes")?, role.arg(2, "round_trips")?);
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    role.ready("")?;
    echo(&mut stream, payload_bytes, total)
}

/// The timing side of a byte-stream ping-pong (TCP or Unix socket): write the payload, read the
/// answer whole, touch it.
pub(crate) fn timed_exchanges(
    stream: &mut (impl Read + Write),
    payload_bytes: usize,
    warmup: usize,
    round_trips: usize,
) -> BoxResult<Vec<u64>> {
    let buf = source(payload_bytes, 0xa0);
    let mut answer = vec![0u8; payload_bytes];
    let rtt_ns = ping_pong::timed(warmup, round_trips, |_| -> std::io::Result<()> {
        stream.write_all(&buf)?;
        stream.read_exact(&mut answer)?;
        touch(&answer);
        Ok(())
    })?;
    Ok(rtt_ns)
}

/// The echo side of a byte-stream ping-pong: `total` times, read a payload whole, touch it,
/// write the answer.
pub(crate) fn echo(stream: &mut (impl Read + Write), payload_bytes: usize, total: usize) -> BoxResult<()> {
    let mut buf = vec![0u8; payload_bytes];
    let answer = source(payload_bytes, 0xb0);
    for _ in 0..total {
        stream.read_exact(&mut buf)?;
        touch(&buf);
        stream.write_all(&answer)?;
    }
    Ok(())
}

/// Nanoseconds from the common start until `writers` writer processes have each delivered
/// `frames` frames of `frame_bytes` to a reader thread of this process.
pub fn stream(writers: usize, frames: usize, frame_bytes: usize) -> BoxResult<u64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let args = [listener.local_addr()?.to_string(), frames.to_string(), frame_bytes.to_string()];
    let mut processes = Vec::with_capacity(writers);
    let mut streams = Vec::with_capacity(writers);
    for _ in 0..writers {
        let mut writer = Spawned::role(WRITER_ROLE, &args)?;
        writer.ready()?;
        let (stream, _) = listener.accept()?;
        stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
        processes.push(writer);
        streams.push(stream);
    }
    let start = Instant::now();
    for writer in &mut processes {
        writer.go()?;
    }
    let ends_ns = thread::scope(|scope| {
        let readers: Vec<_> = streams
            .into_iter()
            .map(|mut stream| {
                scope.spawn(move || -> std::io::Result<u64> {
                    let mut frame = vec![0u8; frame_bytes];
                    for _ in 0..frames {
                        stream.read_exact(&mut frame)?;
                        touch(&frame);
                    }
                    Ok(elapsed_ns(start))
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().expect("tcp reader thread panicked")).collect::<Result<Vec<_>, _>>()
    })?;
    for writer in processes {
        writer.finish()?;
    }
    Ok(ends_ns.into_iter().max().unwrap_or(0))
}

/// A writer process of [`stream`].
pub fn writer_role(role: &Role) -> BoxResult<()> {
    let address: SocketAddr = role.arg(0, "address")?;
    let (frames, frame_bytes): (usize, usize) = (role.arg(1, "frames")?, role.arg(2, "frame_bytes")?);
    let mut stream = TcpStream::connect(address)?;
    let frame = source(frame_bytes, 0xc0);
    role.ready("")?;
    role.wait_go()?;
    for _ in 0..frames {
        stream.write_all(&frame)?;
    }
    Ok(())
}
