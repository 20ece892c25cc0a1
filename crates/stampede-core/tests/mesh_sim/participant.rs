//! One simulated participant: the real [`stampede_core::Participant`] (its `Progress` and `Mesh`
//! with the rules that glue them — mirror, stash, floors — exactly as the engine holds it), and a
//! model of its workload — tasks with virtual times and open items, items hosted here — from which
//! the oracle reads the true claims.

use std::collections::BTreeMap;

use stampede_core::mesh::{MoveId, Transmit};
use stampede_core::progress::{push_move, TaskKey, Updates};
use stampede_core::{Location, Mesh, Peer, Timestamp, Update, INFINITY};

/// How far above its floor a task moves or puts: small, so that timestamps collide.
pub const TS_SPREAD: u64 = 3;

/// A task: its virtual time and the timestamps of the items it holds open.
#[derive(Clone, Debug)]
pub struct TaskModel {
    pub vt: Timestamp,
    pub open: Vec<Timestamp>,
}

impl TaskModel {
    pub fn visibility(&self) -> Timestamp {
        self.open.iter().copied().fold(self.vt, Timestamp::min)
    }
}

/// What a data message carries; each is covered by its mover's carry until resolved.
#[derive(Clone, Copy, Debug)]
pub enum Cargo {
    /// A put into a channel hosted by the receiver.
    Put,
    /// An item the receiver's task `task` got from the mover.
    Item { task: TaskKey },
    /// A task moved to the receiver (a shadow there): its claim at the task's virtual time
    /// moves with it.
    Task,
}

#[derive(Clone, Copy, Debug)]
pub struct Data {
    pub id: MoveId,
    pub ts: Timestamp,
    pub cargo: Cargo,
}

pub struct Participant {
    pub peer: Peer,
    /// The real participant, linked to this incarnation's mesh.
    node: stampede_core::Participant,
    pub tasks: BTreeMap<TaskKey, TaskModel>,
    /// Items hosted here and not yet given to a task: key → timestamp (claim `Queue(key)`).
    pub items: BTreeMap<u64, Timestamp>,
    next_key: u64,
    /// Last ts_min observed (must never decrease).
    pub ts_min_seen: Timestamp,
    /// Last ts_min of the runtime observed (must never decrease): what its GC reclaims below.
    pub runtime_ts_min_seen: Timestamp,
    /// `1 +` the highest put that landed here.
    pub watermark: Timestamp,
    /// Its view was complete once: it has heard every peer it knew at its start, and their
    /// fences.
    pub settled: bool,
}

impl Participant {
    /// A fresh runtime linked to `mesh`, the participant `peer`.
    pub fn new(peer: Peer, mesh: Mesh) -> Participant {
        let mut node = stampede_core::Participant::default();
        let _ = node.link(mesh).expect("a fresh runtime links");
        Participant {
            peer,
            node,
            tasks: BTreeMap::new(),
            items: BTreeMap::new(),
            next_key: 1,
            ts_min_seen: 0,
            runtime_ts_min_seen: 0,
            watermark: 0,
            settled: false,
        }
    }

    /// The mesh participant.
    pub fn mesh(&self) -> &Mesh {
        self.node.mesh().expect("linked")
    }

    /// The runtime's ts_min: what its GC reclaims below (the mesh's mirrored, or alone, its own).
    pub fn runtime_ts_min(&self) -> Timestamp {
        self.node.progress().ts_min()
    }

    /// The lowest virtual time a root task may start at here (`None`: no door).
    pub fn root_floor(&self) -> Option<Timestamp> {
        self.node.root_floor()
    }

    /// The mesh participant, for an input from the fabric; [`sync`](Self::sync) after.
    pub fn mesh_mut(&mut self) -> &mut Mesh {
        self.node.mesh_mut().expect("linked")
    }

    fn key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    /// Applies local claim changes to `Progress`, then settles — the path a driver takes after
    /// every operation.
    fn local(&mut self, updates: &[Update]) -> Result<(), String> {
        self.apply(updates, "progress")?;
        self.sync()
    }

    fn apply(&mut self, updates: &[Update], what: &str) -> Result<(), String> {
        let peer = self.peer;
        self.node.apply(updates).map(drop).map_err(|r| format!("{peer:?}: {what} refused {updates:?}: {r:?}"))
    }

    /// Settles the participant: its claim changes go to the mesh, the mesh's ts_min comes back.
    /// Every change reaches the mesh: the simulation's links never push back, so nothing may
    /// stay stashed (unless the mesh expelled this participant).
    pub fn sync(&mut self) -> Result<(), String> {
        let _ = self.node.settle();
        if self.node.stashed() > 0 {
            return Err(format!("{:?}: the mesh left {} claim changes stashed", self.peer, self.node.stashed()));
        }
        Ok(())
    }

    pub fn transmits(&mut self) -> Vec<Transmit> {
        std::iter::from_fn(|| self.mesh_mut().poll_transmit()).collect()
    }

    // ---- workload ---------------------------------------------------------------------------

    /// A root task at or above the join floor (or at `INFINITY`, a reader). Without a door, it
    /// opens one instead, as a node does when a session opens (the task waits for it).
    pub fn new_task(&mut self, above: u64, reader: bool) -> Result<(), String> {
        let Some(floor) = self.node.root_floor() else {
            self.mesh_mut().open_door().map_err(|r| format!("{:?}: open_door: {r}", self.peer))?;
            return self.sync();
        };
        let vt = if reader { INFINITY } else { floor.saturating_add(above as Timestamp) };
        self.node.check_root(vt).map_err(|e| format!("{:?}: a root task at its floor refused: {e}", self.peer))?;
        let key = self.key();
        self.node.progress_mut().add_task(key);
        self.tasks.insert(key, TaskModel { vt, open: Vec::new() });
        self.local(&[Update { location: Location::Task(key), ts: vt, delta: 1 }])
    }

    /// A child of `parent` at or above its visibility.
    pub fn spawn(&mut self, parent: TaskKey, above: u64) -> Result<(), String> {
        let vt = self.tasks[&parent].visibility().saturating_add(above as Timestamp);
        let key = self.key();
        self.node.progress_mut().add_task(key);
        self.tasks.insert(key, TaskModel { vt, open: Vec::new() });
        self.local(&[Update { location: Location::Task(key), ts: vt, delta: 1 }])
    }

    /// `set_virtual_time(v)` for some legal `v >= visibility`.
    pub fn set_virtual_time(&mut self, task: TaskKey, above: u64, infinity: bool) -> Result<(), String> {
        let model = &self.tasks[&task];
        let vt = if infinity { INFINITY } else { model.visibility().saturating_add(above as Timestamp) };
        let mut updates = Updates::new();
        push_move(&mut updates, Location::Task(task), Some(model.vt), Some(vt));
        self.tasks.get_mut(&task).expect("task").vt = vt;
        self.local(&updates)
    }

    /// The timestamp `task` may put at: its visibility plus `above`, if that is an item timestamp.
    pub fn put_ts(&self, task: TaskKey, above: u64) -> Option<Timestamp> {
        let ts = self.tasks[&task].visibility().checked_add(above as Timestamp)?;
        stampede_core::time::is_item_ts(ts).then_some(ts)
    }

    /// An item put into a channel hosted here (by a local task, or arriving from a mover).
    pub fn host_put(&mut self, ts: Timestamp) -> Updates {
        let key = self.key();
        self.items.insert(key, ts);
        self.watermark = self.watermark.max(ts + 1);
        let mut updates = Updates::new();
        updates.push(Update { location: Location::Queue(key), ts, delta: 1 });
        updates
    }

    pub fn local_put(&mut self, ts: Timestamp) -> Result<(), String> {
        let updates = self.host_put(ts);
        self.apply(&updates, "put")?;
        self.node.progress_mut().note_put(ts);
        self.sync()
    }

    /// A hosted item opened by a local task (its claim moves from the queue to the task).
    pub fn local_get(&mut self, task: TaskKey, item: u64) -> Result<(), String> {
        let ts = self.items.remove(&item).expect("item");
        self.tasks.get_mut(&task).expect("task").open.push(ts);
        self.local(&[
            Update { location: Location::Handover(task), ts, delta: 1 },
            Update { location: Location::Queue(item), ts, delta: -1 },
        ])
    }

    /// A hosted item handed to a remote task: covered by a carry before its claim goes.
    pub fn give(&mut self, to: Peer, task: TaskKey, item: u64) -> Result<Option<Data>, String> {
        let ts = self.items[&item];
        let Ok(id) = self.mesh_mut().send_move(to, ts) else { return Ok(None) };
        self.items.remove(&item);
        self.local(&[Update { location: Location::Queue(item), ts, delta: -1 }])?;
        Ok(Some(Data { id, ts, cargo: Cargo::Item { task } }))
    }

    /// A put into a channel on `host`: covered by a carry; the task may move on at once.
    pub fn remote_put(&mut self, host: Peer, ts: Timestamp) -> Option<Data> {
        let id = self.mesh_mut().send_move(host, ts).ok()?;
        Some(Data { id, ts, cargo: Cargo::Put })
    }

    /// Gives the door back, or opens one (a pause round).
    pub fn toggle_door(&mut self) -> Result<(), String> {
        let peer = self.peer;
        let toggled = match self.mesh().join_floor() {
            Some(_) => self.mesh_mut().close_door().map(drop),
            None => self.mesh_mut().open_door().map(drop),
        };
        toggled.map_err(|r| format!("{peer:?}: a door refused: {r}"))?;
        self.sync()
    }

    /// Task `task` moves to `to`: it consumes what it holds open, then a carry at its virtual
    /// time covers it before its claim here goes.
    pub fn move_task(&mut self, to: Peer, task: TaskKey) -> Result<Option<Data>, String> {
        while !self.tasks[&task].open.is_empty() {
            self.consume(task, 0)?;
        }
        let vt = self.tasks[&task].vt;
        if !stampede_core::time::is_item_ts(vt) {
            return Ok(None);
        }
        let Ok(id) = self.mesh_mut().send_move(to, vt) else { return Ok(None) };
        self.end_task(task)?;
        Ok(Some(Data { id, ts: vt, cargo: Cargo::Task }))
    }

    pub fn consume(&mut self, task: TaskKey, index: usize) -> Result<(), String> {
        let ts = self.tasks.get_mut(&task).expect("task").open.swap_remove(index);
        self.local(&[Update { location: Location::Handover(task), ts, delta: -1 }])
    }

    pub fn end_task(&mut self, task: TaskKey) -> Result<(), String> {
        let model = self.tasks.remove(&task).expect("task");
        let releases: Vec<Update> =
            model.open.iter().map(|&ts| Update { location: Location::Handover(task), ts, delta: -1 }).collect();
        self.apply(&releases, "end")?;
        self.node.progress_mut().remove_task(task);
        // Its last task gone, it gives its door back, as a node does when its last session closes.
        if self.tasks.is_empty() {
            self.mesh_mut().close_door().map_err(|r| format!("{:?}: close_door: {r}", self.peer))?;
        }
        self.sync()
    }

    /// Every task ends and every hosted item is consumed: the last blockers go.
    pub fn release_everything(&mut self) -> Result<(), String> {
        let tasks: Vec<TaskKey> = self.tasks.keys().copied().collect();
        for task in tasks {
            self.end_task(task)?;
        }
        let items: Vec<(u64, Timestamp)> = std::mem::take(&mut self.items).into_iter().collect();
        let releases: Vec<Update> =
            items.iter().map(|&(key, ts)| Update { location: Location::Queue(key), ts, delta: -1 }).collect();
        self.local(&releases)
    }

    // ---- data arriving -------------------------------------------------------------------------

    /// Data from `mover` arrives: taken over if this participant may (the mover is not fenced
    /// here, the move is new), declined if its task is gone.
    pub fn receive(&mut self, mover: Peer, data: Data) -> Result<(), String> {
        if self.mesh().may_accept(mover, data.id).is_err() {
            return Ok(());
        }
        let me = self.peer;
        let refused = |r| format!("{me:?}: takeover of {data:?} from {mover:?} refused: {r}");
        match data.cargo {
            Cargo::Put => {
                let updates = self.host_put(data.ts);
                self.apply(&updates, "put")?;
                self.node.progress_mut().note_put(data.ts);
                self.node.take_over_recorded(mover, data.id).map_err(refused)?;
            }
            Cargo::Item { task } if self.tasks.contains_key(&task) => {
                let claim = [Update { location: Location::Handover(task), ts: data.ts, delta: 1 }];
                self.apply(&claim, "get")?;
                self.tasks.get_mut(&task).expect("task").open.push(data.ts);
                self.node.take_over_recorded(mover, data.id).map_err(refused)?;
            }
            Cargo::Task => {
                let key = self.key();
                self.node.progress_mut().add_task(key);
                self.apply(&[Update { location: Location::Task(key), ts: data.ts, delta: 1 }], "shadow")?;
                self.tasks.insert(key, TaskModel { vt: data.ts, open: Vec::new() });
                self.node.take_over_recorded(mover, data.id).map_err(refused)?;
            }
            Cargo::Item { .. } => self.mesh_mut().decline_move(mover, data.id).map_err(refused)?,
        }
        self.sync()
    }

    /// The lowest claim this participant truly holds (tasks' visibility, hosted items).
    pub fn true_floor(&self) -> Timestamp {
        let tasks = self.tasks.values().map(TaskModel::visibility);
        tasks.chain(self.items.values().copied()).fold(INFINITY, Timestamp::min)
    }
}
