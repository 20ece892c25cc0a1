//! A bound on how far one input connection may fall behind its channel (docs/SEMANTICS.md,
//! "Slow readers: max_lag").
//!
//! Guarantees: after every put and attach, an input connection with a bound holds at most
//! `max_lag_items` unseen items, and none more than `max_lag_ts` below the channel's newest item.
//! Only *unseen* items are ever let go: an item the reader has gotten (open) stays until it
//! consumes it. Each item let go counts as that connection's consumption (against reference
//! counts, as `consume` does) and in its `skipped` counter; the claim it held on ts_min goes with
//! it. Without a bound nothing changes.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::time::Timestamp;

/// An input connection's options: how far it may fall behind (`None` fields are unbounded, the
/// default), and what its node pushes ahead of its gets when it is remote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputOptions {
    /// At most this many unseen items; older ones are skipped. At least 1.
    pub max_lag_items: Option<usize>,
    /// No unseen item more than this timestamp distance below the channel's newest item.
    pub max_lag_ts: Option<u64>,
    /// A remote connection's prefetch policy (`crate::prefetch`); `None`: its runtime's default
    /// (`auto`, unless the client was connected with another). An embedded connection reads
    /// memory it shares with the producer: there is nothing to prefetch.
    pub prefetch: Option<crate::prefetch::Prefetch>,
}

impl InputOptions {
    /// `true` when either bound is set.
    pub fn bounded(&self) -> bool {
        self.max_lag_items.is_some() || self.max_lag_ts.is_some()
    }

    /// Refuses a bound no reader could live with (`InvalidArgument` naming the channel).
    pub fn check(&self, name: &str) -> Result<()> {
        if self.max_lag_items == Some(0) {
            return Err(Error::InvalidArgument {
                op: "attach_input",
                name: name.to_owned(),
                reason: "max_lag_items must be at least 1 (0 would skip every item as it is put)".into(),
            });
        }
        Ok(())
    }

    /// Takes the oldest unseen timestamps beyond the bound out of `unseen` (`newest`: the channel's
    /// newest item) and returns them, oldest first.
    pub(super) fn trim(&self, unseen: &mut BTreeSet<Timestamp>, newest: Option<Timestamp>) -> Vec<Timestamp> {
        let mut skipped = Vec::new();
        if !self.bounded() {
            return skipped;
        }
        while let Some(&oldest) = unseen.first() {
            let too_many = self.max_lag_items.is_some_and(|items| unseen.len() > items);
            let too_far = match (self.max_lag_ts, newest) {
                (Some(distance), Some(newest)) => newest.abs_diff(oldest) > distance,
                _ => false,
            };
            if !(too_many || too_far) {
                break;
            }
            unseen.pop_first();
            skipped.push(oldest);
        }
        skipped
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::channel::{ChannelState, Limits, Retention};
    use crate::effects::Effects;
    use crate::item::Payload;
    use crate::task::TaskState;
    use crate::time::Selector;

    const OUTPUT: u64 = 1;
    const READER: u64 = 2;

    fn channel_with_reader(options: InputOptions) -> (ChannelState, TaskState) {
        let mut ch = ChannelState::new(Arc::from("cam"), Limits::unbounded(), Retention::History);
        ch.attach_output(OUTPUT, 1).unwrap();
        ch.attach_input(READER, 2, 0, options).unwrap();
        (ch, TaskState::new(1, 0).0)
    }

    fn put(ch: &mut ChannelState, producer: &TaskState, ts: Timestamp, refcount: Option<u32>) -> Effects {
        let mut fx = Effects::default();
        ch.put(OUTPUT, producer, ts, Payload::from(bytes::Bytes::from_static(b"x")), refcount, &mut fx).unwrap();
        fx
    }

    #[test]
    fn a_bounded_reader_keeps_only_the_newest_unseen_items() {
        let options = InputOptions { max_lag_items: Some(3), max_lag_ts: None, ..Default::default() };
        let (mut ch, producer) = channel_with_reader(options);
        for ts in 0..10 {
            put(&mut ch, &producer, ts, None);
        }
        // Its claim on ts_min follows: the oldest it may still get is 7.
        assert_eq!(ch.input_claim(READER), Some(7));
        assert_eq!(ch.connection_stats(READER).unwrap().skipped, 7);
        let mut fx = Effects::default();
        let oldest = ch.get(READER, Selector::Oldest, 0, || 0, &mut fx).unwrap();
        assert_eq!(oldest.ts, 7);
        // What it has gotten stays open, whatever comes after.
        for ts in 10..20 {
            put(&mut ch, &producer, ts, None);
        }
        assert_eq!(ch.input_claim(READER), Some(7));
        assert!(ch.get(READER, Selector::At(7), 0, || 0, &mut fx).is_ok());
        assert_eq!(ch.connection_stats(READER).unwrap().skipped, 16);
    }

    #[test]
    fn a_skip_counts_against_reference_counts() {
        let options = InputOptions { max_lag_items: None, max_lag_ts: Some(5), ..Default::default() };
        let (mut ch, producer) = channel_with_reader(options);
        put(&mut ch, &producer, 0, Some(1));
        let fx = put(&mut ch, &producer, 6, None);
        // 0 is more than 5 below 6: skipped, which was its one consumption.
        assert_eq!(fx.reclaimed.iter().map(|item| item.ts).collect::<Vec<_>>(), vec![0]);
        assert_eq!(ch.timestamps(), vec![6]);
    }

    #[test]
    fn a_reader_attached_late_starts_within_its_bound() {
        let mut ch = ChannelState::new(Arc::from("cam"), Limits::unbounded(), Retention::History);
        ch.attach_output(OUTPUT, 1).unwrap();
        let producer = TaskState::new(1, 0).0;
        for ts in 0..10 {
            put(&mut ch, &producer, ts, None);
        }
        let options = InputOptions { max_lag_items: Some(2), max_lag_ts: None, ..Default::default() };
        ch.attach_input(READER, 2, 0, options).unwrap();
        assert_eq!(ch.input_claim(READER), Some(8));
        assert_eq!(ch.connection_stats(READER).unwrap().skipped, 8);
        let refused = InputOptions { max_lag_items: Some(0), max_lag_ts: None, ..Default::default() };
        assert!(ch.attach_input(READER + 1, 2, 0, refused).is_err());
    }

    #[test]
    fn trims_the_oldest_beyond_either_bound() {
        let by_items = InputOptions { max_lag_items: Some(2), max_lag_ts: None, ..Default::default() };
        let mut unseen = BTreeSet::from([1, 2, 3, 4]);
        assert_eq!(by_items.trim(&mut unseen, Some(4)), vec![1, 2]);
        assert_eq!(unseen, BTreeSet::from([3, 4]));

        let by_ts = InputOptions { max_lag_items: None, max_lag_ts: Some(10), ..Default::default() };
        let mut unseen = BTreeSet::from([5, 15, 20, 30]);
        assert_eq!(by_ts.trim(&mut unseen, Some(30)), vec![5, 15]);
        assert_eq!(unseen, BTreeSet::from([20, 30]));

        let unbounded = InputOptions::default();
        let mut unseen = BTreeSet::from([1, 2, 3]);
        assert!(unbounded.trim(&mut unseen, Some(1_000)).is_empty());
        assert_eq!(unseen.len(), 3);
    }

    #[test]
    fn a_bound_of_no_items_is_refused() {
        let none = InputOptions { max_lag_items: Some(0), max_lag_ts: None, ..Default::default() };
        assert!(matches!(none.check("cam"), Err(Error::InvalidArgument { .. })));
        assert!(InputOptions { max_lag_items: Some(1), max_lag_ts: Some(0), ..Default::default() }
            .check("cam")
            .is_ok());
    }
}
