//! Tasks: the holders of virtual time (docs/SEMANTICS.md, "Terms" and
//! "Virtual time, visibility, GC").
//!
//! A [`Task`] handle is cheap to clone; the task lives while any handle or connection of it
//! lives, or until [`Task::close`]. Closing detaches every connection the task holds and releases
//! its claim on ts_min, so a task that ends never pins GC. The facade's `stampede::Task` forwards
//! here when it is embedded.

use std::sync::Arc;

use stampede_core::{Error, Result, Timestamp, NAME_BYTES_MAX};

use crate::space::{Origin, TaskShared};

/// The unit that holds a virtual time. Any thread or async task may drive it.
#[derive(Clone)]
pub struct Task {
    pub(crate) shared: Arc<TaskShared>,
}

impl Task {
    /// The task's id, unique within its runtime.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        self.shared.state.lock().virtual_time()
    }

    /// `min(virtual_time, timestamps of items open on its input connections)`: the lowest
    /// timestamp this task may still put.
    pub fn visibility(&self) -> Timestamp {
        self.shared.state.lock().visibility()
    }

    /// Sets the virtual time; `v` must be `>= visibility` (else `BelowVisibility`). Advancing it
    /// may advance ts_min and reclaim items before this returns.
    pub fn set_virtual_time(&self, v: Timestamp) -> Result<()> {
        self.shared.space.set_virtual_time(&self.shared, v)
    }

    /// Creates a child task whose virtual time must be `>= self.visibility()`.
    pub fn spawn(&self, virtual_time: Timestamp) -> Result<Task> {
        let shared = self.shared.space.new_task(virtual_time, Origin::Child(&self.shared))?;
        Ok(Task { shared })
    }

    /// Labels the task for tools (graphs, dashboards, traces): any text of at most
    /// [`NAME_BYTES_MAX`] bytes without control characters ([`check_name`]); it need not be
    /// unique.
    pub fn set_name(&self, name: &str) -> Result<()> {
        check_name(self.id(), name)?;
        *self.shared.name.lock() = Some(name.into());
        Ok(())
    }

    /// Its label, if it has one.
    pub fn name(&self) -> Option<String> {
        self.shared.name.lock().as_deref().map(str::to_owned)
    }

    /// Ends the task now: detaches its connections (their later use fails `Closed`) and releases
    /// its claim on ts_min.
    pub fn close(&self) {
        self.shared.space.close_task(&self.shared);
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Task")
            .field("id", &self.shared.id)
            .field("virtual_time", &state.virtual_time())
            .field("visibility", &state.visibility())
            .finish()
    }
}

/// `Ok` if `name` may label task `id`: at most [`NAME_BYTES_MAX`] bytes without control
/// characters (`InvalidArgument` else). A client checks it before it sends a label, the runtime
/// that stores it checks it again.
pub fn check_name(id: u64, name: &str) -> Result<()> {
    if name.len() <= NAME_BYTES_MAX && !name.chars().any(char::is_control) {
        return Ok(());
    }
    let reason =
        format!("a task name is at most {NAME_BYTES_MAX} bytes without control characters, e.g. \"tracker 2\"");
    Err(Error::InvalidArgument { op: "set_name", name: format!("task {id}"), reason })
}
