//! Giving back what a get opened when its reply never reached the client: the node's release of
//! a numbered request (docs/NODES.md, "A call's timeout"). A released get leaves the connection
//! as if it had not run: each item it opened that is still open there is unseen again, so the
//! next `*_UNSEEN` get returns it; nothing else changes (the connection's claim on ts_min is
//! `min(unseen ∪ open)`, the same before and after). An item the get returned that was open
//! before it ran stays open: the node asks [`ChannelState::open_for`] before a get runs, and
//! gives back only what the get opened.

use super::{ChannelState, ConnId};
use crate::effects::{Effects, OpenChange};
use crate::time::{Selector, Timestamp};

impl ChannelState {
    /// The timestamps open on `conn` that a get with `selector` (or, with `range`, a
    /// `get_range(t0, t1)`) could return again without opening them: what it would not have
    /// opened, were it to run now. Empty for an `*_UNSEEN` get, which returns only unseen items.
    pub fn open_for(&self, conn: ConnId, selector: Selector, range: Option<(Timestamp, Timestamp)>) -> Vec<Timestamp> {
        let Some(input) = self.inputs.get(&conn) else { return Vec::new() };
        if let Some((t0, t1)) = range {
            return match t0 <= t1 {
                true => input.open.range(t0..=t1).copied().collect(),
                false => Vec::new(),
            };
        }
        let open = match selector {
            Selector::At(ts) => input.open.get(&ts),
            Selector::Oldest => input.open.first(),
            Selector::Newest => input.open.last(),
            Selector::OldestUnseen | Selector::NewestUnseen => None,
        };
        open.copied().into_iter().collect()
    }

    /// Gives back on `conn` the items at `ts` a released get returned: each still open there
    /// becomes unseen. Returns how many went back (none for a detached connection, or items
    /// consumed or reclaimed since).
    pub fn give_back(&mut self, conn: ConnId, ts: &[Timestamp], fx: &mut Effects) -> usize {
        let Some(input) = self.inputs.get_mut(&conn) else { return 0 };
        let before = input.claim();
        let task = input.task;
        let mut back = 0;
        for &ts in ts {
            if input.open.remove(&ts) {
                input.unseen.insert(ts);
                fx.opens.push(OpenChange { task, ts, opened: false });
                back += 1;
            }
        }
        debug_assert_eq!(input.claim(), before, "giving back never moves a claim");
        back
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::channel::{ChannelState, Limits, Retention};
    use crate::effects::Effects;
    use crate::item::Payload;
    use crate::task::TaskState;
    use crate::time::{Selector, Timestamp};

    const OUTPUT: u64 = 1;
    const READER: u64 = 2;

    /// A get released after it ran: its item is unseen again (an `OLDEST_UNSEEN` reader gets it
    /// next, nothing is skipped), its claim unchanged; an item consumed since stays consumed.
    #[test]
    fn a_released_get_leaves_its_item_unseen() {
        let mut ch = ChannelState::new(Arc::from("cam"), Limits::unbounded(), Retention::History);
        ch.attach_output(OUTPUT, 1).unwrap();
        ch.attach_input(READER, 2, 0, Default::default()).unwrap();
        let producer = TaskState::new(1, 0).0;
        for ts in 1..=3 {
            let payload = Payload::from(bytes::Bytes::from_static(b"x"));
            ch.put(OUTPUT, &producer, ts, payload, None, &mut Effects::default()).unwrap();
        }
        let mut fx = Effects::default();
        let first = ch.get(READER, Selector::OldestUnseen, 0, || 0, &mut fx).unwrap();
        assert_eq!(first.ts, 1);
        let claim = ch.input_claim(READER);
        let mut back = Effects::default();
        assert_eq!(ch.give_back(READER, &[1], &mut back), 1);
        assert_eq!(back.opens.len(), 1);
        assert!(!back.opens[0].opened);
        assert_eq!(ch.input_claim(READER), claim);
        assert_eq!(ch.get(READER, Selector::OldestUnseen, 0, || 0, &mut fx).unwrap().ts, 1, "it comes again");
        ch.consume(READER, 1, 0, &mut fx).unwrap();
        assert_eq!(ch.give_back(READER, &[1], &mut Effects::default()), 0, "a consumed item stays consumed");
        assert_eq!(ch.give_back(99, &[2], &mut Effects::default()), 0, "no such connection");
        assert_eq!(ch.get(READER, Selector::OldestUnseen, 0, || 0, &mut fx).unwrap().ts, 2);
        assert_eq!(ch.open_for(READER, Selector::Oldest, None), vec![2], "what an OLDEST get would return again");
        assert_eq!(ch.open_for(READER, Selector::At(3), None), Vec::<Timestamp>::new(), "3 is unseen: a get opens it");
        assert_eq!(ch.open_for(READER, Selector::NewestUnseen, None), Vec::<Timestamp>::new());
        assert_eq!(ch.open_for(READER, Selector::Newest, Some((1, 3))), vec![2]);
    }
}
