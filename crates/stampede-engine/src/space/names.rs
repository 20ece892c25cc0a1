//! The name service: registering, looking up, listing, watching and destroying channels and
//! queues by name, and closing a destroyed container.
//!
//! Creations and destructions are recorded under the names lock, so a watcher's snapshot and the
//! log agree; closing a container releases its claims and wakes its blocked calls.

use std::sync::Arc;

use crate::watch::{self, NameFeed, WatchEvent};
use stampede_core::name;
use stampede_core::{Effects, Error, Result};

use super::commit::park_handovers;
use super::{ContainerState, Entry, Shared, Space};

impl Space {
    // ---- names -------------------------------------------------------------------------------

    pub(crate) fn register(&self, name: &str, entry: Entry) -> Result<()> {
        self.check_open(name)?;
        let mut names = self.names.write();
        if names.contains_key(name) {
            return Err(Error::AlreadyExists { name: name.to_owned() });
        }
        let key = match &entry {
            Entry::Channel(ch) => {
                self.channels.write().insert(ch.key, ch.clone());
                ch.key
            }
            Entry::Queue(q) => q.key,
        };
        self.tracking.lock().progress_mut().add_container(key);
        let kind = entry.kind();
        names.insert(name.to_owned(), entry);
        // Recorded under the names lock, so a watcher's snapshot and the log agree.
        self.name_log.record(WatchEvent::Created { name: name.to_owned(), container_kind: kind.into(), node: None });
        Ok(())
    }

    pub(crate) fn lookup(&self, name: &str) -> Result<Entry> {
        self.check_open(name)?;
        self.names.read().get(name).cloned().ok_or_else(|| Error::NotFound { name: name.to_owned() })
    }

    /// The names `prefix` selects ([`stampede_core::name::under`]), sorted.
    pub(crate) fn names(&self, prefix: &str) -> Vec<String> {
        self.names
            .read()
            .range(prefix.to_owned()..)
            .take_while(|(n, _)| n.starts_with(prefix))
            .filter(|(n, _)| name::under(n, prefix))
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.names.read().values().cloned().collect()
    }

    /// Destroys the container called `name`: blocked operations wake with `Closed`.
    pub(crate) fn destroy(&self, name: &str, reason: &'static str) -> Result<()> {
        let entry = {
            let mut names = self.names.write();
            let entry = names.remove(name).ok_or_else(|| Error::NotFound { name: name.to_owned() })?;
            let destroyed =
                WatchEvent::Destroyed { name: name.to_owned(), container_kind: entry.kind().into(), node: None };
            self.name_log.record(destroyed);
            entry
        };
        self.close_entry(&entry, reason);
        Ok(())
    }

    /// A watch of the names under `prefix`: those that exist now (`Created` events), and a feed
    /// of every change after them.
    pub(crate) fn watch(self: &Arc<Self>, prefix: &str) -> (Vec<WatchEvent>, NameFeed) {
        let (snapshot, cursor) = {
            let names = self.names.read();
            let snapshot = names.iter().filter(|(n, _)| name::under(n, prefix)).map(|(n, e)| (n.clone(), e.kind()));
            (watch::snapshot(snapshot.collect::<Vec<_>>(), None), self.name_log.end())
        };
        let space = Arc::downgrade(self);
        let closed = Box::new(move || space.upgrade().is_none_or(|space| space.is_closed()));
        (snapshot, NameFeed::new(self.name_log.clone(), cursor, closed))
    }

    pub(super) fn close_entry(&self, entry: &Entry, reason: &'static str) {
        match entry {
            Entry::Channel(ch) => {
                self.channels.write().remove(&ch.key);
                self.close_container(ch, reason);
            }
            Entry::Queue(q) => self.close_container(q, reason),
        }
    }

    /// Closes a container: its connections' claims go, items still open in other tasks' states
    /// are handed over to those tasks until their states are updated.
    fn close_container<S: ContainerState>(&self, shared: &Shared<S>, reason: &'static str) {
        let (opens, reclaimed, advanced) = {
            let mut state = shared.state.lock();
            let Effects { mut claims, opens, reclaimed, .. } = state.close(reason);
            park_handovers(&mut claims, &opens);
            let mut tracking = self.tracking.lock();
            tracking.unlist(shared.key, &shared.listed_at);
            tracking.progress_mut().remove_container(shared.key);
            let advanced = tracking.apply(&claims);
            let advanced = self.publish(&mut tracking).or(advanced);
            (opens, reclaimed, advanced)
        };
        self.progressed();
        self.apply_others(opens);
        self.reclaimed(shared, &reclaimed);
        if let Some(disk) = &shared.disk {
            disk.lock().release();
        }
        shared.wake_all();
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
    }
}
