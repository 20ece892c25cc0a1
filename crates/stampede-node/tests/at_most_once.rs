//! Requests at most once (`docs/NODES.md`, "Requests at most once"): a request whose reply is
//! lost is sent again with its number, and the node answers the repeat with the first answer
//! instead of running it twice. The client drops the replies on arrival on purpose
//! (`LoseReplies`, feature `faults`): the node ran the request and sent its reply, as when the
//! fabric loses it. Each case runs on the direct path and on zenoh alone.
//!
//! Without the numbers, the retried put failed `DuplicateTimestamp` (or, without retries, the
//! session ended), and the retried get took the next item while the first sat held by a reply
//! nobody read.

mod support;

use std::time::Duration;

use stampede::{Error, Limits, Selector, INFINITY};
use support::{with_watchdog, TestNode};

/// A put whose reply is lost is retried and stored once: not `DuplicateTimestamp`, one item, and
/// the session lives on.
fn a_put_retried_after_a_lost_reply_is_stored_once(zenoh_only: bool) {
    let node = TestNode::new();
    let (rt, lose) = node.losing("put", 1, zenoh_only);
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let camera = rt.task(0).unwrap();
    let output = camera.attach_output(&frames).unwrap();
    output.put(1, &b"one"[..]).expect("the retry gets the first answer, not DuplicateTimestamp");
    assert_eq!(lose.left(), 0, "the reply was lost");
    assert_eq!(frames.timestamps(), vec![1], "one item");
    output.put(2, &b"two"[..]).expect("the session lives on");
    let reader = rt.task(0).unwrap().attach_input(&frames).unwrap();
    assert_eq!(&reader.get(Selector::At(1), Some(Duration::ZERO)).unwrap().data()[..], b"one");
    // A second put at the same timestamp is a new request: the node runs it, and refuses it.
    assert!(matches!(output.put(1, &b"again"[..]), Err(Error::DuplicateTimestamp { .. })));
}

/// A queue get whose reply is lost is retried and receives the item the first one took; no other
/// getter sees it, the next get the next item.
fn a_queue_get_retried_after_a_lost_reply_receives_its_item(zenoh_only: bool) {
    let node = TestNode::new();
    let (rt, lose) = node.losing("get", 1, zenoh_only);
    let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
    let producer = node.runtime.task(0).unwrap();
    let output = producer.attach_output(&node.runtime.queue("jobs").unwrap()).unwrap();
    output.put(1, &b"first"[..], None).unwrap();
    output.put(2, &b"second"[..], None).unwrap();
    let worker = rt.task(INFINITY).unwrap();
    let input = worker.attach_input(&jobs).unwrap();
    let first = input.get(Some(Duration::from_secs(5))).expect("the retry receives the item");
    assert_eq!(lose.left(), 0, "the reply was lost");
    assert_eq!((first.item.ts, &first.item.data()[..]), (1, &b"first"[..]), "the item the lost reply carried");
    let other = node.runtime.task(INFINITY).unwrap().attach_input(&node.runtime.queue("jobs").unwrap()).unwrap();
    let second = other.get(Some(Duration::ZERO)).expect("the second item is there for another getter");
    assert_eq!(second.item.ts, 2);
    assert!(matches!(other.get(Some(Duration::ZERO)), Err(Error::NotAvailable { .. })), "nothing else");
    input.consume(&first).expect("the session lives on");
    other.consume(&second).unwrap();
    assert_eq!(jobs.stats().live_items, 0);
}

/// A channel get whose reply is lost is retried and receives the item.
fn a_channel_get_retried_after_a_lost_reply_receives_its_item(zenoh_only: bool) {
    let node = TestNode::new();
    let (rt, lose) = node.losing("get", 1, zenoh_only);
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let (reader, camera) = (rt.task(0).unwrap(), rt.task(0).unwrap());
    let input = reader.attach_input(&frames).unwrap();
    camera.attach_output(&frames).unwrap().put(3, &b"frame"[..]).unwrap();
    let item = input.get(Selector::At(3), Some(Duration::from_secs(5))).expect("the retry receives the item");
    assert_eq!(lose.left(), 0, "the reply was lost");
    assert_eq!((item.ts, &item.data()[..]), (3, &b"frame"[..]));
    input.consume(3).expect("the session lives on");
}

#[test]
fn a_put_retried_after_a_lost_reply_is_stored_once_direct() {
    with_watchdog("a_put_retried_after_a_lost_reply_is_stored_once_direct", || {
        a_put_retried_after_a_lost_reply_is_stored_once(false)
    });
}

#[test]
fn a_put_retried_after_a_lost_reply_is_stored_once_zenoh() {
    with_watchdog("a_put_retried_after_a_lost_reply_is_stored_once_zenoh", || {
        a_put_retried_after_a_lost_reply_is_stored_once(true)
    });
}

#[test]
fn a_queue_get_retried_after_a_lost_reply_receives_its_item_direct() {
    with_watchdog("a_queue_get_retried_after_a_lost_reply_receives_its_item_direct", || {
        a_queue_get_retried_after_a_lost_reply_receives_its_item(false)
    });
}

#[test]
fn a_queue_get_retried_after_a_lost_reply_receives_its_item_zenoh() {
    with_watchdog("a_queue_get_retried_after_a_lost_reply_receives_its_item_zenoh", || {
        a_queue_get_retried_after_a_lost_reply_receives_its_item(true)
    });
}

#[test]
fn a_channel_get_retried_after_a_lost_reply_receives_its_item_direct() {
    with_watchdog("a_channel_get_retried_after_a_lost_reply_receives_its_item_direct", || {
        a_channel_get_retried_after_a_lost_reply_receives_its_item(false)
    });
}

#[test]
fn a_channel_get_retried_after_a_lost_reply_receives_its_item_zenoh() {
    with_watchdog("a_channel_get_retried_after_a_lost_reply_receives_its_item_zenoh", || {
        a_channel_get_retried_after_a_lost_reply_receives_its_item(true)
    });
}
