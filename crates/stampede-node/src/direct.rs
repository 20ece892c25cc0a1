//! The node's direct request path: its own sockets beside the zenoh queryable, announced in
//! its hello ([`DirectPath`]). A client on this host reaches the abstract Unix socket, one
//! elsewhere the TCP port opened beside each `tcp/` endpoint (on the same interface). The client
//! side and the reasons are in `stampede`'s `remote/direct.rs`.
//!
//! A connection carries one request at a time: a frame ([`FRAME_LENGTH_BYTES`] of length, then
//! the message of a zenoh query), answered by a frame holding the reply message. Requests are
//! served by `serve::serve`, exactly as those that come through zenoh: the same decoding of
//! hostile bytes, the same session and secret checks, the same bounds.
//!
//! Guarantees:
//! - Nothing is allocated for a frame above the node's largest request (`payload_bytes_max`
//!   plus a header): the client gets an `InvalidArgument` reply naming the bound, and the
//!   connection ends.
//! - Nothing before a session is proven costs the node much. A connection is *unproven* until its
//!   first request names a live session with its secret; that request's header (at most
//!   `REQUEST_HEADER_BYTES_MAX` bytes) is read and checked before anything else of it, so no
//!   larger buffer exists for a sender without a session, and the connection must send it within
//!   [`HANDSHAKE_DEADLINE`]. Unproven connections are bounded apart, [`UNPROVEN_CONNECTIONS_MAX`]
//!   in all and [`UNPROVEN_PER_SOURCE_MAX`] per source address: idle or half-sent connections
//!   cannot take the places of proven ones, and each is closed at its deadline.
//! - At most [`CONNECTIONS_PER_SESSION`] × `sessions_max` proven connections at once; past it the
//!   first request of a new one is refused (`Unreachable`) and the connection closed.
//! - A connection whose request is `Request::Pushes` of a live session (its secret checked)
//!   becomes that session's stream of push events (`push.rs`): answered `Done`, then only written
//!   to; one per session (a newer one replaces it), ending with the session. It no longer counts
//!   among the proven connections. On the Unix socket a large pushed item is passed as its
//!   segment; on TCP (a client on another host) it is written.
//! - Not offered on a node with TLS: a `tls/` or `quic/` client's requests stay on TLS.
//! - A refusal that ends a connection reaches its client, though the node may not have read the
//!   refused frame: the node lingers on the connection (`crate::linger`) instead of resetting it.
//! - The listeners and connections end with the node's worker threads ([`crate::Node::close`]).

use std::future::Future;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Error, Result};
use stampede_wire::shared;
use stampede_wire::{decode_request_head, DirectPath, FRAME_LENGTH_BYTES, REQUEST_HEADER_BYTES_MAX};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};

use crate::node::NodeShared;
use crate::places::{Unproven, UnprovenPlace};
use crate::serve::{self, Answer};

/// Connections a node accepts per session it may serve (a client keeps up to `IDLE_MAX`, 8,
/// idle ones and opens more while calls overlap).
pub const CONNECTIONS_PER_SESSION: usize = 16;

/// How long a new connection has to send the header of its first request, which must name a live
/// session with its secret (a client sends it as soon as it connects).
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(2);

/// Unproven connections (no request of a live session yet) the node holds at once, in all.
pub const UNPROVEN_CONNECTIONS_MAX: usize = 256;

/// Unproven connections from one source address (TCP; the Unix socket counts in all only).
pub const UNPROVEN_PER_SOURCE_MAX: usize = 32;

/// Replies up to this size are written in one system call, copied into one buffer; longer ones
/// (a large item) are written part after part, not copied.
const COPY_BYTES_MAX: usize = 64 * 1024;

/// Opens the node's direct sockets and starts accepting on `workers`: the abstract Unix socket
/// and one TCP port per `tcp/` endpoint. Returns what the hello announces (empty with TLS).
pub(crate) fn start(node: &Arc<NodeShared>, workers: &tokio::runtime::Handle) -> Result<DirectPath> {
    let options = &node.options;
    let mut offered = DirectPath::default();
    if options.tls.is_some() {
        return Ok(offered);
    }
    let _entered = workers.enter();
    let unreachable = |reason: String| Error::Unreachable { op: "serve", name: options.name.clone(), reason };
    let gates = Arc::new(Gates::new());
    for endpoint in &options.listen {
        let Some(address) = endpoint.strip_prefix("tcp/") else { continue };
        let Some((host, port)) = address.rsplit_once(':') else { continue };
        let Ok(port) = port.parse::<u16>() else { continue };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let listener = std::net::TcpListener::bind((host, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(tokio::net::TcpListener::from_std)
            .map_err(|e| unreachable(format!("the direct TCP port beside {endpoint} could not open: {e}")))?;
        let direct = listener.local_addr().map_err(|e| unreachable(e.to_string()))?.port();
        offered.tcp.push((port, direct));
        workers.spawn(accept_tcp(Arc::downgrade(node), listener, gates.clone()));
    }
    // The abstract name is this node's zenoh id: unique on the host, gone with the process, and
    // short (a node's name could exceed the 107 bytes a socket name may have).
    let name = format!("stampede/{}", node.zenoh.zid());
    let listener = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|address| std::os::unix::net::UnixListener::bind_addr(&address))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(tokio::net::UnixListener::from_std)
        .map_err(|e| unreachable(format!("the direct Unix socket @{name} could not open: {e}")))?;
    workers.spawn(accept_unix(Arc::downgrade(node), listener, gates));
    offered.unix = Some(name);
    Ok(offered)
}

async fn accept_tcp(node: Weak<NodeShared>, listener: tokio::net::TcpListener, gates: Arc<Gates>) {
    loop {
        match listener.accept().await {
            Ok((stream, source)) => {
                let _ = stream.set_nodelay(true);
                admit(&node, stream, Some(source.ip()), &gates);
            }
            Err(_) => backoff().await,
        }
    }
}

async fn accept_unix(node: Weak<NodeShared>, listener: tokio::net::UnixListener, gates: Arc<Gates>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => admit(&node, stream, None, &gates),
            Err(_) => backoff().await,
        }
    }
}

/// After a failed accept (out of file descriptors, say): the listener is tried again shortly,
/// not in a busy loop.
async fn backoff() {
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
}

/// The node's counts of direct connections: proven ones, and places for unproven ones.
struct Gates {
    proven: AtomicUsize,
    unproven: Arc<Unproven>,
}

impl Gates {
    fn new() -> Gates {
        Gates {
            proven: AtomicUsize::new(0),
            unproven: Unproven::new(UNPROVEN_CONNECTIONS_MAX, UNPROVEN_PER_SOURCE_MAX),
        }
    }

    /// A place for a connection that proved a session, if fewer than `max` hold one.
    fn proven_place(self: &Arc<Self>, max: usize) -> Option<ProvenPlace> {
        if self.proven.fetch_add(1, Ordering::SeqCst) >= max {
            self.proven.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(ProvenPlace(self.clone()))
    }
}

/// A proven connection's place, given back when dropped.
struct ProvenPlace(Arc<Gates>);

impl Drop for ProvenPlace {
    fn drop(&mut self) {
        self.0.proven.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves `stream` on its own task, if the node has room for another unproven connection (from
/// `source`); otherwise it is closed at once.
fn admit<S: Transport>(node: &Weak<NodeShared>, stream: S, source: Option<IpAddr>, gates: &Arc<Gates>) {
    let Some(place) = gates.unproven.place(source) else { return };
    let (node, gates) = (node.clone(), gates.clone());
    tokio::spawn(async move {
        let _ = connection(&node, stream, place, &gates).await;
    });
}

/// Answers the requests of one connection, one after another, until the client closes it, the
/// node goes, or a frame is out of bounds. While the connection is unproven each frame must start
/// within [`HANDSHAKE_DEADLINE`], and only its first `REQUEST_HEADER_BYTES_MAX` bytes are read
/// before its header is checked: a frame naming a live session with its secret proves the
/// connection; a longer one that does not is refused unread and the connection closed; a short one
/// (a hello, an open, or bytes that are no request) is answered as usual.
async fn connection<S: Transport>(
    node: &Weak<NodeShared>,
    mut stream: S,
    place: UnprovenPlace,
    gates: &Arc<Gates>,
) -> std::io::Result<()> {
    let mut unproven = Some(place);
    let mut _proven = None;
    loop {
        let head_max = if unproven.is_some() { REQUEST_HEADER_BYTES_MAX } else { usize::MAX };
        let read = read_head(node, &mut stream, head_max);
        let frame = match unproven {
            Some(_) => match tokio::time::timeout(HANDSHAKE_DEADLINE, read).await {
                Ok(frame) => frame?,
                Err(_) => return Ok(()), // nothing proven in time: closed
            },
            None => read.await?,
        };
        let Some((length, descriptor, mut message)) = frame else { return Ok(()) };
        // Upgraded again (within_bound did before the read): no strong handle is held across a
        // read a slow peer controls, so a node that closes is not kept alive by its connections.
        let Some(shared) = node.upgrade() else { return Ok(()) };
        if unproven.is_some() {
            let name = || shared.options.name.clone();
            if serve::proves_session(&shared, &message) {
                let connections_max = shared.options.sessions_max.saturating_mul(CONNECTIONS_PER_SESSION);
                let Some(proven) = gates.proven_place(connections_max) else {
                    let reason = format!("the node's direct path holds {connections_max} connections; try again");
                    let e = Error::Unreachable { op: "request", name: name(), reason };
                    return refuse(&mut stream, &e).await;
                };
                (_proven, unproven) = (Some(proven), None);
            } else if message.len() < length {
                let reason = "a request longer than a header on a direct connection must name a live session with \
                              its secret";
                return refuse(&mut stream, &Error::Closed { name: name(), reason }).await;
            }
        }
        read_rest(&mut stream, &mut message, length).await?;
        shared.direct_requests.fetch_add(1, Ordering::Relaxed);
        if let Some(pushes) = serve::pushes_to(&shared, &message) {
            // The connection becomes the session's stream of push events (`push.rs`).
            let answer = pushes.as_ref().map_or_else(serve::refusal, |_| serve::accepted());
            write_answer(&mut stream, &answer).await?;
            if let Ok(session) = pushes {
                crate::push::stream_to(&session, stream.into_events());
            }
            return Ok(());
        }
        let answer = match descriptor.map(|d| shared::map(d, shared.options.payload_bytes_max)).transpose() {
            Ok(passed) => serve::answer(&shared, &message, passed, serve::Alive::Token).await,
            Err(reason) => {
                serve::refusal(&Error::InvalidArgument { op: "request", name: shared.options.name.clone(), reason })
            }
        };
        drop((shared, message));
        write_answer(&mut stream, &answer).await?;
    }
}

/// A frame's length, the segment passed with it, and the start of its message: all of it when it
/// is at most `head_max` bytes, else what the reads brought until the request's header decodes or
/// `head_max` bytes came. `None` when the frame is out of bounds (refused) or the node is gone.
async fn read_head<S: Transport>(
    node: &Weak<NodeShared>,
    stream: &mut S,
    head_max: usize,
) -> std::io::Result<Option<(usize, Option<OwnedFd>, Vec<u8>)>> {
    let (length, descriptor) = stream.read_prefix().await?;
    if !within_bound(node, stream, length).await? {
        return Ok(None);
    }
    let mut head = Vec::new();
    if length <= head_max {
        read_rest(stream, &mut head, length).await?;
        return Ok(Some((length, descriptor, head)));
    }
    head.resize(head_max, 0);
    let mut filled = 0;
    while filled < head_max {
        match stream.read(&mut head[filled..]).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            read => filled += read,
        }
        if decode_request_head(&head[..filled]).is_ok() {
            break;
        }
    }
    head.truncate(filled);
    Ok(Some((length, descriptor, head)))
}

/// Whether a frame of `length` bytes is within the node's largest request; if not, the client
/// gets a refusal naming the bound (nothing is allocated for the frame) and `false` ends the
/// connection, as does the node being gone.
async fn within_bound<S: Transport>(node: &Weak<NodeShared>, stream: &mut S, length: usize) -> std::io::Result<bool> {
    let Some(node) = node.upgrade() else { return Ok(false) };
    let message_bytes_max = node.options.payload_bytes_max + REQUEST_HEADER_BYTES_MAX;
    if length <= message_bytes_max {
        return Ok(true);
    }
    let reason = format!("a request of {length} bytes (at most {message_bytes_max})");
    let e = Error::InvalidArgument { op: "request", name: node.options.name.clone(), reason };
    refuse(stream, &e).await?;
    Ok(false)
}

/// Answers the connection's frame with `e` before it is closed, lingering on it
/// ([`crate::linger`]): the frame may be unread, and a reset would fail the client's write of it.
async fn refuse<S: Transport>(stream: &mut S, e: &Error) -> std::io::Result<()> {
    write_answer(stream, &serve::refusal(e)).await?;
    crate::linger::linger(stream).await;
    Ok(())
}

/// Reads into `message` until it holds `length` bytes; `UnexpectedEof` if the stream ends first.
async fn read_rest<S: Transport>(stream: &mut S, message: &mut Vec<u8>, length: usize) -> std::io::Result<()> {
    let missing = length.saturating_sub(message.len());
    message.reserve_exact(missing);
    stream.take(missing as u64).read_to_end(message).await?;
    if message.len() < length {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// A connection that became a session's stream of push events (`push.rs`).
pub(crate) enum EventStream {
    /// On the Unix socket: a large pushed item passes as its segment.
    Unix(tokio::net::UnixStream),
    /// On TCP, from another host: every payload is written.
    Tcp(tokio::net::TcpStream),
}

/// Writes a push event, `answer`, on a session's stream of them (`push.rs`), as a reply.
pub(crate) async fn write_event(stream: &mut EventStream, answer: &Answer) -> std::io::Result<()> {
    match stream {
        EventStream::Unix(unix) => write_answer(unix, answer).await,
        EventStream::Tcp(tcp) => write_answer(tcp, answer).await,
    }
}

/// Writes `answer` as one frame. On a Unix socket an item's payload that is a shared-memory
/// segment is passed as one instead of written.
async fn write_answer<S: Transport>(stream: &mut S, answer: &Answer) -> std::io::Result<()> {
    let passed = match &answer.payloads[..] {
        [payload] if S::PASSES_SEGMENTS => shared::descriptor(payload),
        _ => None,
    };
    let payloads: &[Bytes] = if passed.is_some() { &[] } else { &answer.payloads };
    let length = answer.header.len() + payloads.iter().map(Bytes::len).sum::<usize>();
    let length = u32::try_from(length).map_err(|_| std::io::Error::other("a reply longer than a frame"))?;
    if let Some(descriptor) = passed {
        let prefix = length.to_le_bytes();
        let frame = [&prefix[..], &answer.header];
        let sent = stream.send_with(&frame, descriptor).await?;
        let rest: Vec<u8> = frame.concat().split_off(sent);
        return stream.write_all(&rest).await;
    }
    if length as usize <= COPY_BYTES_MAX {
        let mut frame = Vec::with_capacity(FRAME_LENGTH_BYTES + length as usize);
        frame.extend_from_slice(&length.to_le_bytes());
        frame.extend_from_slice(&answer.header);
        for payload in payloads {
            frame.extend_from_slice(payload);
        }
        return stream.write_all(&frame).await;
    }
    stream.write_all(&length.to_le_bytes()).await?;
    stream.write_all(&answer.header).await?;
    for payload in payloads {
        stream.write_all(payload).await?;
    }
    Ok(())
}

/// What the two kinds of connection do differently: only the Unix socket passes shared-memory
/// segments (`SCM_RIGHTS`).
trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    const PASSES_SEGMENTS: bool;

    /// Reads a frame's length, with the segment passed with it, if any.
    fn read_prefix(&mut self) -> impl Future<Output = std::io::Result<(usize, Option<OwnedFd>)>> + Send + '_;

    /// The connection as a stream of push events.
    fn into_events(self) -> EventStream;

    /// Sends the start of `parts` with `passed`: how many bytes went.
    fn send_with<'a>(
        &'a mut self,
        parts: &'a [&'a [u8]],
        passed: Arc<OwnedFd>,
    ) -> impl Future<Output = std::io::Result<usize>> + Send + 'a;
}

impl Transport for tokio::net::TcpStream {
    const PASSES_SEGMENTS: bool = false;

    async fn read_prefix(&mut self) -> std::io::Result<(usize, Option<OwnedFd>)> {
        let mut prefix = [0u8; FRAME_LENGTH_BYTES];
        self.read_exact(&mut prefix).await?;
        Ok((u32::from_le_bytes(prefix) as usize, None))
    }

    async fn send_with(&mut self, _: &[&[u8]], _: Arc<OwnedFd>) -> std::io::Result<usize> {
        Err(std::io::Error::other("a shared-memory segment cannot pass on TCP"))
    }

    fn into_events(self) -> EventStream {
        EventStream::Tcp(self)
    }
}

impl Transport for tokio::net::UnixStream {
    const PASSES_SEGMENTS: bool = true;

    async fn read_prefix(&mut self) -> std::io::Result<(usize, Option<OwnedFd>)> {
        let mut prefix = shared::Prefix::default();
        while !prefix.is_whole() {
            let unfilled = prefix.unfilled();
            let received = self.async_io(Interest::READABLE, || shared::receive_with(&*self, unfilled)).await?;
            prefix.received(received)?;
        }
        Ok(prefix.into_parts())
    }

    async fn send_with(&mut self, parts: &[&[u8]], passed: Arc<OwnedFd>) -> std::io::Result<usize> {
        self.async_io(Interest::WRITABLE, || shared::send_with(&*self, parts, passed.as_fd())).await
    }

    fn into_events(self) -> EventStream {
        EventStream::Unix(self)
    }
}
