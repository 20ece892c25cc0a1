//! [`Graph`]: what a runtime holds right now — its tasks, their connections and its channels and
//! queues with their counters — for tools (the dashboard, `stampede ls`), embedded or remote
//! alike (`stampede`'s `Runtime::graph`).
//!
//! A graph is a snapshot taken without stopping the runtime: each task and each container is
//! read under its own lock, one after the other, so parts may be from slightly different
//! instants (a connection may name a container destroyed since, a counter may have moved). It
//! holds no claim and changes nothing. Tasks and containers come in id and name order, so two
//! graphs of an idle runtime are equal. The types serialize with serde (feature `serde`: the
//! wire carries them; tools emit them as JSON).

use crate::{Tape, Timestamp};

/// A snapshot of a runtime's tasks, connections and containers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Graph {
    /// The node it describes, for a runtime connected to one (`None`: an embedded runtime, served
    /// or not).
    pub node: Option<String>,
    pub ts_min: Timestamp,
    /// Open tasks by id.
    pub tasks: Vec<TaskView>,
    /// Channels and queues by name.
    pub containers: Vec<ContainerView>,
    /// What holds ts_min where it is now: every claim at ts_min (empty when nothing does — ts_min
    /// is then `1 +` the highest timestamp put). The first place to look when ts_min stalls.
    pub held_by: Vec<Holder>,
}

/// One claim at a runtime's ts_min ([`Graph::held_by`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Holder {
    /// A task, by id: its virtual time, or items open on its connections that it still counts.
    Task { id: u64 },
    /// A channel input connection, by id (its task lists it): its lowest unseen or open item.
    Connection { id: u64 },
    /// A queue: its lowest unconsumed item.
    Queue { name: String },
    /// Another node of the mesh, by participant id: a claim held there.
    Node { peer: u64 },
}

/// One open task.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TaskView {
    pub id: u64,
    /// Its label (`Task::set_name`), if it has one.
    pub name: Option<String>,
    /// On a node, the client session that owns it (`None`: the node's own application's, or an
    /// embedded runtime's).
    pub session: Option<String>,
    pub virtual_time: Timestamp,
    pub visibility: Timestamp,
    /// Its attached connections, by id.
    pub connections: Vec<ConnectionView>,
}

/// Which way a connection carries items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ConnectionKind {
    Input,
    Output,
}

/// One attached connection of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ConnectionView {
    pub id: u64,
    /// The name of the channel or queue it is attached to.
    pub container: String,
    pub kind: ConnectionKind,
    /// Items gotten (input) or put (output) through it so far.
    pub items: u64,
    /// Input only: items it let go without getting them (see
    /// [`ConnectionStats::skipped`](crate::ConnectionStats::skipped)).
    pub skipped: u64,
    /// A remote client's input connection, on its node: what it asked for and the pattern that
    /// shows ([`Tape`]); `None` elsewhere.
    pub tape: Option<Tape>,
    /// Its prefetch on its node: the policy, items pushed and those its cache used; `None`
    /// elsewhere.
    pub prefetch: Option<crate::prefetch::Pushes>,
}

/// One channel or queue with its bounds and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ContainerView {
    pub name: String,
    /// `"channel"` or `"queue"`.
    pub kind: String,
    /// Bounds: most items and most payload bytes stored at once (`None`: unbounded).
    pub capacity: Option<u64>,
    pub max_bytes: Option<u64>,
    /// Its declared codec, if any.
    pub codec: Option<String>,
    pub description: String,
    pub live_items: u64,
    pub live_bytes: u64,
    pub puts: u64,
    pub gets: u64,
    pub reclaimed: u64,
    /// Puts that ended `Full` (the item was not stored): its producers' drops.
    pub dropped: u64,
    /// Its lowest claim on ts_min, if any.
    pub claim: Option<Timestamp>,
}

impl Graph {
    /// `holder` in words, with what this graph knows of it: `task 3 "tracker" (session 9f2c…)`,
    /// `connection 7 of task 3 on camera/frames`, `queue jobs`, `another node of the mesh
    /// (participant 42)` — what `stampede ls --ts-min` and the dashboard print.
    pub fn describe(&self, holder: &Holder) -> String {
        match holder {
            Holder::Task { id } => self.describe_task(*id),
            Holder::Connection { id } => {
                let on = self.tasks.iter().find_map(|task| {
                    task.connections.iter().find(|c| c.id == *id).map(|c| (task.id, c.container.as_str()))
                });
                match on {
                    Some((task, container)) => {
                        format!("connection {id} of {} on {container}", self.describe_task(task))
                    }
                    None => format!("connection {id}"),
                }
            }
            Holder::Queue { name } => format!("queue {name}"),
            Holder::Node { peer } => format!("another node of the mesh (participant {peer})"),
        }
    }

    /// `task <id> "<name>" (session <id>)`, with what the graph knows of it.
    fn describe_task(&self, id: u64) -> String {
        let mut text = format!("task {id}");
        if let Some(task) = self.tasks.iter().find(|t| t.id == id) {
            if let Some(name) = &task.name {
                text.push_str(&format!(" {name:?}"));
            }
            if let Some(session) = &task.session {
                text.push_str(&format!(" (session {session})"));
            }
        }
        text
    }
}
