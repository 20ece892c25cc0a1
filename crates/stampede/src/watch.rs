//! Watching the name service (docs/NODES.md, "The name service"):
//! [`Runtime::watch`](crate::Runtime::watch) yields the channels and queues under a prefix — first
//! those that exist, then every creation and destruction — and, through a client, the nodes coming
//! up and going down.
//!
//! Embedded, the runtime keeps its last [`NAME_EVENTS_KEPT`] name changes in a log (`NameLog`); a
//! watcher reads it from its cursor and waits on the log's signal. A watcher that falls further
//! behind gets one [`WatchEvent::Lagged`] (`names()` tells the present) instead of growing the
//! log. Through a client, the node publishes its runtime's changes on `stampede/<node>/names` and
//! holds a liveliness token `stampede/<node>/alive`; the client's watcher subscribes to both,
//! over every node it reaches.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stampede_core::name;
use stampede_core::{Error, Result, Selector};

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

/// A watch on the names under a prefix. Iterating yields events until none comes within the
/// watch's timeout (or the runtime closes); [`next_event`](Self::next_event) waits as long as
/// asked.
pub struct Watch {
    prefix: String,
    timeout: Option<Duration>,
    /// Events to hand out before waiting (the snapshot, or what a subscriber delivered).
    ready: VecDeque<WatchEvent>,
    source: Source,
}

enum Source {
    Local { log: Arc<NameLog>, cursor: u64, closed: Box<dyn Fn() -> bool + Send + Sync> },
    Remote(crate::remote::watch::Subscription),
}

impl Watch {
    pub(crate) fn local(
        prefix: &str,
        timeout: Option<Duration>,
        snapshot: Vec<WatchEvent>,
        log: Arc<NameLog>,
        cursor: u64,
        closed: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Watch {
        let source = Source::Local { log, cursor, closed };
        Watch { prefix: prefix.to_owned(), timeout, ready: snapshot.into(), source }
    }

    pub(crate) fn remote(
        prefix: &str,
        timeout: Option<Duration>,
        snapshot: Vec<WatchEvent>,
        subscription: crate::remote::watch::Subscription,
    ) -> Watch {
        Watch { prefix: prefix.to_owned(), timeout, ready: snapshot.into(), source: Source::Remote(subscription) }
    }

    /// The next event under the prefix, waiting at most `timeout` (`None`: as long as it takes).
    /// `NotAvailable` when none came in time (try again), `Closed` once the runtime closed.
    pub fn next_event(&mut self, timeout: Option<Duration>) -> Result<WatchEvent> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            while let Some(event) = self.ready.pop_front() {
                if self.selects(&event) {
                    return Ok(event);
                }
            }
            match &mut self.source {
                Source::Local { log, cursor, closed } => {
                    let waiter = log.signal.listen_owned();
                    match log.at(*cursor) {
                        Err(missed) => {
                            *cursor += missed;
                            self.ready.push_back(WatchEvent::Lagged { missed });
                        }
                        Ok(Some(event)) => {
                            *cursor += 1;
                            self.ready.push_back(event);
                        }
                        Ok(None) if closed() => return Err(closed_error()),
                        Ok(None) => {
                            if !waiter.wait(deadline) {
                                return Err(none_yet());
                            }
                        }
                    }
                }
                Source::Remote(subscription) => match subscription.next(deadline) {
                    Some(event) => self.ready.push_back(event),
                    None if subscription.closed() => return Err(closed_error()),
                    None => return Err(none_yet()),
                },
            }
        }
    }

    fn selects(&self, event: &WatchEvent) -> bool {
        match event {
            WatchEvent::Created { name, .. } | WatchEvent::Destroyed { name, .. } => name::under(name, &self.prefix),
            _ => true,
        }
    }
}

impl Iterator for Watch {
    type Item = WatchEvent;

    /// The next event, or `None` when none came within the watch's timeout or the runtime
    /// closed.
    fn next(&mut self) -> Option<WatchEvent> {
        self.next_event(self.timeout).ok()
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("prefix", &self.prefix).field("timeout", &self.timeout).finish()
    }
}

/// The snapshot a watch starts with: a `Created` event per name in `names`.
pub(crate) fn snapshot(names: impl IntoIterator<Item = (String, &'static str)>, node: Option<&str>) -> Vec<WatchEvent> {
    names
        .into_iter()
        .map(|(name, kind)| WatchEvent::Created { name, kind: kind.to_owned(), node: node.map(str::to_owned) })
        .collect()
}

/// Names seen created and not destroyed since, for a watcher that merges a snapshot and a stream
/// that may repeat it.
#[derive(Default)]
pub(crate) struct Known(BTreeSet<(Option<String>, String)>);

impl Known {
    /// `true` if the event is news (a creation not seen, a destruction of a name seen).
    pub(crate) fn admit(&mut self, event: &WatchEvent) -> bool {
        match event {
            WatchEvent::Created { name, node, .. } => self.0.insert((node.clone(), name.clone())),
            WatchEvent::Destroyed { name, node, .. } => self.0.remove(&(node.clone(), name.clone())),
            _ => true,
        }
    }
}

fn none_yet() -> Error {
    Error::NotAvailable {
        op: "watch",
        name: String::new(),
        selector: Selector::Oldest,
        previous: None,
        next: None,
        settled: false,
    }
}

fn closed_error() -> Error {
    Error::Closed { name: String::new(), reason: "the runtime was closed" }
}
