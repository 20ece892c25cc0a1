//! A client's session on a node — the papers' surrogate.
//!
//! A remote client's tasks and connections live in the node's engine, in its
//! [`stampede_engine::Session`]; the client holds only their handles. Here the node keeps what is
//! its own beside them: the session's secret and rights, its shadows and moves across nodes, its
//! reclaimed items to send and its kept replies. Every operation therefore runs the
//! embedded code path, with the embedded semantics and errors. Closing the session (the client
//! closed it, or its liveliness token disappeared) closes every task it owns: their claims on
//! ts_min are released and the items they held open go back (docs/SEMANTICS.md,
//! "Virtual time, visibility, GC").
//!
//! A session holds at most `handles_max` tasks, connections and containers together, and at most
//! `handles_max` moves of its tasks to other nodes not known to be resolved; past that a
//! creation fails `InvalidArgument` and the node carries on.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use stampede_core::mesh::MoveId;
use stampede_core::tape::Access;
use stampede_core::{Error, Handle, MoveProof, Op, Peer, Prefetch, Result, Tape};
use stampede_engine::session::{Admission, Right};
use stampede_engine::Task;
use stampede_wire::session::Replies;
use stampede_wire::Secret;

use crate::access::Rights;
use crate::push::Pushing;
use crate::readers::Readers;
use crate::reclaim::{Outbox, Sending};
use crate::release::Kept;
use stampede_core::prefetch::Pushes;

pub(crate) use stampede_engine::session::closed;

/// Why a shadow closed when its home node left the mesh ([`Session::close_shadows_of`]).
const HOME_LEFT: &str = "the node this shadow's task lives on left the mesh (it died, or was cut off), so the shadow \
                         closed; attach the task's connections again once its node is back";
/// Why a shadow closed when this node was expelled from its mesh ([`Session::leave_mesh`]).
const EXPELLED: &str = "this node was expelled from its mesh (cut off, or its stream could not be applied), so the \
                        shadows of other nodes' tasks on it closed; attach again from the task's node";

/// One client's session: its id, its handles in the node's engine, and what the node keeps of it
/// beside them.
pub(crate) struct Session {
    pub(crate) id: String,
    /// What requests of this session must carry (`access.rs`).
    pub(crate) secret: Secret,
    /// The user's rights on a node with an access policy; `None`: every right.
    rights: Option<Rights>,
    /// Its tasks, connections and containers in the node's engine, with their bound.
    pub(crate) handles: stampede_engine::Session,
    handles_max: usize,
    mesh: Mutex<Mesh>,
    /// Items reclaimed for the client's GC handlers, not sent yet (`reclaim.rs`).
    pub(crate) outbox: Mutex<Outbox>,
    /// The replies of its numbered requests not yet acknowledged (`stampede_wire::session`).
    pub(crate) replies: Mutex<Replies<Kept>>,
    pub(crate) sending: Sending,
    /// Its input connections' tapes and prefetch (`readers.rs`), and its pushes (`push.rs`).
    pub(crate) readers: Readers,
    pub(crate) pushing: Pushing,
    /// The highest number of the deferred consumes its requests carried that the node applied
    /// (`serve/moves.rs`'s `consumed`): held while a request applies its header's, so that a
    /// request that finds its consumes applied runs after them.
    pub(crate) consumes_applied: tokio::sync::Mutex<u64>,
}

/// What the session's tasks do across nodes. Locked after the engine session's table, never
/// while a request waits.
#[derive(Default)]
struct Mesh {
    /// The node participant whose task each shadow task of this session stands for.
    shadows: HashMap<Handle, Peer>,
    /// Moves of this session's tasks to other nodes (`MoveTask`), with the node's name: those
    /// still open when the session ends are declined there (the client went away before asking
    /// for the takeover). Bounded apart from the handles: a move taken over is no handle, and
    /// is forgotten at the next move.
    moves: Vec<Move>,
    /// Shadows closing ([`Session::close_shadows_of`], [`Session::leave_mesh`]): each until its
    /// reply hold passed, and why.
    closing: Vec<(Handle, Duration, &'static str)>,
}

/// A move of a session's task to another node (`MoveTask`), declined there if it is still open
/// when the task or the session ends (the takeover was never asked for, or never arrived).
#[derive(Clone)]
pub(crate) struct Move {
    pub(crate) task: Handle,
    pub(crate) to_node: String,
    pub(crate) to: Peer,
    pub(crate) id: MoveId,
    /// What the move's takeover must present (`MoveProof`).
    pub(crate) proof: MoveProof,
}

impl Admission for Session {
    fn check(&self, op: &'static str, right: Right, name: &str) -> Result<()> {
        self.rights.as_ref().map_or(Ok(()), |rights| rights.check(op, right, name))
    }

    fn sees(&self, name: &str) -> bool {
        self.rights.as_ref().is_none_or(|rights| rights.sees(name))
    }
}

impl Session {
    pub(crate) fn new(
        id: String,
        handles_max: usize,
        payload_bytes_max: usize,
        secret: Secret,
        rights: Option<Rights>,
    ) -> Session {
        let handles = stampede_engine::Session::new(id.clone(), handles_max, payload_bytes_max);
        let (mesh, outbox, sending) = (Mutex::default(), Mutex::default(), Sending::default());
        let (replies, readers, pushing) = (Mutex::default(), Readers::default(), Pushing::default());
        let consumes_applied = tokio::sync::Mutex::default();
        Session {
            id,
            secret,
            rights,
            handles,
            handles_max,
            mesh,
            outbox,
            replies,
            sending,
            readers,
            pushing,
            consumes_applied,
        }
    }

    /// This session with its puts charged to `budget` (and its node's).
    pub(crate) fn with_budget(self, budget: stampede_engine::budget::SessionBudget) -> Session {
        Session { handles: self.handles.with_budget(budget), ..self }
    }

    /// Whether the node has an access policy for this session.
    pub(crate) fn restricted(&self) -> bool {
        self.rights.is_some()
    }

    /// Takes `task`, a shadow of a task of node participant `home`, into the session (closed
    /// with it, or when `home` dies: [`close_shadows_of`](Self::close_shadows_of)).
    pub(crate) fn add_shadow(&self, op: &'static str, task: Task, home: Peer) -> Result<Handle> {
        let handle = self.handles.add_task(op, task)?;
        self.mesh.lock().shadows.insert(handle, home);
        Ok(handle)
    }

    /// Closes the shadows of tasks of `home`, a node found dead, at `until` (the reply hold:
    /// [`close_shadows`](Self::close_shadows)): their task can never move again, and they would
    /// hold every node's ts_min for as long as the client keeps them.
    pub(crate) fn close_shadows_of(&self, home: Peer, until: Duration) {
        self.close_shadows(|of| of == home, HOME_LEFT, until);
    }

    /// This node was expelled from its mesh and rejoins as a new incarnation: every shadow on it
    /// closes at `until` (their home nodes fenced this one), and the moves of its tasks are
    /// forgotten (resolved by the old incarnation's death). Its own tasks and connections stay:
    /// what they use lives here, and the runtime keeps their claims (docs/NODES.md, "Meshes of
    /// nodes").
    pub(crate) fn leave_mesh(&self, until: Duration) {
        self.mesh.lock().moves.clear();
        self.close_shadows(|_| true, EXPELLED, until);
    }

    /// Starts closing the shadows of the tasks of the participants `of` selects: from now on
    /// whoever uses them is told `reason`, but for the consumes and detaches that let go of what
    /// they hold; they close at `until` ([`settle`](Self::settle)). The hold is the longest a
    /// client takes a reply after sending its request: a get's reply already on its way may
    /// carry an item of theirs, which must not go back to the queue (or be reclaimed) before
    /// that reply can no longer be taken — else another worker could get, even consume, an item
    /// this client then receives.
    fn close_shadows(&self, of: impl Fn(Peer) -> bool, reason: &'static str, until: Duration) {
        let mut mesh = self.mesh.lock();
        let orphans: Vec<Handle> =
            mesh.shadows.iter().filter(|(_, home)| of(**home)).map(|(handle, _)| *handle).collect();
        mesh.shadows.retain(|_, home| !of(*home));
        mesh.closing.extend(orphans.into_iter().map(|task| (task, until, reason)));
    }

    /// Closes the shadows whose hold ended by `now`.
    pub(crate) fn settle(&self, now: Duration) {
        let due: Vec<(Handle, &'static str)> = {
            let mut mesh = self.mesh.lock();
            let due = mesh.closing.iter().filter(|(_, until, _)| *until <= now).map(|&(h, _, r)| (h, r)).collect();
            mesh.closing.retain(|(_, until, _)| *until > now);
            due
        };
        for (task, reason) in due {
            self.handles.close_tasks(&[task], reason);
        }
    }

    /// `Closed`, saying why, if `op` works through a shadow that is closing — but for a consume
    /// (what the client holds is let go of, not kept), a detach and the shadow's close.
    pub(crate) fn refuse_closing(&self, op: &Op) -> Result<()> {
        let (task, connection) = match *op {
            Op::Consume { .. } | Op::ConsumeUntil { .. } | Op::QueueConsume { .. } => return Ok(()),
            Op::Detach { .. } | Op::CloseTask { .. } => return Ok(()),
            Op::Spawn { task, .. }
            | Op::SetVirtualTime { task, .. }
            | Op::Times { task }
            | Op::SetTaskName { task, .. }
            | Op::AttachInput { task, .. }
            | Op::AttachOutput { task, .. }
            | Op::MoveTask { task, .. } => (Some(task), None),
            Op::Put { connection, .. }
            | Op::Get { connection, .. }
            | Op::GetRange { connection, .. }
            | Op::QueuePut { connection, .. }
            | Op::QueueGet { connection, .. }
            | Op::Demand { connection, .. }
            | Op::WaitChanged { connection, .. } => (None, Some(connection)),
            _ => return Ok(()),
        };
        if self.mesh.lock().closing.is_empty() {
            return Ok(());
        }
        // The engine's table first, then the mesh (the order every path takes).
        let through = |c| self.handles.connection(op.name(), c).ok().map(|c| c.task_id());
        let task = task.or_else(|| connection.and_then(through));
        let mesh = self.mesh.lock();
        match mesh.closing.iter().find(|(closing, ..)| Some(*closing) == task) {
            Some((_, _, reason)) => Err(Error::Closed { name: self.handles.name(), reason }),
            None => Ok(()),
        }
    }

    /// The ids of the moves recorded, for the caller to find those resolved (outside the
    /// session's lock: asking the mesh settles it, which may run GC handlers).
    pub(crate) fn move_ids(&self) -> Vec<(Peer, MoveId)> {
        self.mesh.lock().moves.iter().map(|m| (m.to, m.id)).collect()
    }

    /// Records `new`, a move of one of this session's tasks, forgetting those `resolved` are
    /// taken over or declined already. `InvalidArgument` past the session's bound on moves not
    /// known to be resolved (the move is then left to the caller to decline); `Closed` once the
    /// session ended.
    pub(crate) fn add_move(&self, op: &'static str, new: Move, resolved: &HashSet<(Peer, MoveId)>) -> Result<()> {
        let mut mesh = self.mesh.lock();
        if self.handles.ended() {
            return Err(closed(&self.id));
        }
        mesh.moves.retain(|m| !resolved.contains(&(m.to, m.id)));
        if mesh.moves.len() >= self.handles_max {
            return Err(Error::InvalidArgument {
                op,
                name: self.handles.name(),
                reason: format!(
                    "the session's tasks have {} moves to other nodes not taken over yet, the node's \
                     session_handles_max; attach a task to another node's channels and queues once it took the \
                     earlier ones over",
                    mesh.moves.len()
                ),
            });
        }
        mesh.moves.push(new);
        Ok(())
    }

    /// Whether this session made the move `id` to `to` and handed out `proof` for it.
    pub(crate) fn owns_move(&self, to: Peer, id: MoveId, proof: &MoveProof) -> bool {
        let mesh = self.mesh.lock();
        mesh.moves.iter().any(|m| m.to == to && m.id == id && crate::access::same_secret(&m.proof, proof))
    }

    /// The moves of its tasks not known to be resolved.
    pub(crate) fn moves(&self) -> Vec<Move> {
        self.mesh.lock().moves.clone()
    }

    /// Closes the task `handle` and forgets it (as the engine's `CloseTask`). Returns the task's
    /// moves to other nodes, for the caller to decline those still open.
    pub(crate) fn close_task(&self, op: &'static str, handle: Handle) -> Result<Vec<Move>> {
        self.handles.close_task(op, handle)?;
        let mut mesh = self.mesh.lock();
        mesh.shadows.remove(&handle);
        mesh.closing.retain(|(closing, ..)| *closing != handle);
        let (moves, kept) = std::mem::take(&mut mesh.moves).into_iter().partition(|m| m.task == handle);
        mesh.moves = kept;
        Ok(moves)
    }

    /// Ends the session: every task is closed (claims released, open items back) and every
    /// connection detached; requests in flight on them fail `Closed`. Idempotent. Returns the
    /// moves of its tasks, for the caller to decline those still open.
    pub(crate) fn close(&self) -> Vec<Move> {
        self.handles.close();
        let mut mesh = self.mesh.lock();
        mesh.shadows.clear();
        mesh.closing.clear();
        std::mem::take(&mut mesh.moves)
    }

    /// Records on the tape of input connection `handle` that `access` was made at `at_us` (an
    /// output, or a connection gone, records nothing).
    pub(crate) fn record(&self, handle: Handle, access: Access, at_us: u64) {
        let Ok(connection) = self.handles.connection("tape", handle) else { return };
        let alive = |kept| self.handles.connection("tape", kept).is_ok();
        self.readers.record(handle, &connection, access, at_us, self.handles_max, alive);
    }

    /// Input connection `handle` was attached with `prefetch` (`readers.rs`).
    pub(crate) fn attached(&self, handle: Handle, prefetch: Prefetch) {
        let Ok(connection) = self.handles.connection("attach_input", handle) else { return };
        let alive = |kept| self.handles.connection("tape", kept).is_ok();
        self.readers.attached(handle, &connection, prefetch, self.handles_max, alive);
    }

    /// The tape of the input connection `id` of task `task` (as a graph names them), with its
    /// prefetch and its pushes, if this session kept one.
    pub(crate) fn tape_of(&self, task: Handle, id: u64) -> Option<(Tape, Pushes)> {
        self.readers.tape_of(task, id)
    }

    /// Whether the session is ended or being ended: [`close`](Self::close) began.
    pub(crate) fn ended(&self) -> bool {
        self.handles.ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::session::Connection;
    use stampede_engine::Runtime;
    use std::sync::Arc;

    /// A shadow closing because its home node died refuses what would take more through it at
    /// once, but lets go of what it holds (consumes) until its reply hold ends; then it is gone
    /// from the session's handles too, and its claim with it.
    #[test]
    fn the_shadows_of_a_dead_node_are_closed() {
        let runtime = Runtime::new();
        let session = Session::new("0a".into(), 16, 1 << 20, [0; 16], None);
        let home = Peer { id: 7, incarnation: 1 };
        let shadow = session.add_shadow("shadow", runtime.task(3).unwrap(), home).unwrap();
        let kept = session.handles.add_task("task", runtime.task(5).unwrap()).unwrap();
        assert_eq!(runtime.stats().claims, 2);
        let hold = Duration::from_secs(2);
        session.close_shadows_of(home, hold);
        let advance = Op::SetVirtualTime { task: shadow, virtual_time: 9 };
        assert!(matches!(session.refuse_closing(&advance), Err(Error::Closed { reason: HOME_LEFT, .. })));
        assert!(session.refuse_closing(&Op::ConsumeUntil { connection: 1, ts: 4 }).is_ok());
        assert!(session.refuse_closing(&Op::SetVirtualTime { task: kept, virtual_time: 9 }).is_ok());
        session.settle(hold - Duration::from_millis(1));
        assert_eq!(runtime.stats().claims, 2, "what a reply on its way may carry is held until the hold ends");
        session.settle(hold);
        assert!(
            matches!(session.handles.task("task", shadow), Err(Error::Closed { reason: HOME_LEFT, .. })),
            "its use says why it closed"
        );
        assert!(session.handles.task("task", kept).is_ok());
        assert_eq!(runtime.stats().claims, 1, "the shadow's claim went with it");
    }

    /// Expelled, a session keeps its own tasks and connections; every shadow on it closes (its
    /// connections with it), each saying why, and its moves are forgotten.
    #[test]
    fn an_expelled_node_keeps_its_sessions_own_tasks() {
        let runtime = Runtime::new();
        let channel = runtime.create_channel("frames", Default::default()).unwrap();
        let session = Session::new("0a".into(), 16, 1 << 20, [0; 16], None);
        let home = Peer { id: 7, incarnation: 1 };
        let shadow_task = runtime.task(3).unwrap();
        let through_shadow = channel.attach_output(&shadow_task).unwrap();
        let shadow = session.add_shadow("shadow", shadow_task, home).unwrap();
        let shadow_output =
            session.handles.add_connection("attach", Connection::ChannelOutput(Arc::new(through_shadow))).unwrap();
        let own_task = runtime.task(5).unwrap();
        let own_output = channel.attach_output(&own_task).unwrap();
        let own = session.handles.add_task("task", own_task).unwrap();
        let own_connection =
            session.handles.add_connection("attach", Connection::ChannelOutput(Arc::new(own_output))).unwrap();
        let to = Peer { id: 9, incarnation: 2 };
        let moved = Move { task: own, to_node: "b".into(), to, id: 1, proof: [1; 16] };
        session.add_move("move", moved, &HashSet::new()).unwrap();

        session.leave_mesh(Duration::ZERO);
        session.settle(Duration::ZERO);
        assert!(matches!(session.handles.task("put", shadow), Err(Error::Closed { reason: EXPELLED, .. })));
        assert!(matches!(
            session.handles.connection("put", shadow_output),
            Err(Error::Closed { reason: EXPELLED, .. })
        ));
        assert!(session.handles.task("put", own).is_ok() && session.handles.connection("put", own_connection).is_ok());
        assert!(!session.owns_move(to, 1, &[1; 16]), "the move went with the old incarnation");
        assert_eq!(runtime.stats().claims, 1, "the own task's claim stays, the shadow's went");
        assert!(!session.ended());
    }
}
