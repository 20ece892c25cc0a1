//! Releases (`docs/NODES.md`, "A call's timeout"): a get whose reply never reaches its client —
//! lost, to its retry too — fails `Unreachable` and is released: the client's next request
//! carries its number, the node gives back what it took, and the session lives on. The client
//! drops the replies on arrival on purpose (`LoseReplies`, feature `faults`): the node ran the get
//! and sent its reply, as when the fabric loses it. Each case runs on the direct path and on
//! zenoh alone.
//!
//! Without releases the session ended (every later call failed), and with releases that gave back
//! nothing the next `OLDEST_UNSEEN` get skipped the item, the next queue get took the second item
//! while the first sat held by a reply nobody read.

mod support;

use std::time::Duration;

use stampede::{Error, Limits, INFINITY, OLDEST_UNSEEN};
use support::{with_watchdog, TestNode};

/// `Unreachable`, saying that what the call took is given back.
fn assert_released<T: std::fmt::Debug>(result: stampede::Result<T>) {
    match result {
        Err(Error::Unreachable { reason, .. }) => assert!(reason.contains("given back"), "{reason}"),
        other => panic!("expected a released get's Unreachable, got {other:?}"),
    }
}

/// A queue get released: its item goes back to the head of the queue, and the same worker's next
/// get receives it, before the item put after it.
fn a_released_queue_get_gives_its_item_back(zenoh_only: bool) {
    let node = TestNode::new();
    let (rt, lose) = node.losing("get", 2, zenoh_only);
    let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
    let output = node.runtime.task(0).unwrap().attach_output(&node.runtime.queue("jobs").unwrap()).unwrap();
    output.put(1, &b"first"[..], None).unwrap();
    output.put(2, &b"second"[..], None).unwrap();
    let input = rt.task(INFINITY).unwrap().attach_input(&jobs).unwrap();
    assert_released(input.get(Some(Duration::from_secs(5))));
    assert_eq!(lose.left(), 0, "both replies were lost");
    let first = input.get(Some(Duration::from_secs(5))).expect("the session lives on");
    assert_eq!((first.item.ts, &first.item.data()[..]), (1, &b"first"[..]), "the item the released get took");
    let second = input.get(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(second.item.ts, 2);
    input.consume(&first).unwrap();
    input.consume(&second).unwrap();
    assert_eq!(jobs.stats().live_items, 0, "both consumed once");
}

/// A channel get released: its item is unseen again, so the next `OLDEST_UNSEEN` get returns it
/// rather than skipping to the next.
fn a_released_channel_get_leaves_its_item_unseen(zenoh_only: bool) {
    let node = TestNode::new();
    let (rt, lose) = node.losing("get", 2, zenoh_only);
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let (reader, camera) = (rt.task(0).unwrap(), rt.task(0).unwrap());
    let input = reader.attach_input(&frames).unwrap();
    let output = camera.attach_output(&frames).unwrap();
    output.put(3, &b"three"[..]).unwrap();
    output.put(4, &b"four"[..]).unwrap();
    assert_released(input.get(OLDEST_UNSEEN, Some(Duration::from_secs(5))));
    assert_eq!(lose.left(), 0, "both replies were lost");
    let item = input.get(OLDEST_UNSEEN, Some(Duration::from_secs(5))).expect("the session lives on");
    assert_eq!((item.ts, &item.data()[..]), (3, &b"three"[..]), "not skipped");
    assert_eq!(input.get(OLDEST_UNSEEN, Some(Duration::ZERO)).unwrap().ts, 4);
}

#[test]
fn a_released_queue_get_gives_its_item_back_direct() {
    with_watchdog("a_released_queue_get_gives_its_item_back_direct", || {
        a_released_queue_get_gives_its_item_back(false)
    });
}

#[test]
fn a_released_queue_get_gives_its_item_back_zenoh() {
    with_watchdog("a_released_queue_get_gives_its_item_back_zenoh", || a_released_queue_get_gives_its_item_back(true));
}

#[test]
fn a_released_channel_get_leaves_its_item_unseen_direct() {
    with_watchdog("a_released_channel_get_leaves_its_item_unseen_direct", || {
        a_released_channel_get_leaves_its_item_unseen(false)
    });
}

#[test]
fn a_released_channel_get_leaves_its_item_unseen_zenoh() {
    with_watchdog("a_released_channel_get_leaves_its_item_unseen_zenoh", || {
        a_released_channel_get_leaves_its_item_unseen(true)
    });
}
