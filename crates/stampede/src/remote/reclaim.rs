//! GC handlers on a client (D-Stampede's generic handler): `on_reclaim` through the fabric runs
//! the client's handler for items reclaimed on the node.
//!
//! The first registration declares a subscriber on the session's reclaim key
//! (`stampede/<node>/reclaimed/<session>`) and starts one dispatcher thread, which runs the
//! handlers in the order the node reclaimed the items, outside every lock. The node sends the
//! items its handling of this client's own request reclaimed before the reply to that request;
//! a call (blocking or async) therefore waits, before it returns, until the dispatcher has run every
//! event that arrived before its reply — as embedded, where handlers run before the operation that
//! made the item garbage returns. Items reclaimed by others arrive soon after, asynchronously.
//! No handler runs once the client's close has returned ([`Dispatch::close`]): a caller may free
//! what its handlers use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use zenoh::pubsub::Subscriber;
use zenoh::Wait;

use crate::remote::connection::item;
use crate::wait::{Changed, Signal};
use crate::Item;
use stampede_wire::{decode_event, Handle, ReclaimEvent};

/// A handler of one channel or queue.
pub(crate) type ContainerHandler = Arc<dyn Fn(&Item) + Send + Sync>;
/// A runtime-wide handler: `(name, item)`.
pub(crate) type GlobalHandler = Arc<dyn Fn(&str, &Item) + Send + Sync>;

/// Most reclaim events received and not yet handled; past it events are dropped (a handler that
/// stalls cannot grow the client's memory).
pub const RECLAIM_PENDING_MAX: usize = 65_536;

/// Longest a call waits for the dispatcher to run the handlers of items its request reclaimed.
const BARRIER_WAIT_MAX: Duration = Duration::from_secs(5);

/// The handlers registered on a client and the thread that runs them.
pub(crate) struct Dispatch {
    handlers: Arc<Mutex<Handlers>>,
    progress: Arc<Progress>,
    dispatcher: ThreadId,
    _subscriber: Subscriber<()>,
}

#[derive(Default)]
struct Handlers {
    global: Vec<GlobalHandler>,
    containers: HashMap<Handle, Vec<ContainerHandler>>,
}

/// Events received and events whose handlers ran; whether handlers may still run.
#[derive(Default)]
struct Progress {
    received: AtomicU64,
    ran: AtomicU64,
    ran_more: Arc<Signal>,
    /// Set by [`Dispatch::close`]: events left are dropped, their handlers never run.
    closed: AtomicBool,
    /// Held by the dispatcher while it runs one event's handlers, so that closing can wait for
    /// the handlers running.
    running: Mutex<()>,
}

impl Dispatch {
    /// Subscribes to `key` and starts the dispatcher thread (it ends when the subscriber goes).
    pub(crate) fn start(zenoh: &zenoh::Session, key: String) -> zenoh::Result<Dispatch> {
        let handlers = Arc::new(Mutex::new(Handlers::default()));
        let progress = Arc::new(Progress::default());
        let (tx, rx) = mpsc::sync_channel::<(ReclaimEvent, Bytes)>(RECLAIM_PENDING_MAX);
        let dispatcher = {
            let (handlers, progress) = (handlers.clone(), progress.clone());
            std::thread::Builder::new()
                .name("stampede-reclaim".into())
                .spawn(move || dispatch(&rx, &handlers, &progress))?
                .thread()
                .id()
        };
        let received = progress.clone();
        let subscriber = zenoh
            .declare_subscriber(key)
            .callback(move |sample| {
                let bytes = Bytes::from(sample.payload().to_bytes().into_owned());
                // An event that does not decode is not from a Stampede node of this release: skip it.
                if let Ok((event, payload)) = decode_event(&bytes) {
                    let payload = bytes.slice_ref(payload);
                    // Counted only when queued: the barrier waits for what the dispatcher will run.
                    if tx.try_send((event, payload)).is_ok() {
                        received.received.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
            .wait()?;
        Ok(Dispatch { handlers, progress, dispatcher, _subscriber: subscriber })
    }

    pub(crate) fn add_global(&self, handler: GlobalHandler) {
        self.handlers.lock().global.push(handler);
    }

    pub(crate) fn add_container(&self, container: Handle, handler: ContainerHandler) {
        self.handlers.lock().containers.entry(container).or_default().push(handler);
    }

    /// Waits until the handlers of every event received so far have run (at most
    /// [`BARRIER_WAIT_MAX`]; at once on the dispatcher thread itself, a handler making a call).
    pub(crate) fn barrier(&self) {
        if std::thread::current().id() == self.dispatcher {
            return;
        }
        let target = self.progress.received.load(Ordering::SeqCst);
        let deadline = Instant::now() + BARRIER_WAIT_MAX;
        loop {
            let waiter = self.progress.ran_more.listen();
            if self.progress.ran.load(Ordering::SeqCst) >= target || !waiter.wait(Some(deadline)) {
                return;
            }
        }
    }

    /// Stops the handlers: once this returns none runs again (it waits for those running, unless
    /// called from a handler). Idempotent.
    pub(crate) fn close(&self) {
        self.progress.closed.store(true, Ordering::SeqCst);
        if std::thread::current().id() != self.dispatcher {
            drop(self.progress.running.lock());
        }
    }

    /// [`barrier`](Self::barrier) without blocking a thread (for the `_async` forms).
    pub(crate) async fn barrier_async(&self) {
        let target = self.progress.received.load(Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + BARRIER_WAIT_MAX;
        loop {
            let changed = Changed::new(&self.progress.ran_more);
            if self.progress.ran.load(Ordering::SeqCst) >= target {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return;
            }
        }
    }
}

fn dispatch(rx: &mpsc::Receiver<(ReclaimEvent, Bytes)>, handlers: &Mutex<Handlers>, progress: &Progress) {
    for (event, payload) in rx {
        let running = progress.running.lock();
        if !progress.closed.load(Ordering::SeqCst) {
            run(event, payload, handlers);
        }
        drop(running);
        progress.ran.fetch_add(1, Ordering::SeqCst);
        progress.ran_more.notify();
    }
}

/// Runs the handlers of one event.
fn run(event: ReclaimEvent, payload: Bytes, handlers: &Mutex<Handlers>) {
    let reclaimed = item(event.item, payload);
    let (global, container) = {
        let handlers = handlers.lock();
        match event.container {
            None => (handlers.global.clone(), Vec::new()),
            Some(id) => (Vec::new(), handlers.containers.get(&id).cloned().unwrap_or_default()),
        }
    };
    for handler in global {
        handler(&event.name, &reclaimed);
    }
    for handler in container {
        handler(&reclaimed);
    }
}
