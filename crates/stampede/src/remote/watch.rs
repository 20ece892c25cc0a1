//! A client's watch (see [`crate::watch`]): name changes every node publishes on
//! `stampede/<node>/names`, and nodes up and down from their liveliness tokens
//! `stampede/<node>/alive`, merged into one stream without repeats.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Weak};
use std::time::Instant;

use zenoh::pubsub::Subscriber;
use zenoh::sample::SampleKind;
use zenoh::Wait;

use crate::remote::client::Client;
use crate::watch::{Known, WatchEvent, NAME_EVENTS_KEPT};
use stampede_core::name;
use stampede_wire::decode_name_event;
use stampede_wire::fabric;

/// The subscribers of one watch and what they delivered.
pub(crate) struct Subscription {
    events: mpsc::Receiver<WatchEvent>,
    /// Events dropped because the watcher had [`NAME_EVENTS_KEPT`] unread: told as `Lagged`.
    missed: Arc<AtomicU64>,
    /// What the watcher was told exists: repeats are dropped as they come out.
    known: Known,
    client: Weak<Client>,
    _names: Subscriber<()>,
    _nodes: Subscriber<()>,
}

impl Subscription {
    /// Subscribes on `client`'s zenoh session. Start it before taking the snapshot, then
    /// [`admit`](Self::admit) the snapshot: what changed in between is then neither lost nor
    /// repeated.
    pub(crate) fn start(client: &Arc<Client>, prefix: &str) -> zenoh::Result<Subscription> {
        let (send, events) = mpsc::sync_channel(NAME_EVENTS_KEPT);
        let missed = Arc::new(AtomicU64::new(0));
        // Never blocks zenoh's thread: a watcher that does not read loses events, and is told.
        let deliver = {
            let missed = missed.clone();
            move |event: WatchEvent| {
                if send.try_send(event).is_err() {
                    missed.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        let names = {
            let (deliver, prefix) = (deliver.clone(), prefix.to_owned());
            client
                .zenoh()
                .declare_subscriber(fabric::names_key("*"))
                .callback(move |sample| {
                    // Anything that does not decode is not from a node of this release: skipped.
                    match decode_name_event(&sample.payload().to_bytes()) {
                        Ok(event) if event.subject().is_some_and(|name| name::under(name, &prefix)) => deliver(event),
                        _ => {}
                    }
                })
                .wait()?
        };
        let nodes = client
            .zenoh()
            .liveliness()
            .declare_subscriber(fabric::alive_key("*"))
            .history(true)
            .callback(move |sample| {
                let Some(node) = fabric::node_of_alive(sample.key_expr().as_str()) else { return };
                let node = node.to_owned();
                deliver(match sample.kind() {
                    SampleKind::Put => WatchEvent::NodeUp { node },
                    SampleKind::Delete => WatchEvent::NodeDown { node },
                });
            })
            .wait()?;
        let client = Arc::downgrade(client);
        Ok(Subscription { events, missed, known: Known::default(), client, _names: names, _nodes: nodes })
    }

    /// Records what the watch starts with, so that it is not repeated.
    pub(crate) fn admit(&mut self, snapshot: &[WatchEvent]) {
        for event in snapshot {
            self.known.admit(event);
        }
    }

    /// The next new event delivered before `deadline` (`None`: waits as long as it takes).
    pub(crate) fn next(&mut self, deadline: Option<Instant>) -> Option<WatchEvent> {
        let missed = self.missed.swap(0, Ordering::Relaxed);
        if missed > 0 {
            return Some(WatchEvent::Lagged { missed });
        }
        loop {
            let event = match deadline {
                None => self.events.recv().ok()?,
                Some(deadline) => self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()?,
            };
            if self.known.admit(&event) {
                return Some(event);
            }
        }
    }

    /// `true` once the client was closed.
    pub(crate) fn closed(&self) -> bool {
        self.client.upgrade().is_none_or(|client| client.is_closed())
    }
}
