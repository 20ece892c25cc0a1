//! The client's side of the fabric: connecting to a node, its session, and one request.
//!
//! [`connect`] opens a zenoh session in client mode to the node's endpoint, asks the node its name
//! and bounds ([`Op::Hello`]), declares the session's liveliness token
//! `stampede/<node>/session/<id>` and opens the session. Every later call is one zenoh query on
//! `stampede/<node>/rpc` with a timeout of the wait it asks for plus [`QUERY_MARGIN`].
//!
//! **No lost items.** A blocking get asks the node to wait at most the node's wait slice; the node
//! replies with the item or "not yet" within it, and the client asks again until its own
//! deadline. A request whose lost reply would leave something held on the node ([`Op::holds_on_node`]) whose reply does not come
//! within the slice plus the margin ends the session: the client withdraws its liveliness token,
//! the node closes the session, and whatever the lost reply carried goes back on the node. A dead
//! client's token disappears with it, to the same effect. So an item is never taken by a client
//! that is alive and does not see it.
//!
//! **Requests at most once.** Every request of the session but `Open` and those sent without
//! waiting carries a number; the node runs a numbered request once and answers a repeat with the
//! first answer (`stampede_wire::session::Replies`). So a request whose reply was lost is sent again
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
//!
//! Layout: `connect` (reaching a node, the hello, opening the session), `exchange` (one request
//! and its reply: numbering, retries, the lateness rule), `waits` (sliced waits and readiness
//! futures), `sends` (requests sent without waiting for their replies), `close` (ending the
//! session, early or by closing the client), `push` (prefetch caches and the answers they
//! report), `consumes` (consumes deferred into the session's requests until confirmed).
//!
//! The rules of numbering, retries and reading a reply are the session protocol's
//! (`stampede_wire::session`), pure and shared with the node; this module does the I/O around
//! them.
//!
//! [`connect`]: fn@connect
//! [`QUERY_MARGIN`]: crate::remote::QUERY_MARGIN
//! [`REQUEST_RETRIES`]: stampede_wire::session::REQUEST_RETRIES
//! [`LEASE_SHARE`]: stampede_wire::session::LEASE_SHARE

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{Error, Result};
use parking_lot::Mutex;
use zenoh::key_expr::KeyExpr;
use zenoh::liveliness::LivelinessToken;

use crate::payload::{Buffers, Segments};
use crate::remote::direct::Direct;
use crate::remote::reclaim::{ContainerHandler, Dispatch, GlobalHandler};
use crate::remote::CLIENT_CLOSED;
use stampede_wire::fabric;
use stampede_wire::session::ClientSession;
use stampede_wire::shared::{self, SHARED_BYTES_MIN};
use stampede_wire::{Handle, Hello, Op, Secret};

mod close;
mod connect;
mod consumes;
mod exchange;
mod push;
mod sends;
mod waits;

pub(crate) use connect::connect;
pub(crate) use push::Cache;
pub(crate) use waits::micros;

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
    /// The session protocol's state: request numbers, acknowledgements, the lease, and how a
    /// reply is read (`stampede_wire::session`).
    protocol: Mutex<ClientSession>,
    /// Replies to drop on arrival, as if lost (tests only).
    #[cfg(feature = "faults")]
    lose_replies: Option<Arc<crate::remote::faults::LoseReplies>>,
    /// The shadows of this session's tasks on other nodes: `(node, shadow's handle there)` to
    /// the task's handle here (what a graph of several nodes folds into one task).
    pub(crate) shadows: Mutex<std::collections::HashMap<(String, Handle), Handle>>,
    /// The node's own sockets, where it offers them and this client reaches them
    /// (`direct.rs`); `None`: every request is a zenoh query.
    direct: Option<Direct>,
    /// Its input connections' prefetch caches (`push.rs`), and the policy of those that choose
    /// none.
    prefetching: push::Prefetching,
    prefetch: crate::Prefetch,
    /// Consumes deferred into the session's requests until a reply confirms them (`consumes.rs`).
    consumes: consumes::Consumes,
    /// Requests sent so far (every try, and sends), each built by [`header`](Self::header).
    sent: AtomicU64,
}

impl Client {
    /// The node's name.
    pub(crate) fn node(&self) -> &str {
        &self.hello.node
    }

    /// Requests sent so far: every request built, sent once.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The endpoint this client connected to.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A buffer pool for an output of this session: its large copies are shared-memory segments
    /// when requests take the node's Unix socket (they are passed, not written).
    pub(crate) fn buffers(&self) -> Arc<Buffers> {
        match &self.direct {
            Some(direct) if direct.passes_segments() => {
                Arc::new(Buffers::with_segments(Segments { make: shared::make, bytes_min: SHARED_BYTES_MIN }))
            }
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
        self.done(Op::OnReclaim { container })
    }

    /// The client's zenoh session.
    pub(crate) fn zenoh(&self) -> &zenoh::Session {
        &self.zenoh
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

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}
