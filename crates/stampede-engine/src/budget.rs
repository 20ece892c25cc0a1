//! Byte budgets: how many live payload bytes the sessions of a node may hold, all together and
//! each (docs/LIMITS.md, "Byte budgets"), so that one client putting into a channel nobody reads
//! cannot grow the node until the kernel kills it.
//!
//! A put through a session first takes a `Charge` of its payload's size against the session's
//! [`Budget`] and the node's; the charge travels inside the item's bytes and is given back when
//! the last reference to them drops — when the item is reclaimed (or moved to the disk tier) and
//! no reply still carries it. A session that ends leaves its items charged to the node alone (its
//! own budget goes with it). A put that does not fit waits for room (a reclaim anywhere wakes
//! it), then fails `Full` naming the budget; one larger than a budget fails at once.
//!
//! Guarantees: a budget's live bytes never exceed its maximum (reservations are one atomic
//! compare-and-swap each, taken in a fixed order and undone on failure), and every byte charged is
//! given back exactly once (by the charge's drop).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use stampede_core::{BudgetUse, Error, Result, Timestamp};

use crate::wait::Signal;

/// Smallest budget accepted (a budget below it could not hold one frame of a small camera).
pub const BUDGET_BYTES_MIN: u64 = 64 * 1024;

/// One budget: its live bytes against its maximum.
#[derive(Debug)]
pub struct Budget {
    /// What the budget is, as errors and stats name it (`"the node's max_live_bytes"`).
    what: &'static str,
    max: u64,
    live: AtomicU64,
}

impl Budget {
    /// A budget of `max` bytes; `InvalidArgument` below [`BUDGET_BYTES_MIN`].
    pub fn new(what: &'static str, max: u64) -> Result<Arc<Budget>> {
        if max < BUDGET_BYTES_MIN {
            let reason = format!("{max} bytes is below BUDGET_BYTES_MIN ({BUDGET_BYTES_MIN}); give a larger budget");
            return Err(Error::InvalidArgument { op: "budget", name: what.into(), reason });
        }
        Ok(Arc::new(Budget { what, max, live: AtomicU64::new(0) }))
    }

    /// Live bytes charged now.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Acquire)
    }

    /// The most live bytes it allows.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Adds `bytes` if they fit; `false` (nothing added) if not.
    fn reserve(&self, bytes: u64) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                live.checked_add(bytes).filter(|&after| after <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        let before = self.live.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "{} gave back {bytes} bytes of its {before}", self.what);
    }
}

/// The node-wide budget of a runtime's sessions, and the signal its puts wait on for room.
pub struct NodeBudget {
    node: Arc<Budget>,
    /// Notified whenever a charge is given back.
    freed: Arc<Signal>,
}

impl NodeBudget {
    /// A node-wide budget of `max` bytes.
    pub fn new(max: u64) -> Result<Arc<NodeBudget>> {
        Ok(Arc::new(NodeBudget { node: Budget::new("the node's max_live_bytes", max)?, freed: Arc::default() }))
    }

    /// The node's budget.
    pub fn node(&self) -> &Budget {
        &self.node
    }

    /// The budget of one session of this node, of `max` bytes (at most the node's).
    pub fn session(self: &Arc<Self>, max: u64) -> Result<SessionBudget> {
        let session = Budget::new("the session's max_session_live_bytes", max.min(self.node.max))?;
        Ok(SessionBudget { node: self.clone(), session })
    }
}

/// A session's budget beside its node's.
pub struct SessionBudget {
    node: Arc<NodeBudget>,
    session: Arc<Budget>,
}

impl SessionBudget {
    /// The session's own budget.
    pub fn session(&self) -> &Budget {
        &self.session
    }

    /// The node's budget.
    pub fn node(&self) -> &Budget {
        &self.node.node
    }

    /// Both budgets' live bytes against their maximums now.
    pub fn usage(&self) -> BudgetUse {
        BudgetUse {
            node_live_bytes: self.node().live(),
            node_max_bytes: self.node().max(),
            session_live_bytes: self.session.live(),
            session_max_bytes: self.session.max(),
        }
    }

    /// What a put's waits listen to: a charge given back anywhere on the node.
    pub(crate) fn freed(&self) -> &Signal {
        &self.node.freed
    }

    /// Charges `bytes` for a put at `ts` into `name` to this session and its node: `Full` when
    /// they do not fit now (waiting may help: `can_never_fit` is false), or can never fit (more
    /// than a budget's maximum).
    pub(crate) fn charge(&self, name: &str, ts: Timestamp, bytes: usize) -> Result<Charge> {
        let bytes = bytes as u64;
        let full = |budget: &Budget, can_never_fit: bool| Error::Full {
            name: name.to_owned(),
            ts,
            reason: format!(
                "{bytes} bytes do not fit {} ({} of {} bytes live){}",
                budget.what,
                budget.live(),
                budget.max,
                if can_never_fit { "" } else { ": the session's items are not being reclaimed (consume them)" }
            ),
            can_never_fit,
        };
        for budget in [&self.session, &self.node.node] {
            if bytes > budget.max {
                return Err(full(budget, true));
            }
        }
        if !self.session.reserve(bytes) {
            return Err(full(&self.session, false));
        }
        if !self.node.node.reserve(bytes) {
            self.session.give_back(bytes);
            return Err(full(&self.node.node, false));
        }
        Ok(Charge { session: self.session.clone(), node: self.node.clone(), bytes })
    }
}

/// Bytes charged to a session and its node, given back when dropped.
pub(crate) struct Charge {
    session: Arc<Budget>,
    node: Arc<NodeBudget>,
    bytes: u64,
}

impl Charge {
    /// `data` carrying this charge: it is given back when the last reference to the bytes drops.
    pub(crate) fn carried_by(self, data: Bytes) -> Bytes {
        Bytes::from_owner(Charged { data, _charge: self })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.session.give_back(self.bytes);
        self.node.node.give_back(self.bytes);
        self.node.freed.notify();
    }
}

/// An item's bytes with the charge they carry.
struct Charged {
    data: Bytes,
    _charge: Charge,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn a_charge_is_given_back_when_its_bytes_drop() {
        let node = NodeBudget::new(256 * KIB).unwrap();
        let (a, b) = (node.session(128 * KIB).unwrap(), node.session(128 * KIB).unwrap());
        let bytes = a.charge("cam", 1, 100 * 1024).unwrap().carried_by(Bytes::from(vec![0; 100 * 1024]));
        let view = bytes.slice(10..20);
        assert_eq!((a.session().live(), node.node().live()), (100 * KIB, 100 * KIB));
        // a's own budget is full; b still has room on the node.
        let Err(Error::Full { reason, can_never_fit: false, .. }) = a.charge("cam", 2, 64 * 1024) else {
            panic!("a's budget is full")
        };
        assert!(reason.contains("max_session_live_bytes"), "{reason}");
        let other = b.charge("cam", 2, 100 * 1024).unwrap();
        // The node's budget: 200 of 256 KiB; 64 KiB more does not fit it.
        let Err(Error::Full { reason, .. }) = b.charge("cam", 3, 64 * 1024) else { panic!("the node is full") };
        assert!(reason.contains("max_session_live_bytes"), "b's own 128 KiB budget first: {reason}");
        drop(bytes);
        assert_eq!(a.session().live(), 100 * KIB, "a view still holds the bytes");
        drop(view);
        drop(other);
        assert_eq!((a.session().live(), b.session().live(), node.node().live()), (0, 0, 0));
    }

    #[test]
    fn a_put_larger_than_a_budget_can_never_fit() {
        let node = NodeBudget::new(256 * KIB).unwrap();
        let session = node.session(1 << 40).unwrap();
        assert_eq!(session.session().max(), 256 * KIB, "a session's budget is at most the node's");
        let Err(Error::Full { can_never_fit: true, .. }) = session.charge("cam", 1, 300 * 1024) else {
            panic!("never fits")
        };
        assert_eq!(node.node().live(), 0);
        assert!(matches!(NodeBudget::new(1), Err(Error::InvalidArgument { .. })));
    }
}
