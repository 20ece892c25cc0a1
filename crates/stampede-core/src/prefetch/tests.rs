//! The cache's rule against the channel it caches: whatever puts (pushed or not, as the node's
//! sending rule sends them), deliveries (late, or lost with a reset after), gets and consumes
//! come, an answer from the cache is an item unseen on the connection on the node, and no newer
//! put came before the notice the cache last heard — so the get's place in the channel's serial
//! order is at that notice, before every put whose notice is still on its way.

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
    Put(Timestamp, bool),
    Deliver,
    Lose,
    Get,
    ConsumeUntil(Timestamp),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..40i64, any::<bool>()).prop_map(|(ts, push)| Step::Put(ts, push)),
        3 => Just(Step::Deliver),
        1 => Just(Step::Lose),
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
        let mut pusher = Pusher::default();
        let mut cache = PushCache::<Timestamp>::default();
        // Events in the order the node sent them (a session's events travel in order); a lost one
        // is followed by a reset, as the node's queue does.
        let mut in_flight: std::collections::VecDeque<Option<Notice>> = Default::default();
        // Puts, in the channel's serial order, each with whether its notice was sent.
        let mut puts: Vec<Timestamp> = Vec::new();
        // How many puts the last notice delivered had seen (its place in the serial order).
        let mut heard = 0;
        let mut sent_at: std::collections::VecDeque<usize> = Default::default();
        // The place of the latest notice sent (or lost, a reset on its way instead).
        let mut last_sent = 0;
        // The highest timestamp the connection read (got, or consumed up to).
        let mut read: Option<Timestamp> = None;
        for step in steps {
            let mut fx = Effects::default();
            match step {
                Step::Put(ts, push) => {
                    if channel.put(OUTPUT, &task, ts, Payload::from(vec![0u8; 4]), None, &mut fx).is_ok() {
                        puts.push(ts);
                        let (newest, item) = channel.pushable(INPUT, ts).expect("the put is present");
                        if let Some(with_item) = pusher.sends(item.filter(|_| push).map(|item| item.ts), newest) {
                            in_flight.push_back(Some(Notice { ts, newest, pushed: with_item }));
                            sent_at.push_back(puts.len());
                            last_sent = puts.len();
                        }
                    }
                }
                Step::Deliver => match in_flight.pop_front() {
                    Some(Some(notice)) => {
                        heard = sent_at.pop_front().expect("one place per notice");
                        cache.noticed(notice, notice.pushed.then_some(notice.ts));
                    }
                    Some(None) => cache.reset(),
                    None => {}
                },
                Step::Lose => {
                    if in_flight.front().is_some_and(Option::is_some) {
                        in_flight.pop_front();
                        sent_at.pop_front();
                        in_flight.push_front(None);
                    }
                }
                Step::Get => match cache.newest_unseen() {
                    Some((ts, payload)) => {
                        prop_assert_eq!(ts, payload);
                        prop_assert!(unseen(&channel, ts), "the cache answered {} which is not unseen on the node", ts);
                        // Placed at the last notice heard: it was the newest then.
                        let newest_then = puts[..heard].iter().max().copied();
                        prop_assert_eq!(Some(ts), newest_then, "the cache answered {} but {:?} was newest", ts, newest_then);
                        // Missed only puts a notice on its way will tell of: with none on its way,
                        // no newer put came since the one heard.
                        let since = puts[heard..].iter().max().copied();
                        let told = last_sent > heard;
                        prop_assert!(told || since.is_none_or(|q| q < ts), "{} answered, {:?} put since, untold", ts, since);
                        // The connection's next message opens it on the node, which then knows it
                        // used.
                        channel.get(INPUT, Selector::At(ts), 0, || 0, &mut fx).unwrap();
                        pusher.used();
                        read = read.max(Some(ts));
                    }
                    None => {
                        // A get waits in the cache only while the node owes it a message: a
                        // notice is on its way, or nothing newer than what it read was put.
                        if cache.waits() {
                            let newer = puts.iter().find(|&&q| read.is_none_or(|read| q > read) && unseen(&channel, q));
                            let told = last_sent > heard;
                            prop_assert!(told || newer.is_none(), "waits, untold of {:?}", newer);
                            continue;
                        }
                        if let Ok(item) = channel.get(INPUT, Selector::NewestUnseen, 0, || 0, &mut fx) {
                            cache.seen(item.ts);
                            read = read.max(Some(item.ts));
                        }
                    }
                },
                Step::ConsumeUntil(ts) => {
                    channel.consume_until(INPUT, ts, &mut fx).unwrap();
                    cache.seen(ts);
                    read = read.max(Some(ts));
                }
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

/// A push is sent with its notice; the first put that makes it not the newest sends a notice
/// alone; an out-of-order put, or a later one, sends nothing; an item older than the newest is
/// never pushed.
#[test]
fn a_stale_push_is_told_once() {
    let mut pusher = Pusher::default();
    assert_eq!(pusher.sends(None, 3), None, "nothing pushed: nothing to tell");
    assert_eq!(pusher.sends(Some(5), 5), Some(true));
    assert_eq!(pusher.sends(None, 5), None, "an older put: 5 is still the newest");
    assert_eq!(pusher.sends(Some(4), 5), None, "an older item is never pushed");
    assert_eq!(pusher.sends(None, 6), Some(false));
    assert_eq!(pusher.sends(None, 7), None, "told once");
    assert_eq!(pusher.sends(Some(8), 8), Some(true));
    pusher.used();
    assert_eq!(pusher.sends(None, 9), Some(false), "used: told all the same (a get may wait for it)");
    assert_eq!((pusher.notices, pusher.pushed, pusher.used), (4, 2, 1));
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
    assert!(cache.waits(), "4 was pushed and read: the next put is told of");
    cache.noticed(Notice { ts: 6, newest: 6, pushed: false }, None);
    assert!(!cache.waits(), "told of 6, not pushed: ask the node");
    cache.noticed(Notice { ts: 5, newest: 6, pushed: true }, Some("five"));
    assert_eq!(cache.newest_unseen(), None, "5 is not the newest the node holds");
    cache.seen(6);
    cache.noticed(Notice { ts: 7, newest: 7, pushed: true }, Some("seven"));
    cache.seen(7);
    assert_eq!(cache.newest_unseen(), None, "read past by a round trip");
    assert_eq!((cache.hits, cache.notices), (1, 5));
    cache.noticed(Notice { ts: 9, newest: 9, pushed: true }, Some("nine"));
    cache.put_here(10);
    assert_eq!(cache.newest_unseen(), None, "this client put 10: the node answers, not the cache");
    assert!(!cache.waits());
}

/// Policies by name, as every client language spells them.
#[test]
fn policies_have_names() {
    for policy in Prefetch::ALL {
        assert_eq!(Prefetch::parse(policy.name()), Ok(policy));
    }
    assert_eq!(Prefetch::parse("sometimes"), Err("\"sometimes\" is no prefetch policy: off, newest or auto".into()));
    assert_eq!(Prefetch::default(), Prefetch::Auto);
}

/// `auto` pushes from a connection's first `NEWEST_UNSEEN` get on, while its tape reads so, and
/// stops when its reads become another pattern.
#[test]
fn auto_follows_the_tape_from_the_first_get() {
    let mut tape = Tape::default();
    assert!(!Prefetch::Auto.pushes_newest(&tape), "nothing read yet");
    assert!(Prefetch::Newest.pushes_newest(&tape) && !Prefetch::Off.pushes_newest(&tape));
    tape.record(Access::Get { selector: Selector::NewestUnseen, got: Some(1) }, 10);
    assert!(Prefetch::Auto.pushes_newest(&tape), "one freshest read");
    tape.record(Access::Consume { until: 1 }, 11);
    assert!(Prefetch::Auto.pushes_newest(&tape), "consumes are not reads");
    tape.record(Access::Get { selector: Selector::OldestUnseen, got: Some(2) }, 20);
    assert!(!Prefetch::Auto.pushes_newest(&tape), "a read in order: not yet a skipping reader");
    for i in 3..20 {
        tape.record(Access::Get { selector: Selector::NewestUnseen, got: Some(i) }, i as u64 * 10);
    }
    assert_eq!(tape.pattern(), Pattern::Skipping);
    assert!(Prefetch::Auto.pushes_newest(&tape));
    for i in 20..40 {
        tape.record(Access::Get { selector: Selector::OldestUnseen, got: Some(i) }, i as u64 * 10);
    }
    assert!(!Prefetch::Auto.pushes_newest(&tape), "{:?}", tape.pattern());
}
