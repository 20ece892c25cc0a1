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

use crate::{Error, InputOptions, Result, Timestamp, INFINITY};

use crate::remote::client::Client;
use crate::remote::runtime::unexpected;
use stampede_wire::{Handle, Op, Outcome};

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
    /// The highest virtual time the task had through this handle: its start, or set since. No
    /// virtual time at or above it can be refused (the task's visibility is at most its virtual
    /// time, which is at most this).
    highest: Mutex<Timestamp>,
    /// Its label, as last set through this handle.
    name: Mutex<Option<String>>,
    /// Its shadows on other nodes, by node name (docs/PROTOCOL.md "A task spans nodes through
    /// shadows"): created at the first attachment to a container there, closed with the task.
    /// Held only to read or change the map, never across a call: a GC handler run before a call
    /// returns may read the task (`visibility`), as embedded.
    shadows: Mutex<BTreeMap<String, Shadow>>,
    /// Serializes what changes the task on several nodes (`set_virtual_time`, a shadow's start,
    /// `close`), so that home and shadows see the changes in one order.
    changing: Mutex<()>,
}

/// A task's shadow: a task on another node, in this client's session there, whose claims
/// follow the home task's.
#[derive(Clone)]
struct Shadow {
    client: Arc<Client>,
    id: Handle,
}

impl Drop for TaskRef {
    fn drop(&mut self) {
        let closed = self.closed.load(Ordering::SeqCst);
        if !closed {
            self.client.send(Op::CloseTask { task: self.id });
        }
        let mut registry = self.client.shadows.lock();
        for (node, shadow) in self.shadows.get_mut().iter() {
            if !closed {
                shadow.client.send(Op::CloseTask { task: shadow.id });
            }
            registry.remove(&(node.clone(), shadow.id));
        }
    }
}

impl RemoteTask {
    pub(crate) fn new(client: Arc<Client>, id: Handle, virtual_time: Timestamp) -> RemoteTask {
        let known = Mutex::new((virtual_time, virtual_time));
        let highest = Mutex::new(virtual_time);
        let name = Mutex::new(None);
        let (shadows, changing) = (Mutex::default(), Mutex::default());
        let closed = AtomicBool::new(false);
        RemoteTask { inner: Arc::new(TaskRef { client, id, closed, known, highest, name, shadows, changing }) }
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
        let home = self.times().1;
        let shadows = self.shadows_by_node();
        shadows.iter().map(|(_, shadow)| shadow_times(shadow).map_or(INFINITY, |(_, v)| v)).fold(home, Timestamp::min)
    }

    /// Sets the virtual time (`>= visibility`, else `BelowVisibility`); ts_min on the node may
    /// advance and reclaim before this returns. The home task moves first, then its shadows
    /// (so no node's claim for the task is ever above the task's own).
    ///
    /// A shadow whose session on its node ended went with that session (the node closed it): it
    /// is forgotten, and the task attaches there again through a new one.
    ///
    /// A task without shadows moving to or above the highest virtual time it had is sent
    /// without waiting for the node's reply, as a consume is (`direct.rs`): the node cannot
    /// refuse it, and every later call of this client sees it applied.
    pub fn set_virtual_time(&self, v: Timestamp) -> Result<()> {
        let request = Op::SetVirtualTime { task: self.inner.id, virtual_time: v };
        let client = &self.inner.client;
        if self.inner.shadows.lock().is_empty() && client.sends_directly() && !self.inner.closed.load(Ordering::SeqCst)
        {
            // Held across the send: two threads setting the task send in the order they checked.
            let mut highest = self.inner.highest.lock();
            if v >= *highest {
                client.check_open(request.name())?;
                client.send(request);
                *highest = v;
                return Ok(());
            }
        }
        // A task without shadows changes on one node only: no order to keep, so no lock (a GC
        // handler may move it while a call of it waits for the handler, as embedded). A shadow
        // starting meanwhile reads the home's virtual time after its takeover: at worst it keeps
        // the value the home had just before, until the next move.
        let _changing = (!self.inner.shadows.lock().is_empty()).then(|| self.inner.changing.lock());
        client.done(request)?;
        let mut highest = self.inner.highest.lock();
        *highest = (*highest).max(v);
        drop(highest);
        for (node, shadow) in self.shadows_by_node() {
            if let Err(e) = shadow.client.done(Op::SetVirtualTime { task: shadow.id, virtual_time: v }) {
                if !self.forget_if_gone(&node, &shadow) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// A child task on the node whose virtual time must be `>= self.visibility()`.
    pub fn spawn(&self, virtual_time: Timestamp) -> Result<RemoteTask> {
        let handle = self.inner.client.handle(Op::Spawn { task: self.inner.id, virtual_time })?;
        Ok(RemoteTask::new(self.inner.client.clone(), handle, virtual_time))
    }

    /// Labels the task on the node (its graph shows it).
    pub fn set_name(&self, name: &str) -> Result<()> {
        self.inner.client.done(Op::SetTaskName { task: self.inner.id, name: name.to_owned() })?;
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
            let _changing = self.inner.changing.lock();
            let _ = self.inner.client.done(Op::CloseTask { task: self.inner.id });
            for (node, shadow) in self.shadows_by_node() {
                let _ = shadow.client.done(Op::CloseTask { task: shadow.id });
                self.inner.client.shadows.lock().remove(&(node, shadow.id));
            }
        }
    }

    /// The task's shadows now, by node (the map is not held while they are asked anything).
    fn shadows_by_node(&self) -> Vec<(String, Shadow)> {
        self.inner.shadows.lock().iter().map(|(node, shadow)| (node.clone(), shadow.clone())).collect()
    }

    /// Forgets `shadow` if its session ended (closed, or ended after a lost reply): its node
    /// closed it with the session. `false` if the session is still open.
    fn forget_if_gone(&self, node: &str, shadow: &Shadow) -> bool {
        if shadow.client.check_open("set_virtual_time").is_ok() {
            return false;
        }
        let mut shadows = self.inner.shadows.lock();
        if shadows.get(node).is_some_and(|s| Arc::ptr_eq(&s.client, &shadow.client) && s.id == shadow.id) {
            shadows.remove(node);
        }
        self.inner.client.shadows.lock().remove(&(node.to_owned(), shadow.id));
        true
    }

    /// Virtual time and visibility now, or as last seen when the node cannot be reached.
    fn times(&self) -> (Timestamp, Timestamp) {
        let client = &self.inner.client;
        let answer = client.call(Op::Times { task: self.inner.id }, None, Duration::ZERO);
        let mut known = self.inner.known.lock();
        if let Ok((Outcome::Times { virtual_time, visibility }, _)) = answer {
            *known = (virtual_time, visibility);
        }
        *known
    }

    /// Attaches a connection of this task to `container` (of `client`): an input with its
    /// options, or an output (`None`). Returns the connection's handle. A container on another
    /// node is attached through the task's shadow there.
    pub(crate) fn attach(
        &self,
        client: &Arc<Client>,
        name: &str,
        input: Option<InputOptions>,
        container: Handle,
    ) -> Result<Handle> {
        let op = if input.is_some() { "attach_input" } else { "attach_output" };
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
        let request = match input {
            Some(options) => Op::AttachInput {
                task,
                container,
                max_lag_items: options.max_lag_items.map(|items| items as u64),
                max_lag_ts: options.max_lag_ts,
                prefetch: client.prefetch(options),
            },
            None => Op::AttachOutput { task, container },
        };
        client.handle(request)
    }

    /// The task's shadow on `client`'s node, started there on first use: the home node moves
    /// the task's visibility to that node, which takes the move over as a new task, then raised
    /// to the task's virtual time.
    ///
    /// Nothing is moved through a session that ended: the move could never be taken over, and
    /// its carry would hold every node's ts_min at the task's visibility until the home session
    /// ends.
    fn shadow_on(&self, client: &Arc<Client>, op: &'static str, name: &str) -> Result<Handle> {
        let _changing = self.inner.changing.lock();
        let existing = self.inner.shadows.lock().get(client.node()).cloned();
        if let Some(shadow) = existing {
            if Arc::ptr_eq(&shadow.client, client) {
                return Ok(shadow.id);
            }
            if !self.forget_if_gone(client.node(), &shadow) {
                return Err(Error::InvalidArgument {
                    op,
                    name: name.to_owned(),
                    reason: format!(
                        "task {} has a shadow on node {} in another client session there; attach it to the \
                         channels and queues of that node through one runtime",
                        self.inner.id,
                        client.node()
                    ),
                });
            }
        }
        client.check_open(op)?;
        let home = &self.inner.client;
        let Some(to) = client.hello.mesh else {
            return Err(Error::InvalidArgument {
                op,
                name: name.to_owned(),
                reason: format!(
                    "it is on node {}, which shares no ts_min with node {} where task {} lives (a stampede before \
                     wire 19, where sharing was --mesh-ts-min); upgrade it, or create the task with a runtime \
                     connected to node {}",
                    client.node(),
                    home.node(),
                    self.inner.id,
                    client.node()
                ),
            });
        };
        let request = Op::MoveTask { task: self.inner.id, to_node: client.node().to_owned(), to };
        let (from, id, visibility, proof) = match home.call(request, None, Duration::ZERO)?.0 {
            Outcome::Moved { from, id, visibility, proof } => (from, id, visibility, proof),
            _ => return Err(unexpected(op, home.node())),
        };
        let from_node = home.node().to_owned();
        let shadow = client.handle(Op::TakeOverTask { from_node, from, id, to, virtual_time: visibility, proof })?;
        let virtual_time = self.times().0;
        if virtual_time > visibility {
            if let Err(e) = client.done(Op::SetVirtualTime { task: shadow, virtual_time }) {
                let _ = client.done(Op::CloseTask { task: shadow });
                return Err(e);
            }
        }
        self.inner.shadows.lock().insert(client.node().to_owned(), Shadow { client: client.clone(), id: shadow });
        home.shadows.lock().insert((client.node().to_owned(), shadow), self.inner.id);
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
    match shadow.client.call(Op::Times { task: shadow.id }, None, Duration::ZERO) {
        Ok((Outcome::Times { virtual_time, visibility }, _)) => Some((virtual_time, visibility)),
        _ => None,
    }
}
