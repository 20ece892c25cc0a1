//! The client's direct request path: requests on the node's own sockets — an abstract Unix
//! socket for a client on the node's host, TCP elsewhere — instead of zenoh queries, where the
//! node offers them ([`DirectPath`] in its hello). Why: a zenoh query costs ~2.5 raw TCP round
//! trips on our machines, a framed socket about one (`docs/ARCHITECTURE.md` "The request path").
//!
//! The frames carry the very messages of the zenoh path (`wire.rs`), each after its length
//! ([`FRAME_LENGTH_BYTES`], little-endian); the node decodes and checks them the same way.
//!
//! Guarantees:
//! - One request at a time per connection. A call takes an idle connection or opens one, so no
//!   caller waits behind another's reply and no reply is handed from thread to thread.
//! - A connection whose exchange failed in any way (timeout, short read, a length out of bounds)
//!   is never used again: a late reply is never read as the answer to a later request.
//! - [`Direct::close`] shuts every connection down, idle or in use: a call blocked on the node's
//!   reply returns at once.
//! - Bounded: at most [`IDLE_MAX`] idle connections are kept; a reply longer than
//!   [`REPLY_BYTES_MAX`] ends its connection before anything is allocated for it.

use std::collections::HashMap;
use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::remote::wire::{DirectPath, FRAME_LENGTH_BYTES};
use crate::remote::QUERY_MARGIN;

/// Most idle connections a client keeps to its node; a call finding none opens another.
pub const IDLE_MAX: usize = 8;

/// Longest reply a client reads: the node's largest payload (`PAYLOAD_BYTES_MAX_LIMIT`, 1 GiB
/// less 1 MiB) and a header.
pub const REPLY_BYTES_MAX: usize = 1 << 30;

/// Longest wait to open a connection to the node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The node's sockets, as reached from this client.
pub(crate) struct Direct {
    address: Address,
    idle: Mutex<Vec<Connection>>,
    /// A clone of every connection not yet dropped, by id, to shut them down on close; `None`
    /// once closed (no connection is opened after).
    open: Mutex<Option<HashMap<u64, Stream>>>,
    next_id: AtomicU64,
}

#[derive(Clone, Debug)]
enum Address {
    /// An abstract Unix socket (this host).
    Unix(String),
    /// `host:port`.
    Tcp(String),
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

struct Connection {
    id: u64,
    stream: Stream,
    /// The read timeout set on the socket, so that it is set again only when it changes.
    read_timeout: Option<Duration>,
}

impl Direct {
    /// The direct path from a client that reached the node at `endpoint`, if the node offers
    /// one that this client reaches (its first connection is opened now, and kept): the Unix
    /// socket when the endpoint is on this host, else the TCP port paired with the endpoint's.
    /// `None`: the client asks over zenoh.
    pub(crate) fn reach(endpoint: &str, offered: &DirectPath) -> Option<Direct> {
        let (scheme, address) = endpoint.split_once('/')?;
        let mut candidates = Vec::new();
        let host_port = (scheme == "tcp").then(|| address.rsplit_once(':')).flatten();
        let on_this_host = scheme == "unixsock-stream" || host_port.is_some_and(|(host, _)| is_loopback(host));
        if let (true, Some(name)) = (on_this_host, &offered.unix) {
            candidates.push(Address::Unix(name.clone()));
        }
        if let Some((host, port)) = host_port {
            let port: u16 = port.parse().ok()?;
            if let Some(&(_, direct)) = offered.tcp.iter().find(|(zenoh, _)| *zenoh == port) {
                candidates.push(Address::Tcp(format!("{host}:{direct}")));
            }
        }
        candidates.into_iter().find_map(|address| {
            let direct = Direct {
                address,
                idle: Mutex::new(Vec::new()),
                open: Mutex::new(Some(HashMap::new())),
                next_id: AtomicU64::new(0),
            };
            let first = direct.connect().ok()?;
            direct.idle.lock().push(first);
            Some(direct)
        })
    }

    /// Which socket the path uses, for errors and `Debug`.
    pub(crate) fn describe(&self) -> String {
        match &self.address {
            Address::Unix(name) => format!("the node's Unix socket @{name}"),
            Address::Tcp(address) => format!("the node's direct TCP port {address}"),
        }
    }

    /// Sends one request (`parts`, concatenated, are its message) and reads the node's reply
    /// message, within `timeout` for the reply. `Err`: why there is no reply (the caller treats
    /// it as a lost reply, as a zenoh query's timeout).
    pub(crate) fn exchange(&self, parts: &[&[u8]], timeout: Duration) -> Result<Bytes, String> {
        let idle = self.idle.lock().pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.connect()?,
        };
        match connection.exchange(parts, timeout) {
            Ok(reply) => {
                self.give_back(connection);
                Ok(reply)
            }
            Err(e) => {
                self.forget(connection.id);
                Err(format!("{}: {e}", self.describe()))
            }
        }
    }

    /// Shuts every connection down (a call waiting on one returns) and opens none after.
    /// Idempotent.
    pub(crate) fn close(&self) {
        let open = self.open.lock().take();
        for stream in open.into_iter().flat_map(HashMap::into_values) {
            stream.shutdown();
        }
        self.idle.lock().clear();
    }

    fn connect(&self) -> Result<Connection, String> {
        let stream = match &self.address {
            Address::Unix(name) => {
                let address = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| e.to_string())?;
                Stream::Unix(UnixStream::connect_addr(&address).map_err(|e| e.to_string())?)
            }
            Address::Tcp(address) => {
                let resolved = address.to_socket_addrs().map_err(|e| e.to_string())?.next();
                let resolved = resolved.ok_or_else(|| format!("{address} resolves to no address"))?;
                let stream = TcpStream::connect_timeout(&resolved, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                Stream::Tcp(stream)
            }
        };
        // A node that stops reading must not hold a writer for ever.
        stream.set_write_timeout(Some(QUERY_MARGIN)).map_err(|e| e.to_string())?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock();
        let Some(open) = open.as_mut() else {
            return Err("the client is closed".into());
        };
        open.insert(id, stream.try_clone().map_err(|e| e.to_string())?);
        Ok(Connection { id, stream, read_timeout: None })
    }

    fn give_back(&self, connection: Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_MAX && self.open.lock().is_some() {
            idle.push(connection);
        } else {
            drop(idle);
            self.forget(connection.id);
        }
    }

    fn forget(&self, id: u64) {
        if let Some(open) = self.open.lock().as_mut() {
            open.remove(&id);
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.close();
    }
}

impl Connection {
    fn exchange(&mut self, parts: &[&[u8]], timeout: Duration) -> std::io::Result<Bytes> {
        let length: usize = parts.iter().map(|part| part.len()).sum();
        let prefix = u32::try_from(length)
            .map_err(|_| std::io::Error::other(format!("a request of {length} bytes does not fit a frame")))?
            .to_le_bytes();
        let mut frame = Vec::with_capacity(parts.len() + 1);
        frame.push(&prefix[..]);
        frame.extend_from_slice(parts);
        write_all(&mut self.stream, &frame)?;
        // Zero would mean "no timeout" to the socket; the caller's timeout is never zero
        // (a wait slice plus the query margin), this only keeps it so.
        let timeout = Some(timeout.max(Duration::from_millis(1)));
        if self.read_timeout != timeout {
            self.stream.set_read_timeout(timeout)?;
            self.read_timeout = timeout;
        }
        let mut prefix = [0u8; FRAME_LENGTH_BYTES];
        self.stream.read_exact(&mut prefix)?;
        let length = u32::from_le_bytes(prefix) as usize;
        if length > REPLY_BYTES_MAX {
            return Err(std::io::Error::other(format!("a reply of {length} bytes (at most {REPLY_BYTES_MAX})")));
        }
        let mut reply = Vec::with_capacity(length);
        (&mut self.stream).take(length as u64).read_to_end(&mut reply)?;
        if reply.len() < length {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(Bytes::from(reply))
    }
}

/// Writes `parts` in order with as few system calls as the socket allows (one, usually).
fn write_all(stream: &mut Stream, parts: &[&[u8]]) -> std::io::Result<()> {
    let total: usize = parts.iter().map(|part| part.len()).sum();
    let mut written = 0;
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

/// Whether `host` (of a `tcp/` endpoint) is this host's loopback interface.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
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

    fn set_write_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
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
