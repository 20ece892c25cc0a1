//! The client's side of prefetch (docs/PREFETCH.md): the node's push events for this session,
//! routed to each input connection's cache, and the cache's answers reported to the node on the
//! session's next request.
//!
//! Guarantees: a cache answers by `stampede_core::PushCache`'s rule, only while the session is
//! open and within [`LEASE_SHARE`] of the lease after the latest request whose reply this client
//! read was sent (the node heard from the session then, and ends it no sooner than a lease later:
//! nothing is delivered after its session ended); an
//! answer is reported by every request built after it until a reply confirms the node applied it
//! (`stampede_wire::session::CacheAnswers`: why, and the bound past which caches answer nothing); a
//! [`PushEvent::Reset`], or an event whose number shows one was lost on the fabric, empties every
//! cache of the session. The subscriber never blocks zenoh's thread for longer than a cache's
//! lock.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use stampede_core::{Handle, PushCache};
#[cfg(doc)]
use stampede_wire::session::LEASE_SHARE;
use stampede_wire::session::{cache_may_answer, CacheAnswers};
use stampede_wire::{
    decode_push, decode_push_passed, decode_reply, encode, fabric, Opened, PushEvent, PushOrder, Reply, Request,
    RequestHeader, WireOutcome,
};
use std::sync::atomic::Ordering;
use zenoh::pubsub::Subscriber;
use zenoh::Wait;

use crate::remote::connection::item;
use crate::wait::Signal;
use crate::{Item, Result};

use super::Client;

/// One input connection's cache, and the signal a get waiting for a push listens to.
#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) state: Mutex<PushCache<Item>>,
    pub(crate) arrived: Signal,
    /// When the latest get of this connection that the node served was asked (any reply but
    /// `Closed` or `Unreachable`): the connection was open on the node then — not closing, which
    /// refuses gets — so the node keeps it open at least a lease after (a closing shadow's
    /// hold), and a session's end comes no sooner either.
    served: Mutex<Option<Instant>>,
}

impl Cache {
    /// A get of this connection asked at `asked` ended with `result`: if the node served it, the
    /// cache may answer until [`LEASE_SHARE`] of the lease after `asked`.
    pub(crate) fn served<T>(&self, asked: Instant, result: &crate::Result<T>) {
        if !matches!(result, Err(crate::Error::Closed { .. } | crate::Error::Unreachable { .. })) {
            let mut served = self.served.lock();
            *served = (*served).max(Some(asked));
        }
    }
}

/// What one look at a cache says.
enum Look {
    Answer(Item),
    /// Nothing yet, and the node owes the cache its next message.
    Wait,
    /// Ask the node.
    Ask,
}

/// The session's caches, its subscriber to the node's push events, and the answers not yet
/// reported.
pub(crate) struct Prefetching {
    /// Where the node's events go.
    routes: Arc<Routes>,
    subscriber: Mutex<Option<Subscriber<()>>>,
    /// Cache answers to report until a reply confirms the node applied them.
    opened: Mutex<CacheAnswers<Instant>>,
    /// The session's lease (caches answer within [`LEASE_SHARE`] of it).
    lease: Duration,
}

impl Prefetching {
    /// Nothing cached yet, for a session whose node ends it after `lease` of silence.
    pub(super) fn new(lease: Duration) -> Prefetching {
        Prefetching { routes: Arc::default(), subscriber: Mutex::default(), opened: Mutex::default(), lease }
    }
}

impl Client {
    /// The prefetch policy of a channel input attached with `options`: its own, else the one
    /// this client was connected with.
    pub(crate) fn prefetch(&self, options: crate::InputOptions) -> crate::Prefetch {
        options.prefetch.unwrap_or(self.prefetch)
    }

    /// A cache for input connection `connection` of `container`, fed by the node's push events
    /// to this session (subscribed on first use).
    pub(crate) fn cache(&self, connection: Handle, container: Handle) -> Result<Arc<Cache>> {
        let prefetching = &self.prefetching;
        {
            let mut subscriber = prefetching.subscriber.lock();
            if subscriber.is_none() {
                let routes = prefetching.routes.clone();
                let declared = self
                    .zenoh()
                    .declare_subscriber(fabric::push_key(self.node(), &self.session))
                    .callback(move |sample| routes.deliver(message(sample.payload()), None))
                    .wait()
                    .map_err(|e| crate::Error::Unreachable {
                        op: "attach_input",
                        name: self.node().to_owned(),
                        reason: format!("the prefetch subscriber could not start: {e}"),
                    })?;
                *subscriber = Some(declared);
                self.open_push_stream();
            }
        }
        let cache = Arc::new(Cache::default());
        let mut caches = prefetching.routes.caches.lock();
        caches.retain(|_, (_, cache)| cache.strong_count() > 0);
        caches.insert(connection, (container, Arc::downgrade(&cache)));
        Ok(cache)
    }

    /// Opens the session's stream of push events on the direct path: the node writes the events
    /// there — on its Unix socket a large pushed item as a shared-memory segment (mapped, not
    /// copied), on its TCP port (a client on another host) as bytes — and a thread of the
    /// client's reads them. Without a direct path, or refused, they come through the subscriber
    /// (which stays: the node goes back to it when the stream breaks).
    fn open_push_stream(&self) {
        let Some(direct) = self.direct.as_ref() else { return };
        let secret = self.secret.get().copied().unwrap_or_default();
        let request = encode(&RequestHeader::new(self.session.clone(), secret, Request::Pushes));
        self.sent.fetch_add(1, Ordering::Relaxed);
        let Some((mut stream, reply)) = direct.open_stream(&request) else { return };
        if !matches!(decode_reply(&reply), Ok((Reply::Outcome(WireOutcome::Done), _))) {
            return;
        }
        let routes = self.prefetching.routes.clone();
        let reader = move || {
            while let Ok((message, passed)) = stream.next() {
                routes.deliver(message, passed);
            }
        };
        // Without the thread the stream is dropped, and the node goes back to the fabric.
        let _ = std::thread::Builder::new().name("stampede-pushes".into()).spawn(reader);
    }

    /// This client put `ts` into `container` (or may have): its caches of the container know the
    /// channel holds it, so that none answers a later get of this client with an older item.
    pub(crate) fn put_here(&self, container: Handle, ts: stampede_core::Timestamp) {
        for cache in self.caches_of(container) {
            cache.state.lock().put_here(ts);
        }
    }

    /// The live caches of `container`'s input connections.
    fn caches_of(&self, container: Handle) -> Vec<Arc<Cache>> {
        let caches = self.prefetching.routes.caches.lock();
        caches.values().filter(|(c, _)| *c == container).filter_map(|(_, cache)| cache.upgrade()).collect()
    }

    /// This client destroyed `container`: its caches answer nothing from now on (a get after the
    /// destroy must not be placed before it).
    pub(crate) fn forget_caches_of(&self, container: Handle) {
        for cache in self.caches_of(container) {
            cache.state.lock().reset();
        }
    }

    /// Whether `cache` may answer `now`: the session open, the latest get of its connection the
    /// node served recent enough, and room to report the answer.
    fn cache_may_answer(&self, cache: &Cache, now: Instant) -> bool {
        let prefetching = &self.prefetching;
        let served = *cache.served.lock();
        let recent = served.is_some_and(|at| cache_may_answer(prefetching.lease, now.saturating_duration_since(at)));
        recent && self.check_open("get").is_ok() && prefetching.opened.lock().may_answer()
    }

    /// The answer `cache` gives a `NEWEST_UNSEEN` get on `connection`, if it may give one: at
    /// once, or when a push arrives before `deadline` (`None`: none) and within the client's wait
    /// slice — while the node owes the cache its next message (`PushCache::waits`). `None`: ask
    /// the node. An answer at once reads the clock once and registers no waiter.
    pub(crate) fn cached(&self, connection: Handle, cache: &Cache, deadline: Option<Instant>) -> Option<Item> {
        let (mut until, mut arrival) = (None, None);
        loop {
            let now = Instant::now();
            match self.look(connection, cache, now) {
                Look::Answer(item) => return Some(item),
                Look::Ask => return None,
                Look::Wait => {}
            }
            // Nothing yet: register, then look again before waiting, so that a push arriving in
            // between is not missed.
            let Some(waiter) = arrival.take() else {
                arrival = Some(cache.arrived.listen());
                continue;
            };
            let until = *until.get_or_insert_with(|| {
                let slice = now + self.wait_slice;
                deadline.map_or(slice, |deadline: Instant| deadline.min(slice))
            });
            if !waiter.wait(Some(until)) {
                return None;
            }
        }
    }

    /// One look at `cache` for a get on `connection` at `now`.
    fn look(&self, connection: Handle, cache: &Cache, now: Instant) -> Look {
        if !self.cache_may_answer(cache, now) {
            return Look::Ask;
        }
        let mut state = cache.state.lock();
        if let Some((ts, item)) = state.newest_unseen() {
            self.prefetching.opened.lock().answered(connection, ts, now);
            return Look::Answer(item);
        }
        if state.waits() {
            Look::Wait
        } else {
            Look::Ask
        }
    }

    /// The answers to report in a request's header: every one not yet confirmed, each with how
    /// long ago it was given. A request is about to be sent.
    pub(super) fn pending_opened(&self) -> Vec<Opened> {
        self.prefetching.opened.lock().reports(|at| micros(at.elapsed()))
    }

    /// An outcome was read in reply to a call whose first try reported `carried`: the node
    /// applied them before it ran the call (a repeat it answers from its first run, which
    /// carried them too).
    pub(super) fn confirm_opened(&self, carried: &[Opened]) {
        if !carried.is_empty() {
            self.prefetching.opened.lock().confirm(carried);
        }
    }
}

/// A push event's bytes, copied out of zenoh's buffers once (the pushed payload is a slice of
/// them).
fn message(payload: &zenoh::bytes::ZBytes) -> Bytes {
    match payload.to_bytes() {
        std::borrow::Cow::Owned(bytes) => Bytes::from(bytes),
        std::borrow::Cow::Borrowed(bytes) => Bytes::copy_from_slice(bytes),
    }
}

/// The session's caches by input connection (with the container each reads), and the number
/// the node's next event should carry.
#[derive(Default)]
struct Routes {
    caches: Mutex<HashMap<Handle, (Handle, Weak<Cache>)>>,
    order: Mutex<PushOrder>,
}

impl Routes {
    /// Routes one push event to its connection's cache (an event that does not decode, or for a
    /// connection gone, is dropped): `message`, with the pushed item's payload after it or, on
    /// the direct path, `passed` apart (a shared-memory segment). A missing number — an event
    /// lost on the fabric — or a reset first empties every cache.
    fn deliver(&self, message: Bytes, passed: Option<Bytes>) {
        let decoded = match passed {
            None => decode_push(&message).map(|(event, payload)| (event, message.slice_ref(payload))),
            Some(passed) => decode_push_passed(&message, passed.len()).map(|event| (event, passed)),
        };
        let Ok((event, payload)) = decoded else { return };
        if self.order.lock().forgets(&event) {
            let caches: Vec<_> = self.caches.lock().values().filter_map(|(_, cache)| cache.upgrade()).collect();
            for cache in caches {
                cache.state.lock().reset();
                cache.arrived.notify();
            }
        }
        if let PushEvent::Put { connection, notice, item: header, .. } = event {
            let Some(cache) = self.caches.lock().get(&connection).and_then(|(_, cache)| cache.upgrade()) else {
                return;
            };
            let pushed = header.map(|header| item(header, payload));
            cache.state.lock().noticed(notice, pushed);
            cache.arrived.notify();
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
