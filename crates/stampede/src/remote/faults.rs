//! Faults a test injects into a client (feature `faults`, for tests only): replies the client
//! drops on arrival, as if the fabric had lost them after the node sent them.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Drops the next `count` replies to requests of operation `op` (`"put"`, `"get"`, …) that reach
/// this client.
#[derive(Debug)]
pub struct LoseReplies {
    op: &'static str,
    left: AtomicUsize,
}

impl LoseReplies {
    pub fn new(op: &'static str, count: usize) -> LoseReplies {
        LoseReplies { op, left: AtomicUsize::new(count) }
    }

    /// Whether to drop a reply to `op` that arrived (counting it).
    pub(crate) fn lose(&self, op: &'static str) -> bool {
        op == self.op && self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    }

    /// How many of the replies it was to drop are still to come.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::SeqCst)
    }
}

/// Two fault injections are equal only if they are the same one.
impl PartialEq for LoseReplies {
    fn eq(&self, other: &LoseReplies) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for LoseReplies {}
