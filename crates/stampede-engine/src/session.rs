//! A session: what one caller of [`Runtime::execute`](crate::Runtime::execute) holds — its
//! tasks, connections and containers under handles — with its bounds and its rights. It is the
//! papers' surrogate: a node keeps one per remote client, and an operation of the session names
//! what it uses by handle.
//!
//! **Guarantees.** A session holds at most `handles_max` tasks, connections and containers
//! together; past that a creation fails `InvalidArgument` and what it made is closed again.
//! Once [`close`](Session::close) began, every operation of the session fails `Closed` and
//! anything a request in flight creates is closed at once: closing releases every claim the
//! session held (its tasks closed, its connections detached), so the items they held open go
//! back and ts_min moves on (docs/SEMANTICS.md, "Virtual time, visibility, GC").

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use stampede_core::{Error, Handle, Result, Timestamp};

use crate::budget::{Charge, SessionBudget};
use crate::sync::{Mutex, MutexGuard};
use crate::{ChannelInput, ChannelOutput, Container, QueueInput, QueueOutput, Task};

/// The reason of the `Closed` error of an operation in a session that ended.
pub const SESSION_CLOSED: &str =
    "the client's session on the node ended (closed, or the client vanished); connect again";

/// The error of an operation in session `id` after it ended (or that was never opened).
pub fn closed(id: &str) -> Error {
    Error::Closed { name: format!("session {id}"), reason: SESSION_CLOSED }
}

/// What a right allows; a session's [`Admission`] says which it has on which names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Right {
    /// Attach an input (get, consume); read the runtime's graph (with `""`).
    Read,
    /// Attach an output (put).
    Write,
    /// Create and destroy channels and queues.
    Create,
}

impl Right {
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Create => "create",
        }
    }
}

/// Which rights a session's user has: checked by [`Runtime::execute`](crate::Runtime::execute)
/// once, on the names its operations touch.
pub trait Admission {
    /// `Ok` if the user has `right` on `name`, else `PermissionDenied`.
    fn check(&self, op: &'static str, right: Right, name: &str) -> Result<()>;
    /// Whether the user may look `name` up and see it listed (any right on it).
    fn sees(&self, name: &str) -> bool;
}

/// Every right on every name: an embedded caller's, or a node's without an access policy.
pub struct Unrestricted;

impl Admission for Unrestricted {
    fn check(&self, _op: &'static str, _right: Right, _name: &str) -> Result<()> {
        Ok(())
    }

    fn sees(&self, _name: &str) -> bool {
        true
    }
}

/// A connection a session holds. Shared so that an operation can use it without holding the
/// session's lock while it waits.
#[derive(Clone)]
pub enum Connection {
    ChannelInput(Arc<ChannelInput>),
    ChannelOutput(Arc<ChannelOutput>),
    QueueInput(Arc<QueueInput>),
    QueueOutput(Arc<QueueOutput>),
}

impl Connection {
    /// An input connection's id in its channel or queue (a graph's `ConnectionView::id`);
    /// `None` for an output.
    pub fn input_id(&self) -> Option<u64> {
        match self {
            Connection::ChannelInput(c) => Some(c.conn),
            Connection::QueueInput(c) => Some(c.conn),
            Connection::ChannelOutput(_) | Connection::QueueOutput(_) => None,
        }
    }

    /// The task the connection was attached by.
    pub fn task_id(&self) -> Handle {
        match self {
            Connection::ChannelInput(c) => c.task.id,
            Connection::ChannelOutput(c) => c.task.id,
            Connection::QueueInput(c) => c.task.id,
            Connection::QueueOutput(c) => c.task.id,
        }
    }

    fn detach(&self) {
        match self {
            Connection::ChannelInput(c) => c.detach(),
            Connection::ChannelOutput(c) => c.detach(),
            Connection::QueueInput(c) => c.detach(),
            Connection::QueueOutput(c) => c.detach(),
        }
    }
}

/// Tasks and connections the node closed for a session (not the client: see
/// [`Session::close_tasks`]) whose handles it remembers, to say why when the client uses one;
/// older ones are forgotten (their use is then "holds no task").
pub const CLOSED_HANDLES_KEPT: usize = 64;

/// One session's handles and bounds.
pub struct Session {
    /// Its id, in errors (`session <id>`).
    pub id: String,
    handles_max: usize,
    /// Largest payload one put of the session may carry.
    payload_bytes_max: usize,
    /// The live payload bytes its puts may hold, and its node's (`None`: not budgeted).
    budget: Option<SessionBudget>,
    owned: Mutex<Owned>,
}

#[derive(Default)]
struct Owned {
    closed: bool,
    tasks: HashMap<Handle, Task>,
    connections: HashMap<Handle, Connection>,
    /// Channels and queues the session created or looked up, under their runtime ids.
    containers: HashMap<Handle, Container>,
    next_connection: Handle,
    /// The last [`CLOSED_HANDLES_KEPT`] tasks and connections the node closed: what each was,
    /// its handle, and why.
    closed_by_node: VecDeque<(&'static str, Handle, &'static str)>,
}

impl Owned {
    /// Remembers that the node closed the `what` `handle` for `reason`.
    fn closed_by_node(&mut self, what: &'static str, handle: Handle, reason: &'static str) {
        if self.closed_by_node.len() == CLOSED_HANDLES_KEPT {
            self.closed_by_node.pop_front();
        }
        self.closed_by_node.push_back((what, handle, reason));
    }
}

impl Owned {
    fn count(&self) -> usize {
        self.tasks.len() + self.connections.len() + self.containers.len()
    }
}

impl Session {
    /// An empty session `id` holding at most `handles_max` handles, its puts at most
    /// `payload_bytes_max` bytes each.
    pub fn new(id: String, handles_max: usize, payload_bytes_max: usize) -> Session {
        Session { id, handles_max, payload_bytes_max, budget: None, owned: Mutex::default() }
    }

    /// This session with its puts charged to `budget` (docs/LIMITS.md, "Byte budgets").
    pub fn with_budget(self, budget: SessionBudget) -> Session {
        Session { budget: Some(budget), ..self }
    }

    /// Its budget, if it has one.
    pub fn budget(&self) -> Option<&SessionBudget> {
        self.budget.as_ref()
    }

    /// Charges a put of `bytes` at `ts` into `name` to the session's budget, waiting up to
    /// `timeout` for room (`None` without a budget); `Full` naming the budget when none came.
    ///
    /// `refused` is what refuses the put whatever is reclaimed: asked before waiting for room,
    /// so that such a put fails at once with its own error rather than the budget's `Full`.
    pub(crate) async fn charge(
        &self,
        name: &str,
        ts: Timestamp,
        bytes: usize,
        deadline: Option<Instant>,
        refused: impl FnOnce() -> Result<()>,
    ) -> Result<Option<Charge>> {
        let Some(budget) = &self.budget else { return Ok(None) };
        match budget.charge(name, ts, bytes) {
            Err(Error::Full { can_never_fit: false, .. }) => refused()?,
            charged => return charged.map(Some),
        }
        let timeout = crate::wait::left(deadline);
        crate::wait::asynchronous(budget.freed(), Some(timeout), || budget.charge(name, ts, bytes)).await.map(Some)
    }

    /// The lowest visibility of the session's tasks — what it holds the runtime's ts_min at —
    /// `None` when it holds no task (or is closed).
    pub fn visibility(&self) -> Option<Timestamp> {
        let owned = self.owned.lock();
        owned.tasks.values().map(Task::visibility).min()
    }

    /// The task `handle` of this session.
    pub fn task(&self, op: &'static str, handle: Handle) -> Result<Task> {
        let owned = self.open()?;
        owned.tasks.get(&handle).cloned().ok_or_else(|| self.missing(&owned, op, "task", handle))
    }

    /// The channel or queue `handle` of this session.
    pub fn container(&self, op: &'static str, handle: Handle) -> Result<Container> {
        let owned = self.open()?;
        owned.containers.get(&handle).cloned().ok_or_else(|| self.unknown(op, "channel or queue", handle))
    }

    /// The connection `handle` of this session.
    pub fn connection(&self, op: &'static str, handle: Handle) -> Result<Connection> {
        let owned = self.open()?;
        owned.connections.get(&handle).cloned().ok_or_else(|| self.missing(&owned, op, "connection", handle))
    }

    /// Takes `task` into the session; closes it instead if the session ended or is full.
    pub fn add_task(&self, op: &'static str, task: Task) -> Result<Handle> {
        let handle = task.id();
        self.take(op, task, Task::close, |owned, task| {
            owned.tasks.insert(handle, task);
            handle
        })
    }

    /// Whether task `id` of the runtime is this session's.
    pub fn owns_task(&self, id: Handle) -> bool {
        self.owned.lock().tasks.contains_key(&id)
    }

    /// Takes `container` into the session under its runtime id (once, however often it is looked up).
    pub fn add_container(&self, op: &'static str, handle: Handle, container: Container) -> Result<()> {
        let mut owned = self.owned.lock();
        if owned.containers.contains_key(&handle) {
            return Ok(());
        }
        self.admit(op, &owned)?;
        owned.containers.insert(handle, container);
        Ok(())
    }

    /// Forgets the container `handle` (destroyed): its slot counts no more.
    pub fn forget_container(&self, handle: Handle) {
        self.owned.lock().containers.remove(&handle);
    }

    /// Takes `connection` into the session; detaches it instead if the session ended or is full.
    pub fn add_connection(&self, op: &'static str, connection: Connection) -> Result<Handle> {
        self.take(op, connection, Connection::detach, |owned, connection| {
            owned.next_connection += 1;
            owned.connections.insert(owned.next_connection, connection);
            owned.next_connection
        })
    }

    /// Inserts `thing` into the table if the session admits one more handle; else lets it go
    /// (`release`, outside the lock: closing a task may run GC handlers) and fails.
    fn take<T>(
        &self,
        op: &'static str,
        thing: T,
        release: impl FnOnce(&T),
        insert: impl FnOnce(&mut Owned, T) -> Handle,
    ) -> Result<Handle> {
        let mut owned = self.owned.lock();
        if let Err(e) = self.admit(op, &owned) {
            drop(owned);
            release(&thing);
            return Err(e);
        }
        Ok(insert(&mut owned, thing))
    }

    /// Closes the task `handle` and forgets it (its connections stay, detached, as in the
    /// embedded API: their later use fails `Closed`).
    pub fn close_task(&self, op: &'static str, handle: Handle) -> Result<()> {
        let task = self.open()?.tasks.remove(&handle).ok_or_else(|| self.unknown(op, "task", handle))?;
        task.close();
        Ok(())
    }

    /// Closes the tasks `handles` for the node (a shadow whose home node left the mesh) and
    /// forgets them and their connections; the later use of any fails `Closed` with `reason`.
    pub fn close_tasks(&self, handles: &[Handle], reason: &'static str) {
        let tasks: Vec<Task> = {
            let mut owned = self.owned.lock();
            let tasks: Vec<Task> = handles.iter().filter_map(|handle| owned.tasks.remove(handle)).collect();
            for task in &tasks {
                owned.closed_by_node("task", task.id(), reason);
            }
            let ids: Vec<Handle> = tasks.iter().map(Task::id).collect();
            let attached: Vec<Handle> =
                owned.connections.iter().filter(|(_, c)| ids.contains(&c.task_id())).map(|(h, _)| *h).collect();
            for handle in attached {
                owned.connections.remove(&handle);
                owned.closed_by_node("connection", handle, reason);
            }
            tasks
        };
        for task in tasks {
            task.close();
        }
    }

    /// Detaches the connection `handle` and forgets it.
    pub fn detach(&self, op: &'static str, handle: Handle) -> Result<()> {
        let connection =
            self.open()?.connections.remove(&handle).ok_or_else(|| self.unknown(op, "connection", handle))?;
        connection.detach();
        Ok(())
    }

    /// Ends the session: every task is closed (claims released, open items back) and every
    /// connection detached; operations in flight on them fail `Closed`. Idempotent.
    pub fn close(&self) {
        let owned = {
            let mut owned = self.owned.lock();
            let taken = std::mem::take(&mut *owned);
            // After the take: the table left behind must say closed, or an operation in flight
            // would add a task nobody ever closes.
            owned.closed = true;
            taken
        };
        for connection in owned.connections.values() {
            connection.detach();
        }
        for task in owned.tasks.values() {
            task.close();
        }
    }

    /// Whether the session is ended or being ended: [`close`](Self::close) began.
    pub fn ended(&self) -> bool {
        self.owned.lock().closed
    }

    /// Refuses a payload above the session's bound as a put of an item that can never fit.
    pub(crate) fn check_payload(&self, name: &str, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        let bytes_max = self.payload_bytes_max;
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

    /// The session's table, or `Closed` once the session ended.
    fn open(&self) -> Result<MutexGuard<'_, Owned>> {
        let owned = self.owned.lock();
        if owned.closed {
            return Err(closed(&self.id));
        }
        Ok(owned)
    }

    fn admit(&self, op: &'static str, owned: &Owned) -> Result<()> {
        if owned.closed {
            return Err(closed(&self.id));
        }
        if owned.count() >= self.handles_max {
            return Err(Error::InvalidArgument {
                op,
                name: self.name(),
                reason: format!(
                    "the session holds {} tasks, connections and containers, the node's session_handles_max; close \
                     tasks or detach connections first",
                    owned.count()
                ),
            });
        }
        Ok(())
    }

    /// The error for a `what` `handle` the session does not hold: `Closed` with the node's
    /// reason if the node closed it, else [`unknown`](Self::unknown).
    fn missing(&self, owned: &Owned, op: &'static str, what: &'static str, handle: Handle) -> Error {
        match owned.closed_by_node.iter().find(|&&(kind, closed, _)| kind == what && closed == handle) {
            Some(&(_, _, reason)) => Error::Closed { name: format!("{what} #{handle} of {}", self.name()), reason },
            None => self.unknown(op, what, handle),
        }
    }

    fn unknown(&self, op: &'static str, what: &str, handle: Handle) -> Error {
        Error::InvalidArgument { op, name: self.name(), reason: format!("this session holds no {what} #{handle}") }
    }

    /// The session as errors name it.
    pub fn name(&self) -> String {
        format!("session {}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;

    /// An operation that arrives after the session closed adds nothing: the task it made is
    /// closed at once, and the session stays closed (it must not reopen when its table is taken).
    #[test]
    fn a_closed_session_takes_nothing_more() {
        let runtime = Runtime::new();
        let session = Session::new("0a".into(), 16, 1 << 20);
        session.add_task("task", runtime.task(0).unwrap()).unwrap();
        session.close();
        let late = runtime.task(0).unwrap();
        assert!(matches!(session.add_task("task", late.clone()), Err(Error::Closed { .. })));
        assert!(matches!(
            runtime.create_channel("c", stampede_core::Limits::unbounded().into()).unwrap().attach_output(&late),
            Err(Error::Closed { .. })
        ));
        assert_eq!(runtime.ts_min(), 0, "a fresh runtime's ts_min with no claims left");
        assert!(matches!(session.task("task", late.id()), Err(Error::Closed { .. })));
    }
}
