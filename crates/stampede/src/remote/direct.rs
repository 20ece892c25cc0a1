//! The client's direct request path: requests on the node's own sockets — an abstract Unix
//! socket for a client on the node's host, TCP elsewhere — instead of zenoh queries, where the
//! node offers them ([`DirectPath`] in its hello). A session on another node of the mesh, opened
//! through the first, takes that node's Unix socket when the node runs on this host. Why: a zenoh query costs ~2.5 raw TCP round
//! trips on our machines, a framed socket about one (`docs/ARCHITECTURE.md` "The request path").
//!
//! The frames carry the very messages of the zenoh path (`stampede_wire`), each after its length
//! ([`FRAME_LENGTH_BYTES`](stampede_wire::FRAME_LENGTH_BYTES), little-endian); the node decodes and checks them the same way.
//!
//! Guarantees:
//! - One request at a time per connection. A call takes an idle connection or opens one, so no
//!   caller waits behind another's reply and no reply is handed from thread to thread.
//! - A request sent without waiting ([`Direct::send`]: a consume, a drop's detach, a pipelined
//!   put) is written at once, so the node applies it at once; its reply is read later, and handed
//!   to the send's [`OnReply`] if it has one. Every call made after it sees its effect, as
//!   embedded: the call either goes on the same connection right after it (the node serves a
//!   connection's requests in order) or waits until its reply was read. Sends are applied in the
//!   order they were written: one starts on another connection only once every send before it
//!   was answered (a call may have taken the connection that carried them). At most
//!   [`SENDS_OWED_MAX`] replies are owed; the send after reads them first. A reply that can never
//!   come (its connection failed, the client closed) is handed to its handler as such: every
//!   handler runs exactly once.
//! - A connection whose exchange failed in any way (timeout, short read, a length out of bounds)
//!   is never used again: a late reply is never read as the answer to a later request.
//! - [`Direct::close`] shuts every connection down, idle or in use: a call blocked on the node's
//!   reply returns at once.
//! - Bounded: at most [`IDLE_MAX`] idle connections are kept; a reply longer than
//!   [`REPLY_BYTES_MAX`] ends its connection before anything is allocated for it.

use std::collections::{HashMap, VecDeque};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::BorrowedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::remote::frames::{Connection, Stream};
use crate::remote::QUERY_MARGIN;
use crate::wait::Signal;
use stampede_wire::shared;
use stampede_wire::DirectPath;

/// Most idle connections a client keeps to its node; a call finding none opens another.
pub const IDLE_MAX: usize = 8;

/// Longest reply a client reads: the node's largest payload (`PAYLOAD_BYTES_MAX_LIMIT`, 1 GiB
/// less 1 MiB) and a header.
pub const REPLY_BYTES_MAX: usize = 1 << 30;

/// Most replies of sends (requests that do not wait for their reply) left unread on the
/// connection that carried them.
pub const SENDS_OWED_MAX: usize = 64;

/// Longest wait to open a connection to the node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a client sends its requests as zenoh queries after an exchange on the direct path
/// failed (the node may be refusing connections it cannot take: docs/SECURITY.md).
pub const DIRECT_COOLDOWN: Duration = Duration::from_secs(1);

/// The node's sockets, as reached from this client.
pub(crate) struct Direct {
    address: Address,
    idle: Mutex<Vec<Connection>>,
    owed: Mutex<Owed>,
    /// Sends written, and sends whose replies were read (or can never come).
    sends: Sends,
    /// A clone of every connection not yet dropped, by id, to shut them down on close; `None`
    /// once closed (no connection is opened after).
    open: Mutex<Option<HashMap<u64, Stream>>>,
    next_id: AtomicU64,
    /// Until when requests go as zenoh queries instead, after an exchange here failed.
    cooling: Mutex<Option<Instant>>,
}

/// What a send's reply is for: `None`, nothing (it is read and dropped: a consume, a detach);
/// `Some`, a handler given the reply's message, or why none can come (a pipelined put).
pub(crate) type OnReply = Option<Box<dyn FnOnce(Result<Bytes, String>) + Send>>;

/// The connection that carried the latest sends, and what each of their unread replies is for,
/// oldest first. Replies are owed only on a connection: `replies` is empty when `connection` is
/// `None`.
#[derive(Default)]
struct Owed {
    connection: Option<Connection>,
    replies: VecDeque<OnReply>,
}

#[derive(Clone, Debug)]
enum Address {
    /// An abstract Unix socket (this host).
    Unix(String),
    /// `host:port`.
    Tcp(String),
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
        Self::first_reached(candidates)
    }

    /// The direct path to a node reached through another node: its Unix socket, if the node runs
    /// on this host. Only there does the socket connect: its abstract name holds the node's
    /// zenoh id, and abstract names are the host's (its network namespace's). So a large item
    /// read there is passed as shared memory, not copied at each zenoh hop. `None`: zenoh.
    pub(crate) fn reach_elsewhere(offered: &DirectPath) -> Option<Direct> {
        Self::first_reached(offered.unix.iter().map(|name| Address::Unix(name.clone())).collect())
    }

    /// The first of `candidates` that connects. The connection that tried is closed: the node
    /// closes a connection that sends no request of a live session within its handshake deadline.
    fn first_reached(candidates: Vec<Address>) -> Option<Direct> {
        candidates.into_iter().find_map(|address| {
            let direct = Direct {
                address,
                idle: Mutex::new(Vec::new()),
                owed: Mutex::default(),
                sends: Sends::default(),
                open: Mutex::new(Some(HashMap::new())),
                next_id: AtomicU64::new(0),
                cooling: Mutex::new(None),
            };
            let tried = direct.connect().ok()?;
            direct.forget(tried.id);
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

    /// Sends one request (`parts`, concatenated, are its message; `passed`, the shared-memory
    /// segment holding its payload, see [`shared`]) and reads the node's
    /// reply message, within `timeout` for the reply, with the payload it passed as a segment.
    /// `Err`: why there is no reply (the caller treats it as a lost reply, as a zenoh query's
    /// timeout).
    fn exchange(
        &self,
        parts: &[&[u8]],
        passed: Option<BorrowedFd<'_>>,
        timeout: Duration,
    ) -> Result<(Bytes, Option<Bytes>), String> {
        let Owed { connection, replies } = std::mem::take(&mut *self.owed.lock());
        let (mut connection, owed) = match connection {
            Some(connection) => (connection, replies),
            None => {
                debug_assert!(replies.is_empty(), "replies owed on no connection");
                // Sends written before this call may be on a connection another call took: their
                // effects come first.
                self.sends.wait_answered(self.sends.written.load(Ordering::SeqCst), timeout);
                (self.idle_or_connect()?, VecDeque::new())
            }
        };
        if let Err(e) = connection.write_frame(parts, passed) {
            let reason = self.failed(&connection, &e);
            // The replies owed on it can never be read now.
            self.never_answered(owed, &reason);
            return Err(reason);
        }
        let result = self.read_owed(&mut connection, owed, timeout).and_then(|()| {
            let (message, descriptor) = connection.read_reply(timeout)?;
            let shared =
                descriptor.map(|d| shared::map(d, REPLY_BYTES_MAX)).transpose().map_err(std::io::Error::other)?;
            Ok((message, shared))
        });
        match result {
            Ok(reply) => {
                self.give_back(connection);
                Ok(reply)
            }
            Err(e) => Err(self.failed(&connection, &e)),
        }
    }

    /// Whether requests may take this path now: not within [`DIRECT_COOLDOWN`] of a failed
    /// exchange.
    pub(crate) fn usable(&self) -> bool {
        self.cooling.lock().is_none_or(|until| Instant::now() >= until)
    }

    /// [`exchange`](Self::exchange), and when it fails the path cools down: the caller's next try,
    /// and every request for [`DIRECT_COOLDOWN`], goes as a zenoh query.
    pub(crate) fn exchange_or_cool(
        &self,
        parts: &[&[u8]],
        passed: Option<BorrowedFd<'_>>,
        timeout: Duration,
    ) -> Result<(Bytes, Option<Bytes>), String> {
        let exchanged = self.exchange(parts, passed, timeout);
        if exchanged.is_err() {
            *self.cooling.lock() = Instant::now().checked_add(DIRECT_COOLDOWN);
        }
        exchanged
    }

    /// A connection of its own that the node makes this session's stream of push events:
    /// `request` (a `Request::Pushes`) written, and the node's reply to it. `None`: the node could
    /// not be reached (the events then come on the fabric). The connection is shut down with the
    /// others when the client closes.
    pub(crate) fn open_stream(&self, request: &[u8]) -> Option<(EventStream, Bytes)> {
        let mut connection = self.connect().ok()?;
        match connection.write_frame(&[request], None).and_then(|()| connection.read_reply(QUERY_MARGIN)) {
            Ok((reply, None)) => Some((EventStream { connection }, reply)),
            _ => {
                self.forget(connection.id);
                None
            }
        }
    }

    /// Whether frames on this path may pass shared-memory segments (the Unix socket).
    pub(crate) fn passes_segments(&self) -> bool {
        matches!(self.address, Address::Unix(_))
    }

    /// The shared-memory segment `payload` goes as on this path, if any: a large payload on the
    /// Unix socket (see [`shared::share`]); otherwise its bytes follow the request's header.
    pub(crate) fn segment_of(&self, payload: &Bytes) -> Option<(std::sync::Arc<std::os::fd::OwnedFd>, Bytes)> {
        self.passes_segments().then(|| shared::share(payload)).flatten()
    }

    /// Writes one request (`parts`, concatenated, and `passed`, as for an exchange) and returns
    /// without its reply, which a later call reads and hands to `on_reply`. `Err`: the request
    /// may not have reached the node (`on_reply` is dropped unrun: the caller has the error).
    pub(crate) fn send(
        &self,
        parts: &[&[u8]],
        passed: Option<BorrowedFd<'_>>,
        on_reply: OnReply,
    ) -> Result<(), String> {
        let mut owed = self.owed.lock();
        let mut taken = match owed.connection.take() {
            Some(connection) => connection,
            None => {
                // The sends before this one may be on a connection a call took: they are applied
                // first, as they would be on one connection (the node serves two connections
                // concurrently, so a pipelined put could otherwise land before the one made before it).
                self.sends.wait_answered(self.sends.written.load(Ordering::SeqCst), QUERY_MARGIN);
                self.idle_or_connect()?
            }
        };
        if owed.replies.len() >= SENDS_OWED_MAX {
            let replies = std::mem::take(&mut owed.replies);
            if let Err(e) = self.read_owed(&mut taken, replies, QUERY_MARGIN) {
                return Err(self.failed(&taken, &e));
            }
        }
        match taken.write_frame(parts, passed) {
            Ok(()) => {
                self.sends.written.fetch_add(1, Ordering::SeqCst);
                owed.replies.push_back(on_reply);
                owed.connection = Some(taken);
                Ok(())
            }
            Err(e) => {
                let reason = self.failed(&taken, &e);
                // The replies owed on it can never come now.
                self.never_answered(std::mem::take(&mut owed.replies), &reason);
                Err(reason)
            }
        }
    }

    /// Waits (at most `timeout`) until every send written so far was answered: reads the owed
    /// replies, or waits for the call that took their connection to read them.
    pub(crate) fn finish_sends(&self, timeout: Duration) {
        let Owed { connection, replies } = std::mem::take(&mut *self.owed.lock());
        if let Some(mut connection) = connection {
            match self.read_owed(&mut connection, replies, timeout) {
                Ok(()) => self.give_back(connection),
                Err(_) => self.forget(connection.id),
            }
        }
        self.sends.wait_answered(self.sends.written.load(Ordering::SeqCst), timeout);
    }

    /// For a caller waiting until its sends' handlers make `done` true (a pipelined put whose
    /// window is full), one step: reads the oldest owed reply and hands it to its handler, when
    /// the connection that carries the owed replies is here; else (a call took it, and reads
    /// them before its own reply) waits, at most `timeout`, until `done`, asked at each answer.
    /// A handler runs before its send counts as answered, and `done` is asked after the wait is
    /// registered: a reply read meanwhile by another thread always wakes the caller.
    pub(crate) fn read_one_owed(&self, done: impl Fn() -> bool, timeout: Duration) {
        let mut owed = self.owed.lock();
        let Some(on_reply) = owed.replies.pop_front() else {
            drop(owed);
            self.sends.wait_until(done, timeout);
            return;
        };
        let replies = std::iter::once(on_reply).collect();
        let Some(mut connection) = owed.connection.take() else {
            self.never_answered(replies, "no connection carries the reply");
            return;
        };
        match self.read_owed(&mut connection, replies, timeout) {
            Ok(()) => owed.connection = Some(connection),
            Err(e) => {
                let reason = self.failed(&connection, &e);
                self.never_answered(std::mem::take(&mut owed.replies), &reason);
            }
        }
    }

    /// Reads the `replies` owed on `connection`, in order, handing each to its handler. On a
    /// failure the replies not read can never come: their handlers are told so, and they count
    /// as answered all the same.
    fn read_owed(
        &self,
        connection: &mut Connection,
        replies: VecDeque<OnReply>,
        timeout: Duration,
    ) -> std::io::Result<()> {
        let mut replies = replies.into_iter();
        while let Some(on_reply) = replies.next() {
            match connection.read_reply(timeout) {
                Ok((message, _)) => {
                    if let Some(on_reply) = on_reply {
                        on_reply(Ok(message));
                    }
                    self.sends.answer(1);
                }
                Err(e) => {
                    let reason = format!("{}: {e}", self.describe());
                    self.never_answered(std::iter::once(on_reply).chain(replies), &reason);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Tells the handlers of `replies` that they can never come (`reason`), and counts them as
    /// answered.
    fn never_answered(&self, replies: impl IntoIterator<Item = OnReply>, reason: &str) {
        let mut count = 0;
        for on_reply in replies {
            if let Some(on_reply) = on_reply {
                on_reply(Err(reason.to_owned()));
            }
            count += 1;
        }
        self.sends.answer(count);
    }

    /// Shuts every connection down (a call waiting on one returns) and opens none after.
    /// Idempotent.
    pub(crate) fn close(&self) {
        let Owed { replies, .. } = std::mem::take(&mut *self.owed.lock());
        self.never_answered(replies, "the client closed before the node's reply was read");
        let open = self.open.lock().take();
        for stream in open.into_iter().flat_map(HashMap::into_values) {
            stream.shutdown();
        }
        self.idle.lock().clear();
    }

    /// An idle connection, else a new one.
    fn idle_or_connect(&self) -> Result<Connection, String> {
        let idle = self.idle.lock().pop();
        idle.map_or_else(|| self.connect(), Ok)
    }

    /// Forgets `connection`, whose exchange failed with `e` (it is never used again), and says
    /// why.
    fn failed(&self, connection: &Connection, e: &std::io::Error) -> String {
        self.forget(connection.id);
        format!("{}: {e}", self.describe())
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
        Ok(Connection::new(id, stream))
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

/// A session's stream of push events on the direct path ([`Direct::open_stream`]).
pub(crate) struct EventStream {
    connection: Connection,
}

impl EventStream {
    /// The next event, waiting for it: its message, and the pushed item's payload when it was
    /// passed as a shared-memory segment (mapped). `Err` once the stream ended (the node closed
    /// it, or the client closed).
    pub(crate) fn next(&mut self) -> std::io::Result<(Bytes, Option<Bytes>)> {
        let (message, descriptor) = self.connection.read_frame(None)?;
        let passed = descriptor.map(|d| shared::map(d, REPLY_BYTES_MAX)).transpose().map_err(std::io::Error::other)?;
        Ok((message, passed))
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.close();
    }
}

/// Counts of sends, so that a call on another connection can wait for their effects.
#[derive(Default)]
struct Sends {
    written: AtomicU64,
    answered: AtomicU64,
    answered_more: Signal,
}

impl Sends {
    fn answer(&self, n: u64) {
        if n > 0 {
            self.answered.fetch_add(n, Ordering::SeqCst);
            self.answered_more.notify();
        }
    }

    /// Waits until `done`, asked after each answer (a handler runs before its send counts as
    /// answered), at most `timeout`.
    fn wait_until(&self, done: impl Fn() -> bool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let waiter = self.answered_more.listen();
            if done() || !waiter.wait(Some(deadline)) {
                return;
            }
        }
    }

    /// Waits until `written` sends were answered, at most `timeout` (then the call goes on: a
    /// lost send's effect never comes, and it ends its connection).
    fn wait_answered(&self, written: u64, timeout: Duration) {
        // Checked before listening: on the hot path every send was answered already.
        if self.answered.load(Ordering::SeqCst) >= written {
            return;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let waiter = self.answered_more.listen();
            if self.answered.load(Ordering::SeqCst) >= written || !waiter.wait(Some(deadline)) {
                return;
            }
        }
    }
}

/// Whether `host` (of a `tcp/` endpoint) is this host's loopback interface.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
