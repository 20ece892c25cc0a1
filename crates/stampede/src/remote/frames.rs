//! A connection of the direct path (`direct.rs`): frames written whole, and read within the
//! deadline of the call that waits for them.
//!
//! A frame is its length ([`FRAME_LENGTH_BYTES`], little-endian), then its message; on the Unix
//! socket a shared-memory segment may be passed with its first bytes.
//!
//! Guarantees:
//! - A read never waits past its call's deadline, and never returns before it unless the reply
//!   came or the connection failed: the socket's read timeout is at most [`READ_TIMEOUT_STEP`]
//!   (so it is not set again for every request), and a read a step ends early resumes, the last
//!   step with exactly what is left.
//! - A reply longer than [`REPLY_BYTES_MAX`] fails the read before anything is allocated for it.

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede_wire::shared;
#[cfg(doc)]
use stampede_wire::FRAME_LENGTH_BYTES;

use super::direct::REPLY_BYTES_MAX;

/// The socket's read timeout while a call waits longer than this: a read it ends early is resumed
/// until the call's deadline. Calls differ in their timeouts (and each by microseconds from the
/// last), so setting each call's own would cost a system call per request (`hops` counted 2.7 per
/// round trip in a client); set to this once, the timeout is set again only in a wait's last
/// step, or for a call shorter than a step. A long wait wakes once per step, in the kernel only.
const READ_TIMEOUT_STEP: Duration = Duration::from_millis(250);

/// The socket of a connection.
pub(super) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// One connection: one request at a time, its reply read before the next.
pub(super) struct Connection {
    pub(super) id: u64,
    pub(super) stream: Stream,
    /// The read timeout set on the socket, so that it is set again only when it changes.
    read_timeout: Option<Duration>,
}

impl Connection {
    /// A connection on `stream`, its read timeout not set yet.
    pub(super) fn new(id: u64, stream: Stream) -> Connection {
        Connection { id, stream, read_timeout: None }
    }

    /// Writes one frame: its length, then `parts`; `passed` goes with its first bytes.
    pub(super) fn write_frame(&mut self, parts: &[&[u8]], passed: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
        let length: usize = parts.iter().map(|part| part.len()).sum();
        let prefix = u32::try_from(length)
            .map_err(|_| std::io::Error::other(format!("a request of {length} bytes does not fit a frame")))?
            .to_le_bytes();
        let mut frame = Vec::with_capacity(parts.len() + 1);
        frame.push(&prefix[..]);
        frame.extend_from_slice(parts);
        let written = match (passed, &self.stream) {
            (None, _) => 0,
            (Some(descriptor), Stream::Unix(socket)) => shared::send_with(socket, &frame, descriptor)?,
            (Some(_), Stream::Tcp(_)) => return Err(std::io::Error::other("a segment passed on TCP")),
        };
        write_all(&mut self.stream, &frame, written)
    }

    /// Reads one reply frame: its message, and the segment passed with it, if any.
    pub(super) fn read_reply(&mut self, timeout: Duration) -> std::io::Result<(Bytes, Option<OwnedFd>)> {
        // Zero would mean "no timeout" to the socket; the caller's timeout is never zero
        // (a wait slice plus the query margin), this only keeps it so.
        self.read_frame(Some(timeout.max(Duration::from_millis(1))))
    }

    /// Reads one frame, waiting at most `timeout` (`None`: for as long as it takes).
    pub(super) fn read_frame(&mut self, timeout: Option<Duration>) -> std::io::Result<(Bytes, Option<OwnedFd>)> {
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        self.set_read_timeout(timeout.map(step))?;
        let (length, descriptor) = self.read_prefix(deadline)?;
        if length > REPLY_BYTES_MAX {
            return Err(std::io::Error::other(format!("a reply of {length} bytes (at most {REPLY_BYTES_MAX})")));
        }
        let mut reply = Vec::with_capacity(length);
        while reply.len() < length {
            let missing = (length - reply.len()) as u64;
            match (&mut self.stream).take(missing).read_to_end(&mut reply) {
                // What a read brought before an error is in `reply`; an end before `length` is one.
                Ok(_) if reply.len() < length => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) => self.resume(e, deadline)?,
            }
        }
        Ok((Bytes::from(reply), descriptor))
    }

    /// A frame's length, with the segment passed with it, if any (only a Unix socket passes
    /// one), read by `deadline`.
    fn read_prefix(&mut self, deadline: Option<Instant>) -> std::io::Result<(usize, Option<OwnedFd>)> {
        let mut prefix = shared::Prefix::default();
        while !prefix.is_whole() {
            let received = match &mut self.stream {
                Stream::Unix(socket) => shared::receive_with(&*socket, prefix.unfilled()),
                Stream::Tcp(socket) => socket.read(prefix.unfilled()).map(|bytes| (bytes, None)),
            };
            match received {
                Ok(received) => prefix.received(received)?,
                Err(e) => self.resume(e, deadline)?,
            }
        }
        Ok(prefix.into_parts())
    }

    /// After a read failed with `e`: `Ok` when it may go on — interrupted, or ended by a step
    /// ([`READ_TIMEOUT_STEP`]) before `deadline` (the last step is what is left) — else `e`. A
    /// read never ends before its deadline: the kernel counts a socket's timeout in clock ticks
    /// and may end it up to a tick early, and below a millisecond a timeout would round to "none",
    /// so what is left is waited for again, at least a millisecond.
    fn resume(&mut self, e: std::io::Error, deadline: Option<Instant>) -> std::io::Result<()> {
        match e.kind() {
            std::io::ErrorKind::Interrupted => Ok(()),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
                match left {
                    Some(left) if !left.is_zero() => {
                        self.set_read_timeout(Some(step(left.max(Duration::from_millis(1)))))
                    }
                    _ => Err(e),
                }
            }
            _ => Err(e),
        }
    }

    /// Sets the socket's read timeout, unless it is set so already.
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        if self.read_timeout != timeout {
            self.stream.set_read_timeout(timeout)?;
            self.read_timeout = timeout;
        }
        Ok(())
    }
}

/// The socket's read timeout while `left` remains until a call's deadline: one step, or what is
/// left when it is less.
fn step(left: Duration) -> Duration {
    left.min(READ_TIMEOUT_STEP)
}

/// Writes `parts` in order from byte `written` on, with as few system calls as the socket
/// allows (one, usually).
fn write_all(stream: &mut Stream, parts: &[&[u8]], mut written: usize) -> std::io::Result<()> {
    let total: usize = parts.iter().map(|part| part.len()).sum();
    while written < total {
        let mut skip = written;
        let mut slices = Vec::with_capacity(parts.len());
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
            } else {
                slices.push(IoSlice::new(&part[skip..]));
                skip = 0;
            }
        }
        match stream.write_vectored(&slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Stream {
    pub(super) fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    pub(super) fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }

    pub(super) fn set_write_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(timeout),
            Stream::Tcp(s) => s.set_write_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tcp(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    use super::{Connection, Stream, READ_TIMEOUT_STEP};

    #[test]
    fn a_read_waits_until_its_deadline_not_its_step() {
        let (ours, _silent) = UnixStream::pair().unwrap();
        let mut connection = Connection::new(0, Stream::Unix(ours));
        // Between two steps: the socket's first two timeouts end the read early.
        let timeout = READ_TIMEOUT_STEP * 2 + Duration::from_millis(40);
        let start = Instant::now();
        let e = connection.read_frame(Some(timeout)).unwrap_err();
        assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{e}");
        assert!(start.elapsed() >= timeout, "returned after {:?}, before its timeout {timeout:?}", start.elapsed());
    }

    #[test]
    fn a_frame_is_read_whole_and_the_socket_keeps_one_step_for_every_long_call() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut connection = Connection::new(0, Stream::Unix(ours));
        let message = b"a reply";
        for timeout in [READ_TIMEOUT_STEP * 4 + Duration::from_micros(3), READ_TIMEOUT_STEP * 80] {
            std::io::Write::write_all(&mut theirs, &(message.len() as u32).to_le_bytes()).unwrap();
            std::io::Write::write_all(&mut theirs, message).unwrap();
            let (read, passed) = connection.read_frame(Some(timeout)).unwrap();
            assert_eq!((&read[..], passed.is_none()), (&message[..], true));
            assert_eq!(connection.read_timeout, Some(READ_TIMEOUT_STEP));
        }
    }
}
