//! [`Runtime::execute`]: one [`Op`] of a [`Session`], run on this runtime — the one place an
//! operation given as data becomes the engine's typed calls. A node runs each request of its
//! clients here; the session resolves handles, [`Admission`] checks rights, the session's bound
//! checks a put's payload size: each once, on this side of the process boundary.
//!
//! **Guarantees.** Every operation is the embedded one, with its results and its errors. A wait
//! lasts at most what the op asks (`wait_us`; the caller clamps it first). An op that needs the
//! fabric (moves and takeovers of tasks between nodes, GC-handler subscriptions) is refused
//! `InvalidArgument`: the node runs those itself.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{
    Codec, ContainerInfo, Error, Handle, InputOptions, Item, Limits, Op, Outcome, Payload, QueueItem, Result,
};

use crate::budget::{Charge, SessionBudget};
use crate::payload::{Buffers, IntoPayload, Parts};
use crate::session::{Admission, Connection, Right, Session};
use crate::wait;
use crate::{ChannelOptions, Container, Info, PutOptions, QueueOptions, Runtime};

/// The payload that travels beside a put: bytes a put copies in once, or a buffer it stores as
/// it is (a client's shared-memory segment, received without a copy).
pub enum Body<'a> {
    Inline(&'a [u8]),
    Passed(Bytes),
}

impl Body<'_> {
    pub fn len(&self) -> usize {
        match self {
            Body::Inline(bytes) => bytes.len(),
            Body::Passed(bytes) => bytes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a put stores: an op's body and its codec.
struct Incoming<'a> {
    body: Body<'a>,
    codec: Codec,
    /// What the session's budget charged for it (carried by the payload's bytes).
    charge: Option<Charge>,
}

impl IntoPayload for Incoming<'_> {
    fn payload_bytes(&self) -> usize {
        self.body.len()
    }

    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        let payload = match self.body {
            Body::Inline(bytes) => Parts { parts: &[bytes], codec: self.codec }.into_payload(buffers),
            Body::Passed(data) => Payload { data, codec: self.codec },
        };
        match self.charge {
            Some(charge) => Payload { data: charge.carried_by(payload.data), codec: payload.codec },
            None => payload,
        }
    }
}

impl Runtime {
    /// Runs `op` in `session` with the rights of `admission`; a put's payload is `body` (empty
    /// for every other op).
    pub async fn execute(
        &self,
        session: &Session,
        admission: &impl Admission,
        op: Op,
        body: Body<'_>,
    ) -> Result<Outcome<Item>> {
        let name = op.name();
        let outcome = match op {
            Op::CreateChannel { name: channel, capacity, bytes_max, retention, codec, description } => {
                admission.check(name, Right::Create, &channel)?;
                let limits = Limits::from_counts(capacity, bytes_max).ok_or_else(|| too_large(name, &channel))?;
                let codec = codec.as_deref().map(Codec::from_name);
                let options = ChannelOptions { limits, retention, codec, description, node: None, disk: None };
                container(session, name, Container::Channel(self.create_channel(&channel, options)?))?
            }
            Op::CreateQueue { name: queue, capacity, bytes_max, description } => {
                admission.check(name, Right::Create, &queue)?;
                let limits = Limits::from_counts(capacity, bytes_max).ok_or_else(|| too_large(name, &queue))?;
                let options = QueueOptions { limits, description, node: None };
                container(session, name, Container::Queue(self.create_queue(&queue, options)?))?
            }
            Op::Lookup { name: looked_up } => {
                if !admission.sees(&looked_up) {
                    admission.check(name, Right::Read, &looked_up)?;
                }
                container(session, name, self.lookup(&looked_up)?)?
            }
            Op::Names { prefix } => {
                Outcome::Names(self.names(&prefix).into_iter().filter(|name| admission.sees(name)).collect())
            }
            Op::Listing { prefix } => {
                Outcome::Listing(self.listing(&prefix).into_iter().filter(|l| admission.sees(&l.name)).collect())
            }
            Op::ContainerStats { container } => Outcome::Stats(match session.container(name, container)? {
                Container::Channel(c) => c.stats(),
                Container::Queue(q) => q.stats(),
            }),
            Op::Destroy { container: handle } => {
                let container = session.container(name, handle)?;
                admission.check(name, Right::Create, container.name())?;
                match container {
                    Container::Channel(c) => c.destroy()?,
                    Container::Queue(q) => q.destroy()?,
                }
                session.forget_container(handle);
                Outcome::Done
            }
            Op::Task { virtual_time } => Outcome::Handle(session.add_task(name, self.task(virtual_time)?)?),
            Op::Spawn { task, virtual_time } => {
                let child = session.task(name, task)?.spawn(virtual_time)?;
                Outcome::Handle(session.add_task(name, child)?)
            }
            Op::SetVirtualTime { task, virtual_time } => {
                session.task(name, task)?.set_virtual_time(virtual_time)?;
                Outcome::Done
            }
            Op::Times { task } => {
                let task = session.task(name, task)?;
                Outcome::Times { virtual_time: task.virtual_time(), visibility: task.visibility() }
            }
            Op::CloseTask { task } => {
                session.close_task(name, task)?;
                Outcome::Done
            }
            Op::SetTaskName { task, name: label } => {
                session.task(name, task)?.set_name(&label)?;
                Outcome::Done
            }
            Op::AttachInput { task, container, max_lag_items, max_lag_ts, prefetch } => {
                let task = session.task(name, task)?;
                let container = session.container(name, container)?;
                admission.check(name, Right::Read, container.name())?;
                // An item bound beyond the address space is no bound.
                let max_lag_items = max_lag_items.map(|items| usize::try_from(items).unwrap_or(usize::MAX));
                let options = InputOptions { max_lag_items, max_lag_ts, prefetch: Some(prefetch) };
                let connection = match container {
                    Container::Channel(c) => Connection::ChannelInput(Arc::new(c.attach_input_with(&task, options)?)),
                    Container::Queue(q) if !options.bounded() => {
                        Connection::QueueInput(Arc::new(q.attach_input(&task)?))
                    }
                    Container::Queue(q) => {
                        let reason = "a bound on lag is a channel's: a queue's items go to one reader each".into();
                        return Err(Error::InvalidArgument { op: name, name: q.name().to_owned(), reason });
                    }
                };
                Outcome::Handle(session.add_connection(name, connection)?)
            }
            Op::AttachOutput { task, container } => {
                let task = session.task(name, task)?;
                let container = session.container(name, container)?;
                admission.check(name, Right::Write, container.name())?;
                let connection = match container {
                    Container::Channel(c) => Connection::ChannelOutput(Arc::new(c.attach_output(&task)?)),
                    Container::Queue(q) => Connection::QueueOutput(Arc::new(q.attach_output(&task)?)),
                };
                Outcome::Handle(session.add_connection(name, connection)?)
            }
            Op::Detach { connection } => {
                session.detach(name, connection)?;
                Outcome::Done
            }
            Op::Put { connection, ts, codec, refcount, wait_us } => {
                let Connection::ChannelOutput(out) = session.connection(name, connection)? else {
                    return Err(not_a(session, name, connection, "channel output"));
                };
                let name = out.channel().name();
                session.check_payload(name, ts, body.len())?;
                let deadline = wait::deadline(Some(micros(wait_us)));
                let charge = session.charge(name, ts, body.len(), deadline, || out.check_put(ts, refcount)).await?;
                let payload = Incoming { body, codec: Codec::from_name(&codec), charge };
                out.put_async(ts, payload, PutOptions { refcount, timeout: Some(wait::left(deadline)) }).await?;
                Outcome::Done
            }
            Op::Get { connection, selector, wait_us } => {
                let input = channel_input(session, name, connection)?;
                Outcome::Item(input.get_async(selector, Some(micros(wait_us))).await?)
            }
            Op::GetRange { connection, t0, t1 } => {
                Outcome::Items(channel_input(session, name, connection)?.get_range(t0, t1)?)
            }
            Op::Consume { connection, ts } => {
                channel_input(session, name, connection)?.consume(ts)?;
                Outcome::Done
            }
            Op::ConsumeUntil { connection, ts } => {
                channel_input(session, name, connection)?.consume_until(ts)?;
                Outcome::Done
            }
            Op::QueuePut { connection, ts, codec, wait_us } => {
                let Connection::QueueOutput(out) = session.connection(name, connection)? else {
                    return Err(not_a(session, name, connection, "queue output"));
                };
                let name = out.queue().name();
                session.check_payload(name, ts, body.len())?;
                let deadline = wait::deadline(Some(micros(wait_us)));
                let charge = session.charge(name, ts, body.len(), deadline, || out.check_put(ts)).await?;
                let payload = Incoming { body, codec: Codec::from_name(&codec), charge };
                out.put_async(ts, payload, Some(wait::left(deadline))).await?;
                Outcome::Done
            }
            Op::QueueGet { connection, wait_us } => {
                let Connection::QueueInput(input) = session.connection(name, connection)? else {
                    return Err(not_a(session, name, connection, "queue input"));
                };
                let QueueItem { seq, item } = input.get_async(Some(micros(wait_us))).await?;
                Outcome::QueueItem { seq, item }
            }
            Op::QueueConsume { connection, seq, ts } => {
                let Connection::QueueInput(input) = session.connection(name, connection)? else {
                    return Err(not_a(session, name, connection, "queue input"));
                };
                match seq {
                    Some(seq) => input.consume(&QueueItem { seq, item: Item { ts, payload: Bytes::new().into() } })?,
                    None => input.consume_ts(ts)?,
                }
                Outcome::Done
            }
            Op::Timestamps { container } => Outcome::Timestamps(channel(session, name, container)?.timestamps()),
            Op::PutLog { container } => Outcome::PutLog(channel(session, name, container)?.put_log()),
            Op::Settledness { container } => {
                let channel = channel(session, name, container)?;
                Outcome::Settledness {
                    settled_below: channel.settled_below(),
                    producers_closed: channel.producers_closed(),
                }
            }
            Op::CloseProducers { container } => {
                channel(session, name, container)?.close_producers();
                Outcome::Done
            }
            Op::Demand { connection } => {
                let Connection::ChannelOutput(out) = session.connection(name, connection)? else {
                    return Err(not_a(session, name, connection, "channel output"));
                };
                Outcome::Timestamp(out.demand())
            }
            Op::WaitChanged { connection, selector, wait_us } => {
                let changed = match (session.connection(name, connection)?, selector) {
                    (Connection::ChannelInput(input), Some(selector)) => input.changed(selector),
                    (Connection::ChannelOutput(out), None) => out.freed(),
                    (Connection::QueueInput(input), None) => input.changed(),
                    (Connection::QueueOutput(out), None) => out.freed(),
                    _ => return Err(not_a(session, name, connection, "connection that waits this way")),
                };
                let _ = tokio::time::timeout(micros(wait_us), changed).await;
                Outcome::Done
            }
            Op::WaitProgress { wait_us } => {
                let _ = tokio::time::timeout(micros(wait_us), self.progressed()).await;
                Outcome::Done
            }
            Op::CheckInvariants => {
                let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.check_invariants()));
                if let Err(panic) = check {
                    let reason = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "an invariant does not hold".into());
                    return Err(Error::InvalidArgument { op: name, name: session.name(), reason });
                }
                Outcome::Done
            }
            Op::Graph => {
                // The graph names every task and container: for users who may read every name.
                admission.check(name, Right::Read, "")?;
                Outcome::Graph(self.graph())
            }
            Op::TsMin => Outcome::Timestamp(self.ts_min()),
            Op::Stats => {
                let stats = self.stats();
                Outcome::RuntimeStats {
                    ts_min: stats.ts_min,
                    containers: stats.containers as u64,
                    claims: stats.claims as u64,
                    budget: session.budget().map(SessionBudget::usage),
                }
            }
            Op::Collect => Outcome::Count(self.collect() as u64),
            // Read here, not on the op's arrival: it runs at once, so the two readings bound the
            // same instant.
            Op::TraceClock => {
                let received_ns = crate::trace::monotonic_ns();
                Outcome::TraceClock {
                    host: crate::trace::host_name(),
                    received_ns,
                    replied_ns: crate::trace::monotonic_ns(),
                }
            }
            Op::MeshTime => {
                let received = self.clock().base_ns();
                let reading = self.clock().reading(received);
                if !reading.synced {
                    let reason = "this node's clock is not synced with its mesh yet; try again".into();
                    return Err(Error::Unreachable { op: name, name: session.name(), reason });
                }
                Outcome::MeshTime(reading)
            }
            Op::MoveTask { .. } | Op::TakeOverTask { .. } | Op::OnReclaim { .. } => {
                let reason = "an operation of a node: it needs the fabric".into();
                return Err(Error::InvalidArgument { op: name, name: session.name(), reason });
            }
        };
        Ok(outcome)
    }
}

/// Registers `container` in the session and describes it.
fn container(session: &Session, op: &'static str, container: Container) -> Result<Outcome<Item>> {
    let (id, queue, info, retention) = match &container {
        Container::Channel(c) => (c.id(), false, c.info(), c.retention()),
        Container::Queue(q) => (q.id(), true, q.info(), Default::default()),
    };
    let Info { name, limits, codec, description, .. } = info;
    session.add_container(op, id, container)?;
    Ok(Outcome::Container(ContainerInfo {
        id,
        queue,
        name,
        capacity: limits.capacity.map(|n| n as u64),
        bytes_max: limits.bytes_max.map(|n| n as u64),
        retention,
        codec: codec.map(|codec| codec.name().to_owned()),
        description,
    }))
}

fn channel(session: &Session, op: &'static str, handle: Handle) -> Result<crate::Channel> {
    match session.container(op, handle)? {
        Container::Channel(channel) => Ok(channel),
        Container::Queue(_) => Err(Error::InvalidArgument {
            op,
            name: session.name(),
            reason: format!("container #{handle} is a queue, not a channel"),
        }),
    }
}

fn channel_input(session: &Session, op: &'static str, handle: Handle) -> Result<Arc<crate::ChannelInput>> {
    match session.connection(op, handle)? {
        Connection::ChannelInput(input) => Ok(input),
        _ => Err(not_a(session, op, handle, "channel input")),
    }
}

fn not_a(session: &Session, op: &'static str, handle: Handle, what: &str) -> Error {
    Error::InvalidArgument { op, name: session.name(), reason: format!("connection #{handle} is not a {what}") }
}

fn too_large(op: &'static str, name: &str) -> Error {
    Error::InvalidArgument { op, name: name.to_owned(), reason: "a bound too large for the node's memory".into() }
}

fn micros(wait_us: u64) -> Duration {
    Duration::from_micros(wait_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Unrestricted;
    use stampede_core::{Peer, Retention, Selector};

    /// Runs `op` of `session` to its end on a one-thread runtime (the waits use tokio's timer).
    fn run(runtime: &Runtime, session: &Session, op: Op, body: Body<'_>) -> Result<Outcome<Item>> {
        let tokio = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        tokio.block_on(runtime.execute(session, &Unrestricted, op, body))
    }

    fn handle(outcome: Result<Outcome<Item>>) -> Handle {
        match outcome {
            Ok(Outcome::Handle(handle)) => handle,
            other => panic!("a handle: {other:?}"),
        }
    }

    /// A put and a get given as data go through the session's handles to the channel, the item
    /// and its payload come back whole; an op of a node and a handle the session does not hold
    /// are refused.
    #[test]
    fn ops_run_through_the_sessions_handles() {
        let runtime = Runtime::new();
        let session = Session::new("0a".into(), 16, 1 << 20);
        let create = Op::CreateChannel {
            name: "frames".into(),
            capacity: None,
            bytes_max: None,
            retention: Retention::History,
            codec: None,
            description: String::new(),
        };
        let Ok(Outcome::Container(info)) = run(&runtime, &session, create, Body::Inline(&[])) else {
            panic!("a channel")
        };
        let task = handle(run(&runtime, &session, Op::Task { virtual_time: 0 }, Body::Inline(&[])));
        let out = handle(run(&runtime, &session, Op::AttachOutput { task, container: info.id }, Body::Inline(&[])));
        let attach = Op::AttachInput {
            task,
            container: info.id,
            max_lag_items: None,
            max_lag_ts: None,
            prefetch: Default::default(),
        };
        let input = handle(run(&runtime, &session, attach, Body::Inline(&[])));
        let put = Op::Put { connection: out, ts: 3, codec: "raw".into(), refcount: None, wait_us: 0 };
        assert!(matches!(run(&runtime, &session, put, Body::Inline(b"abc")), Ok(Outcome::Done)));
        let get = Op::Get { connection: input, selector: Selector::OldestUnseen, wait_us: 0 };
        let Ok(Outcome::Item(item)) = run(&runtime, &session, get, Body::Inline(&[])) else { panic!("the item") };
        assert_eq!((item.ts, item.data().as_ref()), (3, &b"abc"[..]));

        let peer = Peer { id: 1, incarnation: 1 };
        let node_only = Op::MoveTask { task, to_node: "b".into(), to: peer };
        assert!(matches!(run(&runtime, &session, node_only, Body::Inline(&[])), Err(Error::InvalidArgument { .. })));
        let unknown = Op::Consume { connection: 99, ts: 3 };
        assert!(matches!(run(&runtime, &session, unknown, Body::Inline(&[])), Err(Error::InvalidArgument { .. })));
    }
}
