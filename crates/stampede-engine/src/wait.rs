//! Waiting for a condition that another thread's operation may make true — blocking or async.
//!
//! A [`Signal`] is an event plus two counters: a version bumped by every notification, and the
//! number of registered waiters. Notifiers skip the wake-up entirely when nobody waits (the
//! common case on a hot path), and a blocking waiter first spins briefly on the version — a
//! producer on the other core is often about to put — before paying for a sleep and a wake-up.
//!
//! Both waiting forms follow the same lost-wake-up-free pattern: try; register as a waiter; try
//! again; only then sleep. Whoever changes the state notifies after releasing its lock. The
//! waiter count is incremented before the second try and read after the state change (both
//! sequentially consistent), so a notifier that sees no waiter changed the state before that
//! waiter's second try, which therefore sees the change. The "not yet" errors are those
//! [`Error::is_transient`] names (`NotAvailable`, `Full` while the item could still fit); every
//! other result returns.
//!
//! [`Changed`] is the same registration as an owned future, for callers that do the operation
//! itself elsewhere (an async bridge that takes or stores synchronously on its own thread): it is
//! registered when created, so "create it; try with a zero timeout; await it if that was 'not
//! yet'" loses no wake-up, and awaiting it never holds an item.
//!
//! A timeout too large to be represented as a deadline (`Duration::MAX`) means "wait forever".

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use event_listener::{Event, EventListener, Listener};
use stampede_core::{Error, Result};

use crate::space::HorizonWait;

/// How long a blocking waiter spins before it registers and sleeps. Longer than a hand-off's
/// work on the other side (a put plus a wake-up check, ~1 µs) with room to spare, short enough
/// that a consumer idling between 30 fps frames burns well under 0.1 % of a core. The spinner
/// yields its core between short bursts: on 2 cores a pure spin starves the producer (measured:
/// Python hand-off 22 µs with a pure 20 µs spin, 2.7 µs with yields, since the producer also
/// needs the GIL back).
const SPIN_FOR: Duration = Duration::from_micros(20);

/// A wake-up source with a version counter and a waiter count.
#[derive(Default)]
pub struct Signal {
    event: Event,
    version: AtomicU64,
    waiters: AtomicUsize,
}

/// A registered waiter; deregisters when dropped. `P` reaches the signal: a borrow for a call
/// that blocks, an `Arc` for a [`Changed`] future that outlives the call creating it.
pub struct Waiter<P: Deref<Target = Signal>> {
    signal: P,
    listener: Option<EventListener>,
}

impl Signal {
    /// Tells waiters that something changed. Cheap when nobody waits.
    pub fn notify(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.event.notify(usize::MAX);
        }
    }

    /// Wakes registered waiters only, without bumping the version: for signals nobody spins on
    /// (the runtime's progress signal, notified on every put and claim change).
    pub(crate) fn notify_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.event.notify(usize::MAX);
        }
    }

    /// Registers a waiter: re-check the condition after this, then wait.
    pub fn listen(&self) -> Waiter<&Signal> {
        Waiter::new(self)
    }

    /// [`listen`](Self::listen) for a waiter that owns its way to the signal.
    pub(crate) fn listen_owned(self: &Arc<Self>) -> Waiter<Arc<Signal>> {
        Waiter::new(self.clone())
    }

    /// Spins in bursts, yielding between them, for up to [`SPIN_FOR`]; `true` if a
    /// notification happened meanwhile.
    fn spin(&self) -> bool {
        let seen = self.version.load(Ordering::Acquire);
        let start = Instant::now();
        loop {
            for _ in 0..50 {
                if self.version.load(Ordering::Acquire) != seen {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= SPIN_FOR {
                return false;
            }
            std::thread::yield_now();
        }
    }
}

impl<P: Deref<Target = Signal>> Waiter<P> {
    fn new(signal: P) -> Waiter<P> {
        signal.waiters.fetch_add(1, Ordering::SeqCst);
        let listener = Some(signal.event.listen());
        Waiter { signal, listener }
    }

    /// Sleeps until notified, or until `deadline`; `false` if the deadline passed.
    pub fn wait(mut self, deadline: Option<Instant>) -> bool {
        let listener = self.listener.take().expect("a waiter waits once");
        match deadline {
            None => {
                listener.wait();
                true
            }
            Some(deadline) => listener.wait_deadline(deadline).is_some(),
        }
    }

    /// The async form of [`wait`](Self::wait), with tokio's timer.
    async fn wait_async(mut self, deadline: Option<tokio::time::Instant>) -> bool {
        let listener = self.listener.take().expect("a waiter waits once");
        match deadline {
            None => {
                listener.await;
                true
            }
            Some(deadline) => tokio::time::timeout_at(deadline, listener).await.is_ok(),
        }
    }
}

impl<P: Deref<Target = Signal>> Drop for Waiter<P> {
    fn drop(&mut self) {
        self.signal.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The result of a first, non-waiting attempt if it is the call's result: `None` when it is "not
/// yet" and the caller may wait (`timeout` other than zero), so the caller goes on to register
/// and block.
pub(crate) fn at_once<T>(first: Result<T>, timeout: Option<Duration>) -> Option<Result<T>> {
    match first {
        Err(e) if e.is_transient() && timeout != Some(Duration::ZERO) => None,
        done => Some(done),
    }
}

/// Blocks until `attempt` succeeds or fails for good, or `timeout` (None = forever) expires,
/// in which case the last "not yet" error is returned.
pub(crate) fn blocking<T>(
    signal: &Signal,
    timeout: Option<Duration>,
    mut attempt: impl FnMut() -> Result<T>,
) -> Result<T> {
    let deadline = deadline(timeout);
    let mut waiting = None;
    loop {
        match attempt() {
            Err(e) if e.is_transient() && deadline.is_none_or(|d| Instant::now() < d) => {}
            other => return other,
        }
        // From the first "not yet" to the return: the call's blocking time in the event log.
        waiting.get_or_insert_with(|| crate::trace::span(crate::trace::Kind::Wait, 0, 0, 0));
        if signal.spin() {
            continue;
        }
        let waiter = signal.listen();
        match attempt() {
            Err(e) if e.is_transient() => {}
            other => return other,
        }
        if !waiter.wait(deadline) {
            return attempt();
        }
    }
}

/// The async form of [`blocking`]: the waiting task yields to its executor instead of blocking
/// a thread (no spinning). Timeouts use tokio's timer, so a timeout needs a tokio runtime with
/// time enabled: outside any tokio runtime a timed async call fails `InvalidArgument` (instead of
/// tokio's panic); without a timeout any executor will do.
pub(crate) async fn asynchronous<T>(
    signal: &Signal,
    timeout: Option<Duration>,
    mut attempt: impl FnMut() -> Result<T>,
) -> Result<T> {
    if timeout.is_some() && tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::InvalidArgument {
            op: "async",
            name: String::new(),
            reason: "an async call with a timeout needs a tokio runtime (with time enabled); await it there, or \
                     without a timeout, or race changed()/freed() against your executor's timer"
                .into(),
        });
    }
    let deadline = timeout.and_then(|d| tokio::time::Instant::now().checked_add(d));
    loop {
        match attempt() {
            Err(e) if e.is_transient() && deadline.is_none_or(|d| tokio::time::Instant::now() < d) => {}
            other => return other,
        }
        let waiter = signal.listen();
        match attempt() {
            Err(e) if e.is_transient() => {}
            other => return other,
        }
        if !waiter.wait_async(deadline).await {
            return attempt();
        }
    }
}

/// The deadline `timeout` from now: `None` (wait forever) for no timeout, or for one too far
/// away to be represented.
pub fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|d| Instant::now().checked_add(d))
}

/// What is left until `deadline` (all the time there is for `None`), zero once it passed.
pub fn left(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::MAX, |deadline| deadline.saturating_duration_since(Instant::now()))
}

/// A future that completes when something a blocked call of one connection waits for may have
/// happened: for an input, an arrival, ts_min or the settled horizon passing what it asks for,
/// its container destroyed, the connection detached, its task or the runtime closed; for an
/// output, room freed or the same closings. It is registered when created, so the pattern
///
/// ```
/// # use std::time::Duration;
/// # use stampede_core::{Item, Result, Selector};
/// # async fn bridge(inp: &stampede_engine::ChannelInput) -> Result<Item> {
/// loop {
///     let changed = inp.changed(Selector::OldestUnseen);
///     match inp.get(Selector::OldestUnseen, Some(Duration::ZERO)) {
///         Err(e) if e.is_transient() => changed.await,
///         done => return done,
///     }
/// }
/// # }
/// ```
///
/// loses no wake-up. It may complete spuriously (try again); it owns what it needs (`'static`,
/// `Send`), and dropping it deregisters.
#[must_use = "a Changed does nothing unless awaited"]
pub struct Changed {
    waiter: Waiter<Arc<Signal>>,
    /// Keeps the connection registered for horizon moves (ts_min, settledness) while waiting.
    _horizon: Option<HorizonWait>,
}

impl Changed {
    /// Completes at the next notification of `signal`.
    pub fn new(signal: &Arc<Signal>) -> Changed {
        Changed::with_horizon(signal, None)
    }

    /// [`new`](Self::new), keeping `horizon` registered (a get's wait for horizon moves) until
    /// it completes or drops.
    pub(crate) fn with_horizon(signal: &Arc<Signal>, horizon: Option<HorizonWait>) -> Changed {
        Changed { waiter: signal.listen_owned(), _horizon: horizon }
    }

    /// Blocks until the future would complete or `deadline` passes; `false` on the deadline.
    pub fn wait(self, deadline: Option<Instant>) -> bool {
        self.waiter.wait(deadline)
    }
}

impl Future for Changed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.waiter.listener.as_mut() {
            Some(listener) => {
                let ready = Pin::new(listener).poll(cx);
                if ready.is_ready() {
                    self.waiter.listener = None;
                }
                ready
            }
            None => Poll::Ready(()),
        }
    }
}

impl std::fmt::Debug for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changed").field("done", &self.waiter.listener.is_none()).finish()
    }
}
