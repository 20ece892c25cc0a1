//! Watching the name service (docs/NODES.md, "The name service"):
//! [`Runtime::watch`](crate::Runtime::watch) yields the channels and queues under a prefix — first
//! those that exist, then every creation and destruction — and, through a client, the nodes coming
//! up and going down.
//!
//! Embedded, the engine keeps its last [`NAME_EVENTS_KEPT`] name changes in a log; a watcher
//! reads it from its cursor ([`stampede_engine::watch::NameFeed`]). A watcher that falls further
//! behind gets one [`WatchEvent::Lagged`] (`names()` tells the present) instead of growing the
//! log. Through a client, the node publishes its runtime's changes on `stampede/<node>/names` and
//! holds a liveliness token `stampede/<node>/alive`; the client's watcher subscribes to both,
//! over every node it reaches.

#[cfg(feature = "remote")]
use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use stampede_core::name;
use stampede_core::{Error, Result, Selector};
#[cfg(feature = "remote")]
use stampede_engine::watch::closed_error;
use stampede_engine::watch::NameFeed;

use crate::backend::remote;
#[cfg(not(feature = "remote"))]
use crate::backend::Never as Subscription;
#[cfg(feature = "remote")]
use crate::remote::watch::Subscription;

#[cfg(feature = "remote")]
pub(crate) use stampede_engine::watch::snapshot;
pub use stampede_engine::watch::{WatchEvent, NAME_EVENTS_KEPT};

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
    Local(NameFeed),
    // Without the `remote` feature its value cannot exist (`Never`).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    Remote(Subscription),
}

impl Watch {
    pub(crate) fn local(prefix: &str, timeout: Option<Duration>, snapshot: Vec<WatchEvent>, feed: NameFeed) -> Watch {
        Watch { prefix: prefix.to_owned(), timeout, ready: snapshot.into(), source: Source::Local(feed) }
    }

    #[cfg(feature = "remote")]
    pub(crate) fn remote(
        prefix: &str,
        timeout: Option<Duration>,
        snapshot: Vec<WatchEvent>,
        subscription: Subscription,
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
                Source::Local(feed) => match feed.next(deadline)? {
                    Some(event) => self.ready.push_back(event),
                    None => return Err(none_yet()),
                },
                Source::Remote(subscription) => remote!(subscription => match subscription.next(deadline) {
                    Some(event) => self.ready.push_back(event),
                    None if subscription.closed() => return Err(closed_error()),
                    None => return Err(none_yet()),
                }),
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

/// Names seen created and not destroyed since, for a watcher that merges a snapshot and a stream
/// that may repeat it (a client's).
#[cfg(feature = "remote")]
#[derive(Default)]
pub(crate) struct Known(BTreeSet<(Option<String>, String)>);

#[cfg(feature = "remote")]
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
