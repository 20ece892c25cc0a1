//! The client's side of the no-lost-items rule (`docs/NODES.md`): when the reply to a get that
//! may have taken an item never comes, even to its retry, the client ends its session — its
//! liveliness token goes, so a real node would release whatever the lost reply carried — and
//! says so on later calls.
//!
//! The node here is a fake on raw zenoh that answers everything but drops the query of a get
//! without replying, the retry's too (zenoh then ends the query at once: a lost reply without a
//! timeout to wait).

mod support;

use std::sync::mpsc;
use std::time::Duration;

use stampede::connect;
use stampede::Retention;
use stampede::{Error, Limits, OLDEST_UNSEEN};
use stampede_wire::{decode_request, encode, ContainerInfo, Hello, Op, Outcome, Reply, Request};
use support::with_watchdog;
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// The fake's queryable: its queries, decoded, go to `respond` with the fake's zenoh id.
type Queryable = zenoh::query::Queryable<()>;

/// A fake node named `fake` on raw zenoh, a router listening on `endpoint`: each request, decoded,
/// goes to `respond` (with the query, which it answers, drops — zenoh then ends the query at once —
/// or keeps unanswered).
fn fake_node(
    endpoint: &str,
    respond: impl Fn(zenoh::query::Query, Request, &str) + Send + Sync + 'static,
) -> (zenoh::Session, Queryable) {
    let mut config = zenoh::Config::default();
    config.insert_json5("mode", "\"router\"").unwrap();
    config.insert_json5("scouting/multicast/enabled", "false").unwrap();
    config.insert_json5("listen/endpoints", &format!("[\"{endpoint}\"]")).unwrap();
    let fake = zenoh::open(config).wait().unwrap();
    let zid = fake.zid().to_string();
    let queryable = fake
        .declare_queryable("stampede/fake/rpc")
        .callback(move |query| {
            let message = query.payload().map(|p| p.to_bytes().into_owned()).unwrap_or_default();
            let Ok((header, _)) = decode_request(&message) else { return };
            respond(query, header.request, &zid);
        })
        .wait()
        .unwrap();
    (fake, queryable)
}

/// The fake's hello, with its liveliness timeout (the session's lease).
fn hello(zid: &str, liveliness_timeout_ms: u64) -> Reply {
    Reply::Hello(Hello {
        node: "fake".into(),
        zid: zid.to_owned(),
        liveliness_timeout_ms,
        payload_bytes_max: 1 << 20,
        wait_slice_ms: 1_000,
        mesh: None,
        direct: Default::default(),
    })
}

/// The fake's channel (or `queue`) `name`, id 1, unbounded.
fn container(name: String, queue: bool) -> Reply {
    Reply::Outcome(Outcome::Container(ContainerInfo {
        id: 1,
        queue,
        name,
        capacity: None,
        bytes_max: None,
        retention: Retention::History,
        codec: None,
        description: String::new(),
    }))
}

/// A node that says hello and then never answers `Open`: `connect` fails `Unreachable` when its
/// timeout is up — not after the node's liveliness timeout plus the reply margin (15 s here).
/// The watchdog (4× the timeout) only catches a call that does not return.
#[test]
fn connect_returns_by_its_timeout_when_the_node_never_opens_the_session() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let holding = held.clone();
    let (fake, _queryable) = fake_node(&endpoint, move |query, request, zid| match request {
        Request::Hello => {
            let _ = query.reply(query.key_expr().clone(), encode(&hello(zid, 10_000))).wait();
        }
        // Kept unanswered as long as the fake lives.
        _ => holding.lock().unwrap().push(query),
    });
    let test = "connect_returns_by_its_timeout_when_the_node_never_opens_the_session";
    let e = support::with_watchdog_for(
        test,
        TIMEOUT * 4,
        || {},
        || connect(&endpoint, Some(TIMEOUT)).map(drop).unwrap_err(),
    );
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert!(!held.lock().unwrap().is_empty(), "the fake held the session's Open");
    fake.close().wait().unwrap();
}

/// A get whose reply is lost fails `Unreachable`, withdraws the session's token, and every later
/// call fails `Unreachable` naming the lost reply.
#[test]
fn lost_get_reply_ends_the_session() {
    with_watchdog("lost_get_reply_ends_the_session", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
        let (fake, _queryable) = fake_node(&endpoint, |query, request, zid| {
            let reply = match request {
                Request::Hello => hello(zid, 10_000),
                Request::Op(Op::CreateChannel { name, .. }) => container(name, false),
                Request::Open { .. } => Reply::Opened([1; 16]),
                Request::Op(Op::Task { .. }) | Request::Op(Op::AttachInput { .. }) => {
                    Reply::Outcome(Outcome::Handle(2))
                }
                Request::Op(Op::Get { .. }) => return, // the lost reply
                _ => Reply::Outcome(Outcome::Done),
            };
            let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
        });
        let (gone, token_gone) = mpsc::channel();
        let _tokens = fake
            .liveliness()
            .declare_subscriber("stampede/fake/session/*")
            .callback(move |sample| {
                if sample.kind() == SampleKind::Delete {
                    let _ = gone.send(sample.key_expr().to_string());
                }
            })
            .wait()
            .unwrap();

        let rt = connect(&endpoint, Some(Duration::from_secs(20))).unwrap();
        let ch = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let inp = task.attach_input(&ch).unwrap();
        let lost = inp.get(OLDEST_UNSEEN, Some(Duration::from_secs(20)));
        assert!(matches!(lost, Err(Error::Unreachable { .. })), "{lost:?}");
        let key = token_gone.recv_timeout(Duration::from_secs(30)).expect("the session's token was withdrawn");
        assert!(key.starts_with("stampede/fake/session/"), "{key}");
        match rt.names("") {
            Err(Error::Unreachable { reason, .. }) => assert!(reason.contains("a reply to get was lost"), "{reason}"),
            other => panic!("expected Unreachable after the session ended, got {other:?}"),
        }
        rt.close();
        fake.close().wait().unwrap();
    });
}

/// A get whose first try has no reply within its deadline is not sent again: the deadline of a
/// request that may hold something on the node runs from its first send, not from a retry's, so
/// a retry could only bring a reply too late to take (the node may be ending the session by then).
/// The call fails `Unreachable` and the node saw the get once. (Timed from each try, the client
/// sent it again half a lease later and took a reply read a whole lease after the first send.)
#[test]
fn a_get_whose_reply_missed_its_deadline_is_not_sent_again() {
    with_watchdog("a_get_whose_reply_missed_its_deadline_is_not_sent_again", || {
        const LEASE_MS: u64 = 2_000;
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
        let gets = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let holding = gets.clone();
        let (fake, _queryable) = fake_node(&endpoint, move |query, request, zid| {
            let reply = match request {
                Request::Hello => hello(zid, LEASE_MS),
                Request::Open { .. } => Reply::Opened([1; 16]),
                Request::Op(Op::Task { .. }) | Request::Op(Op::AttachInput { .. }) => {
                    Reply::Outcome(Outcome::Handle(2))
                }
                Request::Op(Op::CreateQueue { name, .. }) => container(name, true),
                // Held unanswered as long as the fake lives: no reply within the deadline.
                Request::Op(Op::QueueGet { .. }) => return holding.lock().unwrap().push(query),
                _ => Reply::Outcome(Outcome::Done),
            };
            let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
        });

        let options = stampede::ConnectOptions {
            timeout: Some(Duration::from_secs(20)),
            zenoh_only: true,
            ..stampede::ConnectOptions::default()
        };
        let rt = stampede::connect_with(&endpoint, &options).unwrap();
        let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
        let input = rt.task(stampede::INFINITY).unwrap().attach_input(&jobs).unwrap();
        let missed = input.get(Some(Duration::from_secs(20)));
        assert!(matches!(missed, Err(Error::Unreachable { .. })), "{missed:?}");
        assert_eq!(gets.lock().unwrap().len(), 1, "the get was sent once, not retried past its deadline");
        rt.close();
        fake.close().wait().unwrap();
    });
}
