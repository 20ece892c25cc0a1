//! Consumes that ride on requests (docs/PREFETCH.md, "Consumes ride on requests"): a consume an
//! input connection with prefetch makes of an item its get returned, on a channel without bounds,
//! waits in the session's [`Deferred`] list, and every request's header carries it until a reply
//! confirms the node applied it. A reader served from its cache then sends no message per frame
//! of its own.
//!
//! Guarantees (with `stampede_wire::session::Deferred`'s): every request of this client, from any
//! of its threads, carries the consumes deferred before it and not yet confirmed, so whatever the
//! client asks later sees them applied, as if each had been sent when it was made — even when the
//! request that carried one first is still on its way; none waits longer than
//! [`CONSUME_DELAY_MAX`] unsent — a sender thread of the client then makes a call that carries
//! them — and past [`CONSUMED_MAX`] unconfirmed a consume is not deferred. Only a channel without
//! bounds defers: no producer can be waiting for the room a consume makes, so deferring changes
//! when an item is reclaimed (at most the delay later), never what anyone reads. The sender
//! thread holds a strong reference to the client only during its call (a client whose last
//! handle is dropped meanwhile closes when that call returns, within its deadline), and ends
//! when the client closes or goes.

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use stampede_core::{Handle, Timestamp};
use stampede_wire::session::Deferred;
#[cfg(doc)]
use stampede_wire::CONSUMED_MAX;
use stampede_wire::{Consumed, Op, CONSUME_DELAY_MAX};

use crate::wait::Signal;

use super::Client;

/// The session's deferred consumes and their sender.
#[derive(Default)]
pub(crate) struct Consumes {
    deferred: Mutex<Deferred<Instant>>,
    /// Wakes the sender: a consume deferred, the client closed or gone.
    changed: Arc<Signal>,
    /// Whether the sender thread runs (`false`: it could not start, and consumes go at once).
    sender: OnceLock<bool>,
}

impl Drop for Consumes {
    fn drop(&mut self) {
        // The client is going: its sender wakes, finds it gone and ends.
        self.changed.notify();
    }
}

impl Client {
    /// Defers a consume of `connection` at `ts` (`consume_until` when `until`) into the session's
    /// requests: `false` when it cannot be — [`CONSUMED_MAX`] await confirmation, or the sender
    /// cannot run — and the caller sends it at once.
    pub(crate) fn defer_consume(self: &Arc<Self>, connection: Handle, ts: Timestamp, until: bool) -> bool {
        if !*self.consumes.sender.get_or_init(|| start_sender(self)) {
            return false;
        }
        {
            let mut deferred = self.consumes.deferred.lock();
            if !deferred.may_defer() {
                return false;
            }
            deferred.defer(connection, ts, until, Instant::now());
        }
        self.consumes.changed.notify();
        true
    }

    /// The deferred consumes a request's header carries: every one not yet confirmed.
    pub(super) fn carried_consumes(&self) -> Vec<Consumed> {
        self.consumes.deferred.lock().carried()
    }

    /// An outcome was read in reply to a call whose first try carried `carried`: the node
    /// applied them.
    pub(super) fn confirm_consumed(&self, carried: &[Consumed]) {
        if !carried.is_empty() {
            self.consumes.deferred.lock().confirm(carried);
        }
    }

    /// Wakes the sender to end (the client closes).
    pub(super) fn stop_sending_consumes(&self) {
        self.consumes.changed.notify();
    }

    /// Makes a call that only carries the deferred consumes (a `ts_min` question, which changes
    /// nothing): its reply confirms them. Its error is the next call's to meet.
    fn send_deferred(&self) {
        self.consumes.deferred.lock().sent(Instant::now());
        let _ = self.call(Op::TsMin, None, Duration::ZERO);
    }
}

/// Starts the client's sender: it sends the deferred consumes once the oldest waited
/// [`CONSUME_DELAY_MAX`] unconfirmed. `false` when no thread could start.
fn start_sender(client: &Arc<Client>) -> bool {
    let (client, changed): (Weak<Client>, _) = (Arc::downgrade(client), client.consumes.changed.clone());
    let sender = move || loop {
        let waiter = changed.listen();
        let due = {
            let Some(client) = client.upgrade() else { return };
            if client.check_open("consume").is_err() {
                return;
            }
            let since = client.consumes.deferred.lock().since();
            match since.map(|since| since + CONSUME_DELAY_MAX) {
                Some(due) if due <= Instant::now() => {
                    client.send_deferred();
                    continue;
                }
                due => due,
            }
        };
        // Until the oldest is due, or something changes (`None`: nothing deferred).
        waiter.wait(due);
    };
    std::thread::Builder::new().name("stampede-consumes".into()).spawn(sender).is_ok()
}
