//! A prefetching reader of the simulation, as the client's rules make it (docs/PREFETCH.md): its
//! cache's answers (`stampede_core::PushCache`, within `cache_may_answer`'s share of the lease,
//! reported by the next request) and its consumes of those answers deferred into its requests
//! (`stampede_wire::session::Deferred`, only when it consumes often, carried until a reply
//! confirms them, sent by a call of their own once due).

use std::time::Duration;

use stampede_core::Op;
use stampede_wire::session::cache_may_answer;
use stampede_wire::session::deferred::{due_us, worth_deferring};
use stampede_wire::Request;

use super::{Held, Next, Purpose, Role, Side, SimClient};

impl SimClient {
    /// A prefetching reader's consume of the item it holds, deferred into the session's requests
    /// (a channel without bounds, room in the list, as the client does); a call that carries the
    /// deferred consumes once the oldest is due.
    pub(super) fn defer_consume(&mut self, now: u64) -> Option<Next> {
        if !self.prefetching || self.role != Role::ChannelReader {
            return None;
        }
        let conn = self.conn.as_mut()?;
        if let (Some(held), Some(connection)) = (self.held.clone(), conn.connection) {
            let since = conn.last_consume_us.replace(now).map(|at| Duration::from_micros(now.saturating_sub(at)));
            // Otherwise the item held is consumed by a request of its own (`next_request`): one a
            // get opened on the node holds its task's visibility back until the consume arrives.
            if worth_deferring(since) && held.cached && conn.consumed.may_defer() {
                self.held = None;
                conn.cache.seen(held.ts);
                conn.consumed.defer(connection, held.ts, true, now);
            }
        }
        if conn.consumed.since().is_none_or(|since| now < due_us(since)) {
            return None;
        }
        conn.consumed.sent(now);
        let request = Request::Op(Op::TsMin);
        Some(Next::Call { side: Side::Containers, request, payload: Vec::new(), purpose: Purpose::SendConsumes })
    }

    /// The cache's answer to a prefetching reader's next get at `now`, if the rules allow one:
    /// the session open, a get of its connection served within the lease's share, room to report the answer, and
    /// the cache's own rule.
    pub(super) fn cached(&mut self, now: u64) -> Option<Next> {
        if !self.prefetching || self.held.is_some() {
            return None;
        }
        let conn = self.conn.as_mut()?;
        let connection = conn.connection?;
        let since = Duration::from_micros(now.saturating_sub(conn.served_at?));
        let lease = conn.protocol.lease();
        if conn.ended || conn.closed || !cache_may_answer(lease, since) || !conn.opened.may_answer() {
            return None;
        }
        let (ts, (item, payload)) = conn.cache.newest_unseen()?;
        conn.opened.answered(connection, ts, now);
        self.progress += 1;
        self.held = Some(Held { seq: None, ts, cached: true });
        let told = conn.told.filter(|&(newest, _)| newest == ts).map(|(_, seq)| seq);
        Some(Next::Cached { connection, item, payload, told })
    }
}
