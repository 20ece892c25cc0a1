//! Access control on a node (docs/SECURITY.md): users with passwords and rights
//! per name prefix. A client without a right gets `PermissionDenied` naming the name and the
//! right, never data; listings show only what the user may read; a request with another
//! session's id but not its secret is refused.

mod support;

use std::time::Duration;

use stampede::{ConnectOptions, Credentials, Error, Limits, Runtime, OLDEST_UNSEEN};
use stampede_node::access::hash_password;
use stampede_node::{AccessPolicy, Node, NodeOptions};
use stampede_wire::fabric;
use stampede_wire::{decode_reply, encode, Op, Reply, Request, RequestHeader, WireError};
use support::{with_watchdog, TestNode, CONNECT_TIMEOUT};
use zenoh::Wait;

fn policy() -> AccessPolicy {
    let (camera, display, admin) =
        (hash_password("cam").unwrap(), hash_password("disp").unwrap(), hash_password("root").unwrap());
    AccessPolicy::parse(&format!(
        "[users.camera]\npassword = \"{camera}\"\ncreate = [\"camera\"]\nwrite = [\"camera\"]\n\n\
         [users.display]\npassword = \"{display}\"\nread = [\"camera\"]\n\n\
         [users.admin]\npassword = \"{admin}\"\ncreate = [\"\"]\nwrite = [\"\"]\nread = [\"\"]\n"
    ))
    .unwrap()
}

fn connect(node: &TestNode, user: Option<(&str, &str)>) -> stampede::Result<Runtime> {
    let user = user.map(|(user, password)| Credentials { user: user.into(), password: password.into() });
    let options = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), user, ..ConnectOptions::default() };
    stampede::connect_with(&node.endpoint, &options)
}

fn denied(result: stampede::Result<impl Sized>, expected_right: &str) -> String {
    match result {
        Err(e @ Error::PermissionDenied { right, .. }) if right == expected_right => e.to_string(),
        Err(e) => panic!("expected PermissionDenied ({expected_right}), got {e}"),
        Ok(_) => panic!("expected PermissionDenied ({expected_right}), got Ok"),
    }
}

#[test]
fn users_get_exactly_their_rights() {
    with_watchdog("users_get_exactly_their_rights", || {
        let node = TestNode::with(|o| o.access = Some(policy()));
        denied(connect(&node, None), "connect");
        denied(connect(&node, Some(("camera", "disp"))), "connect");
        denied(connect(&node, Some(("nobody", "cam"))), "connect");

        let camera = connect(&node, Some(("camera", "cam"))).unwrap();
        camera.create_channel("camera/frames", Limits::unbounded()).unwrap();
        let message = denied(camera.create_channel("tracker/boxes", Limits::unbounded()), "create");
        assert!(message.contains("\"tracker/boxes\"") && message.contains("user \"camera\""), "{message}");
        let admin = connect(&node, Some(("admin", "root"))).unwrap();
        admin.create_channel("secret/plans", Limits::unbounded()).unwrap();

        let display = connect(&node, Some(("display", "disp"))).unwrap();
        assert_eq!(display.names("").unwrap(), ["camera/frames"], "only the names it may read");
        denied(display.lookup("secret/plans"), "read");
        let stampede::Container::Channel(seen) = display.lookup("camera/frames").unwrap() else { panic!("a channel") };
        let reader = display.task(stampede::INFINITY).unwrap();
        let input = reader.attach_input(&seen).unwrap();
        let stampede::Container::Channel(frames) = camera.lookup("camera/frames").unwrap() else { panic!("a channel") };
        let producer = camera.task(0).unwrap();
        producer.attach_output(&frames).unwrap().put(0, &b"frame"[..]).unwrap();
        assert_eq!(&input.get(OLDEST_UNSEEN, Some(Duration::from_secs(5))).unwrap().payload.data[..], b"frame");
        denied(reader.attach_output(&seen), "write");
        denied(display.create_channel("camera/other", Limits::unbounded()), "create");
        denied(display.graph(), "read");
        denied(display.on_reclaim(|_, _| {}), "read");
    })
}

/// Session ids are on the fabric (liveliness keys): a request naming another session without its
/// secret is answered as if no such session existed.
#[test]
fn another_sessions_id_without_its_secret_is_refused() {
    with_watchdog("another_sessions_id_without_its_secret_is_refused", || {
        let node = TestNode::with(|o| o.access = Some(policy()));
        let admin = connect(&node, Some(("admin", "root"))).unwrap();
        admin.create_channel("secret/plans", Limits::unbounded()).unwrap();

        let config = fabric::client_config(&node.endpoint, Duration::from_secs(10), None).unwrap();
        let intruder = zenoh::open(config).wait().unwrap();
        let tokens = intruder.liveliness().get(fabric::sessions_key("test")).wait().unwrap();
        let victim =
            tokens.recv().unwrap().result().unwrap().key_expr().as_str().rsplit('/').next().unwrap().to_owned();
        let header = RequestHeader::new(victim, [0; 16], Request::Op(Op::Names { prefix: String::new() }));
        let replies = intruder.get(fabric::rpc_key("test")).payload(encode(&header)).wait().unwrap();
        let reply = replies.recv().unwrap();
        let bytes = reply.result().unwrap().payload().to_bytes().into_owned();
        match decode_reply(&bytes).unwrap().0 {
            Reply::Error(WireError::Closed { .. }) => {}
            other => panic!("the intruder got {other:?}"),
        }
        let _ = intruder.close().wait();
        assert_eq!(admin.names("").unwrap(), ["secret/plans"], "the victim's session is untouched");
    })
}

/// A node other machines could reach and that has no access policy is refused, saying how to
/// proceed — a listen or a connect endpoint beyond loopback alike; with a policy, or with
/// `allow_anonymous`, that rule lets it through (192.0.2.1 is a documentation address: the node
/// then fails to bind it, which is another error). Loopback and Unix sockets need neither.
#[test]
fn a_node_beyond_loopback_needs_a_policy_or_allow_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let unix = format!("unixsock-stream/{}", dir.path().join("n.sock").display());
    let beyond = "tcp/192.0.2.1:7447";
    let refused_for_anonymity =
        |options: NodeOptions| match Node::serve(stampede::Runtime::new().engine().unwrap(), options) {
            Err(Error::InvalidArgument { reason, .. }) if reason.contains("--allow-anonymous") => {
                assert!(reason.contains("--access") && reason.contains(beyond), "{reason}");
                true
            }
            Ok(node) => {
                node.close();
                false
            }
            Err(_) => false,
        };
    assert!(refused_for_anonymity(NodeOptions::listen(beyond)));
    assert!(refused_for_anonymity(NodeOptions { connect: vec![beyond.into()], ..NodeOptions::listen(&unix) }));
    assert!(!refused_for_anonymity(NodeOptions { allow_anonymous: true, ..NodeOptions::listen(beyond) }));
    assert!(!refused_for_anonymity(NodeOptions { access: Some(policy()), ..NodeOptions::listen(beyond) }));
    assert_eq!(NodeOptions::listen(&unix).reachable_endpoint(), None);
    assert_eq!(NodeOptions::listen("tcp/127.0.0.1:7447").reachable_endpoint(), None);
}

/// A node joins a mesh only with the policy every node there serves (docs/SECURITY.md, "One
/// policy, one version, one mesh"): another policy, or none, is refused at start, naming both
/// sides and what to do; the same policy joins.
#[test]
fn a_node_with_another_policy_is_refused_at_join() {
    with_watchdog("a_node_with_another_policy_is_refused_at_join", || {
        let shared = policy();
        let a = TestNode::with(|o| {
            o.name = "a".into();
            o.access = Some(shared.clone());
        });
        let dir = tempfile::tempdir().unwrap();
        let join = |name: &str, access: Option<AccessPolicy>| {
            let mut options = NodeOptions::listen(&format!("unixsock-stream/{}", dir.path().join(name).display()));
            options.name = name.into();
            options.connect = vec![a.endpoint.clone()];
            options.access = access;
            Node::serve(Runtime::new().engine().unwrap(), options)
        };
        let other =
            AccessPolicy::parse(&format!("[users.x]\npassword = \"{}\"\n", hash_password("x").unwrap())).unwrap();
        for (name, access, says) in
            [("b", Some(other), "node a serves access policy "), ("c", None, "this node no access policy")]
        {
            match join(name, access) {
                Err(Error::InvalidArgument { reason, .. }) => {
                    assert!(reason.contains(says) && reason.contains("--access"), "{reason}");
                }
                Err(e) => panic!("refused otherwise: {e}"),
                Ok(_) => panic!("node {name} joined a mesh whose policy differs"),
            }
        }
        let same = join("d", Some(shared)).expect("a node with the same policy joins");
        same.close();
    });
}

/// With an access policy, only nodes speak on the mesh's keys, with no certificate (mesh messages
/// only from nodes, whatever the authentication): a client's well-formed mesh messages under a
/// node's key — pause requests to the other node, each holding that node's ts_min until the round
/// it names opens, which it never does — and its decline question are dropped (the messages
/// counted malformed, the question unanswered), and the nodes' own sealed mesh works (a's client
/// holds b's ts_min, then b follows it). Without a policy (a mesh confined to this host) the same
/// messages reach the machine and hold b's ts_min: what the seal stops.
#[test]
fn with_a_policy_only_nodes_speak_on_the_mesh() {
    with_watchdog("with_a_policy_only_nodes_speak_on_the_mesh", || {
        for keyed in [true, false] {
            let access = keyed.then(policy);
            let (a, b, b_rt, _dir) = support::two_nodes_with(|o| o.access = access.clone());
            let credentials = keyed.then_some(("camera", "cam"));
            let client = connect(&a, credentials).unwrap();
            let holder = client.task(5).unwrap();
            let ch = b_rt.create_channel("frames", Limits::unbounded()).unwrap();
            let producer = b_rt.task(5).unwrap();
            let out = producer.attach_output(&ch).unwrap();
            for ts in 5..10 {
                out.put(ts, vec![1]).unwrap();
            }
            producer.set_virtual_time(stampede::INFINITY).unwrap();
            let settled = Duration::from_secs(10);
            assert!(support::eventually(settled, || b_rt.ts_min() == 5), "a's client holds b: {}", b_rt.ts_min());

            let (forged, answered) = forge_as_node_a(&a);
            let malformed = || b.mesh_counters().unwrap().malformed.load(std::sync::atomic::Ordering::Relaxed);
            holder.set_virtual_time(stampede::INFINITY).unwrap();
            if keyed {
                assert!(support::eventually(settled, || malformed() >= forged), "the forged messages are dropped");
                assert_eq!(answered, 0, "a forged decline question is not answered");
                assert!(support::eventually(settled, || b_rt.ts_min() == 10), "b follows: {}", b_rt.ts_min());
            } else {
                // An absence cannot be awaited: a release that b would follow gets time to show.
                std::thread::sleep(Duration::from_millis(500));
                assert_eq!(malformed(), 0, "without a policy a client's mesh message decodes at the node");
                assert_eq!(b_rt.ts_min(), 5, "and a forged pause holds b's ts_min");
            }
            client.close();
            b.close();
        }
    });
}

/// A client of node `a` forges, under a's mesh key, pause requests to every other participant it
/// sees, and asks a's decline queryable to decline a move: how many messages it sent, and how many
/// answers the question got.
fn forge_as_node_a(a: &TestNode) -> (u64, usize) {
    use stampede_core::mesh::Message;
    use stampede_core::Peer;
    let config = fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
    let evil = zenoh::open(config).wait().unwrap();
    let mut participants: Vec<(String, Peer)> = Vec::new();
    for reply in evil.liveliness().get("stampede/*/mesh/*").wait().unwrap().iter() {
        let Ok(sample) = reply.result() else { continue };
        let key = sample.key_expr().as_str().to_owned();
        let mut parts = key.split('/').skip(1);
        let (Some(name), Some("mesh"), Some(inc)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let id = stampede_node::mesh::peer_id(name);
        participants.push((key.clone(), Peer { id, incarnation: inc.parse().unwrap() }));
    }
    let (a_key, a_peer) = participants.iter().find(|(key, _)| key.starts_with("stampede/a/")).cloned().unwrap();
    let others: Vec<Peer> = participants.iter().map(|(_, p)| *p).filter(|p| *p != a_peer).collect();
    assert!(!others.is_empty(), "the client sees node b's participant");
    let forged = 20;
    for after in 0..forged {
        let bytes = postcard::to_allocvec(&(&others, Message::Pause { after })).unwrap();
        evil.put(&a_key, bytes).wait().unwrap();
    }
    let question = postcard::to_allocvec(&(others[0], 1u64)).unwrap();
    let replies =
        evil.get(format!("{a_key}/decline")).payload(question).timeout(Duration::from_secs(2)).wait().unwrap();
    let answered = replies.iter().filter(|r| r.result().is_ok()).count();
    let _ = evil.close().wait();
    (forged, answered)
}
