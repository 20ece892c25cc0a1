//! Consumes that ride on requests (docs/PREFETCH.md, "Consumes ride on requests"): a consume an
//! input connection with prefetch makes of an item its get returned, on a channel without bounds,
//! waits in the session's [`Deferred`] list for the next request, whose header carries it; the
//! node applies it before that request. A reader served from its cache then sends no message per
//! frame of its own.
//!
//! Guarantees (with `stampede_wire::session::Deferred`'s): every request of this client carries
//! the consumes deferred before it, so whatever the client asks later sees them applied, as if
//! each had been sent when it was made; none waits longer than [`CONSUME_DELAY_MAX`] — a sender
//! thread of the client sends them then (the newest as a request of its own, the others in its
//! header) — nor past [`CONSUMED_MAX`] of them; an exchange that failed defers what it carried
//! again. Only a channel without bounds defers: no producer can be waiting for the room a consume
//! makes, so deferring changes when an item is reclaimed (at most the delay later), never what
//! anyone reads. The sender thread holds no strong reference to the client and ends when it
//! closes or goes.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;
use stampede_wire::session::Deferred;
#[cfg(doc)]
use stampede_wire::CONSUMED_MAX;
use stampede_wire::{Consumed, Opened, RequestHeader, CONSUME_DELAY_MAX};

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

/// What a request's header carried of the session's pending reports: its consumes carried again
/// when its exchange failed; its cache answers, confirmed when a reply to its call is read (they
/// stay pending until then).
pub(super) struct Carried {
    pub(super) opened: Vec<Opened>,
    consumed: Vec<Consumed>,
    at: Instant,
}

impl Carried {
    pub(super) fn of(header: &RequestHeader) -> Carried {
        Carried { opened: header.opened.clone(), consumed: header.consumed.clone(), at: Instant::now() }
    }
}

impl Client {
    /// Defers `consumed` into the session's next request (sent at once when the sender cannot
    /// run or [`CONSUMED_MAX`] wait).
    pub(crate) fn defer_consume(self: &Arc<Self>, consumed: Consumed) {
        let full = self.consumes.deferred.lock().defer(consumed, Instant::now());
        let sender_runs = *self.consumes.sender.get_or_init(|| start_sender(self));
        if full || !sender_runs {
            self.send_deferred();
        } else {
            self.consumes.changed.notify();
        }
    }

    /// The deferred consumes a request's header takes.
    pub(super) fn take_consumed(&self) -> Vec<Consumed> {
        self.consumes.deferred.lock().take()
    }

    /// What a failed exchange carried: its consumes applied by the next request instead (its
    /// cache answers are pending still).
    pub(super) fn carry_again(&self, carried: Carried) {
        self.consumes.deferred.lock().restore(carried.consumed, carried.at);
    }

    /// Wakes the sender to end (the client closes).
    pub(super) fn stop_sending_consumes(&self) {
        self.consumes.changed.notify();
    }

    /// Sends the deferred consumes now: the newest as a request of its own (sent without
    /// waiting), the others in its header.
    fn send_deferred(&self) {
        let newest = self.consumes.deferred.lock().pop();
        if let Some(newest) = newest {
            self.send(newest.op());
        }
    }
}

/// Starts the client's sender: it sends the deferred consumes once the oldest waited
/// [`CONSUME_DELAY_MAX`]. `false` when no thread could start.
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
