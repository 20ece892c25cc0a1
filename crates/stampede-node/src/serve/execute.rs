//! One request of an open session, run as the embedded operation: the session's handles looked
//! up, its rights checked, the operation run on the node's runtime and its result made a reply.
//! A put stores the request's body as it came (copied in once, or the client's shared-memory
//! segment as it is); a wait lasts at most the node's slice.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Codec, Error, InputOptions, Item, Payload, QueueItem, Result, Selector};
use stampede_engine::payload::{Buffers, IntoPayload, Parts};
use stampede_engine::{ChannelOptions, Container, Info, MeshLink, PutOptions, QueueOptions};
use stampede_wire::{
    self as wire, ContainerInfo, Handle, ItemHeader, Reply, Request, WireRetention, REMOTE_WAIT_SLICE,
};

use super::Served;
use crate::access::Right;
use crate::node::NodeShared;
use crate::reclaim;
use crate::serve::Body;
use crate::session::{Connection, Move, Session};

/// What a put on the node stores: a request's body and its codec.
struct Incoming<'a> {
    body: Body<'a>,
    codec: Codec,
}

impl IntoPayload for Incoming<'_> {
    fn payload_bytes(&self) -> usize {
        self.body.len()
    }

    fn into_payload(self, buffers: &Arc<Buffers>) -> Payload {
        match self.body {
            Body::Inline(bytes) => Parts { parts: &[bytes], codec: self.codec }.into_payload(buffers),
            Body::Passed(data) => Payload { data, codec: self.codec },
        }
    }
}

/// Runs one request of an open session.
pub(super) async fn execute(
    node: &Arc<NodeShared>,
    session: &Session,
    request: Request,
    body: Body<'_>,
) -> Result<Served> {
    let op = request.op();
    let runtime = &node.runtime;
    let reply = match request {
        Request::CreateChannel { name, capacity, bytes_max, retention, codec, description } => {
            session.check(op, Right::Create, &name)?;
            let limits = wire::limits(capacity, bytes_max).ok_or_else(|| too_large(op, &name))?;
            let codec = codec.as_deref().map(Codec::from_name);
            let options =
                ChannelOptions { limits, retention: retention.into(), codec, description, node: None, disk: None };
            container(session, op, Container::Channel(runtime.create_channel(&name, options)?))?
        }
        Request::CreateQueue { name, capacity, bytes_max, description } => {
            session.check(op, Right::Create, &name)?;
            let limits = wire::limits(capacity, bytes_max).ok_or_else(|| too_large(op, &name))?;
            let options = QueueOptions { limits, description, node: None };
            container(session, op, Container::Queue(runtime.create_queue(&name, options)?))?
        }
        Request::Lookup { name } => {
            session.check_sees(op, &name)?;
            container(session, op, runtime.lookup(&name)?)?
        }
        Request::Names { prefix } => {
            Reply::Names(runtime.names(&prefix).into_iter().filter(|name| session.sees(name)).collect())
        }
        Request::Listing { prefix } => Reply::Listing(
            runtime
                .names(&prefix)
                .into_iter()
                .filter(|name| session.sees(name))
                .filter_map(|name| match runtime.lookup(&name) {
                    Ok(Container::Channel(_)) => Some((name, false)),
                    Ok(Container::Queue(_)) => Some((name, true)),
                    Err(_) => None, // destroyed meanwhile
                })
                .collect(),
        ),
        Request::ContainerStats { container } => Reply::Stats(match session.container(op, container)? {
            Container::Channel(c) => (&c.stats()).into(),
            Container::Queue(q) => (&q.stats()).into(),
        }),
        Request::Destroy { container: handle } => {
            let container = session.container(op, handle)?;
            session.check(op, Right::Create, container.name())?;
            match container {
                Container::Channel(c) => c.destroy()?,
                Container::Queue(q) => q.destroy()?,
            }
            session.forget_container(handle);
            Reply::Done
        }
        Request::Task { virtual_time } => Reply::Handle(session.add_task(op, runtime.task(virtual_time)?)?),
        Request::Spawn { task, virtual_time } => {
            let child = session.task(op, task)?.spawn(virtual_time)?;
            Reply::Handle(session.add_task(op, child)?)
        }
        Request::SetVirtualTime { task, virtual_time } => {
            session.task(op, task)?.set_virtual_time(virtual_time)?;
            Reply::Done
        }
        Request::Times { task } => {
            let task = session.task(op, task)?;
            Reply::Times { virtual_time: task.virtual_time(), visibility: task.visibility() }
        }
        Request::MoveTask { task, to_node, to } => {
            let link = shares_ts_min(node, op)?;
            if to_node == node.options.name || crate::mesh::peer_id(&to_node) != to.id {
                let reason = format!("{to_node:?} is not another node's name, or {to:?} is not its participant");
                return Err(Error::InvalidArgument { op, name: node.options.name.clone(), reason });
            }
            // The moves taken over or declined since are forgotten. The session's table is read
            // first: the mesh is read under the progress lock, never inside the session's.
            let recorded = session.move_ids();
            let resolved: HashSet<_> =
                link.read(|mesh| recorded.into_iter().filter(|&(to, id)| !mesh.is_move_open(to, id)).collect());
            let (from, id, visibility) = link.move_task(&session.task(op, task)?, to)?;
            let taken = Move { task, to_node, to, id };
            if let Err(e) = session.add_move(op, taken.clone(), &resolved) {
                decline(node, vec![taken]).await;
                return Err(e);
            }
            Reply::Moved { from, id, visibility }
        }
        Request::TakeOverTask { from, id, to, virtual_time } => {
            let link = shares_ts_min(node, op)?;
            // The move's carry reaches this node's view with its mover's next batch: the shadow
            // starts at or above it, whatever the client says.
            // So does every member's snapshot (the takeover waits for a complete view).
            let deadline = tokio::time::Instant::now() + TAKEOVER_WAIT;
            let arrived = || link.carried(from, id).is_some() && link.read(|mesh| mesh.is_complete());
            while !arrived() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(TAKEOVER_POLL).await;
            }
            let task = link.take_over_task(from, id, to, virtual_time)?;
            Reply::Handle(session.add_shadow(op, task, from)?)
        }
        Request::CloseTask { task } => {
            let moves = session.close_task(op, task)?;
            decline(node, moves).await;
            Reply::Done
        }
        Request::AttachInput { task, container, max_lag_items, max_lag_ts } => {
            let task = session.task(op, task)?;
            let container = session.container(op, container)?;
            session.check(op, Right::Read, container.name())?;
            // An item bound beyond the address space is no bound.
            let max_lag_items = max_lag_items.map(|items| usize::try_from(items).unwrap_or(usize::MAX));
            let options = InputOptions { max_lag_items, max_lag_ts };
            let connection = match container {
                Container::Channel(c) => Connection::ChannelInput(Arc::new(c.attach_input_with(&task, options)?)),
                Container::Queue(q) if !options.bounded() => Connection::QueueInput(Arc::new(q.attach_input(&task)?)),
                Container::Queue(q) => {
                    let reason = "a bound on lag is a channel's: a queue's items go to one reader each".into();
                    return Err(Error::InvalidArgument { op, name: q.name().to_owned(), reason });
                }
            };
            Reply::Handle(session.add_connection(op, connection)?)
        }
        Request::AttachOutput { task, container } => {
            let task = session.task(op, task)?;
            let container = session.container(op, container)?;
            session.check(op, Right::Write, container.name())?;
            let connection = match container {
                Container::Channel(c) => Connection::ChannelOutput(Arc::new(c.attach_output(&task)?)),
                Container::Queue(q) => Connection::QueueOutput(Arc::new(q.attach_output(&task)?)),
            };
            Reply::Handle(session.add_connection(op, connection)?)
        }
        Request::Detach { connection } => {
            session.detach(op, connection)?;
            Reply::Done
        }
        Request::Put { connection, ts, codec, refcount, wait_us } => {
            let Connection::ChannelOutput(out) = session.connection(op, connection)? else {
                return Err(not_a(session, op, connection, "channel output"));
            };
            check_payload(node, out.channel().name(), ts, body.len())?;
            let payload = Incoming { body, codec: Codec::from_name(&codec) };
            out.put_async(ts, payload, PutOptions { refcount, timeout: Some(slice(wait_us)) }).await?;
            Reply::Done
        }
        Request::Get { connection, selector, wait_us } => {
            let input = channel_input(session, op, connection)?;
            let item = input.get_async(Selector::from(selector), Some(slice(wait_us))).await?;
            return Ok(item_reply(item, Reply::Item));
        }
        Request::GetRange { connection, t0, t1 } => {
            let items = channel_input(session, op, connection)?.get_range(t0, t1)?;
            let headers = items.iter().map(item_header).collect();
            return Ok((Reply::Items(headers), items.into_iter().map(|i| i.payload.data).collect()));
        }
        Request::Consume { connection, ts } => {
            channel_input(session, op, connection)?.consume(ts)?;
            Reply::Done
        }
        Request::ConsumeUntil { connection, ts } => {
            channel_input(session, op, connection)?.consume_until(ts)?;
            Reply::Done
        }
        Request::QueuePut { connection, ts, codec, wait_us } => {
            let Connection::QueueOutput(out) = session.connection(op, connection)? else {
                return Err(not_a(session, op, connection, "queue output"));
            };
            check_payload(node, out.queue().name(), ts, body.len())?;
            let payload = Incoming { body, codec: Codec::from_name(&codec) };
            out.put_async(ts, payload, Some(slice(wait_us))).await?;
            Reply::Done
        }
        Request::QueueGet { connection, wait_us } => {
            let Connection::QueueInput(input) = session.connection(op, connection)? else {
                return Err(not_a(session, op, connection, "queue input"));
            };
            let QueueItem { seq, item } = input.get_async(Some(slice(wait_us))).await?;
            return Ok(item_reply(item, |item| Reply::QueueItem { seq, item }));
        }
        Request::QueueConsume { connection, seq, ts } => {
            let Connection::QueueInput(input) = session.connection(op, connection)? else {
                return Err(not_a(session, op, connection, "queue input"));
            };
            match seq {
                Some(seq) => input.consume(&QueueItem { seq, item: Item { ts, payload: Bytes::new().into() } })?,
                None => input.consume_ts(ts)?,
            }
            Reply::Done
        }
        Request::Timestamps { container } => Reply::Timestamps(channel(session, op, container)?.timestamps()),
        Request::Settledness { container } => {
            let channel = channel(session, op, container)?;
            Reply::Settledness { settled_below: channel.settled_below(), producers_closed: channel.producers_closed() }
        }
        Request::CloseProducers { container } => {
            channel(session, op, container)?.close_producers();
            Reply::Done
        }
        Request::Demand { connection } => {
            let Connection::ChannelOutput(out) = session.connection(op, connection)? else {
                return Err(not_a(session, op, connection, "channel output"));
            };
            Reply::Timestamp(out.demand())
        }
        Request::WaitChanged { connection, selector, wait_us } => {
            let changed = match (session.connection(op, connection)?, selector) {
                (Connection::ChannelInput(input), Some(selector)) => input.changed(Selector::from(selector)),
                (Connection::ChannelOutput(out), None) => out.freed(),
                (Connection::QueueInput(input), None) => input.changed(),
                (Connection::QueueOutput(out), None) => out.freed(),
                _ => return Err(not_a(session, op, connection, "connection that waits this way")),
            };
            let _ = tokio::time::timeout(slice(wait_us), changed).await;
            Reply::Done
        }
        Request::WaitProgress { wait_us } => {
            let _ = tokio::time::timeout(slice(wait_us), runtime.progressed()).await;
            Reply::Done
        }
        Request::OnReclaim { container } => {
            if session.restricted() {
                // Reclaimed items travel on a key any client of the fabric could subscribe to.
                let reason = "GC handlers of remote clients are not offered on a node with an access policy \
                              (docs/SECURITY.md)"
                    .into();
                return Err(Error::PermissionDenied { op, name: node.options.name.clone(), right: "read", reason });
            }
            reclaim::subscribe(node, session, container)?;
            Reply::Done
        }
        Request::CheckInvariants => {
            let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.check_invariants()));
            if let Err(panic) = check {
                let reason = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "an invariant does not hold".into());
                return Err(Error::InvalidArgument { op, name: node.options.name.clone(), reason });
            }
            Reply::Done
        }
        Request::SetTaskName { task, name } => {
            session.task(op, task)?.set_name(&name)?;
            Reply::Done
        }
        Request::Graph => {
            // The graph names every task and container: for users who may read every name.
            session.check(op, Right::Read, "")?;
            let mut graph = runtime.graph();
            graph.node = Some(node.options.name.clone());
            // Which client session owns each task: who to ask when one holds ts_min.
            let sessions: Vec<_> = node.sessions.lock().values().cloned().collect();
            for task in &mut graph.tasks {
                task.session = sessions.iter().find(|s| s.owns_task(task.id)).map(|s| s.id.clone());
            }
            Reply::Graph(graph)
        }
        Request::TsMin => Reply::Timestamp(runtime.ts_min()),
        Request::Stats => {
            let stats = runtime.stats();
            Reply::RuntimeStats {
                ts_min: stats.ts_min,
                containers: stats.containers as u64,
                claims: stats.claims as u64,
            }
        }
        Request::Collect => Reply::Count(runtime.collect() as u64),
        // Read here, not on every request's arrival: the node serves this one at once, so the
        // two readings bound the same instant.
        Request::TraceClock => {
            let received_ns = stampede_engine::trace::monotonic_ns();
            Reply::TraceClock {
                host: stampede_engine::trace::host_name(),
                received_ns,
                replied_ns: stampede_engine::trace::monotonic_ns(),
            }
        }
        Request::Hello | Request::Open { .. } | Request::Close => {
            let reason = "answered before a session is looked up".into();
            return Err(Error::InvalidArgument { op, name: session.id.clone(), reason });
        }
    };
    Ok((reply, Vec::new()))
}

/// Longest wait for a move's carry to reach this node's view before its takeover is refused.
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);
/// Between two looks for it.
const TAKEOVER_POLL: Duration = Duration::from_millis(1);

/// Declines on their nodes the `moves` still open (their takeover never came). Asks the other
/// nodes and waits for them: not on a worker that answers other clients.
async fn decline(node: &Arc<NodeShared>, moves: Vec<Move>) {
    let Some(link) = node.mesh.get().filter(|_| !moves.is_empty()).cloned() else { return };
    let declining = node.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for taken in &moves {
            crate::mesh::decline_there(&declining.zenoh, &link, taken);
        }
    })
    .await;
}

/// The node's mesh participant, or `InvalidArgument` saying how to give it one.
fn shares_ts_min<'a>(node: &'a NodeShared, op: &'static str) -> Result<&'a MeshLink> {
    node.mesh.get().ok_or_else(|| Error::InvalidArgument {
        op,
        name: node.options.name.clone(),
        reason: "this node shares no ts_min with other nodes, so a task cannot span it and another; start every \
                 node of the mesh with --mesh-ts-min"
            .into(),
    })
}

/// A wait a request asks for, clamped to the node's slice.
fn slice(wait_us: u64) -> Duration {
    Duration::from_micros(wait_us).min(REMOTE_WAIT_SLICE)
}

/// Registers `container` in the session and describes it.
fn container(session: &Session, op: &'static str, container: Container) -> Result<Reply> {
    let (id, queue, info, retention) = match &container {
        Container::Channel(c) => (c.id(), false, c.info(), c.retention().into()),
        Container::Queue(q) => (q.id(), true, q.info(), WireRetention::History),
    };
    let Info { name, limits, codec, description, .. } = info;
    session.add_container(op, id, container)?;
    Ok(Reply::Container(ContainerInfo {
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

fn channel(session: &Session, op: &'static str, handle: Handle) -> Result<stampede_engine::Channel> {
    match session.container(op, handle)? {
        Container::Channel(channel) => Ok(channel),
        Container::Queue(_) => Err(Error::InvalidArgument {
            op,
            name: format!("session {}", session.id),
            reason: format!("container #{handle} is a queue, not a channel"),
        }),
    }
}

fn channel_input(session: &Session, op: &'static str, handle: Handle) -> Result<Arc<stampede_engine::ChannelInput>> {
    match session.connection(op, handle)? {
        Connection::ChannelInput(input) => Ok(input),
        _ => Err(not_a(session, op, handle, "channel input")),
    }
}

fn not_a(session: &Session, op: &'static str, handle: Handle, what: &str) -> Error {
    Error::InvalidArgument {
        op,
        name: format!("session {}", session.id),
        reason: format!("connection #{handle} is not a {what}"),
    }
}

fn too_large(op: &'static str, name: &str) -> Error {
    Error::InvalidArgument { op, name: name.to_owned(), reason: "a bound too large for the node's memory".into() }
}

/// Refuses a payload above the node's bound as a put of an item that can never fit.
fn check_payload(node: &NodeShared, name: &str, ts: stampede_core::Timestamp, payload_bytes: usize) -> Result<()> {
    let bytes_max = node.options.payload_bytes_max;
    if payload_bytes <= bytes_max {
        return Ok(());
    }
    Err(Error::Full {
        name: name.to_owned(),
        ts,
        reason: format!("a payload of {payload_bytes} bytes is above the node's payload_bytes_max {bytes_max}"),
        can_never_fit: true,
    })
}

fn item_header(item: &Item) -> ItemHeader {
    ItemHeader { ts: item.ts, codec: item.payload.codec.name().to_owned(), len: item.payload.len() as u64 }
}

fn item_reply(item: Item, reply: impl FnOnce(ItemHeader) -> Reply) -> Served {
    (reply(item_header(&item)), vec![item.payload.data])
}
