//! What each push event's notice was sent beside: the newest timestamp the node's channel held
//! when the node made it (read from the channel itself, not from the notice). A prefetch cache
//! may answer a get only with the newest item its notices told of (docs/PREFETCH.md, "When a
//! cache may answer"), so the world checks each answer: the item was the channel's newest when
//! the node made the event that told the cache so, and if the channel holds a newer item now, the
//! node has made a later event for the session since (a notice on its way, or lost and followed
//! by a reset) — a put whose notice is still on its way may be missed, no other. Together with the
//! oracle's check that the item is still unseen on its connection, this is the rule that puts a
//! cache answer in the channel's one serial order.

use std::collections::HashMap;

use stampede_core::Timestamp;

/// The channel's newest timestamp when each session's push event was made, by session and event
/// number (`None`: the channel held nothing).
#[derive(Default)]
pub(super) struct Notices {
    newest: HashMap<(String, u64), Option<Timestamp>>,
    /// The number of each session's latest event.
    latest: HashMap<String, u64>,
    /// Cache answers checked against the notice that told them.
    pub(super) checked: u64,
}

impl Notices {
    /// Session `session`'s push event `seq` was made while the channel's newest was `newest`.
    pub(super) fn made(&mut self, session: &str, seq: u64, newest: Option<Timestamp>) {
        self.newest.insert((session.to_owned(), seq), newest);
        let latest = self.latest.entry(session.to_owned()).or_default();
        *latest = (*latest).max(seq);
    }

    /// A cache of `session` answered with the item at `ts`, told it was the newest by push event
    /// `told` (`None`: by the client's own put, which the world does not follow), while the
    /// channel's newest on the node is `now`: `Err` unless the channel's newest was `ts` when the
    /// node made that event, and a later event was made if `now` is newer.
    pub(super) fn answered(
        &mut self,
        session: &str,
        told: Option<u64>,
        ts: Timestamp,
        now: Option<Timestamp>,
    ) -> Result<(), String> {
        let Some(seq) = told else { return Ok(()) };
        let Some(&newest) = self.newest.get(&(session.to_owned(), seq)) else {
            return Err(format!("a cache of session {session} relied on push event #{seq}, which no node made"));
        };
        self.checked += 1;
        if newest != Some(ts) {
            return Err(format!(
                "a cache of session {session} answered the item at {ts}, told it was the newest by push event \
                 #{seq}, when the channel's newest on the node was {newest:?}"
            ));
        }
        let latest = self.latest.get(session).copied().unwrap_or_default();
        if now > Some(ts) && latest <= seq {
            return Err(format!(
                "a cache of session {session} answered the item at {ts} (push event #{seq}), the channel holds \
                 {now:?}, and the node made no event for the session since"
            ));
        }
        Ok(())
    }
}
