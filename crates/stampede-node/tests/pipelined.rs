//! Pipelined puts (`OutputOptions::put_window`, the client's `remote/pipeline.rs`): a put returns
//! before the node's reply, lands in order, is seen by every later call of its client, and its
//! error is raised by the connection's next `put` or `flush`, naming its timestamp.

mod support;

use std::time::Duration;

use stampede::{
    ConnectOptions, Error, Limits, OutputOptions, PutOptions, Runtime, NEWEST, OLDEST_UNSEEN, PUT_WINDOW_MAX,
};
use support::{with_watchdog, TestNode, CONNECT_TIMEOUT};

/// A put that never waits for room.
const AT_ONCE: PutOptions = PutOptions { refcount: None, timeout: Some(Duration::ZERO) };

fn client(node: &TestNode, zenoh_only: bool) -> Runtime {
    let options = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), zenoh_only, ..ConnectOptions::default() };
    stampede::connect_with(&node.endpoint, &options).unwrap()
}

/// A put into a full channel returns before the node refuses it: its `Full` is raised by the
/// next `flush`, naming its timestamp, once, and the connection goes on. Only on the direct
/// path: as zenoh queries every put waits for its reply, so the put itself fails. `put_waited`
/// (what a polling binding uses) fails itself on either path.
#[test]
fn a_pipelined_puts_error_is_raised_by_the_next_call_naming_its_timestamp() {
    with_watchdog("a_pipelined_puts_error_is_raised_by_the_next_call_naming_its_timestamp", || {
        let node = TestNode::new();
        for zenoh_only in [false, true] {
            let rt = client(&node, zenoh_only);
            let frames = rt.create_channel(&format!("frames-{zenoh_only}"), Limits::items(2)).unwrap();
            let t = rt.ts_min();
            let producer = rt.task(t).unwrap();
            let out = producer.attach_output_with(&frames, OutputOptions { put_window: 4 }).unwrap();
            out.put_with(t + 1, vec![1u8; 64], AT_ONCE).unwrap();
            out.put_with(t + 2, vec![2u8; 64], AT_ONCE).unwrap();
            let third = out.put_with(t + 3, vec![3u8; 64], AT_ONCE);
            let raised = if zenoh_only {
                third
            } else {
                assert!(third.is_ok(), "a pipelined put returns before the node's reply: {third:?}");
                out.flush()
            };
            assert!(
                matches!(raised, Err(Error::Full { ts, .. }) if ts == t + 3),
                "the refusal of the third: {raised:?}"
            );
            out.flush().expect("an error is raised once");
            assert_eq!(frames.timestamps(), vec![t + 1, t + 2]);
            // A waited put on the same connection fails itself, as a poller needs.
            let waited = out.put_waited(t + 3, vec![3u8; 64], AT_ONCE);
            assert!(matches!(waited, Err(Error::Full { ts, .. }) if ts == t + 3), "{waited:?}");
            rt.close();
        }
    })
}

/// An error is raised, once its reply was read, by the connection's next call, that call doing
/// nothing else: by `flush`, or by a put that needed the failed put's place in the window (with a
/// window of 1, the next put). The puts around a failed one land.
#[test]
fn a_later_put_raises_an_earlier_error_and_is_not_made() {
    with_watchdog("a_later_put_raises_an_earlier_error_and_is_not_made", || {
        let node = TestNode::new();
        let rt = client(&node, false);
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let out = task.attach_output_with(&frames, OutputOptions { put_window: 8 }).unwrap();
        out.put(5, vec![5u8; 8]).unwrap();
        out.put(5, vec![6u8; 8]).unwrap(); // a duplicate: refused on the node
        out.put(6, vec![7u8; 8]).unwrap();
        let raised = out.flush();
        assert!(matches!(raised, Err(Error::DuplicateTimestamp { ts: 5, .. })), "{raised:?}");
        let out = task.attach_output_with(&frames, OutputOptions { put_window: 1 }).unwrap();
        out.put(5, vec![5u8; 8]).unwrap();
        let raised = out.put(7, vec![8u8; 8]);
        assert!(matches!(raised, Err(Error::DuplicateTimestamp { ts: 5, .. })), "{raised:?}");
        assert_eq!(frames.timestamps(), vec![5, 6], "the put that raised was not made");
        out.put(7, vec![8u8; 8]).unwrap();
        out.flush().unwrap();
        assert_eq!(frames.timestamps(), vec![5, 6, 7]);
        rt.close();
    })
}

/// Pipelined puts land in the order they were made, and every later call of their client sees
/// them, without a flush: a reader of the same client finds the last one at once; another
/// client, told through the node after the puts, reads them all in order.
#[test]
fn pipelined_puts_land_in_order_and_every_later_call_sees_them() {
    with_watchdog("pipelined_puts_land_in_order_and_every_later_call_sees_them", || {
        let node = TestNode::new();
        let rt = client(&node, false);
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let told = rt.create_channel("told", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output_with(&frames, OutputOptions { put_window: PUT_WINDOW_MAX }).unwrap();
        let tell = producer.attach_output(&told).unwrap();
        let own_reader = rt.task(0).unwrap().attach_input(&frames).unwrap();
        let other = client(&node, false);
        let (other_frames, other_told) = (other.channel("frames").unwrap(), other.channel("told").unwrap());
        let reader = other.task(0).unwrap();
        let (inp, told_inp) = (reader.attach_input(&other_frames).unwrap(), reader.attach_input(&other_told).unwrap());
        const PUTS: i64 = 300;
        for ts in 0..PUTS {
            out.put(ts, ts.to_le_bytes().to_vec()).unwrap();
            if ts % 50 == 49 {
                let newest = own_reader.get(NEWEST, Some(Duration::ZERO)).unwrap();
                assert_eq!(newest.ts, ts, "a get after a pipelined put sees it");
                own_reader.consume(newest.ts).unwrap();
            }
        }
        tell.put(0, b"all put".to_vec()).unwrap();
        told_inp.get(OLDEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap();
        for ts in 0..PUTS {
            let item = inp.get(OLDEST_UNSEEN, Some(Duration::ZERO)).unwrap();
            assert_eq!((item.ts, item.data().as_ref()), (ts, ts.to_le_bytes().as_slice()));
            inp.consume(ts).unwrap();
        }
        out.flush().unwrap();
        other.close();
        rt.close();
    })
}

/// Producer threads of one client, each pipelining into a channel of its own with its own window,
/// beside a thread making waited puts and gets on the same client: the replies owed on the
/// shared direct connection are read by whichever thread comes next (a put whose window is full,
/// a call that takes the connection, a flush), and each reaches its own put. Every put lands, in
/// its producer's order; the duplicate each producer makes on purpose is raised once, naming its
/// timestamp, by a later call of that producer and no other.
#[test]
fn threads_of_one_client_share_the_replies_owed_on_its_connection() {
    with_watchdog("threads_of_one_client_share_the_replies_owed_on_its_connection", || {
        const PRODUCERS: usize = 3;
        const PUTS: i64 = 400;
        const DUPLICATE: i64 = 100;
        let node = TestNode::new();
        let rt = client(&node, false);
        let channels: Vec<_> =
            (0..PRODUCERS).map(|k| rt.create_channel(&format!("p{k}"), Limits::unbounded()).unwrap()).collect();
        for channel in &channels {
            assert!(channel.put_log().unwrap().is_empty(), "asked once, the log notes every put from then on");
        }
        let other = rt.create_channel("other", Limits::unbounded()).unwrap();
        std::thread::scope(|scope| {
            for (k, channel) in channels.iter().enumerate() {
                let rt = &rt;
                scope.spawn(move || {
                    let out = rt.task(0).unwrap().attach_output_with(channel, OutputOptions { put_window: 1 + 3 * k });
                    let out = out.unwrap();
                    let mut raised = 0;
                    let mut put = |ts: i64| loop {
                        match out.put(ts, ts.to_le_bytes().to_vec()) {
                            Ok(()) => return,
                            Err(Error::DuplicateTimestamp { ts: DUPLICATE, .. }) => raised += 1, // not made: again
                            Err(e) => panic!("producer {k}, put ts={ts}: {e:?}"),
                        }
                    };
                    for ts in 0..PUTS {
                        put(ts);
                        if ts == DUPLICATE {
                            put(DUPLICATE);
                        }
                    }
                    match out.flush() {
                        Ok(()) => {}
                        Err(Error::DuplicateTimestamp { ts: DUPLICATE, .. }) => raised += 1,
                        Err(e) => panic!("producer {k}, flush: {e:?}"),
                    }
                    out.flush().unwrap();
                    assert_eq!(raised, 1, "producer {k}: the duplicate is raised once");
                });
            }
            scope.spawn(|| {
                let out = rt.task(0).unwrap().attach_output(&other).unwrap();
                let inp = rt.task(0).unwrap().attach_input(&other).unwrap();
                for ts in 0..PUTS {
                    out.put(ts, vec![1u8; 16]).unwrap();
                    assert_eq!(inp.get(NEWEST, Some(Duration::ZERO)).unwrap().ts, ts);
                }
            });
        });
        for channel in &channels {
            let log: Vec<i64> = channel.put_log().unwrap().iter().map(|put| put.ts).collect();
            assert_eq!(log, (0..PUTS).collect::<Vec<_>>(), "{}: every put landed once, in order", channel.name());
        }
        rt.close();
    })
}

/// A client closed with pipelined puts on their way: `flush` returns (an error, or none if
/// every reply was read), never hangs; a window above the bound is refused, embedded and remote,
/// and embedded the window changes nothing.
#[test]
fn a_closed_client_and_a_window_out_of_bounds_are_errors_not_hangs() {
    with_watchdog("a_closed_client_and_a_window_out_of_bounds_are_errors_not_hangs", || {
        let node = TestNode::new();
        let rt = client(&node, false);
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let too_wide = OutputOptions { put_window: PUT_WINDOW_MAX + 1 };
        assert!(matches!(task.attach_output_with(&frames, too_wide), Err(Error::InvalidArgument { .. })));
        let out = task.attach_output_with(&frames, OutputOptions { put_window: 16 }).unwrap();
        for ts in 0..16 {
            out.put(ts, vec![0u8; 100_000]).unwrap();
        }
        rt.close();
        assert!(out.flush().is_err(), "a closed client's connection is closed");
        assert!(out.put(16, vec![0u8; 8]).is_err());

        // A node that goes with pipelined puts on their way: flush returns, an error or not.
        let gone = TestNode::new();
        let rt = client(&gone, false);
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let out = rt.task(0).unwrap().attach_output_with(&frames, OutputOptions { put_window: 16 }).unwrap();
        for ts in 0..8 {
            out.put(ts, vec![0u8; 100_000]).unwrap();
        }
        gone.node.close();
        let _ = out.flush();
        rt.close();

        let embedded = Runtime::new();
        let frames = embedded.create_channel("frames", Limits::items(1)).unwrap();
        let task = embedded.task(0).unwrap();
        assert!(matches!(task.attach_output_with(&frames, too_wide), Err(Error::InvalidArgument { .. })));
        let out = task.attach_output_with(&frames, OutputOptions { put_window: 4 }).unwrap();
        out.put(1, vec![1u8]).unwrap();
        let full = out.put_with(2, vec![2u8], AT_ONCE);
        assert!(matches!(full, Err(Error::Full { ts: 2, .. })), "embedded, a put fails itself: {full:?}");
        out.flush().unwrap();
    })
}
