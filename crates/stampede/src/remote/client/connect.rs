//! Reaching a node and opening a session there: the zenoh session in client mode, the hello that
//! tells the node's name and bounds, the session's liveliness token, and `Open`.
//!
//! A node that is not there yet is tried again until the caller's timeout; the session's wait
//! slice is bounded by the node's and by a share of the lease ([`SLICES_PER_LEASE`]).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::{Error, Result};
use parking_lot::Mutex;
use zenoh::query::ConsolidationMode;
use zenoh::Wait;

use crate::remote::direct::Direct;
use crate::remote::runtime::{unexpected, RemoteRuntime};
use crate::remote::LIVELINESS_TIMEOUT_DEFAULT;
use crate::remote::{QUERY_MARGIN, REMOTE_WAIT_SLICE};
use crate::runtime::{ClientTls, ConnectOptions};
use stampede_core::name::check_name;
use stampede_wire::fabric;
use stampede_wire::session::{ClientSession, REPLY_GRACE};
use stampede_wire::{decode_reply, encode, DecodeError, Hello, Op, Outcome, Reply, Request, RequestHeader, Secret};

use super::{blocking, Client, Fabric};

/// Pause between attempts to reach a node that is not there yet.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A wait slice is at most this share of the lease, so that a reply that waited a whole slice
/// still has room within [`LEASE_SHARE`] of it.
///
/// [`LEASE_SHARE`]: stampede_wire::session::LEASE_SHARE
const SLICES_PER_LEASE: u32 = 4;

/// Connects to the node listening on `endpoint` (`tcp/127.0.0.1:7447`, `tls/<host>:<port>`, `quic/<host>:<port>`,
/// `unixsock-stream/<path>`) and opens a session there. `options.timeout`: how long to keep trying
/// to reach the node (`None`: as long as it takes). Errors: `Unreachable` when no node answers in
/// time (for a `tls/` endpoint, naming TLS and what to check), `InvalidArgument` for a malformed
/// endpoint, unusable TLS files or a node of another release (wire version mismatch).
///
/// The client API is blocking; call it outside async code (or in `spawn_blocking`).
///
/// `options.node`: the node to open the session on, reached through the one at `endpoint` and the
/// mesh of routers behind it (`None`: the node at `endpoint`).
pub(crate) fn connect(endpoint: &str, options: &ConnectOptions) -> Result<RemoteRuntime> {
    blocking(|| open(endpoint, options))
}

fn open(endpoint: &str, options: &ConnectOptions) -> Result<RemoteRuntime> {
    let node = options.node.as_deref();
    if let Some(node) = node {
        check_name("connect", node)?;
        if node.contains('/') {
            let reason = "a node's name is one segment (no '/')".to_owned();
            return Err(Error::InvalidArgument { op: "connect", name: node.to_owned(), reason });
        }
    }
    let tls = fabric_tls(options.tls.as_ref())?;
    let deadline = options.timeout.and_then(|t| Instant::now().checked_add(t));
    let (mut zenoh, mut hello) = reach(endpoint, node, tls, LIVELINESS_TIMEOUT_DEFAULT, deadline)?;
    let liveliness_timeout = Duration::from_millis(hello.liveliness_timeout_ms);
    if liveliness_timeout != LIVELINESS_TIMEOUT_DEFAULT {
        // The node detects a vanished client after the lease the client announces: announce the
        // node's liveliness timeout.
        let _ = zenoh.close().wait();
        (zenoh, hello) = reach(endpoint, node, tls, liveliness_timeout.max(Duration::from_millis(1)), deadline)?;
    }
    let unreachable = |reason: String| Error::Unreachable { op: "connect", name: endpoint.to_owned(), reason };
    let session = zenoh.zid().to_string();
    let token = zenoh
        .liveliness()
        .declare_token(fabric::session_key(&hello.node, &session))
        .wait()
        .map_err(|e| unreachable(format!("zenoh refused the session's liveliness token: {e}")))?;
    let rpc_key = zenoh
        .declare_keyexpr(fabric::rpc_key(&hello.node))
        .wait()
        .map_err(|e| unreachable(format!("zenoh refused the node's key: {e}")))?;
    // Asked not to, or through another node that runs elsewhere: zenoh carries the requests.
    let direct = match (options.zenoh_only, node) {
        (true, _) => None,
        (false, None) => Direct::reach(endpoint, &hello.direct),
        (false, Some(_)) => Direct::reach_elsewhere(&hello.direct),
    };
    let client = Client {
        zenoh: Fabric(Some(zenoh)),
        rpc_key,
        session,
        endpoint: endpoint.to_owned(),
        wait_slice: REMOTE_WAIT_SLICE
            .min(Duration::from_millis(hello.wait_slice_ms))
            .min(liveliness_timeout / SLICES_PER_LEASE),
        hello,
        token: Mutex::new(Some(token)),
        ended: Mutex::new(None),
        closed: AtomicBool::new(false),
        reclaims: Mutex::new(None),
        unfinished: Mutex::new(Vec::new()),
        secret: std::sync::OnceLock::new(),
        protocol: Mutex::new(ClientSession::new(liveliness_timeout)),
        #[cfg(feature = "faults")]
        lose_replies: options.lose_replies.clone(),
        shadows: Mutex::default(),
        direct,
        prefetching: super::push::Prefetching::new(liveliness_timeout),
        prefetch: options.prefetch,
        consumes: Default::default(),
        sent: Default::default(),
    };
    let (user, password) = match &options.user {
        Some(credentials) => (Some(credentials.user.clone()), Some(credentials.password.clone())),
        None => (None, None),
    };
    // The node answers `Open` once it sees the session's liveliness token, which it waits for up
    // to its liveliness timeout: the query waits that long too (and the usual margin), but not
    // past the caller's deadline — without a call's grace after it: a connect that fails still
    // closes its half-open zenoh session within the 100 ms a call may overrun.
    let strict = deadline.map(|d| d.checked_sub(REPLY_GRACE).unwrap_or(d));
    match client.call_on(Request::Open { user, password }, None, liveliness_timeout, None, strict)? {
        (Reply::Opened(secret), _) => {
            let _ = client.secret.set(secret);
            client.exchange_trace_clocks(false);
        }
        _ => return Err(unexpected("connect", client.node())),
    }
    Ok(RemoteRuntime::new(client, options))
}

/// Opens a zenoh session to `endpoint` and greets the node there (or `node`, through it),
/// retrying until `deadline`.
fn reach(
    endpoint: &str,
    node: Option<&str>,
    tls: Option<fabric::Tls<'_>>,
    lease: Duration,
    deadline: Option<Instant>,
) -> Result<(zenoh::Session, Hello)> {
    let unreachable = |reason: String| Error::Unreachable { op: "connect", name: endpoint.to_owned(), reason };
    let mut config = fabric::client_config(endpoint, lease, tls)?;
    let zenoh = loop {
        // Each attempt ends by the deadline, even against a listener that never speaks.
        fabric::bound_open(&mut config, left(deadline).unwrap_or(fabric::OPEN_TIMEOUT_MAX))?;
        match zenoh::open(config.clone()).wait() {
            Ok(zenoh) => break zenoh,
            Err(_) if deadline.is_none_or(|d| Instant::now() + CONNECT_RETRY_PAUSE < d) => {
                std::thread::sleep(CONNECT_RETRY_PAUSE);
            }
            // zenoh logs why a TLS handshake failed but returns only that it could not connect.
            Err(e) if fabric::is_tls(endpoint) => {
                return Err(unreachable(format!(
                    "no node answers there ({}); {}",
                    brief(&e),
                    fabric::TLS_HANDSHAKE_HINT
                )))
            }
            Err(e) => return Err(unreachable(format!("no node answers there ({})", brief(&e)))),
        }
    };
    loop {
        match greet(&zenoh, endpoint, node, deadline) {
            Ok(hello) => return Ok((zenoh, hello)),
            // A node behind the router may not be routed to yet.
            Err(Error::Unreachable { .. }) if deadline.is_none_or(|d| Instant::now() + CONNECT_RETRY_PAUSE < d) => {
                std::thread::sleep(CONNECT_RETRY_PAUSE);
            }
            Err(e) => {
                let _ = zenoh.close().wait();
                return Err(e);
            }
        }
    }
}

/// The files of `tls` as the fabric takes them; a certificate without its private key (or the
/// reverse) is `InvalidArgument`.
fn fabric_tls(tls: Option<&ClientTls>) -> Result<Option<fabric::Tls<'_>>> {
    let Some(tls) = tls else { return Ok(None) };
    let identity = match (&tls.certificate, &tls.private_key) {
        (Some(certificate), Some(private_key)) => Some((certificate.as_path(), private_key.as_path())),
        (None, None) => None,
        _ => {
            let reason = "a client certificate needs its private key, and the reverse".to_owned();
            return Err(Error::InvalidArgument { op: "connect", name: "tls".to_owned(), reason });
        }
    };
    Ok(Some(fabric::Tls { root_ca: tls.root_ca.as_deref(), identity, mutual: identity.is_some() }))
}

/// The time left until `deadline` (`None`: no deadline); zero once it passed.
fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()))
}

/// A zenoh error's message without the source location zenoh appends to it.
fn brief(e: &zenoh::Error) -> String {
    let text = e.to_string();
    text.split("  at ").next().unwrap_or(&text).trim().to_owned()
}

/// Asks every node reachable for its [`Hello`] (or only `node`); keeps `node`'s, else the one
/// this client is connected to.
fn greet(zenoh: &zenoh::Session, endpoint: &str, node: Option<&str>, deadline: Option<Instant>) -> Result<Hello> {
    let unreachable = |reason: String| Error::Unreachable { op: "connect", name: endpoint.to_owned(), reason };
    let message = encode(&RequestHeader::new("", Secret::default(), Request::Hello));
    let replies = zenoh
        .get(fabric::rpc_key(node.unwrap_or("*")))
        .payload(message)
        .consolidation(ConsolidationMode::None)
        .timeout(left(deadline).map_or(QUERY_MARGIN, |left| left.min(QUERY_MARGIN)))
        .wait()
        .map_err(|e| unreachable(format!("zenoh refused the query: {e}")))?;
    let routers: Vec<String> = zenoh.info().routers_zid().wait().map(|zid| zid.to_string()).collect();
    let mut hellos = Vec::new();
    let mut unreadable = None;
    while let Ok(reply) = replies.recv() {
        let Ok(sample) = reply.into_result() else { continue };
        let bytes = sample.payload().to_bytes();
        match decode_reply(&bytes) {
            Ok((Reply::Hello(hello), _)) if node.is_some_and(|n| n == hello.node) => return Ok(hello),
            Ok((Reply::Hello(hello), _)) if node.is_none() && routers.contains(&hello.zid) => return Ok(hello),
            Ok((Reply::Hello(hello), _)) => hellos.push(hello),
            Ok((other, _)) => return Err(unreachable(format!("the node answered hello with {other:?}"))),
            // Perhaps another node, of another release: it fails the connect only if no node
            // this client may talk to answers.
            Err(e) => unreadable = Some(e),
        }
    }
    let refuse =
        |e: DecodeError| Error::InvalidArgument { op: "connect", name: endpoint.to_owned(), reason: e.to_string() };
    match (node, hellos.into_iter().next(), unreadable) {
        (_, _, Some(e)) => Err(refuse(e)),
        (None, Some(hello), None) => Ok(hello),
        (Some(node), _, None) => Err(unreachable(format!("node {node} does not answer through this endpoint (yet)"))),
        (None, None, None) => Err(unreachable("no Stampede node answered there".into())),
    }
}

impl Client {
    /// The names of the nodes that answer a hello on the fabric, sorted.
    pub(crate) fn nodes(&self) -> Result<Vec<String>> {
        self.check_open("nodes")?;
        let unreachable = |reason: String| Error::Unreachable { op: "nodes", name: self.node().to_owned(), reason };
        let message = encode(&RequestHeader::new("", Secret::default(), Request::Hello));
        let replies = blocking(|| {
            self.zenoh
                .get(fabric::rpc_key("*"))
                .payload(message)
                .consolidation(ConsolidationMode::None)
                .timeout(QUERY_MARGIN)
                .wait()
        })
        .map_err(|e| unreachable(format!("zenoh refused the query: {e}")))?;
        let mut nodes = Vec::new();
        while let Ok(reply) = replies.recv() {
            let Ok(sample) = reply.into_result() else { continue };
            if let Ok((Reply::Hello(hello), _)) = decode_reply(&sample.payload().to_bytes()) {
                nodes.push(hello.node);
            }
        }
        nodes.sort();
        nodes.dedup();
        Ok(nodes)
    }

    /// Logs timestamp exchanges with the node's host when this process traces: at the session's
    /// start and end (`at_end`), so that the post-mortem merge maps the hosts' clocks onto one
    /// another, drift included (`docs/TRACING.md`).
    pub(super) fn exchange_trace_clocks(&self, at_end: bool) {
        if !crate::trace::enabled() {
            return;
        }
        crate::trace::exchange_clocks(at_end, || match self.call(Op::TraceClock, None, Duration::ZERO) {
            Ok((Outcome::TraceClock { host, received_ns, replied_ns }, _)) => Some((host, received_ns, replied_ns)),
            _ => None,
        });
    }
}
