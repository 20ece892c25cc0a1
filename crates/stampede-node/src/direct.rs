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
//! - At most [`CONNECTIONS_PER_SESSION`] × `sessions_max` connections at once; past it a new one
//!   is closed at once (the call that opened it fails `Unreachable`, as a lost reply).
//! - Not offered on a node with TLS: a `tls/` or `quic/` client's requests stay on TLS.
//! - The listeners and connections end with the node's worker threads ([`crate::Node::close`]).

use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use stampede_core::{Error, Result};
use stampede_wire::shared;
use stampede_wire::{DirectPath, FRAME_LENGTH_BYTES, REQUEST_HEADER_BYTES_MAX};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};

use crate::node::NodeShared;
use crate::serve::{self, Answer};

/// Connections a node accepts per session it may serve (a client keeps up to `IDLE_MAX`, 8,
/// idle ones and opens more while calls overlap).
pub const CONNECTIONS_PER_SESSION: usize = 16;

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
    let live = Arc::new(AtomicUsize::new(0));
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
        workers.spawn(accept_tcp(Arc::downgrade(node), listener, live.clone()));
    }
    // The abstract name is this node's zenoh id: unique on the host, gone with the process, and
    // short (a node's name could exceed the 107 bytes a socket name may have).
    let name = format!("stampede/{}", node.zenoh.zid());
    let listener = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|address| std::os::unix::net::UnixListener::bind_addr(&address))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(tokio::net::UnixListener::from_std)
        .map_err(|e| unreachable(format!("the direct Unix socket @{name} could not open: {e}")))?;
    workers.spawn(accept_unix(Arc::downgrade(node), listener, live));
    offered.unix = Some(name);
    Ok(offered)
}

async fn accept_tcp(node: Weak<NodeShared>, listener: tokio::net::TcpListener, live: Arc<AtomicUsize>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                admit(&node, stream, &live);
            }
            Err(_) => backoff().await,
        }
    }
}

async fn accept_unix(node: Weak<NodeShared>, listener: tokio::net::UnixListener, live: Arc<AtomicUsize>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => admit(&node, stream, &live),
            Err(_) => backoff().await,
        }
    }
}

/// After a failed accept (out of file descriptors, say): the listener is tried again shortly,
/// not in a busy loop.
async fn backoff() {
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
}

/// Serves `stream` on its own task, if the node has room for another connection.
fn admit<S: Transport>(node: &Weak<NodeShared>, stream: S, live: &Arc<AtomicUsize>) {
    let Some(shared) = node.upgrade() else { return };
    let connections_max = shared.options.sessions_max.saturating_mul(CONNECTIONS_PER_SESSION);
    if live.fetch_add(1, Ordering::SeqCst) >= connections_max {
        live.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let (node, live) = (node.clone(), live.clone());
    tokio::spawn(async move {
        let _ = connection(&node, stream).await;
        live.fetch_sub(1, Ordering::SeqCst);
    });
}

/// Answers the requests of one connection, one after another, until the client closes it, the
/// node goes, or a frame is out of bounds.
async fn connection<S: Transport>(node: &Weak<NodeShared>, mut stream: S) -> std::io::Result<()> {
    loop {
        let (length, descriptor) = stream.read_prefix().await?;
        let Some(node) = node.upgrade() else { return Ok(()) };
        let name = || node.options.name.clone();
        let message_bytes_max = node.options.payload_bytes_max + REQUEST_HEADER_BYTES_MAX;
        if length > message_bytes_max {
            let reason = format!("a request of {length} bytes (at most {message_bytes_max})");
            let e = Error::InvalidArgument { op: "request", name: name(), reason };
            write_answer(&mut stream, &serve::refusal(&e)).await?;
            return Ok(());
        }
        let mut message = Vec::with_capacity(length);
        (&mut stream).take(length as u64).read_to_end(&mut message).await?;
        if message.len() < length {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        node.direct_requests.fetch_add(1, Ordering::Relaxed);
        let answer = match descriptor.map(|d| shared::map(d, node.options.payload_bytes_max)).transpose() {
            Ok(passed) => serve::answer(&node, &message, passed).await,
            Err(reason) => serve::refusal(&Error::InvalidArgument { op: "request", name: name(), reason }),
        };
        drop((node, message));
        write_answer(&mut stream, &answer).await?;
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
}
