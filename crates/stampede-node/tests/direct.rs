//! The direct request path (`stampede_node::direct`, the client's `remote/direct.rs`): clients
//! on a node's host send their requests on its own socket, not through zenoh; hostile frames
//! there get a typed error and the node stays up; close and a node's end wake a call blocked
//! on it.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use stampede::{
    ConnectOptions, Container, Error, InputOptions, Limits, Prefetch, INFINITY, NEWEST_UNSEEN, OLDEST_UNSEEN,
};
use stampede_node::direct::{HANDSHAKE_DEADLINE, UNPROVEN_CONNECTIONS_MAX};
use stampede_wire::{
    decode_reply, encode, Consumed, Op, Outcome, Reply, Request, RequestHeader, FRAME_LENGTH_BYTES, VERSION,
};
use support::{raw_connection, with_watchdog, TestNode, CONNECT_TIMEOUT};

/// How soon a call blocked on the node must return once its client closes or the node goes (a
/// bound against hangs, far above what it takes).
const WAKE_BOUND: Duration = Duration::from_secs(5);

/// A client's requests take the direct path: the node counts them there. With `zenoh_only`
/// none do, and the client works the same.
#[test]
fn a_client_on_the_nodes_host_sends_its_requests_on_the_direct_path() {
    with_watchdog("a_client_on_the_nodes_host_sends_its_requests_on_the_direct_path", || {
        let node = TestNode::new();
        for zenoh_only in [false, true] {
            let before = node.node.direct_requests();
            let options = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), zenoh_only, ..ConnectOptions::default() };
            let rt = stampede::connect_with(&node.endpoint, &options).unwrap();
            let name = format!("frames-{zenoh_only}");
            let frames = rt.create_channel(&name, Limits::unbounded()).unwrap();
            let ts = rt.ts_min();
            let out = rt.task(ts).unwrap().attach_output(&frames).unwrap();
            let reader = rt.task(INFINITY).unwrap();
            let inp = reader.attach_input(&frames).unwrap();
            out.put(ts, vec![9u8; 70_000]).unwrap();
            let item = inp.get(OLDEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap();
            assert_eq!((item.ts, item.data().len()), (ts, 70_000));
            inp.consume(ts).unwrap();
            let direct = node.node.direct_requests() - before;
            if zenoh_only {
                assert_eq!(direct, 0, "zenoh_only: every request is a zenoh query");
            } else {
                assert!(direct >= 8, "create, tasks, attaches, put, get, consume: {direct} on the direct path");
            }
            rt.close();
        }
    })
}

/// Closing a client wakes its call blocked on the node's reply (`Closed`), and the node's end
/// wakes one (`Unreachable` or `Closed`), each within [`WAKE_BOUND`].
#[test]
fn close_and_the_nodes_end_wake_a_call_blocked_on_the_direct_path() {
    with_watchdog("close_and_the_nodes_end_wake_a_call_blocked_on_the_direct_path", || {
        let node = TestNode::new();
        for ending in ["client closes", "node closes"] {
            let rt = node.client();
            let frames = rt.create_channel(&format!("never-{}", ending.len()), Limits::unbounded()).unwrap();
            let reader = rt.task(INFINITY).unwrap();
            let inp = reader.attach_input(&frames).unwrap();
            let waiter = std::thread::spawn(move || {
                let result = inp.get(OLDEST_UNSEEN, None);
                (result, Instant::now())
            });
            // Nothing observes the get parked on the node: the pause makes the close hit a blocked call; the result holds either way.
            std::thread::sleep(Duration::from_millis(300));
            let ended = Instant::now();
            if ending == "client closes" {
                rt.close();
            } else {
                node.node.close();
            }
            let (result, woke) = waiter.join().unwrap();
            assert!(woke.duration_since(ended) < WAKE_BOUND, "{ending}: woke after {:?}", woke - ended);
            match (ending, result) {
                // The node ends its sessions as it closes: the get may hear that (`Closed`,
                // detached) before the socket goes (`Unreachable`).
                ("client closes", Err(Error::Closed { .. }))
                | ("node closes", Err(Error::Unreachable { .. } | Error::Closed { .. })) => {}
                (ending, other) => panic!("{ending}: {other:?}"),
            }
        }
    })
}

/// Writes a frame; a connection the node already ended is left for the read to tell.
fn send_frame(stream: &mut UnixStream, length: u32, body: &[u8]) {
    let _ = stream.write_all(&length.to_le_bytes()).and_then(|()| stream.write_all(body));
}

/// The node's reply on `stream`, decoded; `None` when the node ended the connection.
fn read_reply(stream: &mut UnixStream) -> Option<Reply> {
    let mut prefix = [0u8; FRAME_LENGTH_BYTES];
    stream.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
    stream.read_exact(&mut body).unwrap();
    Some(decode_reply(&body).expect("the node's reply decodes").0)
}

/// A client still gets its work done on the node.
fn node_serves(node: &TestNode) {
    let rt = node.client();
    assert!(rt.names("").is_ok(), "the node still serves");
    rt.close();
}

/// A frame longer than the node's largest request gets `InvalidArgument` naming the bound, with
/// nothing allocated for it, and the connection ends; a frame cut short and connections past
/// the bound end too. The node serves on.
#[test]
fn hostile_frames_on_the_direct_path_get_typed_errors() {
    with_watchdog("hostile_frames_on_the_direct_path_get_typed_errors", || {
        let node = TestNode::with(|options| {
            options.payload_bytes_max = 1024;
            options.sessions_max = 1;
        });
        let (_, mut stream) = raw_connection(&node);
        send_frame(&mut stream, u32::MAX, &[]);
        match read_reply(&mut stream) {
            Some(Reply::Error(e)) => {
                let e = Error::from(e);
                assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("at most"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(read_reply(&mut stream).is_none(), "the connection ends");

        let (_, mut stream) = raw_connection(&node);
        send_frame(&mut stream, 100, &[1, 2, 3]);
        drop(stream);

        // Connections that proved no session are bounded apart: past UNPROVEN_CONNECTIONS_MAX
        // the next one is closed at once — and a client still gets its work done meanwhile (its
        // direct connection refused, its requests go as zenoh queries).
        let (hello, first) = raw_connection(&node);
        let held: Vec<_> = (1..UNPROVEN_CONNECTIONS_MAX).map(|_| support::direct_connection(&hello)).collect();
        assert!(
            support::eventually(CONNECT_TIMEOUT, || {
                let mut refused = support::direct_connection(&hello);
                send_frame(&mut refused, 1, &[0]);
                read_reply(&mut refused).is_none()
            }),
            "past the bound an unproven connection is closed"
        );
        node_serves(&node);
        drop((first, held));
        support::eventually(CONNECT_TIMEOUT, || {
            let (_, mut stream) = raw_connection(&node);
            send_frame(&mut stream, 1, &[0]);
            read_reply(&mut stream).is_some()
        });
        node_serves(&node);
    })
}

/// A refusal that ends a direct TCP connection reaches a client that writes its whole frame
/// before it reads, though the node refuses the frame after its first bytes. Were the node to
/// drop the connection with the rest unread, TCP would reset it and the client's write would
/// fail, the refusal unread behind it; the node lingers instead (`stampede_node::direct`),
/// reading and dropping the rest. Rounds: whether the write outlasts the node is a race.
#[test]
fn a_refusal_that_ends_a_direct_tcp_connection_reaches_its_client() {
    with_watchdog("a_refusal_that_ends_a_direct_tcp_connection_reaches_its_client", || {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap().port();
        let node = TestNode::with(|options| {
            options.listen.push(format!("tcp/127.0.0.1:{port}"));
            options.payload_bytes_max = 1024;
        });
        let (hello, _) = raw_connection(&node);
        let &(_, direct) = hello.direct.tcp.iter().find(|(zenoh, _)| *zenoh == port).expect("a direct TCP port");
        const ROUNDS: usize = 10;
        const SENT: usize = 8 << 20;
        let mut frame = (SENT as u32).to_le_bytes().to_vec();
        frame.resize(FRAME_LENGTH_BYTES + SENT, 0);
        for round in 0..ROUNDS {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", direct)).unwrap();
            stream.set_read_timeout(Some(CONNECT_TIMEOUT)).unwrap();
            stream.write_all(&frame).unwrap_or_else(|e| panic!("round {round}: the node reset the connection: {e}"));
            let mut prefix = [0u8; FRAME_LENGTH_BYTES];
            stream.read_exact(&mut prefix).unwrap_or_else(|e| panic!("round {round}: the refusal was lost: {e}"));
            let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
            stream.read_exact(&mut body).unwrap();
            match decode_reply(&body).expect("the node's reply decodes").0 {
                Reply::Error(e) => assert!(matches!(Error::from(e), Error::InvalidArgument { .. })),
                other => panic!("round {round}: {other:?}"),
            }
        }
        node_serves(&node);
    })
}

/// Nothing before a session is proven costs the node much: a connection that sends nothing is
/// closed at the handshake deadline, and a frame longer than a header that names no live session
/// is refused (`Closed`) before its payload is read — the node does not wait for, or buffer, the
/// 60 MiB it announces. The node serves on.
#[test]
fn unproven_connections_are_closed_early() {
    with_watchdog("unproven_connections_are_closed_early", || {
        let node = TestNode::new();
        let (_, mut idle) = raw_connection(&node);
        idle.set_read_timeout(Some(HANDSHAKE_DEADLINE * 10)).unwrap();
        let mut byte = [0u8; 1];
        assert!(matches!(idle.read(&mut byte), Ok(0)), "an idle unproven connection is closed by the node");

        let (_, mut partial) = raw_connection(&node);
        partial.set_read_timeout(Some(HANDSHAKE_DEADLINE * 10)).unwrap();
        let header = encode(&RequestHeader::new("0123abcd", [7; 16], Request::Op(Op::Stats)));
        send_frame(&mut partial, 60 << 20, &header);
        match read_reply(&mut partial) {
            Some(Reply::Error(e)) => assert!(matches!(Error::from(e), Error::Closed { .. })),
            other => panic!("refused before the payload: {other:?}"),
        }
        assert!(read_reply(&mut partial).is_none(), "and the connection ends");
        node_serves(&node);
    })
}

/// Idle sockets on the node's zenoh endpoint do not lock newcomers out: with 150 of them held
/// (zenoh's default allowed 100 links in their handshake, for 10 s each) a client connects within
/// a 5 s timeout — half of what those sockets held before — and its first call works.
#[test]
fn idle_sockets_on_the_zenoh_endpoint_leave_room_for_a_client() {
    with_watchdog("idle_sockets_on_the_zenoh_endpoint_leave_room_for_a_client", || {
        let node = TestNode::new();
        let path = node.endpoint.strip_prefix("unixsock-stream/").expect("a Unix socket endpoint");
        let idle: Vec<_> = (0..150).map(|_| UnixStream::connect(path).unwrap()).collect();
        let rt = stampede::connect(&node.endpoint, Some(Duration::from_secs(5))).expect("a newcomer connects");
        assert!(rt.names("").is_ok(), "and is served");
        rt.close();
        drop(idle);
    })
}

/// A request of another wire version — one release older, one newer — is refused with
/// `InvalidArgument` naming both versions, on the direct path and through zenoh, and the node
/// serves on: a client and a node of different releases say so instead of misreading each other.
#[test]
fn a_peer_of_another_wire_version_is_refused_naming_both_versions() {
    with_watchdog("a_peer_of_another_wire_version_is_refused_naming_both_versions", || {
        use zenoh::Wait;
        let node = TestNode::new();
        let config = stampede_wire::fabric::client_config(&node.endpoint, CONNECT_TIMEOUT, None).unwrap();
        let zenoh = zenoh::open(config).wait().unwrap();
        for other in [VERSION - 1, VERSION + 1] {
            let mut message = encode(&RequestHeader::new("", [0; 16], Request::Hello));
            message[0] = other;
            let (_, mut stream) = raw_connection(&node);
            send_frame(&mut stream, message.len() as u32, &message);
            let direct = read_reply(&mut stream);
            let query = zenoh.get(stampede_wire::fabric::rpc_key("test")).payload(message.clone()).wait().unwrap();
            let bytes = query.recv().unwrap().result().unwrap().payload().to_bytes().into_owned();
            let through_zenoh = decode_reply(&bytes).expect("the node answers in its own version").0;
            for reply in [direct, Some(through_zenoh)] {
                let Some(Reply::Error(e)) = reply else { panic!("{other}: {reply:?}") };
                let e = Error::from(e);
                let text = e.to_string();
                let (theirs, ours) = (format!("speaks version {other}"), format!("this side speaks {VERSION}"));
                assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
                assert!(text.contains(&theirs) && text.contains(&ours), "both versions named: {text}");
            }
        }
        zenoh.close().wait().unwrap();
        node_serves(&node);
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random frames on one connection, each within the bound: every one is answered (an
    /// error, unless the bytes happen to be a request), never silence or a panic, and the node
    /// serves on.
    #[test]
    fn random_frames_on_the_direct_path_are_answered_with_errors(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..8),
    ) {
        let node = TestNode::new();
        let (_, mut stream) = raw_connection(&node);
        for frame in &frames {
            send_frame(&mut stream, frame.len() as u32, frame);
            let reply = read_reply(&mut stream);
            prop_assert!(reply.is_some(), "frame {:?} unanswered", frame);
        }
        node_serves(&node);
    }
}

/// A consume of an item the connection got is sent without waiting for the node's reply; every
/// later call sees it applied all the same — on this thread, and on another thread told after
/// it (whose call may take another connection). A consume the node refuses meanwhile (its
/// channel destroyed) leaves the client working.
#[test]
fn a_consume_sent_without_waiting_is_seen_by_every_later_call() {
    with_watchdog("a_consume_sent_without_waiting_is_seen_by_every_later_call", || {
        let node = TestNode::new();
        let rt = node.client();
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        let out = camera.attach_output(&frames).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&frames).unwrap();
        for ts in 0..200 {
            out.put(ts, vec![1u8; 64]).unwrap();
            camera.set_virtual_time(ts + 1).unwrap();
            assert_eq!(inp.get(OLDEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap().ts, ts);
            inp.consume(ts).unwrap();
            let seen = if ts % 2 == 0 {
                (rt.ts_min(), frames.stats().live_items)
            } else {
                std::thread::scope(|s| s.spawn(|| (rt.ts_min(), frames.stats().live_items)).join().unwrap())
            };
            assert_eq!(seen, (ts + 1, 0), "after the consume of {ts}");
        }
        out.put(200, vec![1u8; 64]).unwrap();
        assert_eq!(inp.get(OLDEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap().ts, 200);
        frames.destroy().unwrap();
        let _ = inp.consume(200);
        assert!(rt.names("").is_ok(), "the client works on");
        rt.close();
    })
}

/// A task's move to or above the highest virtual time it had is sent without waiting for the
/// node's reply: every later call sees it applied, on this thread and on another told after it
/// (`ts_min` after a move: `a_consume_sent_without_waiting_is_seen_by_every_later_call`).
/// A move below takes the reply, so the node's refusal (`BelowVisibility`) is still the caller's.
#[test]
fn a_virtual_time_sent_without_waiting_is_seen_by_every_later_call() {
    with_watchdog("a_virtual_time_sent_without_waiting_is_seen_by_every_later_call", || {
        let node = TestNode::new();
        let rt = node.client();
        let task = rt.task(10).unwrap();
        let before = node.node.direct_requests();
        for v in 11..200 {
            task.set_virtual_time(v).unwrap();
            let seen = if v % 2 == 0 {
                task.virtual_time()
            } else {
                std::thread::scope(|s| s.spawn(|| task.virtual_time()).join().unwrap())
            };
            assert_eq!(seen, v, "after the move to {v}");
        }
        assert!(node.node.direct_requests() - before >= 2 * 189, "each move and each look a request");
        match task.set_virtual_time(150) {
            Err(Error::BelowVisibility { .. }) => {}
            other => panic!("a move below the task's visibility is refused: {other:?}"),
        }
        task.set_virtual_time(250).unwrap();
        assert_eq!(task.virtual_time(), 250);
        rt.close();
    })
}

/// This host's address on its first non-loopback interface, if it has one: the interface a
/// UDP socket would use towards a public address (connecting a UDP socket sends nothing).
fn non_loopback_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("8.8.8.8:53").ok()?;
    Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// A client that reached the node at a non-loopback `tcp/` endpoint uses the direct TCP port
/// paired with it (not the Unix socket, which is for this host's loopback only), for its requests
/// and for its stream of push events: a reader with prefetch is pushed its frames there, not on
/// the fabric, and its cache answers from them.
#[test]
fn a_client_at_a_non_loopback_endpoint_uses_the_direct_tcp_port() {
    let Some(ip) = non_loopback_address() else {
        eprintln!("skipped: this host has no non-loopback interface to reach the node by");
        return;
    };
    with_watchdog("a_client_at_a_non_loopback_endpoint_uses_the_direct_tcp_port", || {
        let port = std::net::TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).unwrap().port();
        let endpoint = format!("tcp/{ip}:{port}");
        // Beyond loopback and without a policy: only when asked for.
        let options =
            stampede_node::NodeOptions { allow_anonymous: true, ..stampede_node::NodeOptions::listen(&endpoint) };
        let node =
            stampede_node::Node::serve(stampede::Runtime::new().engine().unwrap(), options).expect("the node serves");
        let rt = stampede::connect(&endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let before = node.direct_requests();
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let writer = rt.task(0).unwrap();
        let out = writer.attach_output(&frames).unwrap();
        out.put(1, &b"over TCP"[..]).unwrap();
        assert!(node.direct_requests() - before >= 3, "create, task, attach and put on the direct TCP port");

        let reader = stampede::connect(&endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let newest = InputOptions { prefetch: Some(Prefetch::Newest), ..InputOptions::default() };
        let Container::Channel(channel) = reader.lookup("frames").unwrap() else { panic!("a channel") };
        let reading = reader.task(INFINITY).unwrap();
        let inp = reading.attach_input_with(&channel, newest).unwrap();
        let answered = (2..40).any(|ts| {
            out.put(ts, vec![ts as u8; 64]).unwrap();
            // Time for the push to arrive (a get before it asks the node, and the loop goes on).
            std::thread::sleep(Duration::from_millis(50));
            let item = inp.get(NEWEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap();
            inp.consume_until(item.ts).unwrap();
            node.streamed_pushes() > 0 && support::pushes_used(&reader, &reading) > 0
        });
        assert!(answered, "frames pushed on the direct TCP port, and a get answered from them");
        reader.close();
        rt.close();
    })
}

/// The session id of the raw requests of [`RawSession`].
const ID: &str = "0123456789abcdef0123456789abcdef";

/// A session opened by hand on the node's direct path, its requests numbered by the test: the
/// zenoh session holding its liveliness token, a connection, its secret, and a task at
/// `virtual_time` with an input connection to a channel of the node.
struct RawSession {
    zenoh: zenoh::Session,
    _token: zenoh::liveliness::LivelinessToken,
    stream: UnixStream,
    secret: [u8; 16],
    connection: stampede_wire::Handle,
}

impl RawSession {
    /// Opens it (requests 1 to 3: the task, the lookup, the attach).
    fn open(node: &TestNode, channel: &str, virtual_time: stampede::Timestamp) -> RawSession {
        use stampede_wire::fabric;
        use zenoh::Wait;
        let config = fabric::client_config(&node.endpoint, CONNECT_TIMEOUT, None).unwrap();
        let zenoh = zenoh::open(config).wait().unwrap();
        let _token = zenoh.liveliness().declare_token(fabric::session_key("test", ID)).wait().unwrap();
        let (_, mut stream) = raw_connection(node);
        let Reply::Opened(secret) = ask(&mut stream, [0; 16], 0, Request::Open { user: None, password: None }) else {
            panic!("the session opens")
        };
        let mut ask = |seq: u64, op: Op| ask(&mut stream, secret, seq, Request::Op(op));
        let Reply::Outcome(Outcome::Handle(task)) = ask(1, Op::Task { virtual_time }) else { panic!("a task") };
        let Reply::Outcome(Outcome::Container(info)) = ask(2, Op::Lookup { name: channel.into() }) else {
            panic!("the channel")
        };
        let attach = Op::AttachInput {
            task,
            container: info.id,
            max_lag_items: None,
            max_lag_ts: None,
            prefetch: Default::default(),
        };
        let Reply::Outcome(Outcome::Handle(connection)) = ask(3, attach) else { panic!("a connection") };
        RawSession { zenoh, _token, stream, secret, connection }
    }

    /// Request `seq` on its connection, its header carrying `consumed`; its reply.
    fn ask(&mut self, seq: u64, consumed: Vec<Consumed>, request: Request) -> Reply {
        let header = RequestHeader { seq, consumed, ..RequestHeader::new(ID.to_owned(), self.secret, request) };
        ask_header(&mut self.stream, &header)
    }
}

/// A session being ended serves nothing, not even the repeat of a get from its kept replies:
/// what that reply carried is going back. The session's closing is held inside the node
/// application's GC handler (it reclaims the item the get returned) while the repeat arrives on
/// a second connection of the session. (Before the rule the repeat was answered with the item.)
#[test]
fn a_session_being_ended_answers_no_repeat() {
    with_watchdog("a_session_being_ended_answers_no_repeat", || {
        use stampede::Selector;
        use zenoh::Wait;
        let node = TestNode::new();
        let frames = node.runtime.create_channel("frames", Limits::unbounded()).unwrap();
        let (entered, in_handler) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Mutex::new(released);
        frames
            .on_reclaim(move |_| {
                let _ = entered.send(());
                let _ = released.lock().unwrap().recv_timeout(CONNECT_TIMEOUT);
            })
            .unwrap();
        let mut session = RawSession::open(&node, "frames", 0);
        // The item, from the node's application; only the session's task holds ts_min at it.
        let camera = node.runtime.task(0).unwrap();
        camera.attach_output(&frames).unwrap().put(0, vec![7u8; 16]).unwrap();
        camera.set_virtual_time(1).unwrap();
        let get = Request::Op(Op::Get { connection: session.connection, selector: Selector::At(0), wait_us: 0 });
        assert!(
            matches!(session.ask(4, Vec::new(), get.clone()), Reply::Outcome(Outcome::Item(_))),
            "the get returns the item"
        );

        // The client closes on a second connection; the closing reclaims the item and is held in
        // the GC handler, the session still listed.
        let (_, mut second) = raw_connection(&node);
        let secret = session.secret;
        let closing = std::thread::spawn(move || ask(&mut second, secret, 5, Request::Close));
        in_handler.recv_timeout(CONNECT_TIMEOUT).expect("the closing reclaims the item");
        let repeat = session.ask(4, Vec::new(), get);
        release.send(()).unwrap();
        assert_eq!(closing.join().unwrap(), Reply::Outcome(Outcome::Done), "the session closes");
        let Reply::Error(e) = repeat else { panic!("the repeat was answered: {repeat:?}") };
        assert!(matches!(Error::from(e), Error::Closed { .. }));
        session.zenoh.close().wait().unwrap();
        node_serves(&node);
    })
}

/// A deferred consume rides in every request until a reply confirms it, so several requests may
/// carry it: the node applies it before the first of them runs, and once — its connection's
/// tape counts one consume (applied again, each carrier would add one, and push the reads the
/// node predicts from out of the tape's recent accesses).
#[test]
fn a_deferred_consume_carried_twice_is_applied_once() {
    with_watchdog("a_deferred_consume_carried_twice_is_applied_once", || {
        use stampede::Selector;
        let node = TestNode::new();
        let frames = node.runtime.create_channel("frames", Limits::unbounded()).unwrap();
        let mut session = RawSession::open(&node, "frames", INFINITY);
        // The camera's task lives on: it holds ts_min below the item, which stays to be read.
        let camera = node.runtime.task(0).unwrap();
        camera.attach_output(&frames).unwrap().put(5, vec![5u8; 8]).unwrap();
        let connection = session.connection;
        let carried = vec![Consumed { connection, ts: 10, until: true, number: 1 }];
        let get = Request::Op(Op::Get { connection, selector: Selector::At(5), wait_us: 0 });
        let reply = session.ask(4, carried.clone(), get);
        let Reply::Error(e) = reply else { panic!("the consume was applied before the get: {reply:?}") };
        let e = Error::from(e);
        assert!(matches!(e, Error::AlreadyConsumed { ts: 5, .. }), "{e:?}");
        let Reply::Outcome(Outcome::Graph(graph)) = session.ask(5, carried, Request::Op(Op::Graph)) else {
            panic!("a graph")
        };
        let tapes: Vec<_> = graph.tasks.iter().flat_map(|t| &t.connections).filter_map(|c| c.tape.as_ref()).collect();
        assert_eq!(tapes.len(), 1, "the session's input connection keeps a tape");
        assert_eq!(tapes[0].consumes, 1, "{:?}", tapes[0]);
        node_serves(&node);
    })
}

/// Request `seq` of the session [`ID`] with `secret`, on `stream`; its reply.
fn ask(stream: &mut UnixStream, secret: [u8; 16], seq: u64, request: Request) -> Reply {
    ask_header(stream, &RequestHeader { seq, ..RequestHeader::new(ID.to_owned(), secret, request) })
}

/// The request `header` on `stream`; its reply.
fn ask_header(stream: &mut UnixStream, header: &RequestHeader) -> Reply {
    let message = encode(header);
    send_frame(stream, message.len() as u32, &message);
    read_reply(stream).expect("a reply")
}
