//! Ending a session: early, after a lost or late reply (the liveliness token goes, so the node
//! closes the session and takes back what it held), or by closing the client.
//!
//! Closing is idempotent; once it returns, the node has closed the session (or will, when the
//! token's disappearance reaches it) and no GC handler of this client runs any more.

use std::sync::atomic::Ordering;

use stampede_wire::{encode, Request};
use zenoh::Wait;

use crate::remote::QUERY_MARGIN;

use super::{blocking, Client};

impl Client {
    /// Ends the session after a lost reply: the token goes, so the node closes the session.
    pub(super) fn end(&self, reason: String) {
        self.ended.lock().get_or_insert(reason);
        if let Some(direct) = &self.direct {
            direct.close();
        }
        self.send_close();
        self.token.lock().take();
    }

    fn send_close(&self) {
        let message = encode(&self.header(None, Request::Close));
        let _ = self.zenoh.get(&self.rpc_key).payload(message).timeout(QUERY_MARGIN).callback(|_| {}).wait();
    }

    /// Ends the session and leaves the fabric. Idempotent.
    pub(crate) fn close(&self) {
        if !self.is_closed() && self.ended.lock().is_none() {
            self.exchange_trace_clocks(true);
        }
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.stop_sending_consumes();
        if let Some(direct) = &self.direct {
            // A call waiting on the node's reply returns `Closed` at once, as on zenoh.
            direct.close();
        }
        blocking(|| self.leave());
    }

    fn leave(&self) {
        if self.ended.lock().is_none() {
            let message = encode(&self.header(None, Request::Close));
            // Wait for the node to close the session, so that its effects (claims released) are
            // visible when close returns; the token going would do it too, a little later.
            if let Ok(replies) = self.zenoh.get(&self.rpc_key).payload(message).timeout(QUERY_MARGIN).wait() {
                let _ = replies.recv();
            }
            let dispatch = self.reclaims.lock().clone();
            if let Some(dispatch) = dispatch {
                // The handlers of items the closing reclaimed run before close returns.
                dispatch.barrier();
            }
        }
        self.token.lock().take();
        // No handler runs after close returns; the reclaim subscriber goes with the zenoh
        // session, and the dispatcher thread then ends.
        if let Some(dispatch) = self.reclaims.lock().take() {
            dispatch.close();
        }
        let _ = self.zenoh.close().wait();
    }
}
