//! One test per rule of docs/SEMANTICS.md, "Channels", on the embedded runtime.

use std::time::{Duration, Instant};

use stampede::runtime::DESCRIPTION_BYTES_MAX;
use stampede::{
    ChannelOptions, Codec, Error, Limits, PutOptions, QueueOptions, Selector, WatchEvent, INFINITY, NEWEST,
    NEWEST_UNSEEN, OLDEST, OLDEST_UNSEEN,
};

mod configuration;

const NOW: Option<Duration> = Some(Duration::ZERO);

fn setup() -> (configuration::TestRuntime, stampede::Channel) {
    let rt = configuration::runtime();
    let ch = rt.create_channel("camera/left", Limits::unbounded()).unwrap();
    (rt, ch)
}

/// put is copy-in: mutating the caller's buffer after put changes nothing stored.
#[test]
fn put_copies_in() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let mut buf = vec![1u8, 2, 3];
    out.put(5, buf.as_slice()).unwrap();
    buf.fill(9);
    assert_eq!(&inp.get(5, NOW).unwrap().data()[..], &[1, 2, 3]);
}

/// A put below the task's visibility fails BelowVisibility, naming channel, ts and limit.
#[test]
fn put_below_visibility_fails() {
    let (rt, ch) = setup();
    let t = rt.task(42).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let err = out.put(41, &b"x"[..]).unwrap_err();
    assert!(matches!(err, Error::BelowVisibility { ts: 41, limit: 42, .. }), "{err:?}");
    assert_eq!(err.to_string(), "put ts=41 on \"camera/left\" is below the task's visibility 42");
    out.put(42, &b"x"[..]).unwrap();
}

/// One item per timestamp: a second put at the same timestamp fails DuplicateTimestamp.
#[test]
fn duplicate_timestamp_fails() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    out.put(3, &b"a"[..]).unwrap();
    let err = out.put(3, &b"b"[..]).unwrap_err();
    assert!(matches!(err, Error::DuplicateTimestamp { ts: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("\"camera/left\"") && err.to_string().contains("ts=3"));
}

/// Negative timestamps and INFINITY are not item timestamps: put, get, consume and consume_until
/// refuse them.
#[test]
fn invalid_timestamps_fail() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    for ts in [-1, INFINITY] {
        assert!(matches!(out.put(ts, &b""[..]), Err(Error::InvalidTimestamp { .. })));
        assert!(matches!(inp.get(ts, NOW), Err(Error::InvalidTimestamp { .. })));
        assert!(matches!(inp.consume(ts), Err(Error::InvalidTimestamp { .. })));
        assert!(matches!(inp.consume_until(ts), Err(Error::InvalidTimestamp { .. })), "consume_until({ts})");
    }
    assert!(matches!(rt.task(-5), Err(Error::InvalidTimestamp { .. })));
}

/// Items may be put in any timestamp order; selectors see timestamp order, not arrival order.
#[test]
fn puts_in_any_order() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    for ts in [7, 2, 9, 4] {
        out.put(ts, &b"."[..]).unwrap();
    }
    assert_eq!(ch.timestamps(), vec![2, 4, 7, 9]);
    assert_eq!(inp.get(OLDEST_UNSEEN, NOW).unwrap().ts, 2);
    assert_eq!(inp.get(NEWEST_UNSEEN, NOW).unwrap().ts, 9);
}

/// The five selectors: exact, OLDEST/NEWEST over unconsumed items, *_UNSEEN over items not yet
/// gotten on this connection.
#[test]
fn selectors() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    for ts in 1..=5 {
        out.put(ts, vec![ts as u8]).unwrap();
    }
    assert_eq!(inp.get(3, NOW).unwrap().data()[0], 3);
    assert_eq!(inp.get(OLDEST, NOW).unwrap().ts, 1);
    assert_eq!(inp.get(NEWEST, NOW).unwrap().ts, 5);
    // 1, 3 and 5 are open now; the unseen ones are 2 and 4.
    assert_eq!(inp.get(OLDEST_UNSEEN, NOW).unwrap().ts, 2);
    assert_eq!(inp.get(NEWEST_UNSEEN, NOW).unwrap().ts, 4);
    assert!(matches!(inp.get(OLDEST_UNSEEN, NOW), Err(Error::NotAvailable { .. })));
    // OLDEST/NEWEST still see open items; consumed ones are skipped.
    inp.consume(1).unwrap();
    inp.consume(5).unwrap();
    assert_eq!(inp.get(OLDEST, NOW).unwrap().ts, 2);
    assert_eq!(inp.get(NEWEST, NOW).unwrap().ts, 4);
}

/// Wildcards are per connection: a second connection of the same task sees every item unseen.
#[test]
fn connections_are_independent() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let data = t.attach_input(&ch).unwrap();
    let monitor = t.attach_input(&ch).unwrap();
    out.put(1, &b"a"[..]).unwrap();
    data.get(OLDEST_UNSEEN, NOW).unwrap();
    data.consume(1).unwrap();
    assert_eq!(monitor.get(OLDEST_UNSEEN, NOW).unwrap().ts, 1);
}

/// Copy-out is a read-only, shared view: two gets hand out the same buffer (zero-copy), and a
/// caller that wants to mutate takes its own copy without affecting others.
#[test]
fn get_is_zero_copy_and_read_only() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let a = t.attach_input(&ch).unwrap();
    let b = t.attach_input(&ch).unwrap();
    out.put(1, vec![7u8; 1 << 20]).unwrap();
    let x = a.get(1, NOW).unwrap();
    let y = b.get(1, NOW).unwrap();
    if configuration::embedded() {
        // Gets in one process share the stored buffer; a client's gets are separate replies.
        assert_eq!(x.data().as_ptr(), y.data().as_ptr());
    }
    let mut mine = x.data().to_vec();
    mine[0] = 0;
    assert_eq!(y.data()[0], 7);
}

/// Nothing suitable and timeout 0: NotAvailable carries the neighbouring timestamps present on
/// this connection (the papers' timestamp_range).
#[test]
fn not_available_carries_neighbours() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    for ts in [2, 4, 8] {
        out.put(ts, &b"."[..]).unwrap();
    }
    inp.consume(4).unwrap();
    match inp.get(5, NOW).unwrap_err() {
        Error::NotAvailable { previous, next, .. } => assert_eq!((previous, next), (Some(2), Some(8))),
        other => panic!("{other:?}"),
    }
    inp.consume_until(8).unwrap();
    match inp.get(NEWEST_UNSEEN, NOW).unwrap_err() {
        Error::NotAvailable { previous, next, .. } => assert_eq!((previous, next), (None, None)),
        other => panic!("{other:?}"),
    }
}

/// A get with a duration waits that long, then fails NotAvailable.
#[test]
fn get_timeout_expires() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let start = Instant::now();
    let err = inp.get(OLDEST_UNSEEN, Some(Duration::from_millis(50))).unwrap_err();
    assert!(matches!(err, Error::NotAvailable { .. }));
    assert!(start.elapsed() >= Duration::from_millis(50));
}

/// A blocking get (no timeout) wakes when the item arrives from another thread.
#[test]
fn blocking_get_wakes_on_arrival() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let handle = std::thread::spawn(move || {
        // Nothing observes the get parked: the pause makes the wake-up of a blocked get likely; the result holds either way.
        std::thread::sleep(Duration::from_millis(20));
        out.put(11, &b"late"[..]).unwrap();
    });
    assert_eq!(inp.get(11, None).unwrap().ts, 11);
    handle.join().unwrap();
}

/// Exact get of an item consumed on this connection fails AlreadyConsumed; getting an open item
/// again is allowed.
#[test]
fn already_consumed_and_reget_open() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let keep = t.attach_input(&ch).unwrap(); // holds item 1 so it is not reclaimed
    let inp = t.attach_input(&ch).unwrap();
    out.put(1, &b"a"[..]).unwrap();
    inp.get(1, NOW).unwrap();
    inp.get(1, NOW).unwrap();
    inp.consume(1).unwrap();
    let err = inp.get(1, NOW).unwrap_err();
    assert!(matches!(err, Error::AlreadyConsumed { ts: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("already consumed"));
    drop(keep);
}

/// Exact get below ts_min fails Reclaimed, whether the item was reclaimed or never put.
#[test]
fn below_ts_min_is_reclaimed() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    out.put(1, &b"a"[..]).unwrap();
    out.put(9, &b"a"[..]).unwrap();
    t.set_virtual_time(10).unwrap();
    inp.consume_until(9).unwrap();
    assert_eq!(configuration::settled(10, || rt.ts_min()), 10);
    for ts in [1, 5] {
        let err = inp.get(ts, None).unwrap_err();
        assert!(matches!(err, Error::Reclaimed { .. }), "{err:?}");
        assert!(err.to_string().contains("ts_min is 10"));
    }
}

/// A blocked get wakes with Closed when the channel is destroyed, and with Closed when the
/// runtime shuts down.
#[test]
fn blocked_get_wakes_on_destroy_and_close() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let destroyer = ch.clone();
    let h = std::thread::spawn(move || {
        // Nothing observes the get parked: the pause makes the wake-up of a blocked get likely; the result holds either way.
        std::thread::sleep(Duration::from_millis(20));
        destroyer.destroy().unwrap();
    });
    assert!(matches!(inp.get(OLDEST_UNSEEN, None), Err(Error::Closed { .. })));
    h.join().unwrap();
    assert!(matches!(rt.lookup("camera/left"), Err(Error::NotFound { .. })));

    let other = rt.create_channel("camera/right", Limits::unbounded()).unwrap();
    let inp = t.attach_input(&other).unwrap();
    let closer = rt.clone();
    let h = std::thread::spawn(move || {
        // Nothing observes the get parked: the pause makes the wake-up of a blocked get likely; the result holds either way.
        std::thread::sleep(Duration::from_millis(20));
        closer.close();
    });
    let err = inp.get(OLDEST_UNSEEN, None).unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");
    h.join().unwrap();
    assert!(matches!(rt.task(0), Err(Error::Closed { .. })));
}

/// get_range returns every present, unconsumed item in [t0, t1], in order, and opens them.
#[test]
fn get_range_window() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    for ts in 0..10 {
        out.put(ts, &b"."[..]).unwrap();
    }
    inp.consume(4).unwrap();
    let ts: Vec<i64> = inp.get_range(2, 6).unwrap().iter().map(|i| i.ts).collect();
    assert_eq!(ts, vec![2, 3, 5, 6]);
    t.set_virtual_time(INFINITY).unwrap();
    // The window is open now: the lowest open item holds the task's visibility.
    assert_eq!(t.visibility(), 2);
}

/// consume_until consumes every present item up to ts, unseen ones included, on that connection
/// only; an item put later at or below that ts is born consumed there (the connection said it is
/// done with everything up to ts) but unseen on other connections.
#[test]
fn consume_until_includes_unseen() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let other = t.attach_input(&ch).unwrap();
    for ts in [1, 3, 5] {
        out.put(ts, &b"."[..]).unwrap();
    }
    inp.get(3, NOW).unwrap();
    inp.consume_until(4).unwrap();
    assert_eq!(inp.get(OLDEST, NOW).unwrap().ts, 5);
    assert_eq!(other.get(OLDEST, NOW).unwrap().ts, 1);
    out.put(2, &b"."[..]).unwrap();
    assert!(matches!(inp.get(2, NOW), Err(Error::AlreadyConsumed { ts: 2, .. })));
    assert_eq!(inp.get(OLDEST, NOW).unwrap().ts, 5);
    assert_eq!(other.get(2, NOW).unwrap().ts, 2);
}

/// Attaching implicitly consumes present items below the task's visibility; items at or above
/// it, and every item put later whatever its timestamp, are unseen on the new connection.
#[test]
fn attach_consumes_below_visibility() {
    let (rt, ch) = setup();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    for ts in 0..6 {
        out.put(ts, &b"."[..]).unwrap();
    }
    let reader = rt.task(3).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    assert_eq!(inp.get(OLDEST_UNSEEN, NOW).unwrap().ts, 3);
    assert!(matches!(inp.get(1, NOW), Err(Error::AlreadyConsumed { ts: 1, .. })));

    // The paper's tracker: virtual time INFINITY, then attach — new frames are still unseen.
    let tracker = rt.task(INFINITY).unwrap();
    let frames = tracker.attach_input(&ch).unwrap();
    assert!(matches!(frames.get(NEWEST_UNSEEN, NOW), Err(Error::NotAvailable { .. })));
    out.put(6, &b"."[..]).unwrap();
    assert_eq!(frames.get(NEWEST_UNSEEN, NOW).unwrap().ts, 6);
}

/// Detaching an input connection drops its claims: ts_min advances and the items it held go.
#[test]
fn detach_drops_claims() {
    let (rt, ch) = setup();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let reader = rt.task(INFINITY).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    for ts in 0..4 {
        out.put(ts, &b"."[..]).unwrap();
    }
    producer.set_virtual_time(INFINITY).unwrap();
    inp.get(2, NOW).unwrap();
    assert_eq!(rt.ts_min(), 0);
    assert_eq!(reader.visibility(), 2);
    inp.detach();
    assert_eq!(reader.visibility(), INFINITY);
    assert_eq!(configuration::settled(4, || rt.ts_min()), 4, "1 + the highest timestamp put");
    assert_eq!(configuration::settled(0, || ch.stats().live_items), 0);
}

/// A bounded channel that is full fails Full at once with timeout 0, after the timeout with a
/// duration, and a blocked put proceeds as soon as GC frees space.
#[test]
fn bounded_channel_full_and_blocking() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("bounded", Limits::items(2)).unwrap();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let consumer = rt.task(INFINITY).unwrap();
    let inp = consumer.attach_input(&ch).unwrap();
    out.put(0, &b"a"[..]).unwrap();
    out.put(1, &b"b"[..]).unwrap();
    let now = PutOptions { timeout: NOW, ..Default::default() };
    let err = out.put_with(2, &b"c"[..], now).unwrap_err();
    assert!(matches!(err, Error::Full { ts: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("capacity=2"));
    let wait = PutOptions { timeout: Some(Duration::from_millis(30)), ..Default::default() };
    assert!(matches!(out.put_with(2, &b"c"[..], wait), Err(Error::Full { .. })));

    let h = std::thread::spawn(move || {
        // Nothing observes the put parked on a full channel: the pause makes its wake-up likely; the result holds either way.
        std::thread::sleep(Duration::from_millis(20));
        inp.consume_until(0).unwrap();
        inp
    });
    producer.set_virtual_time(1).unwrap();
    out.put(2, &b"c"[..]).unwrap(); // blocks until item 0 is reclaimed
    assert_eq!(ch.timestamps(), vec![1, 2]);
    h.join().unwrap();
}

/// The byte bound: puts wait for bytes to be freed; an item larger than the bound can never fit
/// and fails Full at once, even without a timeout.
#[test]
fn byte_bound() {
    let rt = configuration::runtime();
    let ch = rt.create_channel("bytes", Limits::unbounded().with_bytes(10)).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    out.put(0, vec![0u8; 8]).unwrap();
    let now = PutOptions { timeout: NOW, ..Default::default() };
    assert!(matches!(out.put_with(1, vec![0u8; 4], now), Err(Error::Full { .. })));
    let err = out.put(1, vec![0u8; 11]).unwrap_err();
    assert!(err.to_string().contains("can never fit"), "{err}");
}

/// Async get (tokio) waits without blocking the executor and wakes on arrival; with a timeout it
/// fails NotAvailable.
#[tokio::test(flavor = "current_thread")]
async fn async_get_and_put() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let inp = t.attach_input(&ch).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let err = inp.get_async(OLDEST_UNSEEN, Some(Duration::from_millis(10))).await.unwrap_err();
    assert!(matches!(err, Error::NotAvailable { .. }));
    let (item, ()) = tokio::join!(async { inp.get_async(Selector::At(4), None).await.unwrap() }, async {
        // Nothing observes the get pending: the pause makes its wake-up likely; the result holds either way.
        tokio::time::sleep(Duration::from_millis(5)).await;
        out.put_async(4, &b"x"[..], PutOptions::default()).await.unwrap();
    });
    assert_eq!(item.ts, 4);
}

/// The name service (docs/NODES.md, "The name service"): a channel's info tells its name, kind,
/// node, bounds, declared codec and description, the same through a lookup; a put of another codec
/// is refused; a container placed on a node that does not exist is refused saying so; descriptions
/// are bounded.
#[test]
fn info_codec_and_placement() {
    let rt = configuration::runtime();
    let options = ChannelOptions {
        limits: Limits { capacity: Some(4), bytes_max: None },
        codec: Some(Codec::Utf8),
        description: "left camera, 30 fps".into(),
        ..ChannelOptions::default()
    };
    let ch = rt.create_channel("camera/left", options).unwrap();
    let info = ch.info();
    let placement = configuration::placement(&rt);
    assert_eq!((info.name.as_str(), info.kind, info.node.as_deref()), ("camera/left", "channel", placement.as_deref()));
    assert_eq!(
        (info.limits.capacity, &info.codec, info.description.as_str()),
        (Some(4), &Some(Codec::Utf8), "left camera, 30 fps")
    );
    assert_eq!(rt.channel("camera/left").unwrap().info(), info);
    let out = rt.task(0).unwrap().attach_output(&ch).unwrap();
    out.put(0, "text").unwrap();
    let err = out.put(1, vec![1u8]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }) && err.to_string().contains("declares codec"), "{err}");
    let queue = rt.create_queue("jobs", QueueOptions { description: "work".into(), ..QueueOptions::default() });
    assert_eq!(queue.unwrap().info().kind, "queue");
    let elsewhere = ChannelOptions { node: Some("nowhere".into()), ..ChannelOptions::default() };
    let err = rt.create_channel("x", elsewhere).unwrap_err();
    // Embedded: containers stay in this process; a client: no node of that name answers.
    assert!(err.to_string().contains("node nowhere"), "{err}");
    let own = ChannelOptions { node: rt.node().map(str::to_owned), ..ChannelOptions::default() };
    rt.create_channel("y", own).unwrap();
    let unnamed = ChannelOptions { codec: Some(Codec::from_name("")), ..ChannelOptions::default() };
    assert!(matches!(rt.create_channel("w", unnamed), Err(Error::InvalidArgument { .. })));
    let long = ChannelOptions { description: "x".repeat(DESCRIPTION_BYTES_MAX + 1), ..ChannelOptions::default() };
    assert!(matches!(rt.create_channel("z", long), Err(Error::InvalidArgument { .. })));
}

/// Watching the names under a prefix (docs/NODES.md, "The name service"): those that exist, then
/// each creation and destruction under it, nothing else.
#[test]
fn watch_reports_the_names_under_a_prefix() {
    let rt = configuration::runtime();
    rt.create_channel("camera/left", Limits::unbounded()).unwrap();
    rt.create_channel("audio", Limits::unbounded()).unwrap();
    let mut watch = rt.watch("camera/", Some(Duration::from_secs(20))).unwrap();
    let mut next = || loop {
        // Nodes coming and going are watched too, through a client.
        match watch.next().expect("an event within the timeout") {
            WatchEvent::NodeUp { .. } | WatchEvent::NodeDown { .. } => continue,
            event => return event,
        }
    };
    let node = configuration::placement(&rt);
    let created = |name: &str, kind: &str| WatchEvent::Created {
        name: name.into(),
        container_kind: kind.into(),
        node: node.clone(),
    };
    assert_eq!(next(), created("camera/left", "channel"));
    let right = rt.create_queue("camera/right", Limits::unbounded()).unwrap();
    rt.create_channel("audio/mic", Limits::unbounded()).unwrap();
    assert_eq!(next(), created("camera/right", "queue"));
    right.destroy().unwrap();
    let destroyed =
        WatchEvent::Destroyed { name: "camera/right".into(), container_kind: "queue".into(), node: node.clone() };
    let event = next();
    assert_eq!(event, destroyed);
    // What happened, named as every language names it.
    assert_eq!((created("x", "channel").kind(), event.kind()), ("created", "destroyed"));
}

/// A channel's put log (what `stampede hz` reads): empty until first asked for, then every put
/// with its timestamp and size, oldest first, times that never go back; no reader is attached,
/// so the items are reclaimed as usual.
#[test]
fn the_put_log_notes_puts_once_asked_for() {
    let (rt, ch) = setup();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    out.put(0, &[0u8; 3][..]).unwrap();
    assert!(ch.put_log().unwrap().is_empty(), "off until asked for");
    for ts in 1..=5 {
        out.put(ts, vec![7u8; ts as usize * 10].as_slice()).unwrap();
    }
    let log = ch.put_log().unwrap();
    assert_eq!(log.iter().map(|p| (p.ts, p.bytes)).collect::<Vec<_>>(), [(1, 10), (2, 20), (3, 30), (4, 40), (5, 50)]);
    assert!(log.windows(2).all(|w| w[0].at_us <= w[1].at_us), "{log:?}");
    t.set_virtual_time(INFINITY).unwrap();
    assert_eq!(configuration::settled(0, || ch.stats().live_items), 0, "the log holds no item");
}
