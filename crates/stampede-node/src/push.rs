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
//! Where the session's client opened a stream of push events on the node's direct path
//! (`Request::Pushes`, `direct.rs`: its Unix socket, or its TCP port for a client on another
//! host), the sender writes the events there instead, in the same order and numbering, on the
//! Unix socket a large pushed item that is a shared-memory segment passed as its descriptor (each
//! event so written is counted: `Node::streamed_pushes`); a write that fails or takes longer than [`STREAM_WRITE_MAX`] closes the stream, and
//! the events go on the fabric again (the client finds the number it missed and forgets, as for a
//! reset).
//! A cache's answers reported in a request's header (`RequestHeader::opened`) are applied before
//! the request runs: each item opened on its connection, and counted on its tape as a get.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use stampede_core::{Handle, Op, Selector, Timestamp};
use stampede_engine::session::Connection;
use stampede_wire::session::Mutation;
use stampede_wire::{encode, fabric, ItemHeader, Opened, PushEvent};
use tokio::sync::mpsc;
use zenoh::qos::CongestionControl;

use crate::desk::Desk;
use crate::direct::EventStream;
use crate::node::NodeShared;
use crate::readers::Push;
use crate::serve::Answer;
use crate::session::Session;

/// Most push events queued for one session; past it events are dropped and a reset follows.
pub const PUSH_QUEUE_MAX: usize = 64;

/// Longest a session's sender waits to write one event on its stream (a client that stopped
/// reading): past it the stream is closed and the events go on the fabric.
pub const STREAM_WRITE_MAX: Duration = Duration::from_secs(1);

/// A session's queue of push events and its sender, once something was pushed to it.
#[derive(Default)]
pub(crate) struct Pushing {
    queue: Mutex<Option<mpsc::Sender<Push>>>,
    /// Set when an event was dropped, cleared when the reset went out.
    dropped: Arc<AtomicBool>,
    /// A stream of events the client opened on the direct path, until the sender takes it.
    stream: Arc<Mutex<Option<EventStream>>>,
}

/// `stream`, a direct connection of `session`'s client, carries its push events from now on (a
/// stream it opened before is closed).
pub(crate) fn stream_to(session: &Session, stream: EventStream) {
    *session.pushing.stream.lock() = Some(stream);
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
        .map(|reader| {
            let mut pushes = reader.readers.pushes(channel, ts, now_us);
            // A fault for the whole-path simulation's mutation test; never on in a build without
            // the `mutations` feature, which takes no lock for it.
            if cfg!(feature = "mutations") && reader.replies.lock().mutated(Mutation::SkipStaleNotices) {
                pushes.retain(|push| push.notice.pushed);
            }
            (pushes, reader)
        })
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
        let (dropped, stream) = (session.pushing.dropped.clone(), session.pushing.stream.clone());
        let streamed = node.streamed_pushes.clone();
        tokio::spawn(send(Fabric { zenoh: node.zenoh.clone(), key, stream, streamed }, events, dropped));
        sender
    });
    for push in pushes {
        if sender.try_send(push).is_err() {
            session.pushing.dropped.store(true, Ordering::SeqCst);
        }
    }
}

/// Where a session's events go: its stream on the direct path while it has one, else its key on
/// the fabric.
struct Fabric {
    zenoh: zenoh::Session,
    key: String,
    /// Where the client's stream arrives; taken from there into `open`.
    stream: Arc<Mutex<Option<EventStream>>>,
    /// The node's count of events written on streams.
    streamed: Arc<AtomicU64>,
}

/// Sends a session's events in order until its queue closes.
async fn send(mut to: Fabric, mut events: mpsc::Receiver<Push>, dropped: Arc<AtomicBool>) {
    let mut seq = 0;
    let mut numbered = || {
        seq += 1;
        seq - 1
    };
    let mut open = None;
    while let Some(push) = events.recv().await {
        let (header, payload) = event(&push, numbered());
        if to.publish(&mut open, header, payload).await.is_err() {
            return;
        }
        if dropped.swap(false, Ordering::SeqCst) {
            let reset = encode(&PushEvent::Reset { seq: numbered() });
            if to.publish(&mut open, reset, None).await.is_err() {
                return;
            }
        }
    }
}

impl Fabric {
    /// Sends one event: on the session's stream (`open`, or one that arrived since), or else
    /// reliably on the fabric (waiting for room: only this session's sender waits). `Err`: the
    /// fabric is gone.
    async fn publish(
        &mut self,
        open: &mut Option<EventStream>,
        header: Vec<u8>,
        payload: Option<Bytes>,
    ) -> zenoh::Result<()> {
        if let Some(arrived) = self.stream.lock().take() {
            *open = Some(arrived);
        }
        let answer = Answer { header, payloads: payload.into_iter().collect(), error: None };
        if let Some(stream) = open.as_mut() {
            match tokio::time::timeout(STREAM_WRITE_MAX, crate::direct::write_event(stream, &answer)).await {
                Ok(Ok(())) => {
                    self.streamed.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                // The client went or stopped reading: the fabric carries this event and the next.
                _ => *open = None,
            }
        }
        self.zenoh.put(&self.key, answer.message()).congestion_control(CongestionControl::Block).await
    }
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

#[cfg(test)]
mod tests;
