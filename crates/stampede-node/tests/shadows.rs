//! One task, several nodes (docs/NODES.md "One task, several nodes", docs/PROTOCOL.md point 2):
//! a client places containers on any node of a mesh sharing ts_min, and its tasks use them
//! through shadows. Each test holds one property: puts and gets through shadows, claims held and
//! released on every node, moves never left open (a client gone between the move and its
//! takeover, a lost reply, a takeover that cannot happen), hostile takeovers refused, no stall
//! of GC handlers, no leak of sessions or move slots. Differences from the embedded API that
//! remain are `#[ignore]`d with the reason and documented.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stampede::{ChannelOptions, ConnectOptions, Error, Limits, Runtime, INFINITY};
use support::{eventually, live, two_nodes, two_nodes_with, with_watchdog, TestNode, CONNECT_TIMEOUT};

/// How long the mesh may take to reach a value (several message rounds on loopback: far less).
const SETTLE: Duration = Duration::from_secs(10);

fn on_node(node: &str) -> ChannelOptions {
    ChannelOptions { node: Some(node.into()), ..ChannelOptions::default() }
}

/// Items 5..10 on channel `frames` of node b, their producer gone: b's ts_min is then held only
/// by the tasks of the test.
fn frames_on_b(b_rt: &Runtime) {
    let ch = b_rt.create_channel("frames", Limits::unbounded()).unwrap();
    let producer = b_rt.task(b_rt.ts_min()).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    for ts in 5..10 {
        out.put(ts, vec![ts as u8]).unwrap();
    }
    producer.close();
}

/// A takeover that cannot happen because the client's session on the container's node ended
/// (here: the runtime whose channel it is was closed) must leave no move open on the home node:
/// an open move's carry holds every node's ts_min at the task's visibility for as long as the
/// home session lives, whatever the task does afterwards.
#[test]
fn a_takeover_that_never_happens_leaves_no_move_open() {
    with_watchdog("a_takeover_that_never_happens_leaves_no_move_open", || {
        let (a, _b, b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let holder = client.task(5).unwrap();
        frames_on_b(&b_rt);
        assert!(eventually(SETTLE, || b_rt.ts_min() == 5), "{}", b_rt.ts_min());

        let there = stampede::connect_to(&a.endpoint, "b", Some(CONNECT_TIMEOUT)).unwrap();
        let ch = there.channel("frames").unwrap();
        there.close();
        match holder.attach_input(&ch) {
            Err(Error::Closed { .. }) => {}
            Err(e) => panic!("attaching through a closed session: {e}"),
            Ok(_) => panic!("attached through a closed session"),
        }

        holder.set_virtual_time(8).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "b follows the task to 8: {}", b_rt.ts_min());
        holder.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "nothing holds b any more: {}", b_rt.ts_min());
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 10), "nor a: {}", a.runtime.ts_min());
        client.close();
    })
}

/// A shadow whose session on its node ended is gone (closed with that session): the task's
/// `set_virtual_time` still moves the task and answers `Ok`, as embedded, and the task can
/// attach again on that node through another session (a new shadow).
#[test]
fn a_shadow_whose_session_ended_does_not_break_its_task() {
    with_watchdog("a_shadow_whose_session_ended_does_not_break_its_task", || {
        let (a, _b, b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let task = client.task(5).unwrap();
        frames_on_b(&b_rt);

        let there = stampede::connect_to(&a.endpoint, "b", Some(CONNECT_TIMEOUT)).unwrap();
        let inp = task.attach_input(&there.channel("frames").unwrap()).unwrap();
        assert_eq!(inp.get(5, Some(Duration::from_secs(5))).unwrap().ts, 5);
        there.close();

        task.set_virtual_time(7).expect("the task moves: its shadow went with its session");
        assert_eq!(task.virtual_time(), 7);
        // Through the client's own session on b this time.
        let ch = client.channel("frames").unwrap();
        let inp = task.attach_input(&ch).expect("a new shadow on b");
        assert_eq!(inp.get(8, Some(Duration::from_secs(5))).unwrap().ts, 8);
        inp.consume_until(7).unwrap();
        task.set_virtual_time(9).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "the open item 8 holds b: {}", b_rt.ts_min());
        inp.consume(8).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 9), "{}", b_rt.ts_min());
        client.close();
    })
}

/// A lookup of a name no node has leaves no session of the client on the nodes it asked.
#[test]
fn a_lookup_that_finds_nothing_leaves_no_session_behind() {
    with_watchdog("a_lookup_that_finds_nothing_leaves_no_session_behind", || {
        let (a, b, _b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        for _ in 0..3 {
            assert!(matches!(client.lookup("nowhere"), Err(Error::NotFound { .. })));
        }
        assert_eq!(b.session_count(), 0, "the client holds no session on b");
        client.close();
    })
}

/// A move already taken over takes no slot of the session's bound: `session_handles_max`
/// counts tasks, connections and containers (what the error says), not moves resolved.
#[test]
fn a_resolved_move_takes_no_handle_slot() {
    with_watchdog("a_resolved_move_takes_no_handle_slot", || {
        let (a, _b, b_rt, _b_dir) = two_nodes_with(|o| o.session_handles_max = 3);
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let task = client.task(5).unwrap(); // 1 on a
        frames_on_b(&b_rt);
        let _inp = task.attach_input(&client.channel("frames").unwrap()).unwrap(); // the move, resolved
                                                                                   // The move resolves on the nodes (b's takeover reaching a) with no signal to the client: give it time; if it has not, the handle count below fails loudly.
        std::thread::sleep(Duration::from_millis(300));
        let own = client.create_channel("own", Limits::unbounded()).unwrap(); // 2 on a
        let _out = task.attach_output(&own).expect("a third handle on a: the move is no handle"); // 3 on a
        client.close();
    })
}

/// A GC handler that reads a task's visibility runs while that task's `set_virtual_time`
/// reclaims: embedded, handlers run outside every lock, so neither waits for the other. Here the
/// handler must not wait for the task's shadows lock while the call waits for the handler.
#[test]
fn a_gc_handler_may_read_a_task_that_is_moving() {
    with_watchdog("a_gc_handler_may_read_a_task_that_is_moving", || {
        let (a, _b, b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let ch = client.create_channel("frames", on_node("b")).unwrap();
        let task = client.task(b_rt.ts_min()).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let start = task.virtual_time();
        for ts in start..start + 20 {
            out.put(ts, vec![1]).unwrap();
        }
        let seen = Arc::new(AtomicU64::new(0));
        let reading = Arc::new(AtomicBool::new(true));
        {
            let (task, seen, reading) = (task.clone(), seen.clone(), reading.clone());
            client
                .on_reclaim(move |_, _| {
                    if reading.load(Ordering::SeqCst) {
                        let _ = task.visibility();
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
        let mut slowest = Duration::ZERO;
        for ts in start + 1..start + 20 {
            let began = Instant::now();
            task.set_virtual_time(ts).unwrap();
            slowest = slowest.max(began.elapsed());
            // Let the mesh settle, so that the next move is the one that reclaims.
            assert!(eventually(SETTLE, || b_rt.ts_min() == ts), "{} vs {ts}", b_rt.ts_min());
        }
        reading.store(false, Ordering::SeqCst);
        assert!(eventually(SETTLE, || seen.load(Ordering::SeqCst) > 0), "items were reclaimed on b");
        assert!(slowest < Duration::from_secs(2), "a set_virtual_time took {slowest:?}");
        task.set_virtual_time(INFINITY).unwrap();
        client.close();
    })
}

/// A `MoveTask` whose reply is lost leaves a carry on the home node that the client does not know
/// of (so it never asks for the takeover): like a lost get or task, it must end the session, whose
/// end declines the move. Otherwise every node's ts_min stays at the task's visibility for as
/// long as the session lives.
#[test]
fn a_lost_move_reply_ends_the_session() {
    use stampede_core::Peer;
    use stampede_wire::{Op, Request};
    let to = Peer { id: stampede_node::mesh::peer_id("b"), incarnation: 1 };
    assert!(Request::Op(Op::MoveTask { task: 1, to_node: "b".into(), to }).holds_on_node());
}

/// Embedded, a task's visibility bounds its `set_virtual_time`, puts and spawns: with an item
/// open at 6 on an input (here on node b, through its shadow) and its virtual time at 9,
/// `visibility()` is 6 and `set_virtual_time(7)` is legal. The home node checks against the home
/// task's own visibility only (9), so it refuses — while `visibility()` says 6.
#[test]
#[ignore = "a difference documented in docs/NODES.md, not built: a shadow's open items do not lower the home \
            task's visibility (the home node would need a move back from the shadow's node to cover the lower claim)"]
fn an_item_open_on_a_shadow_lowers_the_tasks_visibility_everywhere() {
    with_watchdog("an_item_open_on_a_shadow_lowers_the_tasks_visibility_everywhere", || {
        let (a, _b, b_rt, _b_dir) = two_nodes();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let task = client.task(5).unwrap();
        frames_on_b(&b_rt);
        let inp = task.attach_input(&client.channel("frames").unwrap()).unwrap();
        assert_eq!(inp.get(6, Some(Duration::from_secs(5))).unwrap().ts, 6);
        task.set_virtual_time(9).unwrap();
        assert_eq!(task.visibility(), 6, "the item open on b");
        task.set_virtual_time(7).expect("7 >= the task's visibility, 6");
        assert_eq!(task.virtual_time(), 7);
        client.close();
    })
}

/// `MeshLink::move_task` reads a task's visibility under its lock but does not check that the
/// task is still open: a `MoveTask` racing the task's `CloseTask` carries the visibility of a
/// task whose claims are gone — a new claim covered by nothing (other views may be past it, and
/// then refuse the carry and stop this node's stream). It must fail `Closed`.
#[test]
fn a_closed_task_cannot_move() {
    use stampede::mesh_link::MeshLink;
    use stampede_core::{Mesh, MeshLimits, Peer};
    let rt = Runtime::new();
    let me = Peer { id: 1, incarnation: 1 };
    let other = Peer { id: 2, incarnation: 1 };
    let link = MeshLink::attach(&rt, Mesh::new(me, MeshLimits::default()), Arc::new(|| {})).unwrap();
    link.with(|mesh| mesh.open_door()).unwrap();
    link.with(|mesh| mesh.peer_joined(other)).unwrap();
    let task = rt.task(3).unwrap();
    task.close();
    assert!(matches!(link.move_task(&task, other), Err(Error::Closed { .. })), "a closed task moved");
}

/// The home node of a task leaves (here it stops serving; a crash is the same to the mesh): its
/// claims go with it, and so does the task's shadow on node b — the task can never move again
/// (`set_virtual_time` fails at home first), so a shadow left behind would hold b's ts_min (and
/// every node's) for as long as the client keeps the task.
#[test]
fn a_shadow_ends_when_its_home_node_leaves() {
    with_watchdog("a_shadow_ends_when_its_home_node_leaves", || {
        let (a, _b, b_rt, b_dir) = two_nodes();
        let b_endpoint = format!("unixsock-stream/{}", b_dir.path().join("b.sock").display());
        // Reached through b, so that a's leaving does not cut the client off.
        let client = stampede::connect_to(&b_endpoint, "a", Some(CONNECT_TIMEOUT)).unwrap();
        let task = client.task(5).unwrap();
        frames_on_b(&b_rt);
        let inp = task.attach_input(&client.channel("frames").unwrap()).unwrap();
        inp.consume_until(6).unwrap();
        task.set_virtual_time(7).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 7), "{}", b_rt.ts_min());

        a.node.close();
        assert!(task.set_virtual_time(8).is_err(), "the task's home is gone");
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "b is still held by the shadow: {}", b_rt.ts_min());
        drop((inp, task));
        client.close();
    })
}

/// A shadow's claim is covered by the move it takes over only at or above the timestamp the move
/// carries (the home task's visibility). The node taking it over checks the client's
/// `virtual_time` against its own ts_min only, so a client speaking the wire may start a shadow
/// below what the move covers: a claim covered by nothing, which another node whose view is
/// already past it (a door heard there, not yet here) refuses — stopping this node's stream there.
///
/// And a takeover naming an earlier incarnation of the receiver is refused without declining the
/// move (move ids count per receiver: declining it would resolve that id ahead of the new one's).
#[test]
fn a_shadow_cannot_start_below_its_move() {
    with_watchdog("a_shadow_cannot_start_below_its_move", || {
        use stampede_wire::fabric;
        use stampede_wire::{decode_reply, encode, Op, Outcome, Reply, Request, RequestHeader, WireError};
        use zenoh::Wait;

        let (a, _b, _b_rt, _b_dir) = two_nodes();
        let config = fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let raw = zenoh::open(config).wait().unwrap();
        let session = raw.zid().to_string();
        let _on_a = raw.liveliness().declare_token(fabric::session_key("a", &session)).wait().unwrap();
        let _on_b = raw.liveliness().declare_token(fabric::session_key("b", &session)).wait().unwrap();
        let mut secrets = std::collections::HashMap::new();
        let mut call = |node: &str, request: Request| {
            let secret = secrets.get(node).copied().unwrap_or_default();
            let id = if matches!(request, Request::Hello) { String::new() } else { session.clone() };
            let header = RequestHeader::new(id, secret, request);
            let replies = raw.get(fabric::rpc_key(node)).payload(encode(&header)).wait().unwrap();
            let bytes = replies.recv().unwrap().result().unwrap().payload().to_bytes().into_owned();
            let reply = decode_reply(&bytes).unwrap().0;
            if let Reply::Opened(s) = reply {
                secrets.insert(node.to_owned(), s);
            }
            reply
        };
        // Routes to b through a may still be converging (under load, a query found no queryable
        // yet: seen once): a real client retries, this raw one asks until b answers.
        let hello = encode(&RequestHeader::new(String::new(), Default::default(), Request::Hello));
        let answers = || raw.get(fabric::rpc_key("b")).payload(hello.clone()).wait().is_ok_and(|r| r.recv().is_ok());
        assert!(eventually(SETTLE, answers), "b answers through a");
        let Reply::Hello(hello) = call("b", Request::Hello) else { panic!("b says hello") };
        let to = hello.mesh.expect("b shares ts_min");
        assert!(matches!(call("a", Request::Open { user: None, password: None }), Reply::Opened(_)));
        assert!(matches!(call("b", Request::Open { user: None, password: None }), Reply::Opened(_)));
        let Reply::Outcome(Outcome::Handle(task)) = call("a", Request::Op(Op::Task { virtual_time: 21 })) else {
            panic!("a task")
        };
        let Reply::Outcome(Outcome::Moved { from, id, visibility, proof }) =
            call("a", Request::Op(Op::MoveTask { task, to_node: "b".into(), to }))
        else {
            panic!("the move")
        };
        assert_eq!(visibility, 21);
        // A takeover meant for an earlier life of b (a request in flight across its restart):
        // refused, and it declines nothing — the same id may yet be this life's.
        let earlier = stampede_core::Peer { incarnation: to.incarnation - 1, ..to };
        let takeover =
            |to, virtual_time, proof| Op::TakeOverTask { from_node: "a".into(), from, id, to, virtual_time, proof };
        let stale = call("b", Request::Op(takeover(earlier, 21, proof)));
        assert!(matches!(stale, Reply::Error(_)), "a takeover for another incarnation: {stale:?}");
        // Whoever learns a move's id without its proof cannot take it over (nor decline it).
        let forged = call("b", Request::Op(takeover(to, 21, [0; 16])));
        let Reply::Error(WireError::PermissionDenied { reason, .. }) = &forged else {
            panic!("a takeover without the move's proof: {forged:?}")
        };
        assert!(reason.contains("proof"), "{reason}");
        let taken = call("b", Request::Op(takeover(to, 21, proof)));
        assert!(
            matches!(taken, Reply::Outcome(Outcome::Handle(_))),
            "the move is still open after the stale takeover: {taken:?}"
        );
        let Reply::Outcome(Outcome::Moved { from, id, proof, .. }) =
            call("a", Request::Op(Op::MoveTask { task, to_node: "b".into(), to }))
        else {
            panic!("another move")
        };
        let below =
            call("b", Request::Op(Op::TakeOverTask { from_node: "a".into(), from, id, to, virtual_time: 0, proof }));
        assert!(matches!(below, Reply::Error(_)), "a shadow at 0 for a move carrying 21: {below:?}");
        let _ = raw.close().wait();
    })
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
        // An absence cannot be awaited: b's ts_min must stay at 5; the pause gives a wrong advance time to show.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(b_rt.ts_min(), 5, "the consumer's shadow holds b at the task's virtual time");
        assert_eq!(live(&b_rt, "frames"), 5);

        inp.consume_until(6).unwrap();
        consumer.set_virtual_time(8).unwrap();
        assert_eq!(consumer.visibility(), 7, "item 7 is open on the input on b");
        inp.consume(7).unwrap();
        assert_eq!(consumer.visibility(), 8);
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "b follows the task to 8: {}", b_rt.ts_min());
        // Observed from another thread: the sweep may still be running when ts_min shows.
        assert!(eventually(SETTLE, || live(&b_rt, "frames") == 2), "{}", live(&b_rt, "frames"));

        // A looked-up channel of another node is found there, and reached the same way.
        let other = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let seen = other.channel("frames").unwrap();
        let late = other.task(8).unwrap();
        let late_in = late.attach_input(&seen).unwrap();
        assert_eq!(late_in.get(9, Some(Duration::from_secs(5))).unwrap().ts, 9);
        other.close();

        client.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "the client's sessions ended: {}", b_rt.ts_min());
        // Observed from another thread: the sweep may still be running when ts_min shows.
        assert!(eventually(SETTLE, || live(&b_rt, "frames") == 0), "{}", live(&b_rt, "frames"));
        for node in [&a.node, &b] {
            let counters = node.mesh_counters().unwrap();
            assert_eq!(counters.malformed.load(Ordering::Relaxed) + counters.refused.load(Ordering::Relaxed), 0);
        }
    })
}

/// A client's session on another node of this host, opened through the node it connected to,
/// sends its requests on that node's direct path (its Unix socket), not through zenoh and the
/// first node. A 2 MiB item put and got there travels as shared memory, whole. With `zenoh_only`,
/// no request takes a direct path and the client works the same.
#[test]
fn a_session_on_another_node_of_this_host_takes_its_direct_path() {
    with_watchdog("a_session_on_another_node_of_this_host_takes_its_direct_path", || {
        let (a, b, _b_rt, _b_dir) = two_nodes();
        for zenoh_only in [false, true] {
            let options = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), zenoh_only, ..ConnectOptions::default() };
            let client = stampede::connect_with(&a.endpoint, &options).unwrap();
            let before = b.direct_requests();
            let ch = client.create_channel(&format!("frames-{zenoh_only}"), on_node("b")).unwrap();
            let ts = client.ts_min();
            let producer = client.task(ts).unwrap();
            let out = producer.attach_output(&ch).unwrap();
            let reader = client.task(INFINITY).unwrap();
            let inp = reader.attach_input(&ch).unwrap();
            let frame: Vec<u8> = (0..2 << 20).map(|i| (i % 251) as u8).collect();
            out.put(ts, frame.clone()).unwrap();
            let item = inp.get(ts, Some(CONNECT_TIMEOUT)).unwrap();
            assert!(item.payload.data[..] == frame[..], "the 2 MiB item, whole");
            inp.consume(ts).unwrap();
            let direct = b.direct_requests() - before;
            if zenoh_only {
                assert_eq!(direct, 0, "zenoh_only: every request is a zenoh query");
            } else {
                assert!(direct >= 4, "create, attaches, put, get, consume on b: {direct} on b's direct path");
            }
            client.close();
        }
    })
}

/// Nodes started with no option but their names share one ts_min (docs/PROTOCOL.md): a task of
/// one node puts into another node's channel through a shadow there, which holds that node's
/// ts_min; once the task closes, both reclaim. (Before wire 19 this needed `--mesh-ts-min` and
/// was refused without it.)
#[test]
fn a_task_spans_nodes_started_with_default_options() {
    with_watchdog("a_task_spans_nodes_started_with_default_options", || {
        let x = TestNode::with(|o| o.name = "x".into());
        let y = TestNode::with(|o| {
            o.name = "y".into();
            o.connect = vec![x.endpoint.clone()];
        });
        let client = stampede::connect(&x.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let ch = client.create_channel("frames", on_node("y")).unwrap();
        assert_eq!(ch.info().node.as_deref(), Some("y"));
        let task = client.task(client.ts_min()).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let start = task.virtual_time();
        out.put(start, vec![1]).unwrap();
        assert!(y.runtime.ts_min() <= start, "the task's shadow holds y: {}", y.runtime.ts_min());
        task.close();
        assert!(
            eventually(SETTLE, || y.runtime.ts_min() > start && x.runtime.ts_min() > start),
            "both reclaim once the task is gone: x {} y {}",
            x.runtime.ts_min(),
            y.runtime.ts_min()
        );
        client.close();
    })
}

/// A task's move to another node that was never taken over (the client died in between, or its
/// takeover request was lost) is declined there when the task closes, or when the client's
/// session on the home node ends: the carry that covered it would otherwise hold every node's
/// ts_min for ever.
#[test]
fn a_move_never_taken_over_is_declined_when_its_session_ends() {
    with_watchdog("a_move_never_taken_over_is_declined_when_its_session_ends", || {
        use stampede_wire::fabric;
        use stampede_wire::{decode_reply, encode, Op, Outcome, Reply, Request, RequestHeader};
        use zenoh::Wait;

        let (a, _b, b_rt, _b_dir) = two_nodes();
        let producer = b_rt.task(b_rt.ts_min()).unwrap();
        let out = producer.attach_output(&b_rt.create_channel("frames", Limits::unbounded()).unwrap()).unwrap();
        out.put(20, vec![1]).unwrap();
        producer.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 21), "{}", b_rt.ts_min());

        // A client speaking the wire itself.
        let config = fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let raw = zenoh::open(config).wait().unwrap();
        let session = raw.zid().to_string();
        let token = raw.liveliness().declare_token(fabric::session_key("a", &session)).wait().unwrap();
        let mut secret = [0; 16];
        let mut call = |node: &str, session: &str, request: Request| {
            let header = RequestHeader::new(session.to_owned(), secret, request);
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
        let put_on_b = |ts| {
            let holder = b_rt.task(b_rt.ts_min()).unwrap();
            holder.attach_output(&b_rt.channel("frames").unwrap()).unwrap().put(ts, vec![2]).unwrap();
            holder.close();
        };

        // A task moved to b, then closed before anything took the move over: a declines it.
        let Reply::Outcome(Outcome::Handle(task)) = call("a", &session, Request::Op(Op::Task { virtual_time: 21 }))
        else {
            panic!("a task")
        };
        let moved = call("a", &session, Request::Op(Op::MoveTask { task, to_node: "b".into(), to }));
        assert!(matches!(moved, Reply::Outcome(Outcome::Moved { visibility: 21, .. })), "{moved:?}");
        put_on_b(25);
        // The put on b and the move reach b's view with no signal to the test: give them time; an absence (b's ts_min not past 21) is what is checked.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(b_rt.ts_min(), 21, "the task and its open move hold b's ts_min");
        assert!(matches!(call("a", &session, Request::Op(Op::CloseTask { task })), Reply::Outcome(Outcome::Done)));
        assert!(eventually(SETTLE, || b_rt.ts_min() == 26), "the closed task's move was declined: {}", b_rt.ts_min());

        // Another, moved, and its client vanishes: a ends the session and has b decline the move.
        let Reply::Outcome(Outcome::Handle(task)) = call("a", &session, Request::Op(Op::Task { virtual_time: 26 }))
        else {
            panic!("a task")
        };
        let moved = call("a", &session, Request::Op(Op::MoveTask { task, to_node: "b".into(), to }));
        assert!(matches!(moved, Reply::Outcome(Outcome::Moved { visibility: 26, .. })), "{moved:?}");
        put_on_b(30);
        drop(token);
        let _ = raw.close().wait();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 31), "the move was declined: {}", b_rt.ts_min());
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 31), "{}", a.runtime.ts_min());
    })
}
