//! The embedded runtime's side of watching the name service (docs/NODES.md, "The name service"): its name changes, kept
//! for watchers ([`Runtime::watch`](crate::Runtime::watch)), and what a watch starts with.
//!
//! The runtime keeps its last [`NAME_EVENTS_KEPT`] name changes in a log (`NameLog`); a
//! [`NameFeed`] reads it from its cursor and waits on the log's signal. A watcher that falls
//! further behind gets one [`WatchEvent::Lagged`] (`names()` tells the present) instead of
//! growing the log. The public `Watch`, which also follows the nodes a client reaches, is the
//! facade's (`stampede::watch`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use stampede_core::{Error, Result};

use crate::sync::Mutex;
use crate::wait::Signal;

pub use stampede_core::WatchEvent;

/// Most name changes an embedded runtime keeps for its watchers.
pub const NAME_EVENTS_KEPT: usize = 4096;

/// An embedded runtime's recent name changes, numbered.
#[derive(Default)]
pub(crate) struct NameLog {
    changes: Mutex<Changes>,
    pub(crate) signal: Arc<Signal>,
}

#[derive(Default)]
struct Changes {
    /// Number of the first change in `kept`.
    first: u64,
    kept: VecDeque<WatchEvent>,
}

impl NameLog {
    /// Records a creation or destruction and wakes the watchers.
    pub(crate) fn record(&self, event: WatchEvent) {
        {
            let mut changes = self.changes.lock();
            changes.kept.push_back(event);
            if changes.kept.len() > NAME_EVENTS_KEPT {
                changes.kept.pop_front();
                changes.first += 1;
            }
        }
        self.signal.notify();
    }

    /// The number the next change will have.
    pub(crate) fn end(&self) -> u64 {
        let changes = self.changes.lock();
        changes.first + changes.kept.len() as u64
    }

    /// The change numbered `cursor`, if kept: `Ok(None)` if not there yet, `Err(missed)` if gone.
    fn at(&self, cursor: u64) -> std::result::Result<Option<WatchEvent>, u64> {
        let changes = self.changes.lock();
        if cursor < changes.first {
            return Err(changes.first - cursor);
        }
        Ok(changes.kept.get((cursor - changes.first) as usize).cloned())
    }
}

/// An embedded runtime's name changes from a cursor on: what a watch reads when embedded.
pub struct NameFeed {
    log: Arc<NameLog>,
    /// The number of the next change to read.
    cursor: u64,
    /// Whether the runtime is closed (or gone): then no change will come.
    closed: Box<dyn Fn() -> bool + Send + Sync>,
}

impl NameFeed {
    /// Reads `log` from change number `cursor` on; `closed` tells whether the runtime closed.
    pub(crate) fn new(log: Arc<NameLog>, cursor: u64, closed: Box<dyn Fn() -> bool + Send + Sync>) -> NameFeed {
        NameFeed { log, cursor, closed }
    }

    /// The next change — [`WatchEvent::Lagged`] for those missed — waiting until `deadline`
    /// (`None`: as long as it takes). `Ok(None)` when none came in time, `Closed` once the
    /// runtime closed.
    pub fn next(&mut self, deadline: Option<Instant>) -> Result<Option<WatchEvent>> {
        loop {
            let waiter = self.log.signal.listen_owned();
            match self.log.at(self.cursor) {
                Err(missed) => {
                    self.cursor += missed;
                    return Ok(Some(WatchEvent::Lagged { missed }));
                }
                Ok(Some(event)) => {
                    self.cursor += 1;
                    return Ok(Some(event));
                }
                Ok(None) if (self.closed)() => return Err(closed_error()),
                Ok(None) => {
                    if !waiter.wait(deadline) {
                        return Ok(None);
                    }
                }
            }
        }
    }
}

/// The snapshot a watch starts with: a `Created` event per name in `names`.
pub fn snapshot(names: impl IntoIterator<Item = (String, &'static str)>, node: Option<&str>) -> Vec<WatchEvent> {
    names
        .into_iter()
        .map(|(name, kind)| WatchEvent::Created {
            name,
            container_kind: kind.to_owned(),
            node: node.map(str::to_owned),
        })
        .collect()
}

/// What a watch fails with once its runtime is closed.
pub fn closed_error() -> Error {
    Error::Closed { name: String::new(), reason: "the runtime was closed" }
}
