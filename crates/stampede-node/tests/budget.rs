//! Byte budgets (docs/LIMITS.md, "Byte budgets"): a client flooding a channel nobody reads is
//! stopped by its session's budget — its put waits for room, then fails `Full` naming the budget —
//! while another session's puts on the same node never wait and never fail; a put waiting for room
//! goes through once an item is reclaimed; what a session charged is given back when its items go;
//! a put refused for another reason fails at once with that reason, whatever the budget.

mod support;

use std::thread;
use std::time::Duration;

use stampede::{Error, Limits, PutOptions, INFINITY, OLDEST_UNSEEN};
use support::{eventually, with_watchdog, TestNode};

const KIB: usize = 1024;
const ITEM: usize = 64 * KIB;
const SESSION_BUDGET: u64 = 1024 * 1024;
const NODE_BUDGET: u64 = 4 * 1024 * 1024;

/// A node with budgets of [`NODE_BUDGET`] and [`SESSION_BUDGET`] per session.
fn budgeted_node() -> TestNode {
    TestNode::with(|options| {
        options.max_live_bytes = Some(NODE_BUDGET);
        options.max_session_live_bytes = Some(SESSION_BUDGET);
    })
}

#[test]
fn a_flooding_session_meets_its_budget_and_the_others_carry_on() {
    with_watchdog("a_flooding_session_meets_its_budget_and_the_others_carry_on", || {
        let node = budgeted_node();
        let (flood, other) = (node.client(), node.client());
        let payload = vec![7u8; ITEM];

        // The flood: items reclaimed only once consumed (refcount 1), and nobody consumes yet.
        let ch = flood.create_channel("flood", Limits::unbounded()).unwrap();
        let out = flood.task(0).unwrap().attach_output(&ch).unwrap();
        let reader = flood.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        let put = |ts, timeout| out.put_with(ts, &payload[..], PutOptions { refcount: Some(1), timeout });
        let mut ts = 0;
        let refused = loop {
            match put(ts, Some(Duration::from_millis(200))) {
                Ok(()) => ts += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(ts as u64, SESSION_BUDGET / ITEM as u64, "the session's budget holds exactly that many items");
        let Error::Full { reason, can_never_fit: false, .. } = &refused else { panic!("Full, not {refused:?}") };
        assert!(reason.contains("max_session_live_bytes"), "the refusal names the budget: {reason}");
        let budget = flood.stats().budget.expect("a node's session is budgeted");
        assert_eq!((budget.session_live_bytes, budget.session_max_bytes), (SESSION_BUDGET, SESSION_BUDGET));
        assert_eq!(budget.node_max_bytes, NODE_BUDGET);

        // A put refused whatever is reclaimed fails at once with its own error, not the budget's.
        let duplicate = put(ts - 1, Some(Duration::from_secs(60)));
        assert!(matches!(duplicate, Err(Error::DuplicateTimestamp { .. })), "{duplicate:?}");

        // Another session's puts on the same node never wait and never fail.
        let ch2 = other.create_channel("steady", Limits::unbounded()).unwrap();
        let steady = other.task(0).unwrap();
        let out2 = steady.attach_output(&ch2).unwrap();
        let inp2 = other.task(INFINITY).unwrap().attach_input(&ch2).unwrap();
        for ts in 0..64 {
            out2.put_with(ts, &payload[..], PutOptions { refcount: Some(1), timeout: Some(Duration::ZERO) })
                .unwrap_or_else(|e| panic!("the other session's put {ts} failed: {e}"));
            inp2.consume(inp2.get(OLDEST_UNSEEN, Some(Duration::ZERO)).unwrap().ts).unwrap();
        }

        // A put waiting for room goes through once an item of the session is reclaimed.
        thread::scope(|scope| {
            let waiting = scope.spawn(|| put(ts, Some(Duration::from_secs(20))));
            thread::sleep(Duration::from_millis(50)); // likely waiting by now; the outcome is the same either way
            inp.consume(inp.get(OLDEST_UNSEEN, Some(Duration::ZERO)).unwrap().ts).unwrap();
            waiting.join().unwrap().expect("room came");
        });

        // A session that ends leaves its items charged to the node alone; they are given back
        // when the items go (here once the other session's producer, which holds ts_min at 0,
        // moves on).
        reader.close();
        flood.close();
        let budget = other.stats().budget.unwrap();
        assert_eq!((budget.node_live_bytes, budget.session_live_bytes), (SESSION_BUDGET, 0));
        steady.set_virtual_time(100).unwrap();
        assert!(
            eventually(Duration::from_secs(10), || other.stats().budget.is_some_and(|b| b.node_live_bytes == 0)),
            "the node's budget is all given back: {:?}",
            other.stats().budget
        );
    });
}

#[test]
fn a_put_larger_than_the_budget_can_never_fit() {
    with_watchdog("a_put_larger_than_the_budget_can_never_fit", || {
        let node = budgeted_node();
        let rt = node.client();
        let ch = rt.create_channel("big", Limits::unbounded()).unwrap();
        let out = rt.task(0).unwrap().attach_output(&ch).unwrap();
        let too_big = vec![0u8; SESSION_BUDGET as usize + 1];
        let refused =
            out.put_with(0, &too_big[..], PutOptions { refcount: None, timeout: Some(Duration::from_secs(20)) });
        assert!(matches!(refused, Err(Error::Full { can_never_fit: true, .. })), "{refused:?}");
    });
}
