//! The fault schedule: while faults run, every [`FAULT_EVERY_US`] a client may be stopped (as by
//! SIGSTOP) for up to 1.5 leases — past its lease, so the node ends its session while its call
//! is under way — killed and restarted, cut off from its node, or closed by its application while
//! a call is under way; a node may be killed and restarted (a new incarnation: an empty engine,
//! no sessions), and the link between two nodes cut for more than a lease (each declares the
//! other dead; healed, the fenced participants learn it and rejoin as new incarnations).
//! Messages are lost beside (`world.rs`). Every fault ends by itself.

use super::world::{Event, World};
use super::{LEASE_US, NODE_DOWN_US_MAX};

/// Between two looks of the fault schedule.
pub(super) const FAULT_EVERY_US: u64 = 100_000;

impl World {
    pub(super) fn fault(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Fault => {
                if self.lossy {
                    self.at(self.now + FAULT_EVERY_US, Event::Fault);
                    self.strike()?;
                }
                Ok(())
            }
            Event::Resume { client } => {
                self.procs[client].stopped = false;
                self.unsilence_client(client);
                self.step(client)
            }
            Event::Restart { client } => {
                self.procs[client].killed = false;
                self.step(client)
            }
            Event::Heal { client } => {
                self.procs[client].cut = false;
                self.unsilence_client(client);
                self.step(client)
            }
            Event::NodeUp { node } => {
                self.node_up(node);
                Ok(())
            }
            Event::Mend { a, b } => {
                self.mend(a, b);
                Ok(())
            }
            other => unreachable!("not a fault: {other:?}"),
        }
    }

    /// One look of the schedule: at most one fault starts.
    fn strike(&mut self) -> Result<(), String> {
        let client = self.rng.below(self.clients.len() as u64) as usize;
        let up = !self.procs[client].killed && !self.procs[client].stopped;
        let lasting = |world: &mut World| world.now + 50_000 + world.rng.below(LEASE_US * 3 / 2);
        match self.rng.below(100) {
            0..=7 if up => {
                self.counts.stops += 1;
                self.procs[client].stopped = true;
                if let Some(pending) = self.procs[client].pending.as_mut() {
                    pending.stopped = true;
                }
                self.silence_client(client);
                let until = lasting(self);
                self.at(until, Event::Resume { client });
            }
            8..=11 if !self.procs[client].killed => {
                self.counts.kills += 1;
                self.kill_client(client);
                let until = self.now + self.rng.below(1_000_000);
                self.at(until, Event::Restart { client });
            }
            12..=17 if !self.procs[client].cut => {
                self.counts.cuts += 1;
                self.procs[client].cut = true;
                self.silence_client(client);
                let until = lasting(self);
                self.at(until, Event::Heal { client });
            }
            18..=19 if up && self.clients[client].conn.is_some() => {
                self.counts.closes += 1;
                return self.close_client(client);
            }
            20 => {
                let node = self.rng.below(self.nodes.len() as u64) as usize;
                if self.nodes[node].is_some() {
                    self.counts.node_kills += 1;
                    self.kill_node(node);
                    let until = self.now + 100_000 + self.rng.below(NODE_DOWN_US_MAX);
                    self.at(until, Event::NodeUp { node });
                }
            }
            21 if self.nodes.len() > 1 => {
                let a = self.rng.below(self.nodes.len() as u64) as usize;
                let b = (a + 1 + self.rng.below(self.nodes.len() as u64 - 1) as usize) % self.nodes.len();
                if self.split(a, b) {
                    self.counts.partitions += 1;
                    let until = self.now + LEASE_US + self.rng.below(LEASE_US);
                    self.at(until, Event::Mend { a, b });
                }
            }
            _ => {}
        }
        Ok(())
    }
}
