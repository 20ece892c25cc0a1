//! Sending pushes (docs/PREFETCH.md): after a put, the put's notice and, where the connection's
//! [`Pusher`](stampede_core::Pusher) says so, its item go to every session reading the channel
//! with prefetch on, on the session's key `stampede/<node>/push/<session>`, in order.
//!
//! Guarantees: a put never waits for a push — its events go into the session's queue of at most
//! [`PUSH_QUEUE_MAX`] events, or are dropped when it is full; the session's sender then publishes
//! a [`PushEvent::Reset`] after the events queued before the drop, so that its client forgets
//! what the dropped notices would have corrected (its cache answers nothing stale for longer than
//! the queue takes to drain). The sender publishes reliably, one event at a time, numbered (a
//! client that finds a number missing — lost on the fabric — forgets as for a reset); it ends
//! with its session (its queue's last sender dropped). A session never pushed to costs nothing.
//! A cache's answers reported in a request's header (`RequestHeader::opened`) are applied before
//! the request runs: each item opened on its connection, and counted on its tape as a get.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use stampede_core::{Handle, Op, Selector, Timestamp};
use stampede_engine::session::Connection;
use stampede_wire::{encode, fabric, ItemHeader, Opened, PushEvent};
use tokio::sync::mpsc;
use zenoh::bytes::ZBytes;
use zenoh::qos::CongestionControl;

use crate::desk::Desk;
use crate::node::NodeShared;
use crate::readers::Push;
use crate::session::Session;

/// Most push events queued for one session; past it events are dropped and a reset follows.
pub const PUSH_QUEUE_MAX: usize = 64;

/// A session's queue of push events and its sender, once something was pushed to it.
#[derive(Default)]
pub(crate) struct Pushing {
    queue: Mutex<Option<mpsc::Sender<Push>>>,
    /// Set when an event was dropped, cleared when the reset went out.
    dropped: Arc<AtomicBool>,
}

/// Sends what the put at `ts` through output connection `connection` of `session` means for
/// every session of the node.
pub(crate) fn pushed(node: &Arc<NodeShared>, session: &Session, connection: Handle, ts: Timestamp) {
    let now_us = node.origin.elapsed().as_micros() as u64;
    for (reader, pushes) in after_put(&node.desk, session, connection, ts, now_us) {
        queue(node, &reader, pushes);
    }
}

/// What the put at `ts` through output connection `connection` of `session`, at `now_us` on the
/// node's clock, sends each session of `desk` (those it sends something): the node's and the
/// whole-path simulation's.
pub(crate) fn after_put(
    desk: &Desk,
    session: &Session,
    connection: Handle,
    ts: Timestamp,
    now_us: u64,
) -> Vec<(Arc<Session>, Vec<Push>)> {
    let Ok(Connection::ChannelOutput(out)) = session.handles.connection("put", connection) else { return Vec::new() };
    let channel = out.channel().id();
    let sessions = desk.sessions().into_iter();
    sessions
        .map(|reader| (reader.readers.pushes(channel, ts, now_us), reader))
        .filter(|(pushes, _)| !pushes.is_empty())
        .map(|(pushes, reader)| (reader, pushes))
        .collect()
}

/// `push` as the session's event number `seq`: the event's header, and the pushed item's payload
/// that follows it.
pub(crate) fn event(push: &Push, seq: u64) -> (Vec<u8>, Option<Bytes>) {
    let item = push.item.as_ref().map(ItemHeader::of);
    let header = encode(&PushEvent::Put { seq, connection: push.connection, notice: push.notice, item });
    (header, push.item.as_ref().map(|item| item.payload.data.clone()))
}

/// Queues `pushes` for `session`, starting its sender on the first.
fn queue(node: &Arc<NodeShared>, session: &Session, pushes: Vec<Push>) {
    let mut queue = session.pushing.queue.lock();
    let sender = queue.get_or_insert_with(|| {
        let (sender, events) = mpsc::channel(PUSH_QUEUE_MAX);
        let key = fabric::push_key(&node.options.name, &session.id);
        tokio::spawn(send(node.zenoh.clone(), key, events, session.pushing.dropped.clone()));
        sender
    });
    for push in pushes {
        if sender.try_send(push).is_err() {
            session.pushing.dropped.store(true, Ordering::SeqCst);
        }
    }
}

/// Publishes a session's events in order until its queue closes.
async fn send(zenoh: zenoh::Session, key: String, mut events: mpsc::Receiver<Push>, dropped: Arc<AtomicBool>) {
    let mut seq = 0;
    let mut numbered = || {
        seq += 1;
        seq - 1
    };
    while let Some(push) = events.recv().await {
        let (header, payload) = event(&push, numbered());
        let mut writer = ZBytes::writer();
        writer.append(ZBytes::from(header));
        if let Some(payload) = payload {
            writer.append(ZBytes::from(payload));
        }
        let message = writer.finish();
        if publish(&zenoh, &key, message).await.is_err() {
            return;
        }
        if dropped.swap(false, Ordering::SeqCst)
            && publish(&zenoh, &key, ZBytes::from(encode(&PushEvent::Reset { seq: numbered() }))).await.is_err()
        {
            return;
        }
    }
}

/// Publishes one event reliably (waiting for room: only this session's sender waits).
async fn publish(zenoh: &zenoh::Session, key: &str, message: ZBytes) -> zenoh::Result<()> {
    zenoh.put(key, message).congestion_control(CongestionControl::Block).await
}

/// Applies the cache answers a request of `session` reported: each item opened on its connection
/// (an answer whose item went meanwhile — the connection detached, the channel closed — changes
/// nothing), and recorded on the connection's tape as the get it answered.
pub(crate) fn opened(session: &Session, opened: &[Opened], now_us: u64) {
    for answer in opened {
        let Some(input) = session.readers.input(answer.connection) else { continue };
        if input.get(Selector::At(answer.ts), Some(Duration::ZERO)).is_ok() {
            session.readers.used(answer.connection, answer.ts, now_us.saturating_sub(answer.ago_us));
        }
    }
}

/// The put a request makes, with its output connection and timestamp.
pub(crate) fn put_of(op: &Op) -> Option<(Handle, Timestamp)> {
    match *op {
        Op::Put { connection, ts, .. } => Some((connection, ts)),
        _ => None,
    }
}
