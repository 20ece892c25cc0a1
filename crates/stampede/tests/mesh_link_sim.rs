//! A seeded simulation of runtimes linked to mesh participants (`stampede::mesh_link`): the real
//! `Space`s, progress machines and `Mesh`es of two or three nodes, with the fabric replaced by
//! per-sender FIFO queues delivered in a random order, and random tasks, puts, gets, consumes,
//! virtual-time moves, closes, node crashes (declared dead at a random later step) and late joins.
//!
//! After every step: no live node's ts_min is above the visibility of any live task on any live
//! node (SPEC §3: ts_min is global), every node's ts_min only rises, and each runtime's own
//! invariants hold. At the end, with every task closed and every message delivered, every live
//! node's ts_min reaches `1 +` the highest timestamp put that it heard of.
//!
//! `STAMPEDE_MESH_LINK_SEEDS=n` runs n seeds (default 300); `STAMPEDE_MESH_LINK_SEED=s` replays one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use stampede::mesh_link::MeshLink;
use stampede::{Channel, ChannelInput, ChannelOutput, Limits, Runtime, Task, Timestamp, INFINITY, OLDEST_UNSEEN};
use stampede_core::mesh::{Event, Message};
use stampede_core::{Mesh, MeshLimits, Peer};

const STEPS: usize = 300;
/// A get that does not wait.
const NOW: Option<std::time::Duration> = Some(std::time::Duration::ZERO);
const NODES_MAX: u64 = 3;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A task of the workload and what it holds.
struct Worker {
    /// Never moves nor closes before the end: the low claim other nodes must not pass.
    holder: bool,
    task: Task,
    out: ChannelOutput,
    inp: ChannelInput,
}

struct Node {
    peer: Peer,
    rt: Runtime,
    link: MeshLink,
    channel: Channel,
    workers: Vec<Worker>,
    ts_min_seen: Timestamp,
    /// `1 +` the highest timestamp put here.
    landed: Timestamp,
}

struct World {
    rng: Rng,
    nodes: BTreeMap<u64, Node>,
    /// Crashed nodes not yet declared dead to the others.
    crashed: Vec<Peer>,
    links: BTreeMap<(Peer, Peer), VecDeque<Message>>,
    next_id: u64,
    trace: Vec<String>,
}

impl World {
    fn new(seed: u64) -> World {
        let mut world = World {
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            nodes: BTreeMap::new(),
            crashed: Vec::new(),
            links: BTreeMap::new(),
            next_id: 0,
            trace: Vec::new(),
        };
        let count = 2 + world.rng.below(NODES_MAX - 1);
        for _ in 0..count {
            world.join();
        }
        world
    }

    /// A new node: learns every live node (and every crashed one not declared dead yet, as
    /// liveliness would still show it), then joins through a live sponsor's move, or alone.
    fn join(&mut self) {
        self.next_id += 1;
        let peer = Peer { id: self.next_id, incarnation: 1 };
        let rt = Runtime::new();
        let link = MeshLink::attach(&rt, Mesh::new(peer, MeshLimits::default()), Arc::new(|| {})).unwrap();
        let channel = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let others: Vec<Peer> = self.nodes.values().map(|n| n.peer).chain(self.crashed.iter().copied()).collect();
        for other in &others {
            link.with(|m| m.peer_joined(*other)).unwrap();
        }
        for node in self.nodes.values() {
            node.link.with(|m| m.peer_joined(peer)).unwrap();
        }
        match self.nodes.values().next() {
            None => {
                link.with(|m| m.genesis()).unwrap();
            }
            Some(sponsor) => {
                let (id, door) = sponsor.link.with(|m| {
                    let door = m.join_floor().expect("every live node has a door");
                    (m.send_move(peer, door).unwrap(), door)
                });
                link.with(|m| m.join(sponsor.peer, id, door)).unwrap();
            }
        }
        self.trace.push(format!("join {peer:?}"));
        self.nodes.insert(peer.id, Node { peer, rt, link, channel, workers: Vec::new(), ts_min_seen: 0, landed: 0 });
    }

    fn pick_node(&mut self) -> Option<u64> {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        (!ids.is_empty()).then(|| ids[self.rng.below(ids.len() as u64) as usize])
    }

    /// Collects what every node has to send, and answers its questions as the driver does (an
    /// incarnation heard of only from peers: joined if it is live, else dead).
    fn transmit(&mut self) {
        let live: Vec<Peer> = self.nodes.values().map(|n| n.peer).chain(self.crashed.iter().copied()).collect();
        for node in self.nodes.values() {
            let events: Vec<Event> = node.link.with(|m| std::iter::from_fn(|| m.poll_event()).collect());
            for event in events {
                if let Event::AskLiveliness { peer } = event {
                    let _ =
                        node.link.with(|m| if live.contains(&peer) { m.peer_joined(peer) } else { m.peer_dead(peer) });
                }
            }
            let transmits: Vec<_> = node.link.with(|m| std::iter::from_fn(|| m.poll_transmit()).collect());
            for transmit in transmits {
                for to in transmit.to {
                    self.links.entry((node.peer, to)).or_default().push_back(transmit.message.clone());
                }
            }
        }
    }

    /// Delivers the next message of one random link (FIFO per sender).
    fn deliver_one(&mut self) {
        let busy: Vec<(Peer, Peer)> = self.links.iter().filter(|(_, q)| !q.is_empty()).map(|(&k, _)| k).collect();
        if busy.is_empty() {
            return;
        }
        let (from, to) = busy[self.rng.below(busy.len() as u64) as usize];
        let message = self.links.get_mut(&(from, to)).unwrap().pop_front().unwrap();
        if let Some(node) = self.nodes.get(&to.id) {
            // Refusals (a dead sender's late message) change nothing; the machine says why.
            let _ = node.link.with(|m| m.handle_message(from, message));
        }
    }

    fn workload(&mut self) {
        let Some(id) = self.pick_node() else { return };
        let roll = self.rng.below(100);
        let above = self.rng.below(4) as Timestamp;
        let pick = self.rng.next();
        let node = self.nodes.get_mut(&id).unwrap();
        let worker = (!node.workers.is_empty()).then(|| (pick % node.workers.len() as u64) as usize);
        match (roll, worker) {
            (0..=19, _) | (_, None) => {
                // At or above the local ts_min: below the node's door it must be refused
                // (another node's view may be above it already).
                let door = node.link.with(|m| m.join_floor()).unwrap();
                let vt = node.rt.ts_min().saturating_add(above);
                let Ok(task) = node.rt.task(vt) else {
                    assert!(vt < door, "a root task at {vt}, at or above the door {door}, was refused");
                    return;
                };
                let out = task.attach_output(&node.channel).unwrap();
                let inp = task.attach_input(&node.channel).unwrap();
                node.workers.push(Worker { holder: roll < 4, task, out, inp });
            }
            (20..=44, Some(w)) => {
                let worker = &node.workers[w];
                let ts = worker.task.visibility().saturating_add(above);
                if ts < INFINITY && worker.out.put(ts, vec![0u8; 4]).is_ok() {
                    node.landed = node.landed.max(ts + 1);
                }
            }
            (45..=59, Some(w)) => {
                let worker = &node.workers[w];
                let _ = worker.inp.get(OLDEST_UNSEEN, NOW);
            }
            (60..=74, Some(w)) => {
                let worker = &node.workers[w];
                if let Ok(item) = worker.inp.get(OLDEST_UNSEEN, NOW) {
                    let _ = worker.inp.consume_until(item.ts);
                }
            }
            (75..=89, Some(w)) if !node.workers[w].holder => {
                let worker = &node.workers[w];
                let v = if roll == 75 { INFINITY } else { worker.task.visibility().saturating_add(above) };
                let _ = worker.task.set_virtual_time(v);
            }
            (90.., Some(w)) if !node.workers[w].holder => {
                node.workers.swap_remove(w).task.close();
            }
            _ => {}
        }
        self.trace.push(format!("workload node {id} roll {roll}"));
    }

    /// A node stops: its messages in flight still arrive (a prefix per link would be a crash
    /// mid-send; the machine is checked for that in stampede-core's simulation), nothing reaches
    /// it any more, and its tasks never close.
    fn crash(&mut self) {
        if self.nodes.len() < 2 {
            return;
        }
        let Some(id) = self.pick_node() else { return };
        let node = self.nodes.remove(&id).unwrap();
        self.links.retain(|&(_, to), _| to != node.peer);
        self.crashed.push(node.peer);
        self.trace.push(format!("crash {:?}", node.peer));
        std::mem::forget(node.workers);
    }

    fn declare(&mut self) {
        if self.crashed.is_empty() {
            return;
        }
        let dead = self.crashed.swap_remove(self.rng.below(self.crashed.len() as u64) as usize);
        for node in self.nodes.values() {
            let _ = node.link.with(|m| m.peer_dead(dead));
        }
        self.trace.push(format!("declare {dead:?} dead"));
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=49 => self.deliver_one(),
            50..=89 => self.workload(),
            90..=92 => self.crash(),
            93..=96 => self.declare(),
            _ if self.nodes.len() < NODES_MAX as usize => self.join(),
            _ => {}
        }
        self.transmit();
    }

    /// Global ts_min: no live node's is above any live task's visibility anywhere; each only
    /// rises; each runtime's own invariants hold.
    fn check(&mut self) -> Result<(), String> {
        let floor = self
            .nodes
            .values()
            .flat_map(|n| n.workers.iter().map(|w| (n.peer, w.task.visibility())))
            .min_by_key(|&(_, v)| v);
        for node in self.nodes.values_mut() {
            node.rt.check_invariants();
            let ts_min = node.rt.ts_min();
            if ts_min < node.ts_min_seen {
                return Err(format!("{:?}: ts_min went back from {} to {ts_min}", node.peer, node.ts_min_seen));
            }
            node.ts_min_seen = ts_min;
            if let Some((owner, visibility)) = floor.filter(|&(_, v)| ts_min > v) {
                return Err(format!(
                    "{:?} has ts_min {ts_min} above the visibility {visibility} of a task on {owner:?}",
                    node.peer
                ));
            }
        }
        Ok(())
    }

    /// Everything ends: deaths declared, every task closed, every message delivered.
    fn finish(&mut self) -> Result<(), String> {
        while !self.crashed.is_empty() {
            self.declare();
        }
        for node in self.nodes.values_mut() {
            for worker in node.workers.drain(..) {
                worker.task.close();
            }
        }
        self.transmit();
        for _ in 0..10_000 {
            if self.links.values().all(VecDeque::is_empty) {
                break;
            }
            self.deliver_one();
            self.transmit();
            self.check()?;
        }
        // Every put that landed on a live node was heard of everywhere (a put on a node that
        // crashed before telling anyone is forgotten with its item).
        let landed = self.nodes.values().map(|n| n.landed).max().unwrap_or(0);
        for node in self.nodes.values() {
            let (ts_min, watermark) = (node.rt.ts_min(), node.link.with(|m| m.watermark()));
            if ts_min != watermark || watermark < landed {
                if std::env::var_os("STAMPEDE_MESH_TRACE").is_some() {
                    node.link.with(|m| eprintln!("{m:#?}"));
                }
                return Err(format!(
                    "{:?}: ts_min {ts_min} after quiescence, expected its watermark {watermark} (puts landed up to \
                     {landed})",
                    node.peer
                ));
            }
        }
        Ok(())
    }
}

fn run(seed: u64) -> Result<(), String> {
    let mut world = World::new(seed);
    let outcome = (|| {
        for _ in 0..STEPS {
            world.step();
            world.check()?;
        }
        world.finish()
    })();
    outcome.map_err(|e| {
        let tail: Vec<&String> = world.trace.iter().rev().take(12).collect();
        format!("seed {seed}: {e}\nlast steps, newest first: {tail:#?}")
    })
}

#[test]
fn linked_runtimes_keep_ts_min_global_over_seeds() {
    if let Some(seed) = std::env::var("STAMPEDE_MESH_LINK_SEED").ok().and_then(|s| s.parse().ok()) {
        run(seed).unwrap();
        return;
    }
    let seeds: u64 = std::env::var("STAMPEDE_MESH_LINK_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    for seed in 1..=seeds {
        if let Err(e) = run(seed) {
            panic!("{e}\nreplay: STAMPEDE_MESH_LINK_SEED={seed} cargo test -p stampede --test mesh_link_sim");
        }
    }
}
