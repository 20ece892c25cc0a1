//! The node's WebSocket endpoint (`--websocket`, docs/BROWSER.md): the browser client's way in.
//! A socket carries the requests of one session — the same wire messages, the same operations,
//! answered by `serve` exactly as those that come through zenoh or the direct path — each in a
//! binary message with the number the client gave its call:
//!
//! ```text
//! client → node   [call: u32 LE][request message]
//! node → client   [call: u32 LE][error text length: u32 LE][error text, UTF-8][reply message]
//! ```
//!
//! The error text is what every other client shows for the reply's error (the node renders it:
//! a browser has no Rust to), empty for a reply that is no error. Call 0 answers a message that
//! could not be taken as a call (too short, not binary, too large); the socket then closes.
//!
//! Guarantees:
//! - **Whose pages.** An upgrade from a browser page is admitted only from an allowed origin
//!   (`stampede_wire::origin`: `--allow-origin`; a node serves no page of its own); one without
//!   `Origin` (a program) always is. Refused: `403`, naming how to allow it.
//! - **One session per socket, living with it.** Until its session is open a socket may send only
//!   `Hello` and `Open`, each at most `REQUEST_HEADER_BYTES_MAX` bytes, and must open it within
//!   [`OPEN_DEADLINE`]; at most [`UNOPENED_SOCKETS_MAX`] sockets (and [`UNOPENED_PER_SOURCE_MAX`]
//!   per address) wait so, so nothing unproven costs the node much. Open, its messages may be as
//!   large as the node's payload bound allows, must name that session, and are served
//!   concurrently, [`CALLS_IN_FLIGHT_MAX`] at once (the socket reads no more until one ends, and
//!   writes the replies meanwhile).
//!   The session ends when the socket does, or after `Close`.
//! - **A silent client goes.** The node pings every socket each quarter of its liveliness
//!   timeout; one it heard nothing from (no message, no pong) for the whole timeout is closed,
//!   and its session with it. A browser answers pings itself, whatever its page's timers do, so a
//!   throttled background tab keeps its session and a closed or frozen one loses it.
//! - **Hostile bytes.** A message that is not a call, a request that does not decode, or one
//!   larger than allowed gets a typed error reply (`InvalidArgument`); the node stays up. A
//!   refusal that closes the socket reaches the client even when the node read only the start of
//!   the refused message: the node lingers on the socket (`crate::linger`) rather than reset it.
//! - **TLS as the node's.** A node with TLS (`NodeOptions::tls`) serves `wss://` with its
//!   certificate, and asks clients for theirs when its TLS is mutual; a handshake that fails
//!   closes the connection before anything else is read.
//! - The listener and the sockets end with the node's worker threads ([`crate::Node::close`]).

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use stampede_core::{Error, Result};
use stampede_wire::{decode_request_head, origin, Request, REQUEST_HEADER_BYTES_MAX};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request as Upgrade, Response};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{http, Message};
use tokio_tungstenite::WebSocketStream;

use crate::node::{NodeShared, TlsOptions};
use crate::places::{Unproven, UnprovenPlace};
use crate::serve::{self, Alive, Answer};

/// What a socket runs over: TCP, or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// How long a new socket has to upgrade and open its session.
pub const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// Sockets whose session is not open yet, in all.
pub const UNOPENED_SOCKETS_MAX: usize = 64;

/// Sockets whose session is not open yet, from one address.
pub const UNOPENED_PER_SOURCE_MAX: usize = 8;

/// Calls of one socket served at once.
pub const CALLS_IN_FLIGHT_MAX: usize = 64;

/// Bytes before a message's request or reply: the call's number.
const CALL_BYTES: usize = 4;

/// Opens the node's WebSocket listener on `address` (`[host:]port`; a bare port is on
/// 127.0.0.1) and starts accepting on `workers`. Returns the address it listens on.
pub(crate) fn start(node: &Arc<NodeShared>, workers: &tokio::runtime::Handle, address: &str) -> Result<SocketAddr> {
    let unreachable = |reason: String| Error::Unreachable { op: "serve", name: format!("websocket {address}"), reason };
    let socket = listen_address(address).map_err(|reason| Error::InvalidArgument {
        op: "serve",
        name: node.options.name.clone(),
        reason,
    })?;
    let tls = node.options.tls.as_ref().map(acceptor).transpose()?;
    let _entered = workers.enter();
    let listener = std::net::TcpListener::bind(socket)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(TcpListener::from_std)
        .map_err(|e| unreachable(format!("the WebSocket listener could not open: {e}")))?;
    let bound = listener.local_addr().map_err(|e| unreachable(e.to_string()))?;
    let unopened = Unproven::new(UNOPENED_SOCKETS_MAX, UNOPENED_PER_SOURCE_MAX);
    workers.spawn(accept(Arc::downgrade(node), listener, tls, unopened));
    Ok(bound)
}

/// The TLS side of the endpoint, from the node's TLS files: its certificate, and a check of
/// client certificates against its root CA when its TLS is mutual.
fn acceptor(tls: &TlsOptions) -> Result<TlsAcceptor> {
    let refuse = |what: &std::path::Path, e: &dyn std::fmt::Display| Error::InvalidArgument {
        op: "serve",
        name: "websocket".into(),
        reason: format!("{}: {e}", what.display()),
    };
    let read = |path: &std::path::Path| std::fs::read(path).map_err(|e| refuse(path, &e));
    let certificates = rustls_pemfile::certs(&mut read(&tls.certificate)?.as_slice())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| refuse(&tls.certificate, &e))?;
    let key = rustls_pemfile::private_key(&mut read(&tls.private_key)?.as_slice())
        .map_err(|e| refuse(&tls.private_key, &e))?
        .ok_or_else(|| refuse(&tls.private_key, &"no private key in the file"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| refuse(&tls.certificate, &e))?;
    let builder = match (&tls.root_ca, tls.mutual) {
        (Some(root_ca), true) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in rustls_pemfile::certs(&mut read(root_ca)?.as_slice()) {
                roots.add(ca.map_err(|e| refuse(root_ca, &e))?).map_err(|e| refuse(root_ca, &e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| refuse(root_ca, &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(certificates, key).map_err(|e| refuse(&tls.certificate, &e))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The socket address `[host:]port` names (a bare port: on 127.0.0.1, this machine only).
pub fn listen_address(address: &str) -> std::result::Result<SocketAddr, String> {
    let with_host = if address.contains(':') { address.to_owned() } else { format!("127.0.0.1:{address}") };
    with_host.parse().map_err(|_| {
        format!("--websocket {address:?} is neither a port nor an address with a port (8765, 0.0.0.0:8765, [::1]:8765)")
    })
}

async fn accept(node: Weak<NodeShared>, listener: TcpListener, tls: Option<TlsAcceptor>, unopened: Arc<Unproven>) {
    loop {
        let Ok((stream, source)) = listener.accept().await else {
            // Out of descriptors, most likely: let some close before trying again.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Some(place) = unopened.place(Some(source.ip())) else { continue };
        let _ = stream.set_nodelay(true);
        let loopback = stream.local_addr().is_ok_and(|a| a.ip().is_loopback());
        let node = node.clone();
        match tls.clone() {
            None => drop(tokio::spawn(socket(node, stream, loopback, place))),
            Some(tls) => drop(tokio::spawn(async move {
                if let Ok(Ok(stream)) = tokio::time::timeout(OPEN_DEADLINE, tls.accept(stream)).await {
                    socket(node, stream, loopback, place).await;
                }
            })),
        }
    }
}

/// One socket, from its upgrade to the end of its session.
async fn socket(node: Weak<NodeShared>, stream: impl Stream, loopback: bool, place: UnprovenPlace) {
    let opened = tokio::time::timeout(OPEN_DEADLINE, open(&node, stream, loopback)).await;
    drop(place);
    if let Ok(Some((ws, session))) = opened {
        let refused = serve_session(&node, ws, &session).await;
        if let Some(node) = node.upgrade() {
            let _ = tokio::task::spawn_blocking(move || node.close_session(&session)).await;
        }
        // Its session closed first: a socket lingered on holds no claim of the session's.
        if let Some(ws) = refused {
            linger(ws).await;
        }
    }
}

/// Upgrades `stream` and answers its `Hello`s until an `Open` opens its session: the socket,
/// reconfigured for the node's largest message, and the session's id. `None` when the socket
/// ended or sent anything else.
async fn open<S: Stream>(node: &Weak<NodeShared>, stream: S, loopback: bool) -> Option<(WebSocketStream<S>, String)> {
    let allowed = node.upgrade()?.options.allowed_origins.clone();
    // The result type is tungstenite's callback's: its error is an HTTP response, large by nature.
    #[allow(clippy::result_large_err)]
    let admit = |upgrade: &Upgrade, response: Response| {
        let origin = upgrade.headers().get(http::header::ORIGIN).and_then(|v| v.to_str().ok());
        match origin::admits(origin, None, loopback, &allowed) {
            Ok(()) => Ok(response),
            Err(reason) => {
                let mut refusal = ErrorResponse::new(Some(reason));
                *refusal.status_mut() = http::StatusCode::FORBIDDEN;
                Err(refusal)
            }
        }
    };
    let small = WebSocketConfig::default()
        .max_message_size(Some(CALL_BYTES + REQUEST_HEADER_BYTES_MAX))
        .max_frame_size(Some(CALL_BYTES + REQUEST_HEADER_BYTES_MAX));
    let mut ws = tokio_tungstenite::accept_hdr_async_with_config(stream, admit, Some(small)).await.ok()?;
    loop {
        let (call, message) = match take_call(ws.next().await?) {
            Taken::Call(call, message) => (call, message),
            Taken::Other => continue,
            Taken::Refused(e) => {
                refuse(&mut ws, &e).await;
                linger(ws).await;
                return None;
            }
        };
        let Ok(header) = decode_request_head(&message) else {
            let answer = serve::answer(&node.upgrade()?, &message, None, Alive::Socket).await;
            ws.send(reply(call, answer)).await.ok()?;
            continue;
        };
        if !matches!(header.request, Request::Hello | Request::Open { .. }) {
            let reason = "a WebSocket sends Hello and Open first; its other requests follow once its session is open";
            let e = Error::InvalidArgument { op: header.request.op(), name: header.session, reason: reason.into() };
            ws.send(reply(call, serve::refusal(&e))).await.ok()?;
            continue;
        }
        let answer = serve::answer(&node.upgrade()?, &message, None, Alive::Socket).await;
        // An `Open` that is no error is answered `Opened`.
        let opened = matches!(header.request, Request::Open { .. }) && answer.error.is_none();
        ws.send(reply(call, answer)).await.ok()?;
        if opened {
            // The client waits for Open's reply before it sends more (docs/BROWSER.md): nothing
            // is read ahead in the socket's buffer, so it can be taken out and wrapped again.
            let limit = CALL_BYTES + REQUEST_HEADER_BYTES_MAX + node.upgrade()?.options.payload_bytes_max;
            let large = WebSocketConfig::default().max_message_size(Some(limit)).max_frame_size(Some(limit));
            let ws = WebSocketStream::from_raw_socket(ws.into_inner(), Role::Server, Some(large)).await;
            return Some((ws, header.session));
        }
    }
}

/// Serves the calls of an open session's socket until it ends, goes silent or closes the session.
/// Returns the socket when it refused a message (to linger on once the session is closed).
async fn serve_session<S: Stream>(
    node: &Weak<NodeShared>,
    mut ws: WebSocketStream<S>,
    session: &str,
) -> Option<WebSocketStream<S>> {
    let liveliness = node.upgrade()?.options.liveliness_timeout;
    let (replies, mut outbox) = mpsc::channel::<Message>(CALLS_IN_FLIGHT_MAX);
    let calls = Arc::new(Semaphore::new(CALLS_IN_FLIGHT_MAX));
    let mut ping = tokio::time::interval(liveliness / 4);
    let mut heard = tokio::time::Instant::now();
    // The place of the next call, taken before its message is read and in a branch of its own:
    // waiting for one inside the read would stop the replies from being written, and the calls
    // holding the places wait for room for their replies (a deadlock seen with 200 calls at once).
    let mut place: Option<OwnedSemaphorePermit> = None;
    loop {
        tokio::select! {
            taken = calls.clone().acquire_owned(), if place.is_none() => {
                place = Some(taken.ok()?);
            }
            message = ws.next(), if place.is_some() => {
                let message = message?;
                heard = tokio::time::Instant::now();
                let (call, message) = match take_call(message) {
                    Taken::Call(call, message) => (call, message),
                    Taken::Other => continue,
                    Taken::Refused(e) => {
                        refuse(&mut ws, &e).await;
                        return Some(ws);
                    }
                };
                let permit = place.take()?;
                let node = node.upgrade()?;
                let (replies, session) = (replies.clone(), session.to_owned());
                tokio::spawn(async move {
                    let answer = answer_call(&node, &message, &session).await;
                    let _ = replies.send(reply(call, answer)).await;
                    drop(permit);
                });
            }
            Some(reply) = outbox.recv() => {
                if ws.send(reply).await.is_err() {
                    return None;
                }
            }
            _ = ping.tick() => {
                if heard.elapsed() > liveliness || ws.send(Message::Ping(Default::default())).await.is_err() {
                    return None;
                }
            }
        }
    }
}

/// The answer to a call on the socket of `session`: served if it is that session's.
async fn answer_call(node: &Arc<NodeShared>, message: &[u8], session: &str) -> Answer {
    let refuse = |op: &'static str, reason: &str| {
        serve::refusal(&Error::InvalidArgument { op, name: session.to_owned(), reason: reason.into() })
    };
    match decode_request_head(message) {
        Ok(header) if header.request == Request::Hello => {}
        Ok(header) if matches!(header.request, Request::Open { .. }) => {
            return refuse("connect", "this WebSocket's session is open already; one socket carries one session");
        }
        Ok(header) if header.session != session => {
            return refuse(header.request.op(), "a WebSocket carries the requests of the session it opened only");
        }
        // A request that does not decode gets the decoder's own error from `serve`.
        _ => {}
    }
    serve::answer(node, message, None, Alive::Socket).await
}

/// What one message of a socket is.
enum Taken {
    /// A call: its number and its request message (a slice of the WebSocket message: no copy).
    Call(u32, Bytes),
    /// A ping, a pong or a close: nothing to answer.
    Other,
    /// A message that is no call, or a read that failed (too large, a broken frame).
    Refused(Error),
}

fn take_call(message: std::result::Result<Message, tokio_tungstenite::tungstenite::Error>) -> Taken {
    let refused =
        |reason: String| Taken::Refused(Error::InvalidArgument { op: "request", name: "websocket".into(), reason });
    match message {
        Ok(Message::Binary(bytes)) if bytes.len() >= CALL_BYTES => {
            let call = u32::from_le_bytes(bytes[..CALL_BYTES].try_into().expect("CALL_BYTES bytes"));
            Taken::Call(call, bytes.slice(CALL_BYTES..))
        }
        Ok(Message::Binary(_)) => refused(format!("a message shorter than its call number ({CALL_BYTES} bytes)")),
        Ok(Message::Text(_)) => refused("a text message; calls are binary messages (docs/BROWSER.md)".into()),
        Ok(_) => Taken::Other,
        Err(e) => refused(format!("the message could not be read: {e}")),
    }
}

/// Answers call 0 with `e` and closes the socket; the caller then lingers on it ([`linger`]).
async fn refuse(ws: &mut WebSocketStream<impl Stream>, e: &Error) {
    let _ = ws.send(reply(0, serve::refusal(e))).await;
    let _ = ws.close(None).await;
}

/// Lingers on a refused socket ([`crate::linger`]) before it is dropped, so the refusal reaches
/// the client even when the node read only the start of the refused message.
async fn linger(ws: WebSocketStream<impl Stream>) {
    crate::linger::linger(&mut ws.into_inner()).await;
}

/// The message answering `call` with `answer` (its payloads copied in: one WebSocket message).
fn reply(call: u32, answer: Answer) -> Message {
    let text = answer.error.map(|e| Error::from(e).to_string()).unwrap_or_default();
    let length = answer.header.len() + answer.payloads.iter().map(|p| p.len()).sum::<usize>();
    let mut message = Vec::with_capacity(CALL_BYTES * 2 + text.len() + length);
    message.extend_from_slice(&call.to_le_bytes());
    message.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes());
    message.extend_from_slice(text.as_bytes());
    message.extend_from_slice(&answer.header);
    for payload in &answer.payloads {
        message.extend_from_slice(payload);
    }
    Message::Binary(message.into())
}
