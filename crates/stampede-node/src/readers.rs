//! What a node keeps of a session's remote input connections: each one's tape (what it asked
//! for, `stampede_core::tape`), its prefetch policy, and what was pushed to it
//! (`stampede_core::prefetch`, docs/PREFETCH.md).
//!
//! Guarantees: bounded — at most one reader per handle the session may hold (past it, readers of
//! connections gone are dropped first); what a put sends each connection — its item and a notice,
//! a notice alone (the first put after a push: the pushed item is no longer the newest), or
//! nothing — is decided by the pure [`Pusher`](stampede_core::Pusher) and built from the
//! engine's view of the put ([`ChannelInput::pushable`]), which changes nothing.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use stampede_core::prefetch::Pushes;
use stampede_core::tape::Access;
use stampede_core::{Handle, Item, Notice, Prefetch, Pusher, Selector, Tape, Timestamp};
use stampede_engine::session::Connection;
use stampede_engine::ChannelInput;

/// One input connection, as the node keeps it.
struct Reader {
    /// Its task and its id in its channel or queue (what a graph names it by).
    task: Handle,
    id: u64,
    tape: Tape,
    prefetch: Prefetch,
    pusher: Pusher,
    /// A channel input's connection in the engine, to look at a put for it.
    input: Option<Arc<ChannelInput>>,
    /// The latest cache answer recorded: a client reports an answer in every request until one
    /// of them is answered, so the same one may come several times (never twice as an answer:
    /// a `NEWEST_UNSEEN` answer is a new item each time).
    last_used: Option<Timestamp>,
}

/// A push (or notice) for one input connection of a session.
pub(crate) struct Push {
    pub(crate) connection: Handle,
    pub(crate) notice: Notice,
    pub(crate) item: Option<Item>,
}

/// The readers of one session, by handle.
#[derive(Default)]
pub(crate) struct Readers(Mutex<HashMap<Handle, Reader>>);

impl Readers {
    /// The reader of `handle`, made if need be from `connection` with `prefetch`; `None` past
    /// the bound of `handles_max` readers (after dropping those whose connection is gone, as
    /// `alive` says).
    fn reader<'a>(
        readers: &'a mut HashMap<Handle, Reader>,
        handle: Handle,
        connection: &Connection,
        prefetch: Prefetch,
        handles_max: usize,
        alive: impl Fn(Handle) -> bool,
    ) -> Option<&'a mut Reader> {
        let id = connection.input_id()?;
        if readers.len() >= handles_max && !readers.contains_key(&handle) {
            readers.retain(|&kept, _| alive(kept));
            if readers.len() >= handles_max {
                return None;
            }
        }
        let input = match connection {
            Connection::ChannelInput(input) => Some(input.clone()),
            _ => None,
        };
        let make = || Reader {
            task: connection.task_id(),
            id,
            tape: Tape::default(),
            prefetch,
            pusher: Pusher::default(),
            input,
            last_used: None,
        };
        Some(readers.entry(handle).or_insert_with(make))
    }

    /// Input connection `handle` was attached with `prefetch`.
    pub(crate) fn attached(
        &self,
        handle: Handle,
        connection: &Connection,
        prefetch: Prefetch,
        handles_max: usize,
        alive: impl Fn(Handle) -> bool,
    ) {
        let mut readers = self.0.lock();
        if let Some(reader) = Self::reader(&mut readers, handle, connection, prefetch, handles_max, alive) {
            reader.prefetch = prefetch;
        }
    }

    /// Records on `handle`'s tape that `access` was made at `at_us`.
    pub(crate) fn record(
        &self,
        handle: Handle,
        connection: &Connection,
        access: Access,
        at_us: u64,
        handles_max: usize,
        alive: impl Fn(Handle) -> bool,
    ) {
        let mut readers = self.0.lock();
        // A connection first seen here was attached before its reader could be kept: no prefetch.
        if let Some(reader) = Self::reader(&mut readers, handle, connection, Prefetch::Off, handles_max, alive) {
            reader.tape.record(access, at_us);
        }
    }

    /// The client's cache answered a `NEWEST_UNSEEN` get on `handle` with the item at `ts`,
    /// at `at_us`: on the tape as the get, and as a pushed item used.
    pub(crate) fn used(&self, handle: Handle, ts: Timestamp, at_us: u64) {
        let mut readers = self.0.lock();
        if let Some(reader) = readers.get_mut(&handle).filter(|reader| reader.last_used != Some(ts)) {
            reader.last_used = Some(ts);
            reader.tape.record(Access::Get { selector: Selector::NewestUnseen, got: Some(ts) }, at_us);
            reader.pusher.used();
        }
    }

    /// The connection `handle`'s engine input, if it is a channel's.
    pub(crate) fn input(&self, handle: Handle) -> Option<Arc<ChannelInput>> {
        self.0.lock().get(&handle).and_then(|reader| reader.input.clone())
    }

    /// What the put at `ts` on the channel `channel` (its runtime id) at `now_us` sends this
    /// session's readers of it.
    pub(crate) fn pushes(&self, channel: u64, ts: Timestamp, now_us: u64) -> Vec<Push> {
        let mut readers = self.0.lock();
        let mut pushes = Vec::new();
        for (&connection, reader) in readers.iter_mut() {
            let Some(input) = reader.input.as_ref().filter(|input| input.channel().id() == channel) else { continue };
            if reader.prefetch == Prefetch::Off {
                continue;
            }
            let Some((newest, item)) = input.pushable(ts) else { continue };
            let bytes = item.as_ref().map_or(0, |item| item.payload.len());
            let push = reader.pusher.on_put(reader.prefetch, &reader.tape, bytes, now_us);
            let Some(with_item) = reader.pusher.sends(item.as_ref().filter(|_| push).map(|item| item.ts), newest)
            else {
                continue;
            };
            let item = item.filter(|_| with_item);
            pushes.push(Push { connection, notice: Notice { ts, newest, pushed: item.is_some() }, item });
        }
        pushes
    }

    /// The tape of the input connection `id` of task `task` (as a graph names them), with what
    /// was pushed to it and used, if one was kept.
    pub(crate) fn tape_of(&self, task: Handle, id: u64) -> Option<(Tape, Pushes)> {
        let readers = self.0.lock();
        let reader = readers.values().find(|r| (r.task, r.id) == (task, id))?;
        let Pusher { notices, pushed, used, .. } = reader.pusher;
        Some((reader.tape.clone(), Pushes { policy: reader.prefetch, notices, pushed, used }))
    }
}
