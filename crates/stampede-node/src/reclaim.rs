//! GC handlers of remote clients (D-Stampede's generic handler): items reclaimed on the node,
//! delivered to the sessions that registered a handler for their channel or queue, or for all.
//!
//! The first time a session asks for a container (or for all), the node installs one embedded
//! handler for it, which copies nothing: it appends `(container, name, item)` to the outbox of
//! every session subscribed to it (at most [`RECLAIM_OUTBOX_MAX`] events each; past that events are
//! dropped and counted, so a client that stops reading cannot grow the node's memory). Outboxes
//! go out as zenoh puts on `stampede/<node>/reclaimed/<session>`: inline, before the reply to the
//! request whose operation reclaimed the items (so the client runs its handlers before that call
//! returns, as embedded), and from a background task for items reclaimed otherwise (another
//! session's request, the node's own application).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use stampede_core::{Item, Result};
use stampede_engine::Container;
use stampede_wire::fabric;
use stampede_wire::{encode, Handle, ItemHeader, ReclaimEvent};
use zenoh::bytes::ZBytes;
use zenoh::qos::CongestionControl;

use crate::node::NodeShared;
use crate::session::Session;

/// Most reclaim events a session's outbox holds before new ones are dropped.
pub const RECLAIM_OUTBOX_MAX: usize = 65_536;

/// The node's side: which embedded handlers it installed, and the events it dropped.
#[derive(Default)]
pub(crate) struct Reclaims {
    /// Containers (by id; `None`: runtime-wide) whose embedded handler is installed.
    installed: Mutex<HashSet<Option<Handle>>>,
    /// Events dropped because an outbox was full.
    pub(crate) dropped: AtomicU64,
    /// Wakes the background sender.
    pub(crate) pending: Arc<tokio::sync::Notify>,
}

/// A session's side: what it subscribed to, and the events not sent yet.
#[derive(Default)]
pub(crate) struct Outbox {
    subscribed: HashSet<Option<Handle>>,
    events: VecDeque<(ReclaimEvent, Bytes)>,
}

/// Serializes the sending of one session's outbox, so its events leave in order.
pub(crate) type Sending = tokio::sync::Mutex<()>;

/// Subscribes `session` to the items reclaimed from `container` (`None`: from all), installing
/// the node's embedded handler for it on first use.
pub(crate) fn subscribe(node: &Arc<NodeShared>, session: &Session, container: Option<Handle>) -> Result<()> {
    let target = match container {
        Some(handle) => Some(session.handles.container("on_reclaim", handle)?),
        None => None,
    };
    // Installed under the lock: a second session asking meanwhile returns only once the handler
    // exists, and a failed installation leaves no mark.
    let mut installed = node.reclaims.installed.lock();
    if !installed.contains(&container) {
        let weak = Arc::downgrade(node);
        match target {
            None => node.runtime.on_reclaim(move |name, item| reclaimed(&weak, None, name, item)),
            Some(Container::Channel(channel)) => {
                let (id, name) = (channel.id(), channel.name().to_owned());
                channel.on_reclaim(move |item| reclaimed(&weak, Some(id), &name, item));
            }
            Some(Container::Queue(queue)) => {
                let (id, name) = (queue.id(), queue.name().to_owned());
                queue.on_reclaim(move |item| reclaimed(&weak, Some(id), &name, item));
            }
        }
        installed.insert(container);
    }
    drop(installed);
    session.outbox.lock().subscribed.insert(container);
    Ok(())
}

/// The embedded handler: queues the item for every subscribed session (the payload is shared,
/// not copied) and wakes the sender.
fn reclaimed(node: &Weak<NodeShared>, container: Option<Handle>, name: &str, item: &Item) {
    let Some(node) = node.upgrade() else { return };
    let sessions: Vec<_> = node.desk.sessions();
    for session in sessions {
        let mut outbox = session.outbox.lock();
        if !outbox.subscribed.contains(&container) {
            continue;
        }
        if outbox.events.len() >= RECLAIM_OUTBOX_MAX {
            node.reclaims.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let header = ItemHeader::of(item);
        let event = ReclaimEvent { container, name: name.to_owned(), item: header };
        outbox.events.push_back((event, item.payload.data.clone()));
    }
    node.reclaims.pending.notify_one();
}

/// Sends `session`'s pending events, in order. A send that fails means the client is gone (its
/// session closes through liveliness).
pub(crate) async fn send(node: &NodeShared, session: &Session) {
    let _sending = session.sending.lock().await;
    let events: Vec<_> = session.outbox.lock().events.drain(..).collect();
    if events.is_empty() {
        return;
    }
    let key = fabric::reclaimed_key(&node.options.name, &session.id);
    for (event, payload) in events {
        let mut message = ZBytes::writer();
        message.append(ZBytes::from(encode(&event)));
        message.append(ZBytes::from(payload));
        // Blocking congestion control: an event is never dropped on the way; the outbox bound
        // is what protects the node from a client that stops reading.
        let _ = node.zenoh.put(&key, message.finish()).congestion_control(CongestionControl::Block).await;
    }
}

/// The background sender: sends every session's pending events whenever some are queued. Holds
/// the node weakly; ends with the node's worker threads.
pub(crate) async fn run(node: Weak<NodeShared>, pending: Arc<tokio::sync::Notify>) {
    loop {
        pending.notified().await;
        let Some(node) = node.upgrade() else { return };
        let sessions: Vec<_> = node.desk.sessions();
        for session in sessions {
            send(&node, &session).await;
        }
    }
}
