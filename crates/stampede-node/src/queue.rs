//! Remote queues and their connections (mirror [`stampede::Queue`], [`stampede::QueueInput`]
//! and [`stampede::QueueOutput`]).
//!
//! A remote getter keeps its place in the queue's line of blocked getters only within one wait
//! slice: between slices another getter may go first (see `docs/NODES.md`).

use std::sync::Arc;
use std::time::Duration;

use stampede::payload::Buffers;
use stampede::{IntoPayload, QueueItem, Result, Timestamp};

use crate::channel::check_fits;
use crate::connection::{container_handle, item, Link};
use crate::runtime::unexpected;
use crate::task::{RemoteAttach, RemoteTask};
use crate::wire::{Reply, Request};

container_handle!(RemoteQueue, "queue");

impl RemoteAttach for RemoteQueue {
    type Input = RemoteQueueInput;
    type Output = RemoteQueueOutput;

    fn attach_input(&self, task: &RemoteTask) -> Result<RemoteQueueInput> {
        Ok(RemoteQueueInput { queue: self.clone(), link: self.container.attach(task, true)? })
    }

    fn attach_output(&self, task: &RemoteTask) -> Result<RemoteQueueOutput> {
        let link = self.container.attach(task, false)?;
        Ok(RemoteQueueOutput { queue: self.clone(), link, buffers: Arc::default() })
    }
}

/// A remote task's output connection to a queue.
pub struct RemoteQueueOutput {
    queue: RemoteQueue,
    link: Link,
    buffers: Arc<Buffers>,
}

impl RemoteQueueOutput {
    /// The queue this connection puts into.
    pub fn queue(&self) -> &RemoteQueue {
        &self.queue
    }

    /// Appends `payload` at `ts` (as [`stampede::QueueOutput::put`]); `timeout` bounds the wait
    /// for room in a bounded queue.
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        self.link.check_attached()?;
        check_fits(&self.link, self.queue.limits(), ts, payload.payload_bytes())?;
        let payload = payload.into_payload(&self.buffers);
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request = |wait_us| Request::QueuePut { connection, ts, codec: codec.clone(), wait_us };
        match self.link.waiting(timeout, Some(payload.data), request)?.0 {
            Reply::Done => Ok(()),
            _ => Err(unexpected("put", self.link.client.node())),
        }
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too).
    pub fn detach(&self) {
        self.link.detach();
    }
}

/// A remote task's input connection to a queue.
pub struct RemoteQueueInput {
    queue: RemoteQueue,
    link: Link,
}

impl RemoteQueueInput {
    /// The queue this connection gets from.
    pub fn queue(&self) -> &RemoteQueue {
        &self.queue
    }

    /// Takes the oldest waiting item (as [`stampede::QueueInput::get`]); it is open on this
    /// connection until consumed. `NotAvailable` when the timeout expires.
    pub fn get(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        let connection = self.link.id;
        match self.link.waiting(timeout, None, |wait_us| Request::QueueGet { connection, wait_us })? {
            (Reply::QueueItem { seq, item: header }, data) => Ok(QueueItem { seq, item: item(header, data) }),
            _ => Err(unexpected("get", self.link.client.node())),
        }
    }

    /// Consumes an item this connection got; the queue reclaims it.
    pub fn consume(&self, item: &QueueItem) -> Result<()> {
        self.link.done(Request::QueueConsume { connection: self.link.id, seq: Some(item.seq), ts: item.item.ts })
    }

    /// Consumes the oldest item open on this connection at `ts`.
    pub fn consume_ts(&self, ts: Timestamp) -> Result<()> {
        self.link.done(Request::QueueConsume { connection: self.link.id, seq: None, ts })
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too); items it holds
    /// open go back to the head of the queue.
    pub fn detach(&self) {
        self.link.detach();
    }
}
