//! Tasks: the holders of virtual time (docs/SEMANTICS.md, "Terms" and
//! "Virtual time, visibility, GC").
//!
//! A [`Task`] handle is cheap to clone; the task lives while any handle or connection of it
//! lives, or until [`Task::close`]. Closing detaches every connection the task holds and releases
//! its claim on ts_min, so a task that ends never pins GC. A task of a remote runtime lives on
//! the node, owned by the client's session.

use stampede_core::{Error, InputOptions, OutputOptions, Result, Timestamp};

#[cfg(not(feature = "remote"))]
use crate::backend::Never as RemoteTask;
use crate::backend::{forward, remote, Backend};
use crate::channel::{Channel, ChannelInput, ChannelOutput};
use crate::queue::{Queue, QueueInput, QueueOutput};
#[cfg(feature = "remote")]
use crate::remote::task::RemoteTask;
use stampede_engine as engine;

/// The unit that holds a virtual time. Any thread or async task may drive it.
#[derive(Clone)]
pub struct Task(pub(crate) Backend<engine::Task, RemoteTask>);

impl Task {
    /// The task's id, unique within its runtime.
    pub fn id(&self) -> u64 {
        forward!(&self.0, t => t.id())
    }

    /// The task's virtual time (remotely: the last one seen when the node cannot be reached).
    pub fn virtual_time(&self) -> Timestamp {
        forward!(&self.0, t => t.virtual_time())
    }

    /// `min(virtual_time, timestamps of items open on its input connections)`: the lowest
    /// timestamp this task may still put (remotely: the last one seen when the node cannot be
    /// reached).
    pub fn visibility(&self) -> Timestamp {
        forward!(&self.0, t => t.visibility())
    }

    /// Sets the virtual time; `v` must be `>= visibility` (else `BelowVisibility`). Advancing it
    /// may advance ts_min and reclaim items before this returns.
    pub fn set_virtual_time(&self, v: Timestamp) -> Result<()> {
        let _span = crate::trace::span(crate::trace::Kind::Claim, 0, v as u64, 0);
        forward!(&self.0, t => t.set_virtual_time(v))
    }

    /// Creates a child task whose virtual time must be `>= self.visibility()`.
    pub fn spawn(&self, virtual_time: Timestamp) -> Result<Task> {
        Ok(match &self.0 {
            Backend::Local(t) => Task(Backend::Local(t.spawn(virtual_time)?)),
            Backend::Remote(t) => remote!(t => Task(Backend::Remote(t.spawn(virtual_time)?))),
        })
    }

    /// Attaches an input connection to a channel or queue. For a channel, every item present
    /// below this task's visibility is consumed on the new connection at once; the rest, and
    /// every item put later, are unseen on it.
    pub fn attach_input<C: Attach>(&self, container: &C) -> Result<C::Input> {
        container.attach_input(self)
    }

    /// Attaches an input connection to a channel, with a bound on how far it may fall behind
    /// (`max_lag_items`, `max_lag_ts`): beyond it the oldest unseen items are consumed for this
    /// connection and counted as skipped, so a slow reader cannot hold ts_min back
    /// (docs/SEMANTICS.md, "Slow readers: max_lag"). `InvalidArgument` for `max_lag_items` 0.
    pub fn attach_input_with(&self, channel: &Channel, options: InputOptions) -> Result<ChannelInput> {
        channel.attach_input_with(self, options)
    }

    /// Attaches an output connection to a channel or queue.
    pub fn attach_output<C: Attach>(&self, container: &C) -> Result<C::Output> {
        container.attach_output(self)
    }

    /// Attaches an output connection to a channel with options: remotely, `put_window` puts
    /// may be on their way to the node at once, their errors raised by the connection's next
    /// `put` or [`flush`](crate::ChannelOutput::flush) (docs/NODES.md, "Pipelined puts").
    /// `InvalidArgument` for a window above [`PUT_WINDOW_MAX`](crate::PUT_WINDOW_MAX).
    pub fn attach_output_with(&self, channel: &Channel, options: OutputOptions) -> Result<ChannelOutput> {
        channel.attach_output_with(self, options)
    }

    /// Labels the task for tools: [`Runtime::graph`](crate::Runtime::graph), dashboards,
    /// traces. Any text of at most [`NAME_BYTES_MAX`](crate::NAME_BYTES_MAX) bytes without
    /// control characters (else `InvalidArgument`); it need not be unique.
    pub fn set_name(&self, name: &str) -> Result<()> {
        match &self.0 {
            Backend::Local(t) => t.set_name(name),
            Backend::Remote(t) => remote!(t => {
                stampede_engine::task::check_name(self.id(), name)?;
                t.set_name(name)
            }),
        }
    }

    /// Its label, if it has one (remotely: as set through this handle).
    pub fn name(&self) -> Option<String> {
        forward!(&self.0, t => t.name())
    }

    /// Ends the task now: detaches its connections (their later use fails `Closed`) and releases
    /// its claim on ts_min.
    pub fn close(&self) {
        let _span = crate::trace::span(crate::trace::Kind::Claim, 0, u64::MAX, 0);
        forward!(&self.0, t => t.close())
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        forward!(&self.0, t => t.fmt(f))
    }
}

/// A container a task can attach to: [`Channel`] or [`Queue`].
pub trait Attach {
    /// The input connection type.
    type Input;
    /// The output connection type.
    type Output;
    /// Attaches an input connection of `task`.
    fn attach_input(&self, task: &Task) -> Result<Self::Input>;
    /// Attaches an output connection of `task`.
    fn attach_output(&self, task: &Task) -> Result<Self::Output>;
}

/// The error of attaching a task of one runtime to a container of another: an embedded task to
/// a remote container or the other way round (the embedded and remote sides check their own).
fn elsewhere(op: &'static str, name: &str, task: &Task) -> Error {
    Error::InvalidArgument {
        op,
        name: name.to_owned(),
        reason: format!(
            "task {} and the channel or queue belong to different runtimes (one embedded, one remote); attach a \
             task of the runtime that created or looked up the container",
            task.id()
        ),
    }
}

impl Channel {
    fn attach_input_with(&self, task: &Task, options: InputOptions) -> Result<ChannelInput> {
        let inner = match (&self.0, &task.0) {
            (Backend::Local(c), Backend::Local(t)) => Backend::Local(c.attach_input_with(t, options)?),
            (Backend::Remote(c), Backend::Remote(t)) => {
                remote!(c, t => Backend::Remote(c.attach_input(t, options)?))
            }
            _ => return Err(elsewhere("attach_input", self.name(), task)),
        };
        Ok(ChannelInput { channel: self.clone(), inner })
    }

    fn attach_output_with(&self, task: &Task, options: OutputOptions) -> Result<ChannelOutput> {
        let inner = match (&self.0, &task.0) {
            (Backend::Local(c), Backend::Local(t)) => {
                options.check(self.name())?;
                Backend::Local(c.attach_output(t)?)
            }
            (Backend::Remote(c), Backend::Remote(t)) => remote!(c, t => Backend::Remote(c.attach_output(t, options)?)),
            _ => return Err(elsewhere("attach_output", self.name(), task)),
        };
        Ok(ChannelOutput { channel: self.clone(), inner })
    }
}

impl Attach for Channel {
    type Input = ChannelInput;
    type Output = ChannelOutput;
    fn attach_input(&self, task: &Task) -> Result<ChannelInput> {
        self.attach_input_with(task, InputOptions::default())
    }
    fn attach_output(&self, task: &Task) -> Result<ChannelOutput> {
        self.attach_output_with(task, OutputOptions::default())
    }
}

impl Attach for Queue {
    type Input = QueueInput;
    type Output = QueueOutput;
    fn attach_input(&self, task: &Task) -> Result<QueueInput> {
        let inner = match (&self.0, &task.0) {
            (Backend::Local(q), Backend::Local(t)) => Backend::Local(q.attach_input(t)?),
            (Backend::Remote(q), Backend::Remote(t)) => remote!(q, t => Backend::Remote(q.attach_input(t)?)),
            _ => return Err(elsewhere("attach_input", self.name(), task)),
        };
        Ok(QueueInput { queue: self.clone(), inner })
    }
    fn attach_output(&self, task: &Task) -> Result<QueueOutput> {
        let inner = match (&self.0, &task.0) {
            (Backend::Local(q), Backend::Local(t)) => Backend::Local(q.attach_output(t)?),
            (Backend::Remote(q), Backend::Remote(t)) => remote!(q, t => Backend::Remote(q.attach_output(t)?)),
            _ => return Err(elsewhere("attach_output", self.name(), task)),
        };
        Ok(QueueOutput { queue: self.clone(), inner })
    }
}
