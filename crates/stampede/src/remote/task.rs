//! [`RemoteTask`]: a task living on the node, owned by this client's session (the remote form of
//! [`crate::Task`]).
//!
//! As embedded, the task lives while any handle or connection of it lives, or until
//! [`RemoteTask::close`]; the last handle dropped closes it on the node (without waiting). Its
//! virtual time and visibility, when the node cannot be reached, are the last ones seen.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use parking_lot::Mutex;

use crate::{Error, Result, Timestamp, INFINITY};

use crate::remote::client::Client;
use crate::remote::runtime::unexpected;
use crate::remote::wire::{Handle, Reply, Request};

/// A task on the node. Cheap to clone; every clone is the same task.
#[derive(Clone)]
pub(crate) struct RemoteTask {
    pub(crate) inner: Arc<TaskRef>,
}

/// The task's handle in the session; closes the task when the last reference drops.
pub(crate) struct TaskRef {
    pub(crate) client: Arc<Client>,
    pub(crate) id: Handle,
    closed: AtomicBool,
    /// Virtual time and visibility when last asked.
    known: Mutex<(Timestamp, Timestamp)>,
    /// Its label, as last set through this handle.
    name: Mutex<Option<String>>,
    /// Its shadows on other nodes, by node name (docs/PROTOCOL.md "A task spans nodes through
    /// shadows"): created at the first attachment to a container there, closed with the task.
    shadows: Mutex<BTreeMap<String, Shadow>>,
}

/// A task's shadow: a task on another node, in this client's session there, whose claims
/// follow the home task's.
struct Shadow {
    client: Arc<Client>,
    id: Handle,
}

impl Drop for TaskRef {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::SeqCst) {
            self.client.send(Request::CloseTask { task: self.id });
            for shadow in self.shadows.get_mut().values() {
                shadow.client.send(Request::CloseTask { task: shadow.id });
            }
        }
    }
}

impl RemoteTask {
    pub(crate) fn new(client: Arc<Client>, id: Handle, virtual_time: Timestamp) -> RemoteTask {
        let known = Mutex::new((virtual_time, virtual_time));
        let name = Mutex::new(None);
        let shadows = Mutex::default();
        RemoteTask { inner: Arc::new(TaskRef { client, id, closed: AtomicBool::new(false), known, name, shadows }) }
    }

    /// The task's id, unique within the node's runtime.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        self.times().0
    }

    /// The task's visibility: `min(virtual_time, timestamps of items open on its inputs)`, over
    /// its inputs on every node.
    pub fn visibility(&self) -> Timestamp {
        let shadows = self.inner.shadows.lock();
        shadows
            .values()
            .map(|shadow| shadow_times(shadow).map_or(INFINITY, |(_, v)| v))
            .fold(self.times().1, Timestamp::min)
    }

    /// Sets the virtual time (`>= visibility`, else `BelowVisibility`); ts_min on the node may
    /// advance and reclaim before this returns. The home task moves first, then its shadows
    /// (so no node's claim for the task is ever above the task's own).
    pub fn set_virtual_time(&self, v: Timestamp) -> Result<()> {
        let shadows = self.inner.shadows.lock();
        self.inner.client.done(Request::SetVirtualTime { task: self.inner.id, virtual_time: v })?;
        for shadow in shadows.values() {
            shadow.client.done(Request::SetVirtualTime { task: shadow.id, virtual_time: v })?;
        }
        Ok(())
    }

    /// A child task on the node whose virtual time must be `>= self.visibility()`.
    pub fn spawn(&self, virtual_time: Timestamp) -> Result<RemoteTask> {
        let handle = self.inner.client.handle(Request::Spawn { task: self.inner.id, virtual_time })?;
        Ok(RemoteTask::new(self.inner.client.clone(), handle, virtual_time))
    }

    /// Labels the task on the node (its graph shows it).
    pub fn set_name(&self, name: &str) -> Result<()> {
        self.inner.client.done(Request::SetTaskName { task: self.inner.id, name: name.to_owned() })?;
        *self.inner.name.lock() = Some(name.to_owned());
        Ok(())
    }

    /// Its label, as set through this handle.
    pub fn name(&self) -> Option<String> {
        self.inner.name.lock().clone()
    }

    /// Ends the task on the node now: its connections are detached (their later use fails
    /// `Closed`) and its claim on ts_min is released by the time this returns.
    pub fn close(&self) {
        if !self.inner.closed.swap(true, Ordering::SeqCst) {
            let _ = self.inner.client.done(Request::CloseTask { task: self.inner.id });
            for shadow in self.inner.shadows.lock().values() {
                let _ = shadow.client.done(Request::CloseTask { task: shadow.id });
            }
        }
    }

    /// Virtual time and visibility now, or as last seen when the node cannot be reached.
    fn times(&self) -> (Timestamp, Timestamp) {
        let client = &self.inner.client;
        let answer = client.call(Request::Times { task: self.inner.id }, None, Duration::ZERO);
        let mut known = self.inner.known.lock();
        if let Ok((Reply::Times { virtual_time, visibility }, _)) = answer {
            *known = (virtual_time, visibility);
        }
        *known
    }

    /// Attaches a connection of this task to `container` (of `client`): the connection's handle.
    /// A container on another node is attached through the task's shadow there.
    pub(crate) fn attach(&self, client: &Arc<Client>, name: &str, input: bool, container: Handle) -> Result<Handle> {
        let op = if input { "attach_input" } else { "attach_output" };
        let task = if Arc::ptr_eq(client, &self.inner.client) {
            self.inner.id
        } else if client.node() != self.inner.client.node() {
            self.shadow_on(client, op, name)?
        } else {
            return Err(Error::InvalidArgument {
                op,
                name: name.to_owned(),
                reason: format!(
                    "task {} and the channel or queue belong to different client sessions on node {}; attach a task \
                     of the runtime that created or looked up the container",
                    self.inner.id,
                    client.node()
                ),
            });
        };
        let request =
            if input { Request::AttachInput { task, container } } else { Request::AttachOutput { task, container } };
        client.handle(request)
    }

    /// The task's shadow on `client`'s node, started there on first use: the home node moves
    /// the task's visibility to that node, which takes the move over as a new task, then raised
    /// to the task's virtual time.
    fn shadow_on(&self, client: &Arc<Client>, op: &'static str, name: &str) -> Result<Handle> {
        let mut shadows = self.inner.shadows.lock();
        if let Some(shadow) = shadows.get(client.node()) {
            return Ok(shadow.id);
        }
        let home = &self.inner.client;
        let Some(to) = client.hello.mesh else {
            return Err(Error::InvalidArgument {
                op,
                name: name.to_owned(),
                reason: format!(
                    "it is on node {}, which shares no ts_min with node {} where task {} lives; start the nodes with \
                     --mesh-ts-min, or create the task with a runtime connected to node {}",
                    client.node(),
                    home.node(),
                    self.inner.id,
                    client.node()
                ),
            });
        };
        let request = Request::MoveTask { task: self.inner.id, to_node: client.node().to_owned(), to };
        let (from, id, visibility) = match home.call(request, None, Duration::ZERO)?.0 {
            Reply::Moved { from, id, visibility } => (from, id, visibility),
            _ => return Err(unexpected(op, home.node())),
        };
        let shadow = client.handle(Request::TakeOverTask { from, id, virtual_time: visibility })?;
        let virtual_time = self.times().0;
        if virtual_time > visibility {
            if let Err(e) = client.done(Request::SetVirtualTime { task: shadow, virtual_time }) {
                let _ = client.done(Request::CloseTask { task: shadow });
                return Err(e);
            }
        }
        shadows.insert(client.node().to_owned(), Shadow { client: client.clone(), id: shadow });
        Ok(shadow)
    }
}

impl std::fmt::Debug for RemoteTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTask").field("id", &self.inner.id).field("node", &self.inner.client.node()).finish()
    }
}

/// A shadow's virtual time and visibility (`None` when its node cannot be reached).
fn shadow_times(shadow: &Shadow) -> Option<(Timestamp, Timestamp)> {
    match shadow.client.call(Request::Times { task: shadow.id }, None, Duration::ZERO) {
        Ok((Reply::Times { virtual_time, visibility }, _)) => Some((virtual_time, visibility)),
        _ => None,
    }
}
