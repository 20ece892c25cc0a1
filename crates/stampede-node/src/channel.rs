//! Remote channels and their connections (mirror [`stampede::Channel`],
//! [`stampede::ChannelInput`] and [`stampede::ChannelOutput`]).
//!
//! A get returns an [`Item`] whose payload is the reply's bytes (copied once out of the zenoh
//! buffer, shared from then on, read-only). A put copies borrowed data once into a buffer of the
//! connection's pool, which zenoh then sends without another copy. Blocking calls wait in slices
//! (see [`crate::client`]).

use std::sync::Arc;
use std::time::Duration;

use stampede::payload::Buffers;
use stampede::{Error, IntoPayload, Item, Limits, PutOptions, Result, Selector, Timestamp};

use crate::connection::{container_handle, item, Link};
use crate::runtime::unexpected;
use crate::task::{RemoteAttach, RemoteTask};
use crate::wire::{Reply, Request};

container_handle!(RemoteChannel, "channel");

impl RemoteAttach for RemoteChannel {
    type Input = RemoteChannelInput;
    type Output = RemoteChannelOutput;

    fn attach_input(&self, task: &RemoteTask) -> Result<RemoteChannelInput> {
        Ok(RemoteChannelInput { channel: self.clone(), link: self.container.attach(task, true)? })
    }

    fn attach_output(&self, task: &RemoteTask) -> Result<RemoteChannelOutput> {
        let link = self.container.attach(task, false)?;
        Ok(RemoteChannelOutput { channel: self.clone(), link, buffers: Arc::default() })
    }
}

/// A remote task's output connection to a channel.
pub struct RemoteChannelOutput {
    channel: RemoteChannel,
    link: Link,
    /// Buffers borrowed payloads are copied into (once) before they are sent.
    buffers: Arc<Buffers>,
}

impl RemoteChannelOutput {
    /// The channel this connection puts into.
    pub fn channel(&self) -> &RemoteChannel {
        &self.channel
    }

    /// Puts `payload` at `ts`, waiting as long as needed for room in a bounded channel.
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload) -> Result<()> {
        self.put_with(ts, payload, PutOptions::default())
    }

    /// Puts with a reference count and/or a timeout (as [`stampede::ChannelOutput::put_with`]).
    pub fn put_with(&self, ts: Timestamp, payload: impl IntoPayload, options: PutOptions) -> Result<()> {
        self.link.check_attached()?;
        self.check_fits(ts, payload.payload_bytes())?;
        let payload = payload.into_payload(&self.buffers);
        let codec = payload.codec.name().to_owned();
        let connection = self.link.id;
        let request =
            |wait_us| Request::Put { connection, ts, codec: codec.clone(), refcount: options.refcount, wait_us };
        match self.link.waiting(options.timeout, Some(payload.data), request)?.0 {
            Reply::Done => Ok(()),
            _ => Err(unexpected("put", self.link.client.node())),
        }
    }

    /// Fails `Full { can_never_fit: true, .. }` when an item of `payload_bytes` can never fit the
    /// channel's `max_bytes` or the node's `payload_bytes_max`: every put checks this before
    /// copying or sending anything.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        check_fits(&self.link, self.channel.limits(), ts, payload_bytes)
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too). Every later
    /// call fails `Closed`.
    pub fn detach(&self) {
        self.link.detach();
    }
}

/// The checks of [`RemoteChannelOutput::check_fits`], for channels and queues.
pub(crate) fn check_fits(link: &Link, limits: Limits, ts: Timestamp, payload_bytes: usize) -> Result<()> {
    let node_bytes_max = link.client.hello.payload_bytes_max;
    if payload_bytes as u64 > node_bytes_max {
        return Err(Error::Full {
            name: link.name.to_string(),
            ts,
            reason: format!(
                "a payload of {payload_bytes} bytes is above the node's payload_bytes_max {node_bytes_max}"
            ),
            can_never_fit: true,
        });
    }
    limits.check_fits(&link.name, ts, payload_bytes)
}

/// A remote task's input connection to a channel.
pub struct RemoteChannelInput {
    channel: RemoteChannel,
    link: Link,
}

impl RemoteChannelInput {
    /// The channel this connection reads.
    pub fn channel(&self) -> &RemoteChannel {
        &self.channel
    }

    /// Gets an item (as [`stampede::ChannelInput::get`]); it becomes open on this connection.
    /// `timeout`: `None` waits as long as needed, `Some(Duration::ZERO)` never waits.
    pub fn get(&self, selector: impl Into<Selector>, timeout: Option<Duration>) -> Result<Item> {
        let selector = selector.into().into();
        let connection = self.link.id;
        match self.link.waiting(timeout, None, |wait_us| Request::Get { connection, selector, wait_us })? {
            (Reply::Item(header), data) => Ok(item(header, data)),
            _ => Err(unexpected("get", self.link.client.node())),
        }
    }

    /// Every item with `t0 <= ts <= t1` present and not consumed on this connection, in
    /// timestamp order; each becomes open. Never waits.
    pub fn get_range(&self, t0: Timestamp, t1: Timestamp) -> Result<Vec<Item>> {
        let connection = self.link.id;
        match self.link.waiting(Some(Duration::ZERO), None, |_| Request::GetRange { connection, t0, t1 })? {
            (Reply::Items(headers), data) => {
                let mut offset = 0;
                let mut items = Vec::with_capacity(headers.len());
                for header in headers {
                    // The lengths add up to the payload's (checked when the reply was decoded).
                    let len = crate::wire::size(header.len);
                    items.push(item(header, data.slice(offset..offset + len)));
                    offset += len;
                }
                Ok(items)
            }
            _ => Err(unexpected("get_range", self.link.client.node())),
        }
    }

    /// Marks the item at `ts` consumed on this connection.
    pub fn consume(&self, ts: Timestamp) -> Result<()> {
        self.link.done(Request::Consume { connection: self.link.id, ts })
    }

    /// Marks every present item `<= ts` consumed on this connection, unseen ones included.
    pub fn consume_until(&self, ts: Timestamp) -> Result<()> {
        self.link.done(Request::ConsumeUntil { connection: self.link.id, ts })
    }

    /// Detaches the connection on the node (idempotent; dropping it detaches too): its claims are
    /// dropped when this returns. Every later call fails `Closed`.
    pub fn detach(&self) {
        self.link.detach();
    }
}
