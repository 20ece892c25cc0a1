//! The client's side of the fabric: connecting to a node, its session, and one request.
//!
//! [`connect`] opens a zenoh session in client mode to the node's endpoint, asks the node its name
//! and bounds ([`Request::Hello`]), declares the session's liveliness token
//! `stampede/<node>/session/<id>` and opens the session. Every later call is one zenoh query on
//! `stampede/<node>/rpc` with a timeout of the wait it asks for plus [`QUERY_MARGIN`].
//!
//! **No lost items.** A blocking get asks the node to wait at most the node's wait slice; the node
//! replies with the item or "not yet" within it, and the client asks again until its own
//! deadline. A request whose lost reply would leave something held on the node ([`Request::holds_on_node`]) whose reply does not come
//! within the slice plus the margin ends the session: the client withdraws its liveliness token,
//! the node closes the session, and whatever the lost reply carried goes back on the node. A dead
//! client's token disappears with it, to the same effect. So an item is never taken by a client
//! that is alive and does not see it.
//!
//! **Requests at most once.** Every request of the session but `Open` and those sent without
//! waiting carries a number; the node runs a numbered request once and answers a repeat with the
//! first answer (`stampede-node`'s `replies.rs`). So a request whose reply was lost is sent again
//! ([`REQUEST_RETRIES`] times) with its number: a retried put is not stored twice, a retried get
//! receives the item the first one took. Each reply read is acknowledged in a later request's
//! header, and the node then forgets it. Only when the retries' replies are lost too does the
//! session end, as above.
//!
//! **Nothing delivered after its session ended.** The node ends a session whose client went
//! silent no sooner than the lease (its liveliness timeout) after the client's last message, and
//! the client's zenoh session sends a message at least every quarter lease. So the reply to a
//! request that may hold something on the node is taken only within [`LEASE_SHARE`] (half) of the
//! lease after the request was sent (and within the call's own deadline), and only while this
//! client has not closed or ended the session: a reply read later — the process was stopped,
//! starved or paused past its lease — is dropped, the call fails `Closed`, and the session is
//! ended, so that whatever the reply carried stays with the node, which gave it back or reclaimed
//! it (or does so now).

use crate::trace::{self, Kind};
use std::borrow::Cow;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Error, Result};
use bytes::Bytes;
use parking_lot::Mutex;
use zenoh::bytes::ZBytes;
use zenoh::key_expr::KeyExpr;
use zenoh::liveliness::LivelinessToken;
use zenoh::query::ConsolidationMode;
use zenoh::Wait;

use crate::payload::Buffers;
use crate::remote::direct::Direct;
use crate::remote::reclaim::{ContainerHandler, Dispatch, GlobalHandler};
use crate::remote::runtime::{unexpected, RemoteRuntime};
use crate::remote::LIVELINESS_TIMEOUT_DEFAULT;
use crate::remote::{CLIENT_CLOSED, QUERY_MARGIN, REMOTE_WAIT_SLICE, REPLY_LATE};
use crate::runtime::{ClientTls, ConnectOptions};
use crate::wait::{Changed, Signal};
use stampede_core::name::check_name;
use stampede_wire::{
    decode_reply, decode_reply_passed, encode, DecodeError, Handle, Hello, Reply, Request, RequestHeader, Secret,
    ACKS_MAX,
};
use stampede_wire::{fabric, shared};

/// Most requests sent without waiting (drops) whose replies are not yet waited for; one more
/// waits for them first.
const UNFINISHED_SENDS_MAX: usize = 256;

/// Pause between attempts to reach a node that is not there yet.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How many times a request whose reply was lost is sent again (with its number, so that the
/// node answers it without running it twice) before the call gives up.
pub const REQUEST_RETRIES: u32 = 1;

/// The share of the lease after sending a request that may hold something on the node within
/// which its reply is taken. The node ends a silent session a lease after the last message of
/// the client's zenoh session, which sends one (a keep-alive, if nothing else) at least every
/// quarter lease — a request on the direct path is not one of them: so not before ¾ of the lease
/// after any request. The rest is room for the two hosts' clocks and the instants between this
/// check and the caller.
const LEASE_SHARE: f64 = 0.5;

/// A wait slice is at most this share of the lease, so that a reply that waited a whole slice
/// still has room within [`LEASE_SHARE`] of it.
const SLICES_PER_LEASE: u32 = 4;

/// What one try of a request brings: its reply (with the payload that follows it), or why none
/// came in time.
type Exchange = std::result::Result<(Reply, Bytes), String>;

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
        lease: liveliness_timeout,
        hello,
        token: Mutex::new(Some(token)),
        ended: Mutex::new(None),
        closed: AtomicBool::new(false),
        reclaims: Mutex::new(None),
        unfinished: Mutex::new(Vec::new()),
        secret: std::sync::OnceLock::new(),
        next_seq: AtomicU64::new(1),
        acks: Mutex::default(),
        #[cfg(feature = "faults")]
        lose_replies: options.lose_replies.clone(),
        shadows: Mutex::default(),
        direct,
    };
    let (user, password) = match &options.user {
        Some(credentials) => (Some(credentials.user.clone()), Some(credentials.password.clone())),
        None => (None, None),
    };
    // The node answers `Open` once it sees the session's liveliness token, which it waits for up
    // to its liveliness timeout: the query waits that long too (and the usual margin).
    match client.call_on(Request::Open { user, password }, None, liveliness_timeout, None)? {
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
    let config = fabric::client_config(endpoint, lease, tls)?;
    let zenoh = loop {
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
        match greet(&zenoh, endpoint, node) {
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

/// A zenoh error's message without the source location zenoh appends to it.
fn brief(e: &zenoh::Error) -> String {
    let text = e.to_string();
    text.split("  at ").next().unwrap_or(&text).trim().to_owned()
}

/// Asks every node reachable for its [`Hello`] (or only `node`); keeps `node`'s, else the one
/// this client is connected to.
fn greet(zenoh: &zenoh::Session, endpoint: &str, node: Option<&str>) -> Result<Hello> {
    let unreachable = |reason: String| Error::Unreachable { op: "connect", name: endpoint.to_owned(), reason };
    let message = encode(&RequestHeader::new("", Secret::default(), Request::Hello));
    let replies = zenoh
        .get(fabric::rpc_key(node.unwrap_or("*")))
        .payload(message)
        .consolidation(ConsolidationMode::None)
        .timeout(QUERY_MARGIN)
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

/// A client's connection to one node: its zenoh session and its Stampede session there.
pub(crate) struct Client {
    zenoh: Fabric,
    rpc_key: KeyExpr<'static>,
    /// The session id (this zenoh session's id).
    session: String,
    endpoint: String,
    pub(crate) hello: Hello,
    /// The longest wait one request asks of the node.
    wait_slice: Duration,
    /// After how long without a message from this client the node ends its session (its
    /// liveliness timeout, which this client announced as its lease).
    lease: Duration,
    /// Dropped (undeclared) when the session ends, which makes the node close it.
    token: Mutex<Option<LivelinessToken>>,
    /// Why the session ended early (a lost reply), if it did.
    ended: Mutex<Option<String>>,
    closed: AtomicBool,
    /// The GC handlers registered through this client, once one is.
    reclaims: Mutex<Option<Arc<Dispatch>>>,
    /// Replies of requests sent without waiting (drops), waited for before the next call.
    unfinished: Mutex<Vec<zenoh::handlers::FifoChannelHandler<zenoh::query::Reply>>>,
    /// The session's secret, once the node opened it.
    secret: std::sync::OnceLock<Secret>,
    /// The next request number (`RequestHeader::seq`; 0 is never used).
    next_seq: AtomicU64,
    /// Numbers of requests whose replies were read and not yet acknowledged to the node.
    acks: Mutex<Vec<u64>>,
    /// Replies to drop on arrival, as if lost (tests only).
    #[cfg(feature = "faults")]
    lose_replies: Option<Arc<crate::remote::faults::LoseReplies>>,
    /// The shadows of this session's tasks on other nodes: `(node, shadow's handle there)` to
    /// the task's handle here (what a graph of several nodes folds into one task).
    pub(crate) shadows: Mutex<std::collections::HashMap<(String, Handle), Handle>>,
    /// The node's own sockets, where it offers them and this client reaches them
    /// (`direct.rs`); `None`: every request is a zenoh query.
    direct: Option<Direct>,
}

impl Client {
    /// The header of request `seq` (0: not numbered) of this session, acknowledging the replies
    /// read since the last header said so.
    fn header(&self, seq: u64, request: Request) -> RequestHeader {
        let secret = self.secret.get().copied().unwrap_or_default();
        let acks = {
            let mut acks = self.acks.lock();
            let keep = acks.len().saturating_sub(ACKS_MAX);
            acks.split_off(keep)
        };
        RequestHeader { seq, acks, ..RequestHeader::new(self.session.clone(), secret, request) }
    }

    /// The number of a new request: 0 for `Open` (answered before the session exists).
    fn number(&self, request: &Request) -> u64 {
        match request {
            Request::Open { .. } => 0,
            _ => self.next_seq.fetch_add(1, Ordering::SeqCst),
        }
    }

    /// Whether to send request `seq` again after this try's `answer`, `taken` after sending it:
    /// its reply was lost, it is numbered, retries are left (counted in `tries`), the client is
    /// open, and the node cannot have ended the session meanwhile.
    fn retries(&self, seq: u64, answer: &Exchange, taken: Duration, tries: &mut u32) -> bool {
        let retry = answer.is_err() && seq != 0 && *tries < REQUEST_RETRIES && !self.is_closed() && taken < self.lease;
        *tries += u32::from(retry);
        retry
    }

    /// `answer` to `op`, or a lost reply where a test's fault injection says so.
    fn injected(&self, op: &'static str, answer: Exchange) -> Exchange {
        #[cfg(feature = "faults")]
        if answer.is_ok() && self.lose_replies.as_ref().is_some_and(|lose| lose.lose(op)) {
            return Err(format!("the reply to {op} was lost on purpose (a test's fault)"));
        }
        let _ = op;
        answer
    }

    /// The node's name.
    pub(crate) fn node(&self) -> &str {
        &self.hello.node
    }

    /// The endpoint this client connected to.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One request and its reply (with the payload that follows it). `wait` is how long the node
    /// may wait before answering. The node's errors come back unchanged; fabric trouble is
    /// `Unreachable`, and ends the session if the request may have taken items.
    pub(crate) fn call(&self, request: Request, payload: Option<Bytes>, wait: Duration) -> Result<(Reply, Bytes)> {
        self.call_on(request, payload, wait, self.direct_path())
    }

    /// [`call`](Self::call) as a zenoh query, whatever path the session's requests take: the
    /// node serves it after the declarations this client made on zenoh before it (a watch's
    /// subscribers), which a request on the direct path may overtake.
    pub(crate) fn call_after_declarations(&self, request: Request) -> Result<(Reply, Bytes)> {
        self.call_on(request, None, Duration::ZERO, None)
    }

    /// A buffer pool for an output of this session: its large copies are shared-memory segments
    /// when requests take the node's Unix socket (they are passed, not written).
    pub(crate) fn buffers(&self) -> Arc<Buffers> {
        match &self.direct {
            Some(direct) if direct.passes_segments() => Arc::new(Buffers::shared()),
            _ => Arc::default(),
        }
    }

    /// Whether requests take the direct path now (then [`send`](Self::send) writes at once, and
    /// every later call sees the send applied).
    pub(crate) fn sends_directly(&self) -> bool {
        self.direct_path().is_some()
    }

    /// The direct path, while the session has no GC handlers: the items a request reclaims reach
    /// the client's handlers on zenoh before the reply only when the reply takes zenoh too.
    fn direct_path(&self) -> Option<&Direct> {
        self.direct.as_ref().filter(|_| self.reclaims.lock().is_none())
    }

    fn call_on(
        &self,
        request: Request,
        payload: Option<Bytes>,
        wait: Duration,
        direct: Option<&Direct>,
    ) -> Result<(Reply, Bytes)> {
        let op = request.op();
        self.check_open(op)?;
        let holds_on_node = request.holds_on_node();
        let seq = self.number(&request);
        let answer = blocking(|| {
            self.finish_sends();
            if direct.is_none() {
                self.finish_direct_sends();
            }
            let mut tries = 0;
            loop {
                let sent = Instant::now();
                let answer = self.exchange(seq, request.clone(), payload.clone(), wait, direct);
                let answer = (self.injected(op, answer), sent.elapsed());
                if !self.retries(seq, &answer.0, answer.1, &mut tries) {
                    break answer;
                }
            }
        });
        let dispatch = self.reclaims.lock().clone();
        if let Some(dispatch) = dispatch {
            // The node sent the items this request reclaimed before its reply: run their
            // handlers before the call returns, as embedded.
            dispatch.barrier();
        }
        self.conclude(op, seq, holds_on_node, wait, answer)
    }

    /// Registers a GC handler: `Global` for every channel and queue of the node, `Container`
    /// for one (its id). Handlers run on the client's reclaim thread (see `reclaim.rs`).
    pub(crate) fn on_reclaim(&self, handler: Registration) -> Result<()> {
        self.check_open("on_reclaim")?;
        let dispatch = {
            let mut reclaims = self.reclaims.lock();
            match &*reclaims {
                Some(dispatch) => dispatch.clone(),
                None => {
                    let key = fabric::reclaimed_key(self.node(), &self.session);
                    let dispatch = blocking(|| Dispatch::start(&self.zenoh, key)).map_err(|e| Error::Unreachable {
                        op: "on_reclaim",
                        name: self.node().to_owned(),
                        reason: format!("the reclaim subscriber could not start: {e}"),
                    })?;
                    reclaims.insert(Arc::new(dispatch)).clone()
                }
            }
        };
        let container = match handler {
            Registration::Global(handler) => {
                dispatch.add_global(handler);
                None
            }
            Registration::Container(id, handler) => {
                dispatch.add_container(id, handler);
                Some(id)
            }
        };
        self.done(Request::OnReclaim { container })
    }

    /// A call's result from the exchange's (and how long after sending the request it ended):
    /// the node's error unchanged, fabric trouble as `Unreachable` (ending the session when the
    /// request may have taken items), and the reply of a request that may hold something on the
    /// node only while the session lives and within its deadline — else the call fails `Closed`
    /// and the session ends (so does a lost reply waited for a whole lease: the process was
    /// stopped or starved past it, and the node may have ended the session meanwhile).
    fn conclude(
        &self,
        op: &'static str,
        seq: u64,
        holds_on_node: bool,
        wait: Duration,
        (answer, taken): (Exchange, Duration),
    ) -> Result<(Reply, Bytes)> {
        if answer.is_ok() && seq != 0 {
            // Read, late or not: the node may forget it.
            self.acks.lock().push(seq);
        }
        let late = holds_on_node
            && match &answer {
                Ok(_) => taken > self.reply_deadline(true, wait),
                Err(_) => taken >= self.lease,
            };
        match answer {
            Ok((Reply::Error(e), _)) => Err(e.into()),
            Ok(answer) if !holds_on_node => Ok(answer),
            _ if late && !self.is_closed() => {
                self.end(format!("a reply to {op} was not read within {taken:?} of its request"));
                Err(Error::Closed { name: self.node().to_owned(), reason: REPLY_LATE })
            }
            // Closed or ended by another thread meanwhile: the node gave back what the reply
            // carried, or will.
            Ok(answer) => self.check_open(op).map(|()| answer),
            // Closed while the call was under way (another thread): as embedded, the call ends
            // `Closed`; whatever it may have taken went back with the session.
            Err(_) if self.closed.load(Ordering::SeqCst) => {
                Err(Error::Closed { name: self.node().to_owned(), reason: CLIENT_CLOSED })
            }
            Err(reason) => {
                if holds_on_node {
                    self.end(format!("a reply to {op} was lost ({reason})"));
                }
                Err(Error::Unreachable { op, name: self.node().to_owned(), reason })
            }
        }
    }

    /// [`call`](Self::call) without blocking a thread.
    pub(crate) async fn call_async(
        &self,
        request: Request,
        payload: Option<Bytes>,
        wait: Duration,
    ) -> Result<(Reply, Bytes)> {
        let op = request.op();
        self.check_open(op)?;
        let holds_on_node = request.holds_on_node();
        self.finish_sends_async().await;
        // Reads replies that came long ago, in the usual case: a short block at most.
        blocking(|| self.finish_direct_sends());
        let seq = self.number(&request);
        let mut tries = 0;
        let answer = loop {
            let sent = Instant::now();
            let answer = self.exchange_async(seq, request.clone(), payload.clone(), wait).await;
            let answer = (self.injected(op, answer), sent.elapsed());
            if !self.retries(seq, &answer.0, answer.1, &mut tries) {
                break answer;
            }
        };
        let dispatch = self.reclaims.lock().clone();
        if let Some(dispatch) = dispatch {
            dispatch.barrier_async().await;
        }
        self.conclude(op, seq, holds_on_node, wait, answer)
    }

    /// The client's zenoh session.
    pub(crate) fn zenoh(&self) -> &zenoh::Session {
        &self.zenoh
    }

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

    /// A request answered by a new handle (a task, a connection).
    pub(crate) fn handle(&self, request: Request) -> Result<Handle> {
        let op = request.op();
        match self.call(request, None, Duration::ZERO)?.0 {
            Reply::Handle(handle) => Ok(handle),
            _ => Err(unexpected(op, self.node())),
        }
    }

    /// A request answered by `Done`.
    pub(crate) fn done(&self, request: Request) -> Result<()> {
        let op = request.op();
        match self.call(request, None, Duration::ZERO)?.0 {
            Reply::Done => Ok(()),
            _ => Err(unexpected(op, self.node())),
        }
    }

    /// [`call`](Self::call) for a request that may wait (a get, a put into a full container):
    /// asks in slices of at most the node's wait slice, again while the answer is "not yet" and
    /// `timeout` (`None`: forever) has not expired; the last "not yet" is the call's error.
    pub(crate) fn call_waiting(
        &self,
        timeout: Option<Duration>,
        payload: Option<Bytes>,
        request: impl Fn(u64) -> Request,
    ) -> Result<(Reply, Bytes)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let wait = self.slice(deadline);
            match self.call(request(micros(wait)), payload.clone(), wait) {
                Err(e) if e.is_transient() && deadline.is_none_or(|d| Instant::now() < d) => {}
                done => return done,
            }
        }
    }

    /// [`call_waiting`](Self::call_waiting) without blocking a thread.
    pub(crate) async fn call_waiting_async(
        &self,
        timeout: Option<Duration>,
        payload: Option<Bytes>,
        request: impl Fn(u64) -> Request,
    ) -> Result<(Reply, Bytes)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let wait = self.slice(deadline);
            match self.call_async(request(micros(wait)), payload.clone(), wait).await {
                Err(e) if e.is_transient() && deadline.is_none_or(|d| Instant::now() < d) => {}
                done => return done,
            }
        }
    }

    /// The next slice of a wait that ends at `deadline` (`None`: never).
    pub(crate) fn slice(&self, deadline: Option<Instant>) -> Duration {
        match deadline {
            None => self.wait_slice,
            Some(d) => d.saturating_duration_since(Instant::now()).min(self.wait_slice),
        }
    }

    /// Sends `request` without waiting for its reply (drops and detaches).
    pub(crate) fn send(&self, request: Request) {
        if self.check_open(request.op()).is_err() {
            return;
        }
        blocking(|| self.send_now(request));
    }

    fn send_now(&self, request: Request) {
        if let Some(direct) = self.direct_path() {
            let header = encode(&self.header(0, request));
            // A send that fails is as one whose query fails: the node goes or is gone.
            let _ = direct.send(&[&header]);
            return;
        }
        if self.unfinished.lock().len() >= UNFINISHED_SENDS_MAX {
            self.finish_sends();
        }
        let message = encode(&self.header(0, request));
        let query = self.zenoh.get(&self.rpc_key).payload(message).consolidation(ConsolidationMode::None);
        if let Ok(replies) = query.timeout(QUERY_MARGIN).wait() {
            self.unfinished.lock().push(replies);
        }
    }

    /// Waits for the replies of the requests sent without waiting (drops), each at most until
    /// its query times out: a call made after a drop sees the drop's effect on the node, as
    /// embedded, although the node serves requests concurrently.
    fn finish_sends(&self) {
        let unfinished = std::mem::take(&mut *self.unfinished.lock());
        for replies in unfinished {
            let _ = replies.recv();
        }
    }

    /// Waits until the node applied the sends of the direct path, for a request that does not
    /// follow them on their connection (a zenoh query).
    fn finish_direct_sends(&self) {
        if let Some(direct) = &self.direct {
            direct.finish_sends(QUERY_MARGIN);
        }
    }

    /// [`finish_sends`](Self::finish_sends) without blocking a thread.
    async fn finish_sends_async(&self) {
        let unfinished = std::mem::take(&mut *self.unfinished.lock());
        for replies in unfinished {
            let _ = replies.recv_async().await;
        }
    }

    /// A readiness future over a waiting request (`request(wait_us)`, one wait slice): sent now,
    /// so that a change after the node registered it is never missed; it completes when the
    /// query ends (answered, timed out, or the session closed).
    pub(crate) fn changed(&self, request: impl FnOnce(u64) -> Request) -> Changed {
        let signal = Arc::new(Signal::default());
        let changed = Changed::new(&signal, None);
        let wait = self.slice(None);
        self.notify_when_answered(request(micros(wait)), wait, signal);
        changed
    }

    /// Completes at the next put or claim change on the node, or after a wait slice.
    pub(crate) fn progressed(&self) -> Changed {
        self.changed(|wait_us| Request::WaitProgress { wait_us })
    }

    /// Sends `request` and notifies `signal` when its query ends (answered, timed out, or the
    /// session closed), without waiting.
    fn notify_when_answered(&self, request: Request, wait: Duration, signal: Arc<Signal>) {
        /// Notifies when zenoh drops the query's callback: the query has ended.
        struct Ended(Arc<Signal>);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.notify();
            }
        }
        let ended = Ended(signal);
        if self.check_open(request.op()).is_err() {
            return;
        }
        let query = self.query(0, request, None, wait.saturating_add(QUERY_MARGIN));
        let _ = blocking(|| query.callback(move |_| ended.0.notify()).wait());
    }

    /// The request's exchange with the node, on `direct` or else as a zenoh query: `Err` with
    /// the reason when no decodable reply came in time.
    fn exchange(
        &self,
        seq: u64,
        request: Request,
        payload: Option<Bytes>,
        wait: Duration,
        direct: Option<&Direct>,
    ) -> Exchange {
        let timeout = self.reply_deadline(request.holds_on_node(), wait);
        // In the event log: encoding and decoding are serialisation; the round trip is messaging,
        // or blocking when the node may park the request waiting for an item or a change (a put
        // parked for room, rarer, counts as messaging).
        let waits_for_items = matches!(
            request,
            Request::Get { .. } | Request::QueueGet { .. } | Request::WaitChanged { .. } | Request::WaitProgress { .. }
        );
        let round_trip = if waits_for_items && !wait.is_zero() { Kind::Wait } else { Kind::Send };
        let serialise = trace::span(Kind::Serialise, 0, 0, 0);
        if let Some(direct) = direct {
            let header = encode(&self.header(seq, request));
            drop(serialise);
            // A large payload to a node on this host goes as a shared-memory segment.
            let passed = payload.as_ref().filter(|_| direct.passes_segments()).and_then(shared::share);
            let parts: &[&[u8]] = match (&payload, &passed) {
                (Some(payload), None) => &[&header, payload],
                _ => &[&header],
            };
            let bytes = parts.iter().map(|part| part.len() as u64).sum();
            let (message, shared) = {
                let _trip = trace::span(round_trip, 0, 0, bytes);
                direct.exchange(parts, passed.as_ref().map(|(d, _)| d.as_fd()), timeout)?
            };
            let _decode = trace::span(Kind::Serialise, 0, 0, message.len() as u64);
            return match shared {
                Some(shared) => {
                    let reply = decode_reply_passed(&message, shared.len())
                        .map_err(|e| format!("the node's reply is unreadable: {e}"))?;
                    Ok((reply, shared))
                }
                None => reply_of(message),
            };
        }
        let query = self.query(seq, request, payload, timeout);
        drop(serialise);
        let reply = {
            let _trip = trace::span(round_trip, 0, 0, 0);
            query.wait().map_err(|e| format!("zenoh refused the query: {e}"))?.recv().ok()
        };
        let _decode = trace::span(Kind::Serialise, 0, 0, 0);
        answer(reply, timeout)
    }

    /// [`exchange`](Self::exchange) without blocking a thread.
    async fn exchange_async(&self, seq: u64, request: Request, payload: Option<Bytes>, wait: Duration) -> Exchange {
        let timeout = self.reply_deadline(request.holds_on_node(), wait);
        let replies =
            self.query(seq, request, payload, timeout).await.map_err(|e| format!("zenoh refused the query: {e}"))?;
        answer(replies.recv_async().await.ok(), timeout)
    }

    /// How long after sending a request that waits at most `wait` on the node its reply is
    /// waited for: the wait plus [`QUERY_MARGIN`], and, for a request that may hold something on
    /// the node (`holds_on_node`), at most [`LEASE_SHARE`] of the lease — later the node may have
    /// ended the session, and the reply is not taken.
    fn reply_deadline(&self, holds_on_node: bool, wait: Duration) -> Duration {
        let deadline = wait.saturating_add(QUERY_MARGIN);
        match holds_on_node {
            true => deadline.min(self.lease.mul_f64(LEASE_SHARE)),
            false => deadline,
        }
    }

    /// The query carrying `request` (and the payload after its header), answered within `timeout`.
    fn query(
        &self,
        seq: u64,
        request: Request,
        payload: Option<Bytes>,
        timeout: Duration,
    ) -> zenoh::session::SessionGetBuilder<'_, '_, zenoh::handlers::DefaultHandler> {
        let mut message = ZBytes::writer();
        message.append(ZBytes::from(encode(&self.header(seq, request))));
        if let Some(payload) = payload {
            message.append(ZBytes::from(payload));
        }
        self.zenoh.get(&self.rpc_key).payload(message.finish()).consolidation(ConsolidationMode::None).timeout(timeout)
    }

    pub(crate) fn check_open(&self, op: &'static str) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed { name: self.node().to_owned(), reason: CLIENT_CLOSED });
        }
        if let Some(reason) = &*self.ended.lock() {
            let reason =
                format!("the session on the node ended: {reason}; what it held went back there; connect again");
            return Err(Error::Unreachable { op, name: self.node().to_owned(), reason });
        }
        Ok(())
    }

    /// Ends the session after a lost reply: the token goes, so the node closes the session.
    fn end(&self, reason: String) {
        self.ended.lock().get_or_insert(reason);
        if let Some(direct) = &self.direct {
            direct.close();
        }
        self.send_close();
        self.token.lock().take();
    }

    fn send_close(&self) {
        let message = encode(&self.header(0, Request::Close));
        let _ = self.zenoh.get(&self.rpc_key).payload(message).timeout(QUERY_MARGIN).callback(|_| {}).wait();
    }

    /// Ends the session and leaves the fabric. Idempotent.
    pub(crate) fn close(&self) {
        if !self.is_closed() && self.ended.lock().is_none() {
            self.exchange_trace_clocks(true);
        }
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(direct) = &self.direct {
            // A call waiting on the node's reply returns `Closed` at once, as on zenoh.
            direct.close();
        }
        blocking(|| self.leave());
    }

    fn leave(&self) {
        if self.ended.lock().is_none() {
            let message = encode(&self.header(0, Request::Close));
            // Wait for the node to close the session, so that its effects (claims released) are
            // visible when close returns; the token going would do it too, a little later.
            if let Ok(replies) = self.zenoh.get(&self.rpc_key).payload(message).timeout(QUERY_MARGIN).wait() {
                let _ = replies.recv();
            }
            let dispatch = self.reclaims.lock().clone();
            if let Some(dispatch) = dispatch {
                // The handlers of items the closing reclaimed run before close returns.
                dispatch.barrier();
            }
        }
        self.token.lock().take();
        // No handler runs after close returns; the reclaim subscriber goes with the zenoh
        // session, and the dispatcher thread then ends.
        if let Some(dispatch) = self.reclaims.lock().take() {
            dispatch.close();
        }
        let _ = self.zenoh.close().wait();
    }

    /// Logs timestamp exchanges with the node's host when this process traces: at the session's
    /// start and end (`at_end`), so that the post-mortem merge maps the hosts' clocks onto one
    /// another, drift included (`docs/TRACING.md`).
    fn exchange_trace_clocks(&self, at_end: bool) {
        if !crate::trace::enabled() {
            return;
        }
        crate::trace::exchange_clocks(at_end, || match self.call(Request::TraceClock, None, Duration::ZERO) {
            Ok((Reply::TraceClock { host, received_ns, replied_ns }, _)) => Some((host, received_ns, replied_ns)),
            _ => None,
        });
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Runs `f`, which waits on zenoh, where zenoh allows it. Zenoh's blocking calls panic on a tokio
/// current-thread runtime (they need `block_in_place`), so there `f` runs on a scoped thread of
/// its own: a blocking call made from async code blocks that code, as documented, but never
/// panics.
pub(crate) fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let current_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    if !current_thread {
        return f();
    }
    std::thread::scope(|scope| scope.spawn(f).join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The client's zenoh session. Dropping a zenoh session waits for it to close, which zenoh
/// refuses (panics) on a tokio current-thread runtime: this drops it through [`blocking`].
struct Fabric(Option<zenoh::Session>);

impl std::ops::Deref for Fabric {
    type Target = zenoh::Session;
    fn deref(&self) -> &zenoh::Session {
        self.0.as_ref().expect("the zenoh session lives as long as its client")
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        if let Some(session) = self.0.take() {
            blocking(move || drop(session));
        }
    }
}

/// A GC handler to register ([`Client::on_reclaim`]).
pub(crate) enum Registration {
    Global(GlobalHandler),
    Container(Handle, ContainerHandler),
}

/// A wait in microseconds, as the wire carries it.
pub(crate) fn micros(wait: Duration) -> u64 {
    u64::try_from(wait.as_micros()).unwrap_or(u64::MAX)
}

/// The reply a query received (`None`: none within `timeout`), decoded, with its payload.
fn answer(reply: Option<zenoh::query::Reply>, timeout: Duration) -> std::result::Result<(Reply, Bytes), String> {
    let reply = reply.ok_or_else(|| format!("no reply from the node (waited at most {timeout:?})"))?;
    let sample = reply.into_result().map_err(|e| format!("the fabric answered with an error: {e:?}"))?;
    let bytes = match sample.payload().to_bytes() {
        Cow::Owned(bytes) => Bytes::from(bytes),
        Cow::Borrowed(bytes) => Bytes::copy_from_slice(bytes),
    };
    reply_of(bytes)
}

/// A reply message decoded, with its payload (a slice of `bytes`, not a copy).
fn reply_of(bytes: Bytes) -> std::result::Result<(Reply, Bytes), String> {
    let (reply, payload) = decode_reply(&bytes).map_err(|e| format!("the node's reply is unreadable: {e}"))?;
    let payload = bytes.slice_ref(payload);
    Ok((reply, payload))
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}
