//! The embedded runtime's [`Graph`]: its open tasks with their connections, and its containers,
//! each read under its own lock and none held while another is taken (the lock order of
//! `space` never comes into play).

use stampede_core::{ConnectionStats, Limits, Stats};

use crate::space::{ContainerState, Entry, Held, Shared, Space, TaskShared};
use stampede_core::graph::{ConnectionKind, ConnectionView, ContainerView, Graph, Holder, TaskView};
use stampede_core::Location;

/// What `space` holds now; `node` is the name it serves under, if it does.
pub(crate) fn graph(space: &Space, node: Option<String>) -> Graph {
    let tasks = space.open_tasks().iter().filter_map(|task| task_view(task)).collect();
    let entries = space.entries();
    let mut containers: Vec<ContainerView> = entries.iter().map(container_view).collect();
    containers.sort_by(|a, b| a.name.cmp(&b.name));
    let held_by = space.ts_min_holders().into_iter().filter_map(|location| holder(location, &entries)).collect();
    Graph { node, ts_min: space.ts_min(), tasks, containers, held_by }
}

/// A claim's location as tools name it; `None` for the watermark, and for a queue destroyed since.
fn holder(location: Location, entries: &[Entry]) -> Option<Holder> {
    Some(match location {
        Location::Task(id) | Location::Handover(id) => Holder::Task { id },
        Location::Input(id) => Holder::Connection { id },
        Location::Queue(key) => Holder::Queue {
            name: entries.iter().find_map(|entry| match entry {
                Entry::Queue(q) if q.key == key => Some(q.name.to_string()),
                _ => None,
            })?,
        },
        Location::Peer(peer) => Holder::Node { peer },
        Location::Watermark => return None,
    })
}

/// A task and its connections; `None` once it is closed.
fn task_view(task: &TaskShared) -> Option<TaskView> {
    let (virtual_time, visibility) = {
        let state = task.state.lock();
        if state.is_closed() {
            return None;
        }
        (state.virtual_time(), state.visibility())
    };
    let held = task.held.lock().clone();
    let mut connections: Vec<ConnectionView> = held.iter().filter_map(connection_view).collect();
    connections.sort_by_key(|c| c.id);
    let name = task.name.lock().as_deref().map(str::to_owned);
    Some(TaskView { id: task.id, name, session: None, virtual_time, visibility, connections })
}

/// A connection as its container counts it; `None` once it is detached or its container gone.
fn connection_view(held: &Held) -> Option<ConnectionView> {
    let (name, kind, counts) = match held {
        Held::ChannelInput(ch, conn) => counted(ch.upgrade()?.as_ref(), ConnectionKind::Input, *conn)?,
        Held::ChannelOutput(ch, conn) => counted(ch.upgrade()?.as_ref(), ConnectionKind::Output, *conn)?,
        Held::QueueInput(q, conn) => counted(q.upgrade()?.as_ref(), ConnectionKind::Input, *conn)?,
        Held::QueueOutput(q, conn) => counted(q.upgrade()?.as_ref(), ConnectionKind::Output, *conn)?,
    };
    Some(ConnectionView {
        id: held.conn(),
        container: name,
        kind,
        items: counts.items,
        skipped: counts.skipped,
        tape: None,
        prefetch: None,
    })
}

fn counted<S: ContainerState>(
    shared: &Shared<S>,
    kind: ConnectionKind,
    conn: u64,
) -> Option<(String, ConnectionKind, ConnectionStats)> {
    let counts = shared.state.lock().connection_stats(conn)?;
    Some((shared.name.to_string(), kind, counts))
}

fn container_view(entry: &Entry) -> ContainerView {
    match entry {
        Entry::Channel(ch) => view(ch, "channel", ch.meta.codec.as_ref().map(|c| c.name().to_owned())),
        Entry::Queue(q) => view(q, "queue", None),
    }
}

fn view<S: ContainerState>(shared: &Shared<S>, kind: &str, codec: Option<String>) -> ContainerView {
    let Stats { live_items, live_bytes, puts, gets, reclaimed, claim, .. } = shared.state.lock().stats();
    let Limits { capacity, bytes_max } = shared.limits;
    ContainerView {
        name: shared.name.to_string(),
        kind: kind.to_owned(),
        capacity: capacity.map(|n| n as u64),
        max_bytes: bytes_max.map(|n| n as u64),
        codec,
        description: shared.meta.description.to_string(),
        live_items: live_items as u64,
        live_bytes: live_bytes as u64,
        puts,
        gets,
        reclaimed,
        dropped: shared.dropped(),
        claim,
    }
}
