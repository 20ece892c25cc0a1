//! Two nodes on the fabric share one ts_min (SPEC §3 "Distributed"): a task held by a client of
//! node A keeps node B from reclaiming what that task could still get, and B follows as soon as
//! the task moves on or goes. The driver is `stampede_node::mesh`; the protocol docs/PROTOCOL.md.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use stampede::{ChannelOptions, Container, Limits, Runtime, INFINITY};
use stampede_node::{Node, NodeOptions};
use support::{eventually, with_watchdog, TestNode, CONNECT_TIMEOUT};

/// How long the mesh may take to reach a value (several message rounds on loopback: far less).
const SETTLE: Duration = Duration::from_secs(10);

fn live(rt: &Runtime, name: &str) -> usize {
    match rt.lookup(name).unwrap() {
        Container::Channel(ch) => ch.stats().live_items,
        Container::Queue(_) => unreachable!("{name} is a channel"),
    }
}

/// Node a, and node b connected to it; both share ts_min.
fn two_nodes() -> (TestNode, Node, Runtime, tempfile::TempDir) {
    let a = TestNode::with(|o| {
        o.name = "a".into();
        o.mesh_ts_min = true;
    });
    let b_dir = tempfile::tempdir().unwrap();
    let mut options = NodeOptions::listen(&format!("unixsock-stream/{}", b_dir.path().join("b.sock").display()));
    options.name = "b".into();
    options.mesh_ts_min = true;
    options.connect = vec![a.endpoint.clone()];
    let b_rt = Runtime::new();
    let b = Node::serve(b_rt.clone(), options).expect("node b joins node a's mesh");
    (a, b, b_rt, b_dir)
}

#[test]
fn a_task_on_one_node_holds_the_other_nodes_ts_min() {
    with_watchdog("a_task_on_one_node_holds_the_other_nodes_ts_min", || {
        let (a, b, b_rt, _b_dir) = two_nodes();

        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let holder = client.task(5).unwrap();

        let ch = b_rt.create_channel("frames", Limits::unbounded()).unwrap();
        let producer = b_rt.task(5).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in 5..10 {
            out.put(ts, vec![ts as u8]).unwrap();
        }
        producer.set_virtual_time(INFINITY).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 5), "b's ts_min reaches 5, not past it: {}", b_rt.ts_min());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(b_rt.ts_min(), 5, "the task of a's client at 5 holds b's ts_min");
        assert_eq!(live(&b_rt, "frames"), 5, "nothing that task could get is reclaimed on b");

        holder.set_virtual_time(8).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "b follows the task to 8: {}", b_rt.ts_min());
        assert_eq!(live(&b_rt, "frames"), 2);

        client.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "the client's session ended: {}", b_rt.ts_min());
        assert_eq!(live(&b_rt, "frames"), 0);
        let counters = b.mesh_counters().unwrap();
        assert_eq!(counters.malformed.load(Ordering::Relaxed) + counters.refused.load(Ordering::Relaxed), 0);
    })
}

#[test]
fn a_node_that_leaves_releases_what_it_held() {
    with_watchdog("a_node_that_leaves_releases_what_it_held", || {
        let (a, b, b_rt, _b_dir) = two_nodes();
        // A task on b's own runtime holds 3; a's ts_min stays there.
        let holder = b_rt.task(3).unwrap();
        let a_task = a.runtime.task(3).unwrap();
        a_task.set_virtual_time(INFINITY).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(a.runtime.ts_min(), 0, "nothing put: the watermark holds ts_min at 0");
        let ch = a.runtime.create_channel("x", Limits::unbounded()).unwrap();
        let p = a.runtime.task(3).unwrap();
        p.attach_output(&ch).unwrap().put(7, vec![7]).unwrap();
        p.close();
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 3), "b's task holds a at 3: {}", a.runtime.ts_min());
        // Node b leaves the fabric without closing its task: its token goes, a drops its claims.
        b.close();
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 8), "b's claims went with b: {}", a.runtime.ts_min());
        drop(holder);
    })
}

/// Hostile bytes on the mesh's keys: payloads that do not decode, keys that name no participant,
/// and well-formed messages from an incarnation nobody reported. The node counts them, keeps at
/// most `EARLY_MESSAGES_MAX` of the unknown sender's, stays up, and its ts_min still follows its
/// own tasks.
#[test]
fn hostile_mesh_messages_are_counted_and_change_nothing() {
    with_watchdog("hostile_mesh_messages_are_counted_and_change_nothing", || {
        use stampede_core::mesh::{Batch, Message};
        use stampede_core::Peer;
        use zenoh::Wait;

        let (a, b, b_rt, _b_dir) = two_nodes();
        let config = stampede::remote::fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let evil = zenoh::open(config).wait().unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..300u32 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let garbage: Vec<u8> = seed.to_le_bytes().iter().cycle().take((i % 40) as usize).copied().collect();
            evil.put("stampede/evil/mesh/7", garbage).wait().unwrap();
        }
        evil.put("stampede/evil/mesh/not-a-number", vec![1u8]).wait().unwrap();
        // Addressed to b's incarnation, read from its liveliness token: b holds them (an unknown
        // sender) up to the bound and drops the rest.
        let token = evil.liveliness().get("stampede/b/mesh/*").wait().unwrap().recv().unwrap();
        let key = token.result().unwrap().key_expr().as_str().to_owned();
        let incarnation = key.rsplit('/').next().unwrap().parse().unwrap();
        let me = Peer { id: stampede_node::mesh::peer_id("b"), incarnation };
        for seq in 1..=400u64 {
            let batch = Message::Batch(Batch { seq, watermark: 1 << 40, ..Batch::default() });
            let bytes = postcard::to_allocvec(&(vec![me], batch)).unwrap();
            evil.put("stampede/evil/mesh/9", bytes).wait().unwrap();
        }
        // One message each from 100 more unknown incarnations: at most EARLY_SENDERS_MAX senders
        // are kept.
        for incarnation in 1_000..1_100u64 {
            let batch = Message::Batch(Batch { seq: 1, ..Batch::default() });
            let bytes = postcard::to_allocvec(&(vec![me], batch)).unwrap();
            evil.put(format!("stampede/evil/mesh/{incarnation}"), bytes).wait().unwrap();
        }
        let counters = b.mesh_counters().unwrap();
        let (messages_max, senders_max) =
            (stampede_node::mesh::EARLY_MESSAGES_MAX as u64, stampede_node::mesh::EARLY_SENDERS_MAX as u64);
        let dropped_at_least = (400 - messages_max) + (100 - (senders_max - 1));
        assert!(
            eventually(SETTLE, || counters.malformed.load(Ordering::Relaxed) >= 200
                && counters.dropped.load(Ordering::Relaxed) >= dropped_at_least),
            "the garbage is counted, unknown senders' messages beyond the bounds dropped: {counters:?}"
        );
        let _ = evil.close().wait();

        // The node is up and its ts_min still follows its own tasks and a's.
        let task = b_rt.task(b_rt.ts_min()).unwrap();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let holder = client.task(b_rt.ts_min()).unwrap();
        task.close();
        let held = holder.virtual_time();
        assert!(eventually(SETTLE, || b_rt.ts_min() == held), "{} vs {held}", b_rt.ts_min());
        drop(holder);
        client.close();
    })
}

fn on_node(node: &str) -> ChannelOptions {
    ChannelOptions { node: Some(node.into()), ..ChannelOptions::default() }
}

/// A client of node a places a channel on node b; its tasks (on a) put and get there through
/// their shadows on b, which hold b's ts_min exactly where the tasks are and follow them.
#[test]
fn a_task_spans_two_nodes_through_its_shadows() {
    with_watchdog("a_task_spans_two_nodes_through_its_shadows", || {
        let (a, b, b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let ch = client.create_channel("frames", on_node("b")).unwrap();
        assert_eq!(ch.info().node.as_deref(), Some("b"));
        assert!(b_rt.lookup("frames").is_ok(), "the channel lives on b");
        assert!(a.runtime.lookup("frames").is_err(), "and not on a");

        let producer = client.task(5).unwrap();
        let consumer = client.task(5).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        let inp = consumer.attach_input(&ch).unwrap();
        for ts in 5..10 {
            out.put(ts, vec![ts as u8]).unwrap();
        }
        producer.set_virtual_time(INFINITY).unwrap();
        let item = inp.get(7, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(&item.payload.data[..], &[7u8]);
        assert_eq!(consumer.visibility(), 5, "nothing consumed yet: the task is at 5");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(b_rt.ts_min(), 5, "the consumer's shadow holds b at the task's virtual time");
        assert_eq!(live(&b_rt, "frames"), 5);

        inp.consume_until(6).unwrap();
        consumer.set_virtual_time(8).unwrap();
        assert_eq!(consumer.visibility(), 7, "item 7 is open on the input on b");
        inp.consume(7).unwrap();
        assert_eq!(consumer.visibility(), 8);
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "b follows the task to 8: {}", b_rt.ts_min());
        assert_eq!(live(&b_rt, "frames"), 2);

        // A looked-up channel of another node is found there, and reached the same way.
        let other = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let seen = other.channel("frames").unwrap();
        let late = other.task(8).unwrap();
        let late_in = late.attach_input(&seen).unwrap();
        assert_eq!(late_in.get(9, Some(Duration::from_secs(5))).unwrap().ts, 9);
        other.close();

        client.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "the client's sessions ended: {}", b_rt.ts_min());
        assert_eq!(live(&b_rt, "frames"), 0);
        for node in [&a.node, &b] {
            let counters = node.mesh_counters().unwrap();
            assert_eq!(counters.malformed.load(Ordering::Relaxed) + counters.refused.load(Ordering::Relaxed), 0);
        }
    })
}

/// Nodes that share no ts_min (no `--mesh-ts-min`): a client still places containers on any
/// node, but a task of one node using another's channel is refused with a typed error saying
/// what to do, and nothing is left held on either node.
#[test]
fn a_task_cannot_span_nodes_that_share_no_ts_min() {
    with_watchdog("a_task_cannot_span_nodes_that_share_no_ts_min", || {
        let x = TestNode::with(|o| o.name = "x".into());
        let y = TestNode::with(|o| {
            o.name = "y".into();
            o.connect = vec![x.endpoint.clone()];
        });
        let client = stampede::connect(&x.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let ch = client.create_channel("frames", on_node("y")).unwrap();
        assert_eq!(ch.info().node.as_deref(), Some("y"));
        assert!(y.runtime.lookup("frames").is_ok());
        let task = client.task(0).unwrap();
        let claims = (x.runtime.stats().claims, y.runtime.stats().claims);
        match task.attach_output(&ch) {
            Err(stampede::Error::InvalidArgument { reason, .. }) => {
                assert!(reason.contains("--mesh-ts-min"), "{reason}")
            }
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("a task of x attached to y's channel"),
        }
        assert_eq!((x.runtime.stats().claims, y.runtime.stats().claims), claims, "nothing held");
        // The same task still uses its own node's channels.
        let own = client.create_channel("own", Limits::unbounded()).unwrap();
        task.attach_output(&own).unwrap().put(1, vec![1]).unwrap();
        client.close();
    })
}

/// A task's move to another node that the client never asked to take over (it died in
/// between) is declined there when its session on the home node ends: the carry that covered it
/// would otherwise hold every node's ts_min for ever.
#[test]
fn a_move_never_taken_over_is_declined_when_its_session_ends() {
    with_watchdog("a_move_never_taken_over_is_declined_when_its_session_ends", || {
        use stampede::remote::fabric;
        use stampede::remote::wire::{decode_reply, encode, Reply, Request, RequestHeader};
        use zenoh::Wait;

        let (a, _b, b_rt, _b_dir) = two_nodes();
        let producer = b_rt.task(b_rt.ts_min()).unwrap();
        let out = producer.attach_output(&b_rt.create_channel("frames", Limits::unbounded()).unwrap()).unwrap();
        out.put(20, vec![1]).unwrap();
        producer.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 21), "{}", b_rt.ts_min());

        // A client speaking the wire itself: a task on a at 21, moved to b, then closed.
        let config = fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let raw = zenoh::open(config).wait().unwrap();
        let session = raw.zid().to_string();
        let token = raw.liveliness().declare_token(fabric::session_key("a", &session)).wait().unwrap();
        let mut secret = [0; 16];
        let mut call = |node: &str, session: &str, request: Request| {
            let header = RequestHeader { session: session.to_owned(), secret, request };
            let replies = raw.get(fabric::rpc_key(node)).payload(encode(&header)).wait().unwrap();
            let bytes = replies.recv().unwrap().result().unwrap().payload().to_bytes().into_owned();
            let reply = decode_reply(&bytes).unwrap().0;
            if let Reply::Opened(s) = reply {
                secret = s;
            }
            reply
        };
        let Reply::Hello(hello) = call("b", "", Request::Hello) else { panic!("b says hello") };
        let to = hello.mesh.expect("b shares ts_min");
        assert!(matches!(call("a", &session, Request::Open { user: None, password: None }), Reply::Opened(_)));
        let Reply::Handle(task) = call("a", &session, Request::Task { virtual_time: 21 }) else { panic!("a task") };
        let moved = call("a", &session, Request::MoveTask { task, to_node: "b".into(), to });
        assert!(matches!(moved, Reply::Moved { visibility: 21, .. }), "{moved:?}");
        assert!(matches!(call("a", &session, Request::CloseTask { task }), Reply::Done));

        // The task is gone; its move still covers 21 on a: nobody's ts_min passes it.
        let holder = b_rt.task(21).unwrap();
        let out = holder.attach_output(&b_rt.channel("frames").unwrap()).unwrap();
        out.put(25, vec![2]).unwrap();
        holder.close();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(b_rt.ts_min(), 21, "the open move holds b's ts_min");

        // The client vanishes: a ends its session and has b decline the move.
        drop(token);
        let _ = raw.close().wait();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 26), "the move was declined: {}", b_rt.ts_min());
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 26), "{}", a.runtime.ts_min());
    })
}
