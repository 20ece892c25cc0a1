//! Remote queues and their connections (the remote forms of [`crate::Queue`],
//! [`crate::QueueInput`] and [`crate::QueueOutput`]).
//!
//! A remote getter keeps its place in the queue's line of blocked getters only within one wait
//! slice: between slices another getter may go first (see `docs/NODES.md`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::payload::Buffers;
use crate::trace::{self, Kind, NO_ITEM};
use crate::wait::Changed;
use crate::{InputOptions, IntoPayload, Payload, QueueItem, Result, Timestamp};

use crate::remote::channel::{check_fits, done};
use crate::remote::connection::{container_handle, item, Link};
use crate::remote::runtime::unexpected;
use crate::remote::task::RemoteTask;
use stampede_wire::{Op, Outcome, WireOutcome};

container_handle!(RemoteQueue, "queue");

impl RemoteQueue {
    pub(crate) fn attach_input(&self, task: &RemoteTask) -> Result<RemoteQueueInput> {
        Ok(RemoteQueueInput { link: self.container.attach(task, Some(InputOptions::default()))? })
    }

    pub(crate) fn attach_output(&self, task: &RemoteTask) -> Result<RemoteQueueOutput> {
        let link = self.container.attach(task, None)?;
        let buffers = link.client.buffers();
        Ok(RemoteQueueOutput { queue: self.clone(), link, buffers })
    }
}

/// A remote task's output connection to a queue.
pub(crate) struct RemoteQueueOutput {
    queue: RemoteQueue,
    link: Link,
    buffers: Arc<Buffers>,
}

impl RemoteQueueOutput {
    /// Appends `payload` at `ts` (as [`crate::QueueOutput::put`]); `timeout` bounds the wait
    /// for room in a bounded queue.
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        let _span = trace::span(Kind::Put, self.link.trace_name(), ts as u64, payload.payload_bytes() as u64);
        let payload = self.admit(ts, payload)?;
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request = |wait_us| Op::QueuePut { connection, ts, codec: codec.clone(), wait_us };
        done("put", &self.link, self.link.waiting(timeout, Some(payload.data), request))
    }

    /// [`put`](Self::put) without blocking a thread.
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        let payload = self.admit(ts, payload)?;
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request = |wait_us| Op::QueuePut { connection, ts, codec: codec.clone(), wait_us };
        done("put", &self.link, self.link.waiting_async(timeout, Some(payload.data), request).await)
    }

    fn admit(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<Payload> {
        self.link.check_attached()?;
        let declared = self.queue.container.codec.as_ref();
        crate::payload::admit(self.queue.name(), ts, payload, declared, &self.buffers, |bytes| {
            self.check_fits(ts, bytes)
        })
    }

    /// As [`RemoteChannelOutput::check_fits`](crate::remote::channel::RemoteChannelOutput::check_fits).
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        check_fits(&self.link, self.queue.limits(), ts, payload_bytes)
    }

    /// Copies `parts` into a buffer of this connection's pool (the one copy of copy-in).
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        self.buffers.copy(parts)
    }

    /// Completes when a put blocked on this connection would wake (or spuriously).
    pub fn freed(&self) -> Changed {
        self.link.changed(None)
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too).
    pub fn detach(&self) {
        self.link.detach();
    }
}

/// A remote task's input connection to a queue.
pub(crate) struct RemoteQueueInput {
    link: Link,
}

impl RemoteQueueInput {
    /// Takes the oldest waiting item (as [`crate::QueueInput::get`]); it is open on this
    /// connection until consumed. `NotAvailable` when the timeout expires.
    pub fn get(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        let span = trace::span(Kind::Get, self.link.trace_name(), NO_ITEM, 0);
        let connection = self.link.id;
        let got = self.got(self.link.waiting(timeout, None, |wait_us| Op::QueueGet { connection, wait_us }));
        if let Ok(got) = &got {
            span.end_with(got.item.ts as u64, got.item.data().len() as u64);
        }
        got
    }

    /// [`get`](Self::get) without blocking a thread.
    pub async fn get_async(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        let connection = self.link.id;
        self.got(self.link.waiting_async(timeout, None, |wait_us| Op::QueueGet { connection, wait_us }).await)
    }

    fn got(&self, reply: Result<(WireOutcome, Bytes)>) -> Result<QueueItem> {
        match reply? {
            (Outcome::QueueItem { seq, item: header }, data) => Ok(QueueItem { seq, item: item(header, data) }),
            _ => Err(unexpected("get", self.link.client.node())),
        }
    }

    /// Completes when a get blocked on this connection would wake (or spuriously).
    pub fn changed(&self) -> Changed {
        self.link.changed(None)
    }

    /// Consumes an item this connection got; the queue reclaims it.
    pub fn consume(&self, item: &QueueItem) -> Result<()> {
        let _span = trace::span(Kind::Consume, self.link.trace_name(), item.item.ts as u64, 0);
        self.link.done(Op::QueueConsume { connection: self.link.id, seq: Some(item.seq), ts: item.item.ts })
    }

    /// Consumes the oldest item open on this connection at `ts`.
    pub fn consume_ts(&self, ts: Timestamp) -> Result<()> {
        let _span = trace::span(Kind::Consume, self.link.trace_name(), ts as u64, 0);
        self.link.done(Op::QueueConsume { connection: self.link.id, seq: None, ts })
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too); items it holds
    /// open go back to the head of the queue.
    pub fn detach(&self) {
        self.link.detach();
    }
}
