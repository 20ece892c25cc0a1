//! [`RemoteTask`]: a task living on the node, owned by this client's session (the remote form of
//! [`crate::Task`]).
//!
//! As embedded, the task lives while any handle or connection of it lives, or until
//! [`RemoteTask::close`]; the last handle dropped closes it on the node (without waiting). Its
//! virtual time and visibility, when the node cannot be reached, are the last ones seen.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use parking_lot::Mutex;

use crate::{Error, Result, Timestamp};

use crate::remote::client::Client;
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
}

impl Drop for TaskRef {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::SeqCst) {
            self.client.send(Request::CloseTask { task: self.id });
        }
    }
}

impl RemoteTask {
    pub(crate) fn new(client: Arc<Client>, id: Handle, virtual_time: Timestamp) -> RemoteTask {
        let known = Mutex::new((virtual_time, virtual_time));
        let name = Mutex::new(None);
        RemoteTask { inner: Arc::new(TaskRef { client, id, closed: AtomicBool::new(false), known, name }) }
    }

    /// The task's id, unique within the node's runtime.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        self.times().0
    }

    /// The task's visibility: `min(virtual_time, timestamps of items open on its inputs)`.
    pub fn visibility(&self) -> Timestamp {
        self.times().1
    }

    /// Sets the virtual time (`>= visibility`, else `BelowVisibility`); ts_min on the node may
    /// advance and reclaim before this returns.
    pub fn set_virtual_time(&self, v: Timestamp) -> Result<()> {
        self.inner.client.done(Request::SetVirtualTime { task: self.inner.id, virtual_time: v })
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
    pub(crate) fn attach(&self, client: &Arc<Client>, name: &str, input: bool, container: Handle) -> Result<Handle> {
        let op = if input { "attach_input" } else { "attach_output" };
        if !Arc::ptr_eq(client, &self.inner.client) {
            return Err(Error::InvalidArgument {
                op,
                name: name.to_owned(),
                reason: format!(
                    "task {} and the channel or queue belong to different client sessions; attach a task of the \
                     session that created or looked up the container",
                    self.inner.id
                ),
            });
        }
        let task = self.inner.id;
        let request =
            if input { Request::AttachInput { task, container } } else { Request::AttachOutput { task, container } };
        self.inner.client.handle(request)
    }
}

impl std::fmt::Debug for RemoteTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTask").field("id", &self.inner.id).field("node", &self.inner.client.node()).finish()
    }
}
