//! Sliced waits: a request that may wait asks the node to wait at most one wait slice and is
//! asked again until the caller's deadline; readiness futures over one such request.
//!
//! No request asks the node to wait longer than the session's wait slice, a bounded share of the
//! lease, so that a reply that waited a whole slice is still taken (see [`Client::call_waiting`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Result;
use bytes::Bytes;
use zenoh::Wait;

use crate::remote::QUERY_MARGIN;
use crate::wait::{Changed, Signal};
use stampede_wire::{Op, WireOutcome};

use super::{blocking, Client};

impl Client {
    /// [`call`](Self::call) for a request that may wait (a get, a put into a full container):
    /// asks in slices of at most the node's wait slice, again while the answer is "not yet" and
    /// `timeout` (`None`: forever) has not expired; the last "not yet" is the call's error.
    pub(crate) fn call_waiting(
        &self,
        timeout: Option<Duration>,
        payload: Option<Bytes>,
        request: impl Fn(u64) -> Op,
    ) -> Result<(WireOutcome, Bytes)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let wait = self.slice(deadline);
            match self.call_until(request(micros(wait)), payload.clone(), wait, deadline) {
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
        request: impl Fn(u64) -> Op,
    ) -> Result<(WireOutcome, Bytes)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let wait = self.slice(deadline);
            match self.call_async(request(micros(wait)), payload.clone(), wait, deadline).await {
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

    /// A readiness future over a waiting request (`request(wait_us)`, one wait slice): sent now,
    /// so that a change after the node registered it is never missed; it completes when the
    /// query ends (answered, timed out, or the session closed).
    pub(crate) fn changed(&self, request: impl FnOnce(u64) -> Op) -> Changed {
        let signal = Arc::new(Signal::default());
        let changed = Changed::new(&signal);
        let wait = self.slice(None);
        self.notify_when_answered(request(micros(wait)), wait, signal);
        changed
    }

    /// Completes at the next put or claim change on the node, or after a wait slice.
    pub(crate) fn progressed(&self) -> Changed {
        self.changed(|wait_us| Op::WaitProgress { wait_us })
    }

    /// Sends `request` and notifies `signal` when its query ends (answered, timed out, or the
    /// session closed), without waiting.
    fn notify_when_answered(&self, request: Op, wait: Duration, signal: Arc<Signal>) {
        /// Notifies when zenoh drops the query's callback: the query has ended.
        struct Ended(Arc<Signal>);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.notify();
            }
        }
        let ended = Ended(signal);
        if self.check_open(request.name()).is_err() {
            return;
        }
        let query = self.query(self.header(None, request.into()), None, wait.saturating_add(QUERY_MARGIN));
        let _ = blocking(|| query.callback(move |_| ended.0.notify()).wait());
    }
}

/// A wait in microseconds, as the wire carries it.
pub(crate) fn micros(wait: Duration) -> u64 {
    u64::try_from(wait.as_micros()).unwrap_or(u64::MAX)
}
