//! Messages between nodes, fed to a node's steward as its mesh driver feeds it: each step is a
//! message from one of the other nodes (decoded as the driver decodes it), a liveliness report,
//! a look at the door, time passing, or a claim change of the node's own tasks (so that it has
//! claims of its own to publish and protect).
//!
//! Checked after every step: the runtime's invariants; the node's ts_min never goes back, whatever
//! the others say (a forged or late batch may be refused, never applied below what was
//! reclaimed); every action the steward asks for is carried out (a restart is declared again).

use std::sync::Arc;
use std::time::Duration;

use stampede_core::mesh::Message;
use stampede_core::{Mesh, MeshLimits, Peer, Timestamp};
use stampede_engine::steward::Action;
use stampede_engine::{MeshLink, Runtime, Steward, Task};

use crate::steps::steps;

/// The fuzzed node's participant in its first life.
pub const ME: Peer = Peer { id: 1, incarnation: 1 };

/// The other nodes' participants a step may speak for (`id` 2 and 3, two incarnations each).
pub const OTHERS: [Peer; 4] = [
    Peer { id: 2, incarnation: 1 },
    Peer { id: 3, incarnation: 1 },
    Peer { id: 2, incarnation: 2 },
    Peer { id: 3, incarnation: 2 },
];

/// The liveliness timeout the steward is given.
const TIMEOUT: Duration = Duration::from_millis(100);

/// Most tasks of the node's own a run keeps.
const TASKS_MAX: usize = 8;

/// What a step does, by its tag (`tag % STEP_KINDS`).
pub mod tag {
    /// A message: the body's first byte picks the sender in `OTHERS`, the rest is what the
    /// driver decodes (`postcard` of `(Vec<Peer>, Message)`).
    pub const MESSAGE: u8 = 0;
    /// `OTHERS[body[0]]` is reported live.
    pub const JOINED: u8 = 1;
    /// `OTHERS[body[0]]` is reported dead.
    pub const DEAD: u8 = 2;
    /// The driver looks at the door (wanted if `body[0]` is odd).
    pub const LOOK: u8 = 3;
    /// `u16` milliseconds pass.
    pub const TIME: u8 = 4;
    /// A task of the node's own starts at virtual time `u16` (`body[0..2]`).
    pub const TASK: u8 = 5;
    /// The node's oldest task moves its virtual time up by `u16`, or ends (0).
    pub const MOVE: u8 = 6;
}

/// Most actions carried out after one step.
const ACTIONS_MAX: usize = 1_000;

/// Kinds of step.
const STEP_KINDS: u8 = 7;

/// Runs the mesh events of `input`'s steps (see [`crate::steps`]).
pub fn messages(input: &[u8]) {
    let runtime = Runtime::new();
    let link = MeshLink::attach(&runtime, Mesh::new(ME, MeshLimits::default()), Arc::new(|| {}))
        .expect("a new runtime links to a new mesh");
    let mut steward = Steward::new(link, TIMEOUT, |i| i + 1, Arc::default(), false);
    steward.began(&[]);
    let mut node = Node { runtime, steward, tasks: Vec::new(), now: Duration::ZERO, ts_min: Timestamp::MIN };
    node.checked("the start");
    for (tag, body) in steps(input) {
        let described = node.step(tag % STEP_KINDS, body);
        node.carry_out();
        node.checked(&described);
    }
}

/// The fuzzed node: its runtime, its steward and its own tasks.
struct Node {
    runtime: Runtime,
    steward: Steward,
    tasks: Vec<Task>,
    now: Duration,
    ts_min: Timestamp,
}

impl Node {
    /// Takes one step; says what it did.
    fn step(&mut self, kind: u8, body: &[u8]) -> String {
        let other = OTHERS[usize::from(body.first().copied().unwrap_or(0)) % OTHERS.len()];
        let number = u16::from_le_bytes([body.first().copied().unwrap_or(0), body.get(1).copied().unwrap_or(0)]);
        match kind {
            tag::MESSAGE => match postcard::from_bytes::<(Vec<Peer>, Message)>(body.get(1..).unwrap_or_default()) {
                Ok((to, message)) => {
                    let described = format!("{message:?} from {other:?} to {to:?}");
                    self.steward.message(other, &to, message, self.now);
                    described
                }
                Err(_) => "a message that does not decode".into(),
            },
            tag::JOINED => {
                self.steward.joined(other, self.now);
                format!("{other:?} joined")
            }
            tag::DEAD => {
                self.steward.dead(other);
                format!("{other:?} died")
            }
            tag::LOOK => {
                self.steward.look(number % 2 == 1, self.now);
                "a look".into()
            }
            tag::TIME => {
                self.now += Duration::from_millis(u64::from(number));
                self.steward.look(!self.tasks.is_empty(), self.now);
                format!("{number} ms passed")
            }
            tag::TASK if self.tasks.len() < TASKS_MAX => match self.runtime.task(Timestamp::from(number)) {
                Ok(task) => {
                    self.tasks.push(task);
                    format!("a task at {number}")
                }
                Err(e) => format!("no task at {number}: {e}"),
            },
            tag::MOVE if !self.tasks.is_empty() && number == 0 => {
                self.tasks.remove(0).close();
                "the oldest task ended".into()
            }
            tag::MOVE if !self.tasks.is_empty() => {
                let task = &self.tasks[0];
                let to = task.virtual_time().saturating_add(Timestamp::from(number));
                let _ = task.set_virtual_time(to);
                format!("the oldest task moved to {to}")
            }
            _ => "nothing".into(),
        }
    }

    /// Carries out what the steward asks, as the node's driver does, until it asks nothing (at
    /// most [`ACTIONS_MAX`] actions a step, as the driver bounds its rounds).
    fn carry_out(&mut self) {
        self.steward.flush();
        for _ in 0..ACTIONS_MAX {
            let Some(action) = self.steward.poll_action() else { return };
            match action {
                // The other nodes are the input's: what it sends goes nowhere.
                Action::Send(_) | Action::Fenced(_) | Action::Note(_) => {}
                Action::AskLiveliness(peer) => self.steward.reported(peer, false, self.now),
                Action::Restarted { .. } => self.steward.began(&[]),
            }
            self.steward.flush();
        }
    }

    /// Checks the runtime after `after`.
    fn checked(&mut self, after: &str) {
        self.runtime.check_invariants();
        let now = self.runtime.ts_min();
        assert!(now >= self.ts_min, "ts_min went back from {} to {now} after {after}", self.ts_min);
        self.ts_min = now;
    }
}
