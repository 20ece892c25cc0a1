//! Prefetch, after Tapeworm (docs/PREFETCH.md): a node pushes an item to a remote input
//! connection before the get it predicts, and the client answers that get from a small cache with
//! no message. This module holds both rules, pure (time is an argument): when the node pushes
//! ([`Pusher`]), and when the client's cache may answer ([`PushCache`]).
//!
//! **What is pushed.** Only to a channel's input connection whose policy asks for it ([`Prefetch`])
//! and that has no bound on lag; only items unseen there that carry no reference count (a
//! counted item may be reclaimed by other readers' uses, an item of a lag-bounded connection by a
//! later put: neither could be answered from a cache safely); at most [`PUSH_ITEMS_MAX`] pushed
//! and unread items per connection — the newest: a skipping reader never gets a backlog — and at
//! most [`PUSH_BYTES_MAX`] bytes of them. A push never makes a producer wait (it is sent or
//! dropped). A push is a [`Notice`] with its item (the put's timestamp and the channel's newest
//! one); the first put that makes the item pushed last no longer the newest sends the connection a
//! notice without an item, which tells its cache so. Other puts send nothing: a cache that holds
//! no answerable item needs to hear nothing more until the next push, and a get waits in the
//! cache only while that notice is still due ([`PushCache::waits`]).
//!
//! **What the cache may answer.** A `NEWEST_UNSEEN` get, with the pushed item `p`, only if `p` is
//! the newest timestamp any notice received said the channel held, and no get or consume of this
//! connection has reached `p` or past it. Then `p` is exactly what the node answered at the moment
//! of that notice (`p` was the newest item, unseen here; only this connection's own gets and
//! consumes could have made it seen, and they did not), so the get is placed there in the
//! channel's serial order: a put whose notice is still on its way is missed, exactly as by a get
//! that raced it. The client's own puts count as notices it received ([`PushCache::put_here`]): a
//! get never misses a put its own client made before it. The item becomes open on the node when
//! the connection's next message arrives.

use crate::tape::{Pattern, Tape};
use crate::Timestamp;

/// Most pushed, unread items per connection: the newest one (a skipping reader's next frame).
pub const PUSH_ITEMS_MAX: usize = 1;

/// Most bytes of pushed, unread items per connection: a larger item is never pushed.
pub const PUSH_BYTES_MAX: usize = 64 << 20;

/// How a connection asks to be pushed items ahead of its gets (Tapeworm's "user locks" for
/// applications that know how they read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Prefetch {
    /// Nothing is pushed: every remote get is a request and its reply.
    Off,
    /// The newest item, when the connection's next `NEWEST_UNSEEN` get is expected before the
    /// next put: a reader that skips what it missed.
    Newest,
    /// What the connection's tape shows: [`Newest`](Prefetch::Newest) while it reads the freshest
    /// item each time ([`Pattern::Skipping`], or every read so far when there are too few to tell
    /// a pattern), nothing otherwise.
    #[default]
    Auto,
}

impl Prefetch {
    /// Every policy, by name.
    pub const ALL: [Prefetch; 3] = [Prefetch::Off, Prefetch::Newest, Prefetch::Auto];

    /// Its name, as every client language spells it: `off`, `newest`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Prefetch::Off => "off",
            Prefetch::Newest => "newest",
            Prefetch::Auto => "auto",
        }
    }

    /// The policy named `name`; for any other word, what to write instead (every client
    /// language's error says the same).
    pub fn parse(name: &str) -> Result<Prefetch, String> {
        Prefetch::ALL
            .into_iter()
            .find(|policy| policy.name() == name)
            .ok_or_else(|| format!("{name:?} is no prefetch policy: off, newest or auto"))
    }

    /// Whether a connection with this policy and this `tape` is pushed the newest item now.
    pub fn pushes_newest(self, tape: &Tape) -> bool {
        match self {
            Prefetch::Off => false,
            Prefetch::Newest => true,
            Prefetch::Auto => match tape.pattern() {
                Pattern::Skipping => true,
                Pattern::Unknown => tape.reads_newest(),
                _ => false,
            },
        }
    }
}

impl std::fmt::Display for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a node tells a connection with prefetch on about one put of its channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Notice {
    /// The put's timestamp.
    pub ts: Timestamp,
    /// The newest timestamp the channel held just after the put (the put's, unless it came out
    /// of order).
    pub newest: Timestamp,
    /// Whether the put's item travels with the notice (then it was unseen on the connection and
    /// had no reference count).
    pub pushed: bool,
}

/// A connection's prefetch as a node reports it (a graph's connections).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Pushes {
    pub policy: Prefetch,
    /// Put notices sent (each a message, with or without its item); items pushed ahead of a get,
    /// and those a get used (Tapeworm's "updates used").
    pub notices: u64,
    pub pushed: u64,
    pub used: u64,
}

/// The node's side for one connection: whether to push a put's item, and what its pushes came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pusher {
    /// When the channel's previous put came (µs) and the mean time between its puts.
    last_put_us: Option<u64>,
    put_interval_us: Option<u64>,
    /// Notices sent, items pushed, and those the client said it used.
    pub notices: u64,
    pub pushed: u64,
    pub used: u64,
    /// The item pushed last, while no notice said it is not the newest any more.
    unread: Option<Timestamp>,
}

/// Weight of the newest put interval in the mean (1/`PUT_INTERVAL_WEIGHT`).
const PUT_INTERVAL_WEIGHT: u64 = 4;

impl Pusher {
    /// Whether to push the item of a put made at `now_us` (`bytes` long) to a connection with
    /// `policy` whose tape is `tape`: when the policy pushes the newest item now, the item fits
    /// [`PUSH_BYTES_MAX`], and the connection's next get is expected before the channel's next
    /// put — from the tape's last read and its interval, and the mean interval between puts — or,
    /// with `newest`, either is not known yet. Records the put's time either way. What is then sent is
    /// [`sends`](Self::sends)'s.
    pub fn on_put(&mut self, policy: Prefetch, tape: &Tape, bytes: usize, now_us: u64) -> bool {
        self.pushes(policy, tape, bytes, now_us)
    }

    /// What a put sends the connection, given the item it would push (`pushed`: its timestamp, if
    /// it would push one) and the channel's newest timestamp after it: `Some(true)` the item with
    /// its notice (only the newest item is pushed: an older one would never be answered);
    /// `Some(false)` a notice alone, when the item pushed last is no longer the newest (so the
    /// client's cache answers it no more, and a get waiting there asks the node); `None` nothing.
    pub fn sends(&mut self, pushed: Option<Timestamp>, newest: Timestamp) -> Option<bool> {
        let sent = match (pushed.filter(|&ts| ts == newest), self.unread) {
            (Some(ts), _) => {
                self.unread = Some(ts);
                Some(true)
            }
            (None, Some(held)) if newest > held => {
                self.unread = None;
                Some(false)
            }
            (None, _) => None,
        };
        self.pushed += u64::from(sent == Some(true));
        self.notices += u64::from(sent.is_some());
        sent
    }

    /// Whether the put's item is pushed ([`on_put`](Self::on_put)).
    fn pushes(&mut self, policy: Prefetch, tape: &Tape, bytes: usize, now_us: u64) -> bool {
        if let Some(last) = self.last_put_us {
            let interval = now_us.saturating_sub(last);
            let mean = self
                .put_interval_us
                .map_or(interval, |mean| (mean * (PUT_INTERVAL_WEIGHT - 1) + interval) / PUT_INTERVAL_WEIGHT);
            self.put_interval_us = Some(mean);
        }
        self.last_put_us = Some(now_us);
        if !policy.pushes_newest(tape) || bytes > PUSH_BYTES_MAX {
            return false;
        }
        let next_get = tape.last_read_us().zip(tape.interval_us()).map(|(last, every)| last.saturating_add(every));
        match (next_get, self.put_interval_us) {
            (Some(next_get), Some(every)) => next_get <= now_us.saturating_add(every),
            // Nothing to predict from yet: `newest` pushes every put, `auto` waits for a
            // second read (a slow reader would otherwise be pushed every frame until then).
            _ => policy == Prefetch::Newest,
        }
    }

    /// The client used a pushed item (it answered a get). The next newer put is still told of:
    /// a client that read the pushed item waits for that notice ([`PushCache::waits`]).
    pub fn used(&mut self) {
        self.used = (self.used + 1).min(self.pushed);
    }
}

/// The client's side for one connection: the pushed item it holds, what the notices said, and
/// what this connection has read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushCache<P> {
    /// The newest timestamp any notice said the channel held.
    newest: Option<Timestamp>,
    /// The pushed item, unread ([`PUSH_ITEMS_MAX`]).
    item: Option<(Timestamp, P)>,
    /// The timestamp of the latest push heard.
    pushed: Option<Timestamp>,
    /// The highest timestamp a get of this connection returned or a consume named.
    seen: Option<Timestamp>,
    /// Gets answered here, and notices received.
    pub hits: u64,
    pub notices: u64,
}

impl<P> Default for PushCache<P> {
    fn default() -> Self {
        PushCache { newest: None, item: None, pushed: None, seen: None, hits: 0, notices: 0 }
    }
}

impl<P> PushCache<P> {
    /// A notice arrived, with the pushed item's payload when it was pushed. A pushed item replaces
    /// an older one unread (which the reader would skip).
    pub fn noticed(&mut self, notice: Notice, payload: Option<P>) {
        self.notices += 1;
        self.newest = self.newest.max(Some(notice.newest));
        if notice.pushed {
            self.pushed = Some(notice.ts);
        }
        if let (true, Some(payload)) = (notice.pushed, payload) {
            let newer = self.item.as_ref().is_none_or(|(held, _)| notice.ts > *held);
            if newer && self.unseen(notice.ts) {
                self.item = Some((notice.ts, payload));
            }
        }
        debug_assert!(self.item.as_ref().is_none_or(|(ts, _)| self.unseen(*ts)));
    }

    /// A get of this connection returned `ts`, or a consume named it (or everything up to it).
    pub fn seen(&mut self, ts: Timestamp) {
        self.seen = self.seen.max(Some(ts));
        if self.item.as_ref().is_some_and(|(held, _)| !self.unseen(*held)) {
            self.item = None;
        }
    }

    /// The answer to a `NEWEST_UNSEEN` get, if the cache may give it (the module's rule); the
    /// item leaves the cache and counts as seen.
    pub fn newest_unseen(&mut self) -> Option<(Timestamp, P)> {
        let ts = self.item.as_ref().map(|(ts, _)| *ts)?;
        if Some(ts) != self.newest || !self.unseen(ts) {
            return None;
        }
        self.hits += 1;
        self.seen = Some(ts);
        self.item.take()
    }

    /// This client put `ts` into the channel (or may have: its reply was lost): the channel holds
    /// it, as a notice would say — so a get after the put, in the same client, is never answered
    /// with an older item.
    pub fn put_here(&mut self, ts: Timestamp) {
        self.newest = self.newest.max(Some(ts));
    }

    /// Notices were dropped on their way: forget what they said, and the pushed item (what this
    /// connection read stays known).
    pub fn reset(&mut self) {
        (self.newest, self.item, self.pushed) = (None, None, None);
    }

    /// Whether a get may wait here for the node's next message instead of asking the node: the
    /// newest item the notices told of is the one pushed last, and this connection read exactly
    /// it — then the node sends a notice (or a push) at the next put newer than it
    /// ([`Pusher::sends`]), and nothing newer was put before.
    pub fn waits(&self) -> bool {
        self.item.is_none() && self.newest.is_some() && self.newest == self.pushed && self.seen == self.newest
    }

    fn unseen(&self, ts: Timestamp) -> bool {
        self.seen.is_none_or(|seen| ts > seen)
    }
}

#[cfg(test)]
mod tests;
