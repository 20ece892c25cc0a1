//! The cache's rule against the channel it caches: whatever puts, notices (late, reordered or
//! lost), gets and consumes come, an answer from the cache is an item unseen on the connection
//! on the node, and no newer one unseen there was told of by a notice that arrived.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::channel::{ChannelState, Limits, Retention};
use crate::effects::Effects;
use crate::tape::Access;
use crate::task::TaskState;
use crate::{InputOptions, Payload, Selector};

const OUTPUT: u64 = 1;
const INPUT: u64 = 2;

#[derive(Clone, Debug)]
enum Step {
    Put(Timestamp),
    Deliver(usize),
    Lose(usize),
    Get,
    ConsumeUntil(Timestamp),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..40i64).prop_map(Step::Put),
        3 => (0..8usize).prop_map(Step::Deliver),
        1 => (0..8usize).prop_map(Step::Lose),
        3 => Just(Step::Get),
        1 => (1..40i64).prop_map(Step::ConsumeUntil),
    ]
}

/// Whether `ts` is unseen on the input connection (no reference counts, no bound on lag here).
fn unseen(channel: &ChannelState, ts: Timestamp) -> bool {
    channel.pushable(INPUT, ts).is_some_and(|(_, item)| item.is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn the_cache_answers_only_what_the_node_would_have(steps in proptest::collection::vec(step(), 1..80)) {
        let mut channel = ChannelState::new(Arc::from("cam"), Limits::unbounded(), Retention::History);
        let (task, _) = TaskState::new(1, 0);
        channel.attach_output(OUTPUT, 1).unwrap();
        channel.attach_input(INPUT, 2, 0, InputOptions::default()).unwrap();
        let mut cache = PushCache::<Timestamp>::default();
        let mut in_flight: Vec<Notice> = Vec::new();
        let mut delivered: Vec<Timestamp> = Vec::new();
        for step in steps {
            let mut fx = Effects::default();
            match step {
                Step::Put(ts) => {
                    if channel.put(OUTPUT, &task, ts, Payload::from(vec![0u8; 4]), None, &mut fx).is_ok() {
                        let (newest, item) = channel.pushable(INPUT, ts).expect("the put is present");
                        in_flight.push(Notice { ts, newest, pushed: item.is_some() });
                    }
                }
                Step::Deliver(i) if !in_flight.is_empty() => {
                    let notice = in_flight.remove(i % in_flight.len());
                    delivered.push(notice.ts);
                    cache.noticed(notice, notice.pushed.then_some(notice.ts));
                }
                Step::Lose(i) if !in_flight.is_empty() => {
                    in_flight.remove(i % in_flight.len());
                }
                Step::Get => match cache.newest_unseen() {
                    Some((ts, payload)) => {
                        prop_assert_eq!(ts, payload);
                        prop_assert!(unseen(&channel, ts), "the cache answered {} which is not unseen on the node", ts);
                        for &told in &delivered {
                            prop_assert!(
                                !unseen(&channel, told) || told <= ts,
                                "the cache answered {} though a notice told of {}, unseen", ts, told
                            );
                        }
                        // The connection's next message opens it on the node.
                        channel.get(INPUT, Selector::At(ts), 0, || 0, &mut fx).unwrap();
                    }
                    None => {
                        if let Ok(item) = channel.get(INPUT, Selector::NewestUnseen, 0, || 0, &mut fx) {
                            cache.seen(item.ts);
                        }
                    }
                },
                Step::ConsumeUntil(ts) => {
                    channel.consume_until(INPUT, ts, &mut fx).unwrap();
                    cache.seen(ts);
                }
                Step::Deliver(_) | Step::Lose(_) => {}
            }
        }
    }
}

/// A 3 fps reader of a 30 fps camera is pushed about one put in ten — the one before its next
/// get — not every put; a reader faster than the camera is pushed every put.
#[test]
fn the_pusher_pushes_the_put_before_the_predicted_get() {
    let mut tape = Tape::default();
    let mut pusher = Pusher::default();
    let (frame, read) = (33_333u64, 333_330u64);
    let mut pushed = 0;
    for i in 0..300u64 {
        let now = i * frame;
        if now % read < frame {
            tape.record(Access::Get { selector: Selector::NewestUnseen, got: Some(i as Timestamp) }, now);
        }
        pushed += u64::from(pusher.on_put(Prefetch::Auto, &tape, 1000, now + 1));
    }
    assert_eq!(tape.pattern(), Pattern::Skipping);
    assert!((25..=45).contains(&pushed), "{pushed} pushes for 30 reads");

    let mut fast = Pusher::default();
    let mut tape = Tape::default();
    for i in 0..20u64 {
        tape.record(Access::Get { selector: Selector::NewestUnseen, got: Some(i as Timestamp) }, i * frame);
        assert!(fast.on_put(Prefetch::Newest, &tape, 1000, i * frame + 10));
    }
    assert!(!fast.on_put(Prefetch::Off, &tape, 1000, 20 * frame), "off never pushes");
    assert!(!fast.on_put(Prefetch::Newest, &tape, PUSH_BYTES_MAX + 1, 21 * frame), "too large");
}

/// A skipping reader's cache holds one item, the newest pushed; it answers once, and not after
/// the connection read past it.
#[test]
fn the_cache_holds_the_newest_push_once() {
    let mut cache = PushCache::default();
    cache.noticed(Notice { ts: 3, newest: 3, pushed: true }, Some("three"));
    cache.noticed(Notice { ts: 4, newest: 4, pushed: true }, Some("four"));
    assert_eq!(cache.newest_unseen(), Some((4, "four")));
    assert_eq!(cache.newest_unseen(), None);
    cache.noticed(Notice { ts: 6, newest: 6, pushed: false }, None);
    assert!(cache.behind(), "told of 6, not pushed: ask the node");
    cache.noticed(Notice { ts: 5, newest: 6, pushed: true }, Some("five"));
    assert_eq!(cache.newest_unseen(), None, "5 is not the newest the node holds");
    cache.seen(6);
    cache.noticed(Notice { ts: 7, newest: 7, pushed: true }, Some("seven"));
    cache.seen(7);
    assert_eq!(cache.newest_unseen(), None, "read past by a round trip");
    assert_eq!((cache.hits, cache.notices), (1, 5));
}

/// Policies by name, as every client language spells them.
#[test]
fn policies_have_names() {
    for policy in Prefetch::ALL {
        assert_eq!(Prefetch::from_name(policy.name()), Some(policy));
    }
    assert_eq!(Prefetch::from_name("sometimes"), None);
    assert_eq!(Prefetch::default(), Prefetch::Auto);
}
