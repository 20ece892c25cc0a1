//! A client's session on a node — the papers' surrogate.
//!
//! A remote client's tasks and connections live here, in the node's own [`stampede::Runtime`],
//! owned by its session; the client holds only their handles. Every operation therefore runs the
//! embedded code path, with the embedded semantics and errors. Closing the session (the client
//! closed it, or its liveliness token disappeared) closes every task it owns: their claims on
//! ts_min are released and the items they held open go back (docs/SEMANTICS.md,
//! "Virtual time, visibility, GC").
//!
//! A session holds at most `handles_max` tasks, connections and containers together, and at most
//! `handles_max` moves of its tasks to other nodes not known to be resolved; past that a
//! creation fails `InvalidArgument` and the node carries on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use stampede_core::{Error, Result};
use stampede_engine::{ChannelInput, ChannelOutput, Container, QueueInput, QueueOutput, Task};

use stampede_core::mesh::MoveId;
use stampede_core::Peer;
use stampede_wire::{Handle, Secret};

use crate::access::{Right, Rights};
use crate::reclaim::{Outbox, Sending};
use crate::serve::Served;
use stampede_wire::session::Replies;

/// The reason of the `Closed` error of a request in a session that ended.
pub const SESSION_CLOSED: &str =
    "the client's session on the node ended (closed, or the client vanished); connect again";

/// The error of a request in the session `id` after it ended (or that was never opened).
pub(crate) fn closed(id: &str) -> Error {
    Error::Closed { name: format!("session {id}"), reason: SESSION_CLOSED }
}

/// A connection a session holds. Shared so that a request can use it without holding the session's
/// lock while it waits.
#[derive(Clone)]
pub(crate) enum Connection {
    ChannelInput(Arc<ChannelInput>),
    ChannelOutput(Arc<ChannelOutput>),
    QueueInput(Arc<QueueInput>),
    QueueOutput(Arc<QueueOutput>),
}

impl Connection {
    fn detach(&self) {
        match self {
            Connection::ChannelInput(c) => c.detach(),
            Connection::ChannelOutput(c) => c.detach(),
            Connection::QueueInput(c) => c.detach(),
            Connection::QueueOutput(c) => c.detach(),
        }
    }
}

/// One client's session: its id and what it owns.
pub(crate) struct Session {
    pub(crate) id: String,
    /// What requests of this session must carry (`access.rs`).
    pub(crate) secret: Secret,
    /// The user's rights on a node with an access policy; `None`: every right.
    rights: Option<Rights>,
    handles_max: usize,
    owned: Mutex<Owned>,
    /// Items reclaimed for the client's GC handlers, not sent yet (`reclaim.rs`).
    pub(crate) outbox: Mutex<Outbox>,
    /// The replies of its numbered requests not yet acknowledged (`stampede_wire::session`).
    pub(crate) replies: Mutex<Replies<Served>>,
    pub(crate) sending: Sending,
}

#[derive(Default)]
struct Owned {
    closed: bool,
    tasks: HashMap<Handle, Task>,
    connections: HashMap<Handle, Connection>,
    /// Channels and queues the client created or looked up, under their runtime ids.
    containers: HashMap<Handle, Container>,
    next_connection: Handle,
    /// The node participant whose task each shadow task of this session stands for.
    shadows: HashMap<Handle, Peer>,
    /// Moves of this session's tasks to other nodes (`MoveTask`), with the node's name: those
    /// still open when the session ends are declined there (the client went away before asking
    /// for the takeover). Bounded apart from the handles: a move taken over is no handle, and
    /// is forgotten at the next move.
    moves: Vec<Move>,
}

/// A move of a session's task to another node (`MoveTask`), declined there if it is still open
/// when the task or the session ends (the takeover was never asked for, or never arrived).
#[derive(Clone)]
pub(crate) struct Move {
    pub(crate) task: Handle,
    pub(crate) to_node: String,
    pub(crate) to: Peer,
    pub(crate) id: MoveId,
}

impl Owned {
    fn count(&self) -> usize {
        self.tasks.len() + self.connections.len() + self.containers.len()
    }
}

impl Session {
    pub(crate) fn new(id: String, handles_max: usize, secret: Secret, rights: Option<Rights>) -> Session {
        let (owned, outbox, sending) = (Mutex::default(), Mutex::default(), Sending::default());
        Session { id, secret, rights, handles_max, owned, outbox, replies: Mutex::default(), sending }
    }

    /// `Ok` if this session's user has `right` on `name` (always, on a node without a policy).
    pub(crate) fn check(&self, op: &'static str, right: Right, name: &str) -> Result<()> {
        self.rights.as_ref().map_or(Ok(()), |rights| rights.check(op, right, name))
    }

    /// Whether the session's user may look `name` up and see it listed (any right on it).
    pub(crate) fn sees(&self, name: &str) -> bool {
        self.rights.as_ref().is_none_or(|rights| rights.sees(name))
    }

    /// `Ok` if the session's user may look `name` up, else `PermissionDenied` (right `read`).
    pub(crate) fn check_sees(&self, op: &'static str, name: &str) -> Result<()> {
        if self.sees(name) {
            return Ok(());
        }
        self.check(op, Right::Read, name)
    }

    /// Whether the node has an access policy for this session.
    pub(crate) fn restricted(&self) -> bool {
        self.rights.is_some()
    }

    /// The task `handle` of this session.
    pub(crate) fn task(&self, op: &'static str, handle: Handle) -> Result<Task> {
        let owned = self.open()?;
        owned.tasks.get(&handle).cloned().ok_or_else(|| self.unknown(op, "task", handle))
    }

    /// The channel or queue `handle` of this session.
    pub(crate) fn container(&self, op: &'static str, handle: Handle) -> Result<Container> {
        let owned = self.open()?;
        owned.containers.get(&handle).cloned().ok_or_else(|| self.unknown(op, "channel or queue", handle))
    }

    /// The connection `handle` of this session.
    pub(crate) fn connection(&self, op: &'static str, handle: Handle) -> Result<Connection> {
        let owned = self.open()?;
        owned.connections.get(&handle).cloned().ok_or_else(|| self.unknown(op, "connection", handle))
    }

    /// Takes `task` into the session; closes it instead if the session ended or is full.
    pub(crate) fn add_task(&self, op: &'static str, task: Task) -> Result<Handle> {
        self.add(op, task, None)
    }

    /// Takes `task`, a shadow of a task of node participant `home`, into the session (closed
    /// with it, or when `home` dies: [`close_shadows_of`](Self::close_shadows_of)).
    pub(crate) fn add_shadow(&self, op: &'static str, task: Task, home: Peer) -> Result<Handle> {
        self.add(op, task, Some(home))
    }

    /// Whether task `id` of the node's runtime is this session's.
    pub(crate) fn owns_task(&self, id: Handle) -> bool {
        self.owned.lock().tasks.contains_key(&id)
    }

    fn add(&self, op: &'static str, task: Task, home: Option<Peer>) -> Result<Handle> {
        let mut owned = self.owned.lock();
        if let Err(e) = self.admit(op, &owned) {
            drop(owned);
            task.close();
            return Err(e);
        }
        let handle = task.id();
        owned.tasks.insert(handle, task);
        if let Some(home) = home {
            owned.shadows.insert(handle, home);
        }
        Ok(handle)
    }

    /// Closes the shadows of tasks of `home`, a node found dead: their task can never move
    /// again, and they would hold every node's ts_min for as long as the client keeps them.
    pub(crate) fn close_shadows_of(&self, home: Peer) {
        let orphans: Vec<Task> = {
            let mut owned = self.owned.lock();
            let handles: Vec<Handle> =
                owned.shadows.iter().filter(|(_, of)| **of == home).map(|(handle, _)| *handle).collect();
            handles
                .into_iter()
                .filter_map(|handle| {
                    owned.shadows.remove(&handle);
                    owned.tasks.remove(&handle)
                })
                .collect()
        };
        for task in orphans {
            task.close();
        }
    }

    /// The ids of the moves recorded, for the caller to find those resolved (outside the
    /// session's lock: asking the mesh settles it, which may run GC handlers).
    pub(crate) fn move_ids(&self) -> Vec<(Peer, MoveId)> {
        self.owned.lock().moves.iter().map(|m| (m.to, m.id)).collect()
    }

    /// Records `new`, a move of one of this session's tasks, forgetting those `resolved` are
    /// taken over or declined already. `InvalidArgument` past the session's bound on moves not
    /// known to be resolved (the move is then left to the caller to decline).
    pub(crate) fn add_move(&self, op: &'static str, new: Move, resolved: &HashSet<(Peer, MoveId)>) -> Result<()> {
        let mut owned = self.open()?;
        owned.moves.retain(|m| !resolved.contains(&(m.to, m.id)));
        if owned.moves.len() >= self.handles_max {
            return Err(Error::InvalidArgument {
                op,
                name: self.name(),
                reason: format!(
                    "the session's tasks have {} moves to other nodes not taken over yet, the node's \
                     session_handles_max; attach a task to another node's channels and queues once it took the \
                     earlier ones over",
                    owned.moves.len()
                ),
            });
        }
        owned.moves.push(new);
        Ok(())
    }

    /// Takes `container` into the session under its runtime id (once, however often it is looked up).
    pub(crate) fn add_container(&self, op: &'static str, handle: Handle, container: Container) -> Result<()> {
        let mut owned = self.owned.lock();
        if owned.containers.contains_key(&handle) {
            return Ok(());
        }
        self.admit(op, &owned)?;
        owned.containers.insert(handle, container);
        Ok(())
    }

    /// Forgets the container `handle` (destroyed): its slot counts no more.
    pub(crate) fn forget_container(&self, handle: Handle) {
        self.owned.lock().containers.remove(&handle);
    }

    /// Takes `connection` into the session; detaches it instead if the session ended or is full.
    pub(crate) fn add_connection(&self, op: &'static str, connection: Connection) -> Result<Handle> {
        let mut owned = self.owned.lock();
        if let Err(e) = self.admit(op, &owned) {
            drop(owned);
            connection.detach();
            return Err(e);
        }
        owned.next_connection += 1;
        let handle = owned.next_connection;
        owned.connections.insert(handle, connection);
        Ok(handle)
    }

    /// Closes the task `handle` and forgets it (its connections stay, detached, as in the
    /// embedded API: their later use fails `Closed`).
    /// Returns the task's moves to other nodes, for the caller to decline those still open.
    pub(crate) fn close_task(&self, op: &'static str, handle: Handle) -> Result<Vec<Move>> {
        let (task, moves) = {
            let mut owned = self.open()?;
            let task = owned.tasks.remove(&handle).ok_or_else(|| self.unknown(op, "task", handle))?;
            owned.shadows.remove(&handle);
            let (moves, kept) = std::mem::take(&mut owned.moves).into_iter().partition(|m| m.task == handle);
            owned.moves = kept;
            (task, moves)
        };
        task.close();
        Ok(moves)
    }

    /// Detaches the connection `handle` and forgets it.
    pub(crate) fn detach(&self, op: &'static str, handle: Handle) -> Result<()> {
        let connection =
            self.open()?.connections.remove(&handle).ok_or_else(|| self.unknown(op, "connection", handle))?;
        connection.detach();
        Ok(())
    }

    /// Ends the session: every task is closed (claims released, open items back) and every
    /// connection detached; requests in flight on them fail `Closed`. Idempotent.
    pub(crate) fn close(&self) -> Vec<Move> {
        let owned = {
            let mut owned = self.owned.lock();
            let taken = std::mem::take(&mut *owned);
            // After the take: the table left behind must say closed, or a request in flight
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
        owned.moves
    }

    /// Whether the session is ended or being ended: [`close`](Self::close) began.
    pub(crate) fn ended(&self) -> bool {
        self.owned.lock().closed
    }

    /// The session's table, or `Closed` once the session ended.
    fn open(&self) -> Result<parking_lot::MutexGuard<'_, Owned>> {
        let owned = self.owned.lock();
        if owned.closed {
            return Err(self.closed());
        }
        Ok(owned)
    }

    fn admit(&self, op: &'static str, owned: &Owned) -> Result<()> {
        if owned.closed {
            return Err(self.closed());
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

    fn closed(&self) -> Error {
        closed(&self.id)
    }

    fn unknown(&self, op: &'static str, what: &str, handle: Handle) -> Error {
        Error::InvalidArgument { op, name: self.name(), reason: format!("this session holds no {what} #{handle}") }
    }

    fn name(&self) -> String {
        format!("session {}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::Runtime;

    /// A request that arrives after the session closed adds nothing: the task it made is closed
    /// at once, and the session stays closed (it must not reopen when its table is taken).
    #[test]
    fn a_closed_session_takes_nothing_more() {
        let runtime = Runtime::new();
        let session = Session::new("0a".into(), 16, [0; 16], None);
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
