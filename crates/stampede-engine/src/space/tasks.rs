//! Tasks and their connections: creating a task (root, child or shadow), its virtual time,
//! attaching and detaching connections, closing producer sets, closing a task or the runtime.
//!
//! A new task's claim is covered from its origin (docs/PROGRESS.md, "Invariants and why they
//! hold"); a task closing releases its own claim before detaching its connections; an input that
//! could unsettle a closed producer set is refused.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::sync::Mutex;
use crate::watch::WatchEvent;
use stampede_core::mesh::MoveId;
use stampede_core::{ContainerKey, Effects, Error, Peer, Refusal, Result, TaskId, TaskState, Timestamp};

use super::{ChannelShared, ContainerState, Entry, Held, Shared, Space};

/// A task's state, shared by its handles and connections.
pub(crate) struct TaskShared {
    pub(crate) id: TaskId,
    /// Its label for tools ([`crate::Task::set_name`]).
    pub(crate) name: Mutex<Option<Arc<str>>>,
    pub(crate) space: Arc<Space>,
    pub(crate) state: Mutex<TaskState>,
    pub(crate) held: Mutex<Vec<Held>>,
}

impl Drop for TaskShared {
    fn drop(&mut self) {
        self.space.close_task(self);
    }
}

/// Where a new task's claim is covered from (docs/PROGRESS.md, "Invariants and why they hold",
/// invariant 1: whoever creates a claim holds one below it, or starts at or above ts_min).
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A root task: at or above ts_min and the node's door.
    Root,
    /// A child: at or above its parent's visibility.
    Child(&'a TaskShared),
    /// A shadow of a task of another node (docs/PROTOCOL.md): the takeover of that node's move
    /// `id` of the task's visibility, sent to participant `to`.
    Moved { from: Peer, id: MoveId, to: Peer },
}

impl Space {
    // ---- tasks -------------------------------------------------------------------------------

    /// The tasks open now, by id.
    pub(crate) fn open_tasks(&self) -> Vec<Arc<TaskShared>> {
        let mut tasks: Vec<_> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        tasks.sort_by_key(|task| task.id);
        tasks
    }

    /// Creates a task: a root task must start at or above ts_min (and the node's door), a child
    /// at or above its parent's visibility (checked while the parent's claims still cover the
    /// child's), a shadow at or above ts_min, its claim the takeover of the move that covers it.
    pub(crate) fn new_task(self: &Arc<Self>, virtual_time: Timestamp, origin: Origin<'_>) -> Result<Arc<TaskShared>> {
        self.check_open("runtime")?;
        let op = match origin {
            Origin::Root => "task",
            Origin::Child(_) => "spawn",
            Origin::Moved { .. } => "shadow",
        };
        if virtual_time < 0 {
            return Err(Error::InvalidTimestamp { op, name: "runtime".into(), ts: virtual_time });
        }
        let id = self.next_id();
        let (state, updates) = TaskState::new(id, virtual_time);
        let parent_state = match origin {
            Origin::Child(parent) => Some(parent.state.lock()),
            Origin::Root | Origin::Moved { .. } => None,
        };
        if let Some(parent_state) = &parent_state {
            parent_state.check_spawn(virtual_time)?;
        }
        let advanced = {
            let mut tracking = self.tracking.lock();
            match origin {
                Origin::Root => tracking.participant.check_root(virtual_time)?,
                Origin::Moved { from, id, to } => tracking.participant.check_takeover(from, id, to, virtual_time)?,
                Origin::Child(_) => {}
            }
            tracking.progress_mut().add_task(id);
            let advanced = tracking.apply(&updates);
            if let Origin::Moved { from, id: move_id, .. } = origin {
                tracking.participant.take_over_task(from, move_id, id)?;
            }
            self.publish(&mut tracking).or(advanced)
        };
        drop(parent_state);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        let task = Arc::new(TaskShared {
            id,
            name: Mutex::new(None),
            space: self.clone(),
            state: Mutex::new(state),
            held: Mutex::new(Vec::new()),
        });
        self.tasks.lock().insert(id, Arc::downgrade(&task));
        Ok(task)
    }

    /// Sets a task's virtual time (docs/SEMANTICS.md, "Virtual time, visibility, GC").
    pub(crate) fn set_virtual_time(&self, task: &TaskShared, v: Timestamp) -> Result<()> {
        let mut state = task.state.lock();
        let updates = state.set_virtual_time(v)?;
        let due = self.commit(&updates, None, None, Some(&state));
        drop(state);
        self.sweep_due(due);
        Ok(())
    }

    /// Releases a task's claim, then detaches every connection it holds.
    ///
    /// The task's own claim goes first: its connections' claims still cover what it holds open.
    pub(crate) fn close_task(&self, task: &TaskShared) {
        let advanced = {
            let mut state = task.state.lock();
            if state.close() {
                let mut tracking = self.tracking.lock();
                let advanced = tracking.progress_mut().remove_task(task.id);
                self.publish(&mut tracking).or(advanced)
            } else {
                None
            }
        };
        let held = std::mem::take(&mut *task.held.lock());
        for h in held {
            self.detach(task, h);
        }
        self.tasks.lock().remove(&task.id);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        self.progressed();
    }

    /// Detaches one connection of `task`: the one path every detach takes (explicit, dropped, or
    /// its task closing). Idempotent. The progress machine forgets the connection (settledness
    /// and joins follow), and the container's waiters wake, so a call blocked on this connection
    /// returns `Closed` at once.
    pub(crate) fn detach(&self, task: &TaskShared, held: Held) {
        let conn = held.conn();
        task.held.lock().retain(|h| h.conn() != conn);
        match held {
            Held::ChannelInput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    // Under Retention::CurrentReaders, detaching may reclaim what only it held.
                    if let Ok((_, items)) = self.run(&*ch, task, |s, _, _, fx| {
                        *fx = s.detach_input(conn);
                        Ok(())
                    }) {
                        self.reclaimed(&ch, &items);
                    }
                    self.forget_connection(&ch, |_| {});
                }
            }
            Held::ChannelOutput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    self.forget_connection(&ch, |s| s.detach_output(conn));
                }
            }
            Held::QueueInput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    // Items it held open go back to the queue.
                    let _ = self.run(&*q, task, |s, _, _, fx| {
                        *fx = s.detach_input(conn);
                        Ok(())
                    });
                    self.forget_connection(&q, |_| {});
                }
            }
            Held::QueueOutput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    self.forget_connection(&q, |s| s.detach_output(conn));
                }
            }
        }
        // After the container forgot it (no put can pass it any more), so horizons only rise; and
        // whether or not the container is gone.
        self.tracking.lock().progress_mut().detach(conn, task.id);
        self.progressed();
    }

    /// Removes a connection from the container's state (`forget`), then wakes the container's
    /// waiters.
    fn forget_connection<S: ContainerState>(&self, shared: &Shared<S>, forget: impl FnOnce(&mut S)) {
        forget(&mut shared.state.lock());
        shared.wake_all();
    }

    /// Closes every container and task: blocked operations wake with `Closed`.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let entries: Vec<(String, Entry)> = std::mem::take(&mut *self.names.write()).into_iter().collect();
        for (name, entry) in &entries {
            self.name_log.record(WatchEvent::Destroyed {
                name: name.clone(),
                container_kind: entry.kind().into(),
                node: None,
            });
        }
        // Watchers wake to find the runtime closed once the log says so.
        self.name_log.signal.notify();
        for (_, entry) in &entries {
            self.close_entry(entry, "the runtime was closed");
        }
        let tasks: Vec<Arc<TaskShared>> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        for task in tasks {
            self.close_task(&task);
        }
    }

    // ---- connections -------------------------------------------------------------------------

    /// Attaches input connection `conn` of `task` to a channel or queue. Refused
    /// (`InvalidArgument`) when `task` produces into a channel with a closed producer set whose
    /// settled horizon this input could bring back below (docs/CORRELATION.md,
    /// "Settled timestamps": settledness never goes back).
    pub(crate) fn attach_input<S: ContainerState>(
        &self,
        container: &Shared<S>,
        task: &TaskShared,
        conn: u64,
        attach: impl FnOnce(&mut S, &TaskState) -> Result<(Option<Timestamp>, Effects)>,
    ) -> Result<()> {
        let mut guard = container.state.lock();
        let state = task.state.lock();
        state.check_open()?;
        let (first_claim, fx) = attach(&mut guard, &state)?;
        let mut tracking = self.tracking.lock();
        if let Err(refusal) = tracking.progress_mut().check_attach_input(task.id, container.key, first_claim) {
            drop(tracking);
            // Undo on the still-locked container: nobody saw the connection, and its claims were
            // never applied.
            let undo = guard.detach_input(conn);
            debug_assert!(undo.reclaimed.is_empty(), "undoing an attach reclaims nothing");
            return Err(self.unsettle_error(&container.name, refusal));
        }
        tracking.progress_mut().attach_input(conn, task.id, container.key);
        let advanced = tracking.apply(&fx.claims);
        debug_assert!(advanced.is_none(), "attaching an input only adds claims");
        // Settling may still advance ts_min: the mesh's view moved since the last change.
        let due = self.publish(&mut tracking).map(|ts_min| tracking.take_due(ts_min));
        drop(tracking);
        drop(state);
        drop(guard);
        self.sweep_due(due);
        Ok(())
    }

    /// Records output connection `conn` of `task` to a container (after its core state took it).
    pub(crate) fn attach_output(&self, key: ContainerKey, task: &TaskShared, conn: u64) {
        self.tracking.lock().progress_mut().attach_output(conn, task.id, key);
    }

    /// Closes a channel's producer set: in its core state, the progress machine and the mirror
    /// flag, then wakes its blocked gets (a wildcard get may now need a horizon registration).
    pub(crate) fn close_producers(&self, ch: &ChannelShared) {
        {
            let mut state = ch.state.lock();
            state.close_producers();
            self.tracking.lock().progress_mut().close_producers(ch.key);
            ch.producers_closed.store(true, Ordering::SeqCst);
        }
        self.progressed();
        ch.wake_all();
    }

    fn unsettle_error(&self, name: &str, refusal: Refusal) -> Error {
        let reason = match refusal {
            Refusal::WouldUnsettle { channel, horizon, earliest } => {
                let channel = self.channels.read().get(&channel).map(|c| c.name.to_string()).unwrap_or_default();
                format!(
                    "the task produces into \"{channel}\", whose producer set is closed and which is settled below \
                     {horizon}; this input could deliver ts={earliest} and so let the task put below what is already \
                     settled. Attach a producer's inputs before close_producers()"
                )
            }
            other => format!("{other:?}"),
        };
        Error::InvalidArgument { op: "attach_input", name: name.to_owned(), reason }
    }
}
