//! A node and its clients in one process: the remote API does what the embedded one does, with
//! the same results and the same errors, and the node's ts_min follows the remote tasks.

mod support;

use std::thread;
use std::time::Duration;

use stampede::{connect, Container as RemoteContainer};
use stampede::{Error, Limits, PutOptions, Runtime, Selector, INFINITY, NEWEST, NEWEST_UNSEEN, OLDEST, OLDEST_UNSEEN};
use support::{eventually, with_watchdog, TestNode};

const SHORT: Option<Duration> = Some(Duration::from_millis(200));
const LONG: Option<Duration> = Some(Duration::from_secs(20));

/// Put and get with every selector, get_range, consume and consume_until through a node: the
/// items, their order and their payloads are the embedded ones.
#[test]
fn channel_operations_cross_the_wire() {
    with_watchdog("channel_operations_cross_the_wire", || {
        let node = TestNode::new();
        let rt = node.client();
        let ch = rt.create_channel("camera/left", Limits::unbounded()).unwrap();
        assert_eq!(rt.names("camera/").unwrap(), vec!["camera/left".to_owned()]);
        assert!(matches!(rt.lookup("camera/left").unwrap(), RemoteContainer::Channel(c) if c == ch));
        let camera = rt.task(0).unwrap();
        let out = camera.attach_output(&ch).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        for ts in [3, 1, 2, 5, 4] {
            out.put(ts, format!("frame {ts}").as_str()).unwrap();
        }
        let item = inp.get(OLDEST_UNSEEN, SHORT).unwrap();
        assert_eq!((item.ts, &item.data()[..]), (1, &b"frame 1"[..]));
        assert_eq!(item.codec(), &stampede::Codec::Utf8);
        assert_eq!(inp.get(NEWEST_UNSEEN, SHORT).unwrap().ts, 5);
        assert_eq!(inp.get(OLDEST_UNSEEN, SHORT).unwrap().ts, 2);
        assert_eq!(inp.get(OLDEST, SHORT).unwrap().ts, 1);
        assert_eq!(inp.get(NEWEST, SHORT).unwrap().ts, 5);
        assert_eq!(inp.get(Selector::At(4), SHORT).unwrap().ts, 4);
        assert_eq!(reader.visibility(), 1, "open items hold the reader's visibility");
        let range: Vec<_> = inp.get_range(2, 4).unwrap().into_iter().map(|i| (i.ts, i.data().clone())).collect();
        assert_eq!(range.iter().map(|(ts, _)| *ts).collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(&range[1].1[..], b"frame 3");
        inp.consume(1).unwrap();
        inp.consume_until(3).unwrap();
        assert_eq!(inp.get(OLDEST, SHORT).unwrap().ts, 4);
        camera.set_virtual_time(10).unwrap();
        inp.consume_until(5).unwrap();
        assert_eq!(rt.ts_min(), 6, "nothing holds 1..=5 any more");
        assert_eq!(ch.stats().live_items, 0);
        assert_eq!(node.runtime.channel("camera/left").unwrap().stats().reclaimed, 5);
    });
}

/// A blocking remote get waits across several wait slices and returns the item put meanwhile; a
/// short timeout on an empty channel is `NotAvailable`.
#[test]
fn blocking_get_spans_slices() {
    with_watchdog("blocking_get_spans_slices", || {
        let node = TestNode::new();
        let rt = node.client();
        let ch = rt.create_channel("slow", Limits::unbounded()).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        assert!(matches!(inp.get(OLDEST_UNSEEN, Some(Duration::ZERO)), Err(Error::NotAvailable { .. })));
        assert!(matches!(inp.get(OLDEST_UNSEEN, SHORT), Err(Error::NotAvailable { .. })));
        let producer = {
            let runtime = node.runtime.clone();
            thread::spawn(move || {
                let ch = runtime.channel("slow").unwrap();
                let task = runtime.task(0).unwrap();
                let out = task.attach_output(&ch).unwrap();
                // The put must land after more than one wait slice of the remote get: the duration is the subject.
                thread::sleep(stampede_wire::REMOTE_WAIT_SLICE + Duration::from_millis(300));
                out.put(7, &b"late"[..]).unwrap();
            })
        };
        let item = inp.get(OLDEST_UNSEEN, None).unwrap();
        assert_eq!((item.ts, &item.data()[..]), (7, &b"late"[..]));
        producer.join().unwrap();
    });
}

/// Reference counts reclaim an item through a node once enough connections consumed it, even
/// above ts_min, and a put into a full bounded channel fails `Full` after its timeout.
#[test]
fn refcounts_and_bounds() {
    with_watchdog("refcounts_and_bounds", || {
        let node = TestNode::new();
        let rt = node.client();
        let ch = rt.create_channel("counted", Limits::items(2)).unwrap();
        let task = rt.task(0).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let (a, b) = (rt.task(INFINITY).unwrap(), rt.task(INFINITY).unwrap());
        let (ia, ib) = (a.attach_input(&ch).unwrap(), b.attach_input(&ch).unwrap());
        out.put_with(0, &b"x"[..], PutOptions { refcount: Some(2), timeout: None }).unwrap();
        out.put(1, &b"y"[..]).unwrap();
        let full = out.put_with(2, &b"z"[..], PutOptions { refcount: None, timeout: SHORT });
        assert!(matches!(full, Err(Error::Full { can_never_fit: false, .. })), "{full:?}");
        ia.consume(0).unwrap();
        assert_eq!(ch.stats().live_items, 2);
        ib.consume(0).unwrap();
        assert_eq!(ch.stats().live_items, 1, "the second consumption reclaims ts=0");
        assert!(matches!(ia.get(Selector::At(0), SHORT), Err(Error::Reclaimed { .. })));
        out.put_with(2, &b"z"[..], PutOptions { refcount: None, timeout: SHORT }).unwrap();
    });
}

/// The node's ts_min follows remote tasks as they advance and as they close; closing the client
/// releases everything its session held.
#[test]
fn ts_min_follows_remote_tasks() {
    with_watchdog("ts_min_follows_remote_tasks", || {
        let node = TestNode::new();
        let rt = node.client();
        let ch = rt.create_channel("progress", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        let out = camera.attach_output(&ch).unwrap();
        let slow = rt.task(0).unwrap();
        let child = slow.spawn(2).unwrap();
        assert_eq!(child.virtual_time(), 2);
        for ts in 0..4 {
            out.put(ts, &[ts as u8][..]).unwrap();
        }
        camera.set_virtual_time(4).unwrap();
        assert_eq!(node.runtime.ts_min(), 0, "the slow task holds ts_min");
        slow.set_virtual_time(3).unwrap();
        // The move was sent without waiting: a call of this client comes after it on the node
        // (docs/NODES.md, "What differs"); the node's own runtime is read after that call.
        assert_eq!(rt.ts_min(), 2, "now its child does");
        assert_eq!(node.runtime.ts_min(), 2, "now its child does, on the node");
        child.close();
        assert_eq!(node.runtime.ts_min(), 3);
        assert_eq!(rt.ts_min(), 3);
        rt.close();
        assert_eq!(node.node.session_count(), 0);
        assert_eq!(node.runtime.ts_min(), 4, "a closed session holds nothing (one above the highest put)");
        assert!(matches!(rt.names(""), Err(Error::Closed { .. })));
        assert_eq!(rt.ts_min(), 3, "a closed client answers ts_min with the last one it saw");
    });
}

/// The failing calls of one scenario, written once for both APIs (they share names and shapes):
/// the errors, in order.
macro_rules! failing_calls {
    ($rt:expr) => {{
        let rt = $rt;
        let ch = rt.create_channel("errors/cam", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&ch).unwrap();
        let mut errors = vec![
            rt.create_channel("errors/cam", Limits::unbounded()).unwrap_err(),
            rt.lookup("errors/none").unwrap_err(),
            rt.create_channel("bad//name", Limits::unbounded()).unwrap_err(),
            rt.task(-1).unwrap_err(),
            out.put(-3, &b""[..]).unwrap_err(),
        ];
        out.put(2, &b"a"[..]).unwrap();
        out.put(6, &b"b"[..]).unwrap();
        task.set_virtual_time(5).unwrap();
        errors.push(out.put(4, &b"c"[..]).unwrap_err());
        errors.push(out.put(6, &b"c"[..]).unwrap_err());
        errors.push(task.set_virtual_time(1).unwrap_err());
        errors.push(inp.get(Selector::At(4), Some(Duration::ZERO)).unwrap_err());
        inp.consume(2).unwrap();
        errors.push(inp.get(Selector::At(2), Some(Duration::ZERO)).unwrap_err());
        inp.consume(6).unwrap();
        errors.push(inp.get(Selector::At(6), Some(Duration::ZERO)).unwrap_err());
        errors.push(inp.consume(8).unwrap_err());
        inp.detach();
        errors.push(inp.get(NEWEST, Some(Duration::ZERO)).unwrap_err());
        task.close();
        errors.push(out.put(9, &b"d"[..]).unwrap_err());
        errors
    }};
}

/// The same failing calls give equal errors, with the same message text, embedded and remote:
/// `AlreadyExists`, `NotFound`, `InvalidArgument`, `InvalidTimestamp`, `BelowVisibility`,
/// `DuplicateTimestamp`, `NotAvailable` with its neighbours, `Reclaimed`, `AlreadyConsumed`,
/// `Closed` after detach and after the task closed.
#[test]
fn errors_cross_unchanged() {
    with_watchdog("errors_cross_unchanged", || {
        let node = TestNode::new();
        let remote = failing_calls!(node.client());
        let embedded = failing_calls!(Runtime::new());
        assert!(matches!(remote[5], Error::BelowVisibility { .. }), "{:?}", remote[5]);
        assert!(matches!(remote[6], Error::DuplicateTimestamp { .. }), "{:?}", remote[6]);
        let neighbours = &remote[8];
        assert!(matches!(neighbours, Error::NotAvailable { previous: Some(2), next: Some(6), .. }), "{neighbours:?}");
        assert!(matches!(remote[9], Error::Reclaimed { .. }), "{:?}", remote[9]);
        assert!(matches!(remote[10], Error::AlreadyConsumed { .. }), "{:?}", remote[10]);
        assert!(matches!(remote[12], Error::Closed { .. }), "{:?}", remote[12]);
        assert_eq!(remote.len(), embedded.len());
        for (remote, embedded) in remote.iter().zip(&embedded) {
            assert_eq!(remote, embedded);
            assert_eq!(remote.to_string(), embedded.to_string());
        }
    });
}

/// A queue through a node: each item goes to exactly one of two workers; an item a worker held
/// open goes back when it detaches.
#[test]
fn queue_serves_two_workers() {
    with_watchdog("queue_serves_two_workers", || {
        let node = TestNode::new();
        let rt = node.client();
        let q = rt.create_queue("work", Limits::unbounded()).unwrap();
        assert!(matches!(rt.channel("work"), Err(Error::NotFound { .. })));
        let splitter = rt.task(0).unwrap();
        let out = splitter.attach_output(&q).unwrap();
        for ts in 0..6 {
            out.put(ts, vec![ts as u8; 4], None).unwrap();
        }
        let (w1, w2) = (rt.task(INFINITY).unwrap(), node.client().task(INFINITY).unwrap());
        let other = w2.attach_input(&node.client().queue("work").unwrap());
        assert!(
            matches!(other, Err(Error::InvalidArgument { .. })),
            "a task attaches only its own session's containers"
        );
        let rt2 = node.client();
        let w2 = rt2.task(INFINITY).unwrap();
        let (i1, i2) = (w1.attach_input(&q).unwrap(), w2.attach_input(&rt2.queue("work").unwrap()).unwrap());
        let mut seen = Vec::new();
        for round in 0..3 {
            let a = i1.get(LONG).unwrap();
            let b = i2.get(LONG).unwrap();
            assert_eq!(a.item.data()[0] as i64, a.item.ts);
            seen.extend([a.item.ts, b.item.ts]);
            i1.consume(&a).unwrap();
            if round < 2 {
                i2.consume(&b).unwrap();
            }
        }
        seen.sort();
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
        assert_eq!(q.stats().live_items, 1, "w2 holds its last item open");
        i2.detach();
        let back = i1.get(LONG).unwrap();
        i1.consume_ts(back.item.ts).unwrap();
        assert_eq!(q.stats().live_items, 0);
    });
}

/// The node's bounds are typed errors and the node carries on: too many sessions, too many
/// handles in a session, a payload above the node's limit.
#[test]
fn bounds_are_typed_errors() {
    with_watchdog("bounds_are_typed_errors", || {
        let node = TestNode::with(|o| {
            o.sessions_max = 1;
            o.session_handles_max = 3;
            o.payload_bytes_max = 1024;
        });
        let rt = node.client();
        let second = connect(&node.endpoint, Some(Duration::from_secs(20)));
        assert!(matches!(second, Err(Error::InvalidArgument { .. })), "{second:?}");
        let ch = rt.create_channel("bounded", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let big = out.put(0, vec![0u8; 2048]);
        assert!(matches!(big, Err(Error::Full { can_never_fit: true, .. })), "{big:?}");
        let fourth = rt.task(0);
        assert!(matches!(fourth, Err(Error::InvalidArgument { .. })), "{fourth:?}");
        out.put(0, vec![0u8; 1024]).unwrap();
        rt.close();
        let again = node.client();
        assert_eq!(again.names("").unwrap(), vec!["bounded".to_owned()]);
    });
}

/// Connecting where no node listens is `Unreachable` once the timeout expires.
#[test]
fn connecting_to_nothing_is_unreachable() {
    with_watchdog("connecting_to_nothing_is_unreachable", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("none.sock").display());
        let result = connect(&endpoint, Some(Duration::from_millis(300)));
        assert!(matches!(result, Err(Error::Unreachable { .. })), "{result:?}");
        let bad = connect("nonsense", Some(Duration::ZERO));
        assert!(matches!(bad, Err(Error::InvalidArgument { .. })), "{bad:?}");
    });
}

/// Dropping a client's handles detaches and closes them on the node, as embedded.
#[test]
fn dropped_handles_release_claims() {
    with_watchdog("dropped_handles_release_claims", || {
        let node = TestNode::new();
        let rt = node.client();
        let ch = rt.create_channel("drops", Limits::unbounded()).unwrap();
        {
            let task = rt.task(0).unwrap();
            let out = task.attach_output(&ch).unwrap();
            out.put(0, &b"x"[..]).unwrap();
        }
        assert!(eventually(Duration::from_secs(20), || node.runtime.ts_min() == 1), "the dropped task let go");
        assert!(eventually(Duration::from_secs(20), || ch.stats().outputs == 0));
    });
}

/// A client used from async code on a tokio current-thread runtime — where zenoh's own blocking
/// calls panic — works: blocking calls, async forms, readiness futures, and dropping it all.
#[test]
fn a_client_on_a_current_thread_runtime_never_panics() {
    with_watchdog("a_client_on_a_current_thread_runtime_never_panics", || {
        let node = TestNode::new();
        let endpoint = node.endpoint.clone();
        let tokio = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        tokio.block_on(async move {
            let rt = connect(&endpoint, LONG).unwrap();
            let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
            let camera = rt.task(0).unwrap();
            let out = camera.attach_output(&ch).unwrap();
            let inp = rt.task(INFINITY).unwrap().attach_input(&ch).unwrap();
            out.put_async(0, &b"x"[..], PutOptions::default()).await.unwrap();
            assert_eq!(inp.get_async(OLDEST_UNSEEN, LONG).await.unwrap().ts, 0);
            let changed = inp.changed(OLDEST_UNSEEN);
            out.put(1, &b"y"[..]).unwrap();
            changed.await;
            assert_eq!(inp.get(OLDEST_UNSEEN, SHORT).unwrap().ts, 1);
            drop((inp, out, camera, ch, rt));
        });
    });
}

/// A client's watch sees the nodes of the mesh: each node up at the start, and a node that
/// closes going down.
#[test]
fn watch_sees_nodes_come_and_go() {
    with_watchdog("watch_sees_nodes_come_and_go", || {
        let a = TestNode::with(|options| options.name = "a".into());
        let b = TestNode::with(|options| {
            options.name = "b".into();
            options.connect = vec![a.endpoint.clone()];
        });
        let rt = b.client();
        let mut watch = rt.watch("", LONG).unwrap();
        let mut up = Vec::new();
        while up.len() < 2 {
            match watch.next().expect("the nodes come up") {
                stampede::WatchEvent::NodeUp { node } => up.push(node),
                other => panic!("unexpected {other:?}"),
            }
        }
        up.sort();
        assert_eq!(up, ["a", "b"]);
        assert_eq!(rt.nodes().unwrap(), ["a", "b"]);
        a.node.close();
        assert_eq!(watch.next(), Some(stampede::WatchEvent::NodeDown { node: "a".into() }));
    });
}

/// A destroyed container frees its slot in the session: a client that creates and destroys
/// temporary channels never runs into `session_handles_max`.
#[test]
fn destroyed_containers_free_their_session_slots() {
    with_watchdog("destroyed_containers_free_their_session_slots", || {
        let node = TestNode::with(|options| options.session_handles_max = 4);
        let rt = node.client();
        for round in 0..10 {
            let ch = rt.create_channel(&format!("scratch/{round}"), Limits::unbounded()).unwrap();
            ch.destroy().unwrap();
        }
    });
}

/// A node serves an embedded runtime's engine; a client of a node has none to serve
/// (`InvalidArgument` naming the node), and the node's application sees the runtime it serves
/// through the facade (`Runtime::from` its engine), the same runtime, not a copy.
#[test]
fn only_an_embedded_runtime_has_an_engine_to_serve() {
    with_watchdog("only_an_embedded_runtime_has_an_engine_to_serve", || {
        let node = TestNode::new();
        let rt = node.client();
        match rt.engine() {
            Err(Error::InvalidArgument { reason, .. }) => assert!(reason.contains("client of node test"), "{reason}"),
            other => panic!("a client's engine: {:?}", other.map(|_| ())),
        }
        rt.create_channel("made/remotely", Limits::unbounded()).unwrap();
        let served = Runtime::from(node.node.runtime().clone());
        assert_eq!(served.names("made/").unwrap(), vec!["made/remotely".to_owned()]);
        rt.close();
    })
}

/// A liveliness timeout outside its named bounds is refused, naming them: too short ends live
/// sessions on a loaded host, too long lets a vanished client hold ts_min for hours.
#[test]
fn a_liveliness_timeout_outside_its_bounds_is_refused() {
    use stampede_node::{Node, NodeOptions, LIVELINESS_TIMEOUT_MAX, LIVELINESS_TIMEOUT_MIN};
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
    for timeout in
        [Duration::from_millis(1), LIVELINESS_TIMEOUT_MAX + Duration::from_secs(1), Duration::from_secs(1 << 40)]
    {
        let options = NodeOptions { liveliness_timeout: timeout, ..NodeOptions::listen(&endpoint) };
        match Node::serve(Runtime::new().engine().unwrap(), options) {
            Err(Error::InvalidArgument { reason, .. }) => {
                assert!(
                    reason.contains("LIVELINESS_TIMEOUT_MIN") && reason.contains("LIVELINESS_TIMEOUT_MAX"),
                    "{reason}"
                )
            }
            other => panic!("{timeout:?}: {:?}", other.map(|_| ())),
        }
    }
    for timeout in [LIVELINESS_TIMEOUT_MIN, LIVELINESS_TIMEOUT_MAX] {
        let options = NodeOptions { liveliness_timeout: timeout, ..NodeOptions::listen(&endpoint) };
        Node::serve(Runtime::new().engine().unwrap(), options).expect("a bound itself is accepted").close();
    }
}

/// A node's worker count outside 1 ..= WORKERS_MAX is refused, naming the bound; one worker
/// serves (the default on 2 processors).
#[test]
fn a_worker_count_outside_its_bounds_is_refused() {
    use stampede_node::{workers_default, Node, NodeOptions, WORKERS_MAX};
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
    for workers in [0, WORKERS_MAX + 1] {
        let options = NodeOptions { workers: Some(workers), ..NodeOptions::listen(&endpoint) };
        match Node::serve(Runtime::new().engine().unwrap(), options) {
            Err(Error::InvalidArgument { reason, .. }) => assert!(reason.contains("WORKERS_MAX"), "{reason}"),
            other => panic!("{workers}: {:?}", other.map(|_| ())),
        }
    }
    assert!((1..=WORKERS_MAX).contains(&workers_default()));
    let node = Node::serve(
        Runtime::new().engine().unwrap(),
        NodeOptions { workers: Some(1), ..NodeOptions::listen(&endpoint) },
    );
    let node = node.expect("one worker serves");
    let rt = connect(&endpoint, LONG).unwrap();
    rt.create_channel("served/by-one-worker", Limits::unbounded()).unwrap();
    rt.close();
    node.close();
}
