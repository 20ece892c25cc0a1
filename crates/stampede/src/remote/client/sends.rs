//! Requests sent without waiting for their replies (drops, detaches, pipelined puts), and waiting
//! for them to be applied before the next call.
//!
//! A call made after a send sees the send's effect on the node, as embedded: the replies of the
//! sends made as zenoh queries (at most [`UNFINISHED_SENDS_MAX`] unfinished) are waited for first,
//! and a call made as a zenoh query first waits until the node applied the direct path's sends (a
//! call on the direct path follows them on their connection).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::remote::direct::OnReply;
use crate::remote::QUERY_MARGIN;
use stampede_wire::{encode, Op, Request};
use zenoh::query::ConsolidationMode;
use zenoh::Wait;

use super::{blocking, Client};

/// Most requests sent without waiting (drops) whose replies are not yet waited for; one more
/// waits for them first.
const UNFINISHED_SENDS_MAX: usize = 256;

impl Client {
    /// Sends `request` without waiting for its reply (drops and detaches).
    pub(crate) fn send(&self, op: Op) {
        if self.check_open(op.name()).is_err() {
            return;
        }
        blocking(|| self.send_now(op.into()));
    }

    fn send_now(&self, request: Request) {
        if let Some(direct) = self.direct_path() {
            // A send that fails is as one whose query fails: the node goes or is gone (what its
            // header carried is carried by every request until a reply confirms it).
            let _ = direct.send(&[&encode(&self.header(None, request))], None, None);
            return;
        }
        if self.unfinished.lock().len() >= UNFINISHED_SENDS_MAX {
            self.finish_sends(None);
        }
        let message = encode(&self.header(None, request));
        let query = self.zenoh.get(&self.rpc_key).payload(message).consolidation(ConsolidationMode::None);
        if let Ok(replies) = query.timeout(QUERY_MARGIN).wait() {
            self.unfinished.lock().push(replies);
        }
    }

    /// Whether a put may be sent without waiting for its reply now (`remote/pipeline.rs`): only on
    /// the direct path, whose connection the node serves in order.
    pub(crate) fn pipelines(&self) -> bool {
        self.check_open("put").is_ok() && self.direct_path().is_some_and(|direct| direct.usable())
    }

    /// Sends a pipelined put `op` with its `payload` on the direct path without waiting for its
    /// reply, which a later call reads and hands to `on_reply`. `None`: the requests go as zenoh
    /// queries now (a query may be overtaken by the next), and the put is the caller's to make as
    /// a call. `Some(Err)`: it may not have reached the node.
    pub(crate) fn send_put(
        &self,
        op: Op,
        payload: &Bytes,
        on_reply: OnReply,
    ) -> Option<std::result::Result<(), String>> {
        let direct = self.direct_path().filter(|direct| direct.usable())?;
        let header = encode(&self.header(None, op.into()));
        // A large payload to a node on this host goes as a shared-memory segment, as a call's.
        let passed = direct.segment_of(payload);
        let parts: &[&[u8]] = match &passed {
            None => &[&header, payload],
            Some(_) => &[&header],
        };
        Some(blocking(|| direct.send(parts, passed.as_ref().map(|(d, _)| d.as_fd()), on_reply)))
    }

    /// Unless `done`, reads one reply owed on the direct path, or waits at most `timeout` for
    /// another call to (see [`Direct::read_one_owed`](crate::remote::direct::Direct::read_one_owed)).
    pub(crate) fn read_one_owed(&self, done: impl Fn() -> bool + Send, timeout: Duration) {
        if let Some(direct) = &self.direct {
            blocking(|| direct.read_one_owed(done, timeout));
        }
    }

    /// Waits for the replies of the requests sent without waiting (drops), each at most until
    /// its query times out, and all of them at most until `until` if given: a call made after a
    /// drop sees the drop's effect on the node, as embedded, although the node serves requests
    /// concurrently. `false`: some were not answered by `until` (they are waited for again by the
    /// next call).
    pub(super) fn finish_sends(&self, until: Option<Instant>) -> bool {
        let mut unfinished = std::mem::take(&mut *self.unfinished.lock()).into_iter();
        for replies in unfinished.by_ref() {
            // One reply, or the query's end without one: the node applied the send, or never will.
            let answered = match until {
                None => {
                    let _ = replies.recv();
                    true
                }
                Some(until) => !matches!(replies.recv_deadline(until), Ok(None)),
            };
            if !answered {
                let mut kept = self.unfinished.lock();
                let later = std::mem::take(&mut *kept);
                kept.extend(std::iter::once(replies).chain(unfinished).chain(later));
                return false;
            }
        }
        true
    }

    /// Waits until the node applied the sends of the direct path, for a request that does not
    /// follow them on their connection (a zenoh query).
    pub(super) fn finish_direct_sends(&self) {
        if let Some(direct) = &self.direct {
            direct.finish_sends(QUERY_MARGIN);
        }
    }

    /// [`finish_sends`](Self::finish_sends) without blocking a thread.
    pub(super) async fn finish_sends_async(&self) {
        let unfinished = std::mem::take(&mut *self.unfinished.lock());
        for replies in unfinished {
            let _ = replies.recv_async().await;
        }
    }
}
