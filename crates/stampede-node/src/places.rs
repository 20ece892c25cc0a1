//! Places for connections that have not proven a session yet, bounded in all and per source
//! address: the direct path's and the WebSocket endpoint's listeners hold each new connection in
//! one until it proves a session (docs/SECURITY.md, "Nothing before a session costs the node
//! much"). A place is given back when dropped, whatever ends the connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// The places of one listener (or of several that share their bounds).
pub(crate) struct Unproven {
    all_max: usize,
    per_source_max: usize,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    all: usize,
    by_source: HashMap<IpAddr, usize>,
}

impl Unproven {
    /// At most `all_max` places in all, `per_source_max` for one source address.
    pub(crate) fn new(all_max: usize, per_source_max: usize) -> Arc<Unproven> {
        Arc::new(Unproven { all_max, per_source_max, counts: Mutex::default() })
    }

    /// A place for a new connection from `source` (`None`: a Unix socket, counted in all only),
    /// if there is one.
    pub(crate) fn place(self: &Arc<Self>, source: Option<IpAddr>) -> Option<UnprovenPlace> {
        let mut counts = self.counts.lock();
        let from_source = source.map_or(0, |source| counts.by_source.get(&source).copied().unwrap_or(0));
        if counts.all >= self.all_max || from_source >= self.per_source_max {
            return None;
        }
        counts.all += 1;
        if let Some(source) = source {
            counts.by_source.insert(source, from_source + 1);
        }
        Some(UnprovenPlace { unproven: self.clone(), source })
    }
}

/// A connection's place among the unproven ones, given back when dropped.
pub(crate) struct UnprovenPlace {
    unproven: Arc<Unproven>,
    source: Option<IpAddr>,
}

impl Drop for UnprovenPlace {
    fn drop(&mut self) {
        let mut counts = self.unproven.counts.lock();
        counts.all -= 1;
        if let Some(source) = self.source {
            if let Some(from_source) = counts.by_source.get_mut(&source) {
                *from_source -= 1;
                if *from_source == 0 {
                    counts.by_source.remove(&source);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_in_all_and_per_source_and_given_back() {
        let unproven = Unproven::new(3, 2);
        let (a, b) = (Some(IpAddr::from([10, 0, 0, 1])), Some(IpAddr::from([10, 0, 0, 2])));
        let first = unproven.place(a).expect("a place");
        let _second = unproven.place(a).expect("a second from the same source");
        assert!(unproven.place(a).is_none(), "two per source");
        let _third = unproven.place(b).expect("another source");
        assert!(unproven.place(None).is_none(), "three in all");
        drop(first);
        assert!(unproven.place(a).is_some(), "a place given back is free again");
    }
}
